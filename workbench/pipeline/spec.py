"""``RunSpec``: what one run computes, resolved once.

A spec holds what the user gave (``model``, ``dataset``, ``target``, ``recipe``, ``input_spec``, ``bsp``
and one options object per stage) and, resolved once when it is built, what every stage needs: the
FP32 source model and its format, the FP32 baseline, the loaded dataset and its hash, the recipe with
``"auto"`` resolved to the target's default, the BSP release, and the model's
:class:`~workbench.models.contract.InputContract` (read when first needed, then kept: resolving it may
load the model).  Stages never resolve these again.

The one translation to and from notebook parameters is here too: :meth:`RunSpec.to_parameters`,
:meth:`RunSpec.from_parameters` and :func:`parameter_names` (a top-level field is the parameter of the
same name; a stage option's parameter is named in :data:`OPTION_PARAMETERS`).  A new knob is one field
on :class:`RunSpec` (or on a stage's options): the batch passes it to every stage notebook, every stage
notebook declares it (``tests/test_pipeline.py`` fails until they do) and every client builds a spec.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .._validation import check_choice
from ..errors import BatchError, TargetError
from ..vocab import AUTO_RECIPE, STAGES
from .options import CalibrationOptions, EvaluationOptions, PlacementOptions, TimingSettings

__all__ = ["OPTION_GROUPS", "OPTION_PARAMETERS", "RunSpec", "parameter_names"]

#: the options object of each stage, by the RunSpec field that holds it
OPTION_GROUPS: dict[str, type] = {"calibration": CalibrationOptions, "evaluation": EvaluationOptions,
                                  "placement": PlacementOptions, "timing": TimingSettings}

#: (options group, field) -> notebook parameter; None: not a notebook parameter (API only)
OPTION_PARAMETERS: dict[tuple[str, str], str | None] = {
    ("calibration", "n"): "calibration_size", ("calibration", "strategy"): "calibration_strategy",
    ("calibration", "seed"): "seed", ("calibration", "condition_weights"): None, ("calibration", "pool"): None,
    ("evaluation", "metric"): "metric", ("evaluation", "split"): None, ("evaluation", "n_bootstrap"): None,
    ("evaluation", "seed"): None, ("evaluation", "num_threads"): None, ("evaluation", "conditions"): None,
    ("placement", "use_compiler"): None,
    ("timing", "board"): "board", ("timing", "replay"): "replay", ("timing", "record"): "record",
    ("timing", "runs"): "timing_runs", ("timing", "warmup"): "timing_warmup",
    ("timing", "accuracy_samples"): "accuracy_samples",
}

#: the options groups each stage reads (besides the top-level fields every stage reads)
STAGE_GROUPS: dict[str, tuple[str, ...]] = {
    "calibration": ("calibration",), "quantize": ("calibration",), "accuracy": ("calibration", "evaluation"),
    "placement": ("calibration", "placement"), "timing": ("calibration", "placement", "timing"),
}

_NOT_PARAMETERS = {"resolve"}


@dataclass(frozen=True)
class RunSpec:
    """One model, one dataset, one target: what a run computes, resolved once.

    Parameters
    ----------
    model : a built-in model name (``reference``, ``tradeoff``, ``keypoints``:
        :data:`~workbench.models.builtin.BUILTIN_MODELS`) or the path of an FP32 model (``.keras``/``.h5``,
        SavedModel folder, ``.onnx`` or FP32 ``.tflite``).
    dataset : a dataset name or path, or a loaded ``Dataset``.
    target : ``imx8mp``, ``imx93``, ``imx95`` (a target id of ``workbench/targets/``); None stops at the INT8 model.
    recipe : a recipe name or ``QuantRecipe``; ``"auto"``: the target's default.
    input_spec : the model's input contract: an ``InputContract``, a card mapping or a YAML path; empty:
        the card beside the model (``<model>.card.yaml``), else inferred from the model.
    bsp : the NXP BSP release whose rules (and compiler) place the ops; empty: the newest the tables know.
    calibration, evaluation, placement, timing : the options of each stage.
    resolve : False builds a spec that is only validated and translated (no model built, no dataset loaded):
        what the batch does before its kernels start.
    """

    model: str = "reference"
    dataset: Any = "digits-conditions"
    target: str | None = None
    recipe: Any = AUTO_RECIPE
    input_spec: Any = ""
    bsp: str = ""
    # each stage's options: the class OPTION_GROUPS names (read when a spec is built, so that it is the one table)
    calibration: CalibrationOptions = field(default_factory=lambda: OPTION_GROUPS["calibration"]())
    evaluation: EvaluationOptions = field(default_factory=lambda: OPTION_GROUPS["evaluation"]())
    placement: PlacementOptions = field(default_factory=lambda: OPTION_GROUPS["placement"]())
    timing: TimingSettings = field(default_factory=lambda: OPTION_GROUPS["timing"]())
    resolve: InitVar[bool] = True

    # resolved once (init=False): what the stages are given
    source_model: str = field(init=False, compare=False, repr=False, default="")
    fp32_model: str = field(init=False, compare=False, repr=False, default="")
    model_format: str = field(init=False, compare=False, repr=False, default="")
    data: Any = field(init=False, compare=False, repr=False, default=None)
    dataset_hash: str = field(init=False, compare=False, repr=False, default="")
    quant_recipe: Any = field(init=False, compare=False, repr=False, default=None)
    bsp_release: str = field(init=False, compare=False, repr=False, default="")
    resolved: bool = field(init=False, compare=False, repr=False, default=False)

    def __post_init__(self, resolve: bool) -> None:
        if not isinstance(self.model, (str, os.PathLike)):
            model = getattr(self.model, "keras", None)     # a ReferenceModel-like result: its .keras file
            if model is None:
                raise TargetError(f"`model` must be a built-in model name or a model path. Got "
                                  f"{type(self.model).__name__} instead.")
            object.__setattr__(self, "model", model)
        object.__setattr__(self, "model", os.fspath(self.model))
        if self.target in ("", None):
            object.__setattr__(self, "target", None)
        else:
            from ..targets import target_ids
            check_choice("target", self.target, target_ids(), error=TargetError)
        object.__setattr__(self, "bsp", self.bsp or "")
        object.__setattr__(self, "input_spec", "" if self.input_spec is None else self.input_spec)
        for name, kind in OPTION_GROUPS.items():
            value = getattr(self, name)
            if isinstance(value, Mapping):
                object.__setattr__(self, name, kind(**value))
            elif not isinstance(value, kind):
                raise TypeError(f"`{name}` must be a {kind.__name__}. Got {type(value).__name__} instead.")
        if resolve or self.target is not None:
            from ..chain import resolve_recipe
            resolve_recipe(self.recipe, self.target)   # "auto" without a target: refused (a template may leave it)
        if resolve:
            self._resolve()

    def _resolve(self) -> None:
        from ..chain import resolve_recipe
        from ..models.builtin import builtin_model, is_builtin
        from ..models.formats import model_format
        from ..quantize.recipe import get_recipe
        setter = object.__setattr__
        if is_builtin(self.model):
            built = builtin_model(self.model)
            setter(self, "source_model", str(built.keras))
            setter(self, "fp32_model", str(getattr(built, "tflite", built.keras)))
        else:
            setter(self, "source_model", self.model)
            setter(self, "fp32_model", self.model)
        setter(self, "model_format", model_format(self.source_model))
        data = self.dataset
        if isinstance(data, (str, os.PathLike)):
            from ..data.loaders import load_dataset
            data = load_dataset(data)
        setter(self, "data", data)
        setter(self, "dataset_hash", data.hash)
        setter(self, "quant_recipe", get_recipe(resolve_recipe(self.recipe, self.target)))
        if self.target is not None:
            from ..targets import get_target
            setter(self, "bsp_release", get_target(self.target, bsp=self.bsp or None).bsp
                   or get_target(self.target).default_bsp)
        setter(self, "resolved", True)

    # -- resolved views ------------------------------------------------------------------------
    def _require_resolved(self, what: str) -> None:
        if not self.resolved:
            raise BatchError(f"this RunSpec was built with resolve=False; {what} needs a resolved spec "
                             "(RunSpec(..., resolve=True)).")

    @property
    def recipe_name(self) -> str:
        """The recipe quantized, by name (``"auto"`` resolved)."""
        if self.resolved:
            return str(self.quant_recipe.name)
        from ..chain import resolve_recipe
        recipe = resolve_recipe(self.recipe, self.target)
        return str(getattr(recipe, "name", recipe))

    @property
    def contract_stated(self) -> bool:
        """The contract is stated (``input_spec`` or a card beside the model), not inferred from the model."""
        self._require_resolved("contract_stated")
        if self.input_spec not in ("", None):
            return True
        from ..models.contract import card_path
        return card_path(self.source_model).is_file()

    @cached_property
    def contract(self) -> Any:
        """The model's :class:`~workbench.models.contract.InputContract`: ``input_spec``, the card beside the
        model, else inferred from the model's input (resolved on first use, then kept)."""
        self._require_resolved("the input contract")
        from ..models.contract import InputContract, resolve_contract
        if isinstance(self.input_spec, InputContract):
            return self.input_spec
        return resolve_contract(self.source_model, self.input_spec or None)

    @property
    def stage_input_spec(self) -> Any:
        """What a stage is given as ``input_spec``: the resolved contract when one is stated, else None (the
        stage then applies nothing, as a model without a card always had)."""
        return self.contract if self.contract_stated else None

    def key(self) -> str:
        """A content key of everything the results depend on (model bytes, dataset hash, recipe, contract,
        target, BSP and the options): what a content-keyed store files results under."""
        self._require_resolved("key()")
        from .._io import sha256_file, stable_hash
        model_sha = sha256_file(self.source_model) if Path(self.source_model).is_file() else self.source_model
        return stable_hash({"model": model_sha, "dataset": self.dataset_hash, "recipe": self.quant_recipe.key(),
                            "contract": self.contract.to_params() if self.contract_stated else None,
                            "target": self.target, "bsp": self.bsp_release,
                            **{name: getattr(self, name).to_dict() for name in OPTION_GROUPS}})[:24]

    def replace(self, *, resolve: bool | None = None, **changes: Any) -> RunSpec:
        """This spec with ``changes`` (a field, or ``calibration=dict(n=...)`` to change some options and keep
        the others, a field the client does not know included): resolved again only where a changed field
        needs it (the loaded dataset is kept); ``resolve``: resolve the new spec (default: as this one is).
        A client that varies some settings of a spec it is given takes the rest whole this way."""
        for name in OPTION_GROUPS:
            if isinstance(changes.get(name), Mapping):
                changes[name] = dataclasses.replace(getattr(self, name), **changes[name])
        if "dataset" not in changes and self.data is not None:
            changes["dataset"] = self.data
        new = dataclasses.replace(self, **changes, resolve=self.resolved if resolve is None else resolve)
        if "contract" in self.__dict__ and not {"model", "input_spec"} & set(changes):
            new.__dict__["contract"] = self.__dict__["contract"]     # same model and input_spec: read once
        return new

    # -- notebook parameters -------------------------------------------------------------------
    def to_parameters(self, *, stage: str | None = None) -> dict[str, Any]:
        """The notebook parameters of this spec (plain values: what papermill writes into a parameters
        cell); ``stage``: only those the stage's notebook declares."""
        out: dict[str, Any] = {}
        for f in _top_fields(type(self)):
            value = getattr(self, f.name)
            if f.name == "dataset" and not isinstance(value, (str, os.PathLike)):
                value = getattr(value, "name", value)
            if f.name == "recipe":
                value = getattr(value, "name", value)
            out[f.name] = _plain(f.name, "" if value is None else value)
        for (group, name), parameter in OPTION_PARAMETERS.items():
            if parameter is not None and (stage is None or group in STAGE_GROUPS[stage]):
                out[parameter] = _plain(parameter, getattr(getattr(self, group), name))
        return out

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, Any], *, resolve: bool = True, **overrides: Any) -> RunSpec:
        """The spec of a notebook's (or the CLI's) parameters: the names :func:`parameter_names` lists are
        read, every other name is ignored (a notebook passes ``globals()``); ``overrides`` are fields."""
        top = {f.name: parameters[f.name] for f in _top_fields(cls) if f.name in parameters}
        groups: dict[str, dict[str, Any]] = {g: {} for g in OPTION_GROUPS}
        for (group, name), parameter in OPTION_PARAMETERS.items():
            if parameter is not None and parameter in parameters:
                groups[group][name] = parameters[parameter]
        for group, values in groups.items():
            if group not in overrides:
                top[group] = OPTION_GROUPS[group](**values)
        return cls(**{**top, **overrides}, resolve=resolve)

    def summary(self) -> str:
        return (f"{self.model} on {getattr(self.dataset, 'name', self.dataset)} -> {self.target or 'no target'} "
                f"({self.recipe_name}{', BSP ' + self.bsp_release if self.bsp_release else ''}); "
                f"{self.calibration.summary()}")


def _top_fields(cls: type | None = None) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls or RunSpec) if f.init and f.name not in OPTION_GROUPS
            and f.name not in _NOT_PARAMETERS]


def _plain(name: str, value: Any) -> Any:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise BatchError(f"parameter {name}: {type(value).__name__} is not a plain value a notebook parameter can hold; "
                     "give a name or a path.")


def parameter_names(stage: str | None = None) -> tuple[str, ...]:
    """The notebook parameters of a spec (``stage``: those the stage's notebook must declare)."""
    if stage is not None:
        check_choice("stage", stage, STAGES, error=BatchError)
    top = [f.name for f in _top_fields()]
    options = [p for (g, _), p in OPTION_PARAMETERS.items()
               if p is not None and (stage is None or g in STAGE_GROUPS[stage])]
    return tuple(dict.fromkeys([*top, *options]))
