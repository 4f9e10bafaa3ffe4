"""The calibrate -> quantize -> place chain, written once.

Three places run the same stages on one FP32 model: a run folder (the stage notebooks and the
batch, :class:`~workbench.runs.RunFolder`), the explorer (:mod:`workbench.explore`) and the
calibration-strategy experiment (:mod:`workbench.calibration.experiment`).  :class:`StageChain`
says once how each stage is computed from the one before (which model, dataset, recipe, input
contract, target and BSP release each call gets) and when a result computed earlier still fits the
request (what a run folder checks before it reuses a saved record).  The callers keep their own
memory: a run folder saves each stage as JSON, the explorer memoizes in memory, and
:func:`~workbench.quantize.engine.quantize` has its content-addressed cache (same source, recipe,
calibration samples and toolchain: the same INT8 file, reported as a cache hit).

::

    chain = StageChain("model.keras", data, target="imx93", recipe="auto", input_spec="model.card.yaml")
    cal = chain.calibrate(CalibrationOptions(n=200, strategy="stratified", seed=0))
    q = chain.quantize(cal, output="runs/x/imx93/model")
    placement = chain.place(q)
    chain.run(CalibrationOptions(n=200))          # all three: a ChainResult
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._results import Result
from ._validation import check_choice
from .calibration.curate import CalibrationSet
from .errors import ModelError, PlacementError, QuantizationError, TargetError, WorkbenchWarning
from .pipeline.options import CalibrationOptions
from .placement.analyze import PlacementReport
from .quantize.engine import QuantizedModel
from .quantize.recipe import QuantRecipe
from .vocab import AUTO_RECIPE

__all__ = ["CalibrationOptions", "ChainResult", "StageChain", "resolve_recipe"]


def resolve_recipe(recipe: str | QuantRecipe | None, target: str | None) -> str | QuantRecipe:
    """``recipe``, or ``target``'s default recipe for ``"auto"`` (also ``""`` and None).

    imx8mp defaults to per-tensor weights (``a8w8_pt``), imx93 and imx95 to per-channel (``a8w8_pc``):
    the ``recipe`` field of each target's table.
    """
    if recipe is not None and recipe not in (AUTO_RECIPE, ""):
        return recipe
    if target is None:
        raise QuantizationError(f"`recipe` {recipe!r} means the target's default recipe, but no target is given. "
                                "Name a recipe ('a8w8_pc', 'a8w8_pt', 'a16w8_pc') or a target.")
    from .targets import get_target
    return get_target(target).recipe


# -- the result of the whole chain ------------------------------------------------------------------
@dataclass(frozen=True)
class ChainResult(Result):
    """What :meth:`StageChain.run` produced: the calibration set, the quantized model and its
    placement on the target (None when the chain has no target or the target refused the model:
    ``placement_error`` says why)."""

    calibration: CalibrationSet
    quantized: QuantizedModel
    placement: PlacementReport | None = None
    placement_error: str = ""

    def summary(self) -> str:
        where = (self.placement.summary() if self.placement is not None
                 else self.placement_error or "not placed (no target)")
        return f"{self.calibration.id} -> {self.quantized.summary()}; {where}"

    def _repr_html_(self) -> str:
        from . import display
        parts = [display.heading("Calibrate, quantize, place"), display.paragraph(self.summary()),
                 self.calibration._repr_html_(), self.quantized._repr_html_()]
        if self.placement is not None:
            parts.append(self.placement._repr_html_())
        elif self.placement_error:
            parts.append(display.alert(self.placement_error))
        return "".join(parts)


# -- the chain ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StageChain:
    """One FP32 model on one dataset, through calibration, quantization and placement.

    Parameters
    ----------
    model : the FP32 model file quantization starts from (``.keras``/``.h5``, a SavedModel folder,
        ``.onnx`` or an FP32 ``.tflite``); also the embedding model of the ``coverage`` strategy.
    dataset : the loaded ``Dataset`` the calibration set is drawn from (a name or path is loaded).
    target : ``"imx8mp"``, ``"imx93"`` or ``"imx95"``; None when the chain stops at the INT8 model.
    recipe : a recipe name or :class:`~workbench.quantize.recipe.QuantRecipe`; ``"auto"`` is the
        target's default.
    input_spec : the model's input contract (``InputContract``, card mapping or YAML path) the
        calibration pixels go through before the converter; None: the card beside the model
        (``<model>.card.yaml``), else the samples as they are.
    bsp : the NXP BSP release whose rules (and, on imx93, whose Vela) place the ops; None: the
        newest release the target's table knows.
    """

    model: str
    dataset: Any
    target: str | None = None
    recipe: str | QuantRecipe = AUTO_RECIPE
    input_spec: Any = None
    bsp: str | None = None

    def __post_init__(self) -> None:
        model = getattr(self.model, "keras", self.model)       # a ReferenceModel quantizes from its .keras
        if not isinstance(model, (str, os.PathLike)):
            raise ModelError(f"`model` must be the path of an FP32 model file (.keras/.h5, SavedModel folder, .onnx "
                             f"or FP32 .tflite). Got {type(model).__name__} instead.")
        object.__setattr__(self, "model", os.fspath(model))
        if isinstance(self.dataset, (str, os.PathLike)):
            from .data.loaders import load_dataset
            object.__setattr__(self, "dataset", load_dataset(self.dataset))
        if self.target is not None:
            from .targets import target_ids
            check_choice("target", self.target, target_ids(), error=TargetError)
        if self.bsp == "":
            object.__setattr__(self, "bsp", None)
        resolve_recipe(self.recipe, self.target)                   # "auto" without a target: refused now

    # -- what each stage is given -----------------------------------------------------------
    @property
    def effective_recipe(self) -> str | QuantRecipe:
        """The recipe quantized: ``recipe``, or the target's default for ``"auto"``."""
        return resolve_recipe(self.recipe, self.target)

    @property
    def recipe_name(self) -> str:
        recipe = self.effective_recipe
        return recipe.name if isinstance(recipe, QuantRecipe) else str(recipe)

    def calibrate(self, options: CalibrationOptions | None = None) -> CalibrationSet:
        """Draw the calibration set (the model, through its input contract, embeds the pool for the
        ``coverage`` strategy only)."""
        from .calibration.curate import curate_calibration_set
        o = options if options is not None else CalibrationOptions()
        return curate_calibration_set(self.dataset, o.n, strategy=o.strategy, seed=o.seed,
                                      condition_weights=o.condition_weights, pool=o.pool, model=self.model,
                                      input_spec=self.input_spec)

    def quantize(self, calibration: CalibrationSet, *, output: str | os.PathLike | None = None) -> QuantizedModel:
        """Quantize the model with the recipe, ``calibration`` and the input contract.

        ``output``: a folder (gets ``model.tflite`` and its manifest) or a file; None leaves the
        model in the workbench cache."""
        from .quantize.engine import quantize
        return quantize(self.model, self.effective_recipe, calibration, dataset=self.dataset, output=output,
                        input_spec=self.input_spec)

    def place(self, quantized: QuantizedModel, *, use_compiler: bool = True) -> PlacementReport:
        """Place every op of the INT8 model on the target (under the BSP release); ``use_compiler=False``:
        from the rule table even where the target's compiler is installed."""
        if self.target is None:
            raise TargetError("this chain has no target to place the model on; give `target` "
                              f"({', '.join(map(repr, _target_ids()))}).")
        from .placement.analyze import analyze_placement
        return analyze_placement(quantized.path, self.target, bsp=self.bsp, use_vela=use_compiler,
                                 use_converter=use_compiler)

    def run(self, options: CalibrationOptions | None = None, *, output: str | os.PathLike | None = None,
            place: bool = True) -> ChainResult:
        """Calibrate, quantize and (with a target and ``place``) place.  A target that cannot take
        the model (a16w8 on an INT8-only NPU) leaves ``placement`` None and says why in
        ``placement_error``: the INT8 model still stands."""
        calibration = self.calibrate(options)
        quantized = self.quantize(calibration, output=output)
        placement, error = None, ""
        if place and self.target is not None:
            try:
                placement = self.place(quantized)
            except (TargetError, PlacementError) as exc:
                error = f"placement on {self.target}: {exc}"
        return ChainResult(calibration=calibration, quantized=quantized, placement=placement, placement_error=error)

    # -- does an earlier result still fit? ----------------------------------------------------
    def calibration_fits(self, saved: CalibrationSet, options: CalibrationOptions) -> bool:
        """``saved`` was drawn with ``options`` from this dataset (same content hash)."""
        return options.fits(saved, self.dataset.hash)

    def quantized_fits(self, saved: QuantizedModel, calibration: CalibrationSet) -> bool:
        """``saved`` was quantized with this recipe from ``calibration`` through this input contract (the
        calibration hash a quantization records includes the contract), and its file is on disk unchanged."""
        recipe = self.effective_recipe
        # a named recipe matches by name (as run folders always did); a QuantRecipe (changed backend,
        # calibrator, exclusions) by every field that makes the model: its cache key part
        same = saved.recipe.key() == recipe.key() if isinstance(recipe, QuantRecipe) else saved.recipe.name == recipe
        if not same:
            return False
        from .quantize.engine import calibration_hashes
        return (saved.calibration_hash in calibration_hashes(calibration.hash, self.model, self.input_spec)
                and _model_intact(saved))

    def placement_fits(self, saved: PlacementReport, quantized: QuantizedModel) -> bool:
        """``saved`` places this very INT8 model (sha256) on this target (and this BSP release, when given)."""
        return (saved.model_sha256 == quantized.sha256 and saved.target == self.target
                and (self.bsp is None or saved.bsp == self.bsp))


def _target_ids() -> tuple[str, ...]:
    from .targets import target_ids
    return target_ids()


def _model_intact(q: QuantizedModel) -> bool:
    """The INT8 model a quantize record names is on disk with the sha256 the record holds."""
    from ._io import sha256_file
    path = Path(q.path)
    if not path.is_file() or sha256_file(path) != q.sha256:
        warnings.warn(f"{path}: missing, or not the model the quantize record names (sha256 differs); "
                      "quantizing again.", WorkbenchWarning, stacklevel=5)
        return False
    return True
