"""Run folders: ``runs/<run-id>/<target>/``, one JSON result per stage.

The stage notebooks share a run folder.  Each stage saves its result there
(atomically, with the parameters it was computed from); a later stage reads it,
or, when the notebook runs alone and the result is missing or was computed from
other parameters, computes it (stages cache their expensive work themselves).

Layout of one target's folder::

    runs/<run-id>/<target>/
        calibration.json   quantize.json   accuracy.json   placement.json   timing.json
        model/model.tflite (+ model_manifest.json)       the INT8 model of this run
        error.json                                         written by the batch when a stage failed

:func:`~workbench.run_summary.summarize_run` reads the folders of every target back into a
:class:`~workbench.run_summary.RunSummary` (no TensorFlow needed): what ``90_summary.ipynb``,
``summary.json`` and ``summary.csv`` show.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._io import CACHE_TOKEN, atomic_write_json, local_paths, portable_paths, read_json  # noqa: F401
from ._results import Result, check_values
from ._validation import check_choice
from .errors import BatchError, WorkbenchWarning
from .vocab import HOST_CPU_LABEL, STAGE_TYPES, STAGES

if TYPE_CHECKING:
    from .chain import StageChain
    from .pipeline.core import Pipeline
    from .pipeline.spec import RunSpec

REFERENCE = "reference"
HOST_CPU = HOST_CPU_LABEL
VELA_ESTIMATE = "Vela estimate (not a board measurement)"
TOOL_PACKAGES = ("npu-workbench", "tensorflow-cpu", "keras", "ai-edge-litert", "onnxruntime",
                 "ethos-u-vela", "numpy", "papermill")


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_run_id() -> str:
    """A run id from the local time: ``YYYYmmdd-HHMMSS``."""
    return _dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def tool_versions() -> dict[str, str]:
    """Installed versions of the tools a result depends on (no heavy import)."""
    import platform
    from importlib import metadata
    out = {"python": platform.python_version()}
    for name in TOOL_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def default_recipe(target: str) -> str:
    """The recipe a target gets with ``recipe="auto"`` (imx8mp: per-tensor, others per-channel)."""
    from .targets import get_target
    return get_target(target).recipe


# -- the run manifest --------------------------------------------------------------------------
@dataclass(frozen=True)
class RunManifest(Result):
    """What a target's results were computed from: hashes, recipe, tools, board."""

    run_id: str
    target: str
    model: str
    model_sha256: str | None = None
    dataset: str = ""
    dataset_hash: str | None = None
    calibration_id: str | None = None
    calibration_hash: str | None = None
    calibration_size: int | None = None
    recipe: str | None = None
    quantized_sha256: str | None = None
    latency_where: str | None = None
    board: str | None = None
    board_fingerprint: dict[str, Any] = field(default_factory=dict)
    tools: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        return (f"run {self.run_id} / {self.target}: model {self.model} "
                f"({(self.model_sha256 or '?')[:12]}), recipe {self.recipe or '-'}, calibration "
                f"{self.calibration_id or '-'}, latency {self.latency_where or '-'}")

    def rows(self) -> list[tuple[str, str]]:
        def short(v: Any) -> str:
            return "-" if v in (None, "", {}) else str(v)
        rows = [("run", self.run_id), ("target", self.target), ("model", self.model),
                ("model sha256", short(self.model_sha256)), ("dataset", self.dataset),
                ("dataset hash", short(self.dataset_hash)), ("calibration", short(self.calibration_id)),
                ("calibration hash", short(self.calibration_hash)),
                ("calibration size", short(self.calibration_size)), ("recipe", short(self.recipe)),
                ("INT8 model sha256", short(self.quantized_sha256)), ("latency measured on",
                                                                      short(self.latency_where)),
                ("board", short(self.board))]
        rows += [(f"board {k}", short(v)) for k, v in self.board_fingerprint.items() if v not in (None, "")]
        rows += [(f"version {k}", v) for k, v in self.tools.items()]
        return rows

    def _repr_html_(self) -> str:
        """Collapsed: hashes and versions are evidence, not the answer (a click opens the table)."""
        from . import display
        return (f'<details style="margin:6px 0"><summary style="cursor:pointer;font-size:13px">Run manifest: '
                f"{display.esc(self.summary())}</summary>{display.table(('', ''), self.rows())}</details>")


def _as_path(name: str) -> str:
    """A model or dataset name that is a file or folder here, made absolute (the record then writes it relative
    to its own folder); a built-in name as it is."""
    return os.path.abspath(name) if name and os.path.exists(name) else name


def _is_builtin(model: str) -> bool:
    from .models.builtin import is_builtin
    return is_builtin(model)


# -- the folder --------------------------------------------------------------------------------
class RunFolder:
    """``<run_dir>/<target>/``: save and load each stage's result as JSON.

    ``model`` is a built-in model's name (``"reference"``, ...) or a path to a Keras
    ``.keras``/``.h5`` file, a SavedModel folder or an ``.onnx`` file; ``dataset`` a
    name or path :func:`~workbench.load_dataset` takes.
    """

    _spec: RunSpec | None = None          # class defaults: a read-only folder made with __new__ has them
    input_spec: Any = None

    def __init__(self, run_dir: str | os.PathLike, *, target: str, model: str = REFERENCE,
                 dataset: str = "digits-conditions", input_spec: Any = None, spec: RunSpec | None = None) -> None:
        from .targets import target_ids
        check_choice("target", target, target_ids(), error=BatchError)
        self.root = Path(run_dir)
        self.target = target
        self.model_name = str(model)
        self.dataset_name = str(dataset)
        self.input_spec = input_spec or None   # --input-spec / notebook `input_spec` ("" = the card or inferred)
        self._spec = spec
        self.path = self.root / target
        self.path.mkdir(parents=True, exist_ok=True)

    @classmethod
    def of(cls, run_dir: str | os.PathLike, spec: RunSpec) -> RunFolder:
        """The folder of ``spec``'s target under ``run_dir``, its stages computed from ``spec``."""
        if spec.target is None:
            raise BatchError("a run folder is per target: the RunSpec names no target.")
        dataset = spec.dataset if isinstance(spec.dataset, (str, os.PathLike)) else getattr(spec.dataset, "name", "")
        return cls(run_dir, target=spec.target, model=spec.model, dataset=str(dataset),
                   input_spec=spec.input_spec if isinstance(spec.input_spec, (str, os.PathLike)) else None, spec=spec)

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, Any]) -> RunFolder:
        """A stage notebook's run folder: ``run_dir`` and the spec of its parameters (``globals()``)."""
        from .pipeline.spec import RunSpec
        return cls.of(parameters.get("run_dir", "runs/latest"), RunSpec.from_parameters(parameters))

    @property
    def spec(self) -> RunSpec:
        """The :class:`~workbench.pipeline.RunSpec` this folder's stages compute (the one given, else the
        folder's model, dataset, target and input contract with the default options; resolved once)."""
        if self._spec is None:
            from .pipeline.spec import RunSpec
            self._spec = RunSpec(self.model_name, self.data, target=self.target, input_spec=self.input_spec or "")
        return self._spec

    def pipeline(self, spec: RunSpec | None = None) -> Pipeline:
        """``Pipeline(spec, this folder)``: each stage loads its record when it still fits, else computes and
        saves it (default: the folder's :attr:`spec`)."""
        from .pipeline.core import Pipeline
        from .pipeline.store import RunFolderStore
        return Pipeline(spec if spec is not None else self.spec, RunFolderStore(self))

    def __repr__(self) -> str:
        return f"RunFolder({str(self.root)!r}, target={self.target!r})"

    @property
    def run_id(self) -> str:
        return self.root.name

    # -- stage records ------------------------------------------------------------------------
    def file(self, stage: str) -> Path:
        check_choice("stage", stage, STAGES, error=BatchError)
        return self.path / f"{stage}.json"

    def save(self, stage: str, result: Any, *, params: dict[str, Any] | None = None) -> Path:
        """Write ``result`` (a Result) as ``<stage>.json`` with the parameters it came from.

        The record is shareable and reads the same from any working folder: paths under the workbench
        cache are written as ``$NPU_WORKBENCH_CACHE/...``, paths under the working (project) folder or
        the run's output folder relative to the record's own folder (``model/model.tflite``), other
        paths under the home folder as ``~/...`` (:func:`portable_paths` with ``base=``).
        """
        kind = type(result)
        record = {"stage": stage, "type": f"{kind.__module__}:{kind.__qualname__}", "saved_utc": _now(),
                  "model": _as_path(self.model_name), "dataset": _as_path(self.dataset_name), "params": params or {},
                  "result": result.to_dict()}
        return atomic_write_json(self.file(stage), portable_paths(record, base=self.path))

    def record(self, stage: str) -> dict[str, Any] | None:
        """The raw JSON record of a stage, or None when the stage has not run."""
        path = self.file(stage)
        if not path.is_file():
            return None
        try:
            return read_json(path)
        except ValueError as exc:
            raise BatchError(f"{path}: not a stage record (invalid JSON: {exc}); delete it and run the "
                             f"{stage} stage again.") from None

    def has(self, stage: str) -> bool:
        return self.file(stage).is_file()

    def load(self, stage: str) -> Any:
        """The saved result of ``stage`` as its own type, or None when the stage has not run."""
        record = self.record(stage)
        if record is None:
            return None
        # the stage decides the type (a fixed table); the record's "type" is compared, never imported
        module, _, name = STAGE_TYPES[stage].partition(":")
        if record.get("type") != STAGE_TYPES[stage]:
            raise BatchError(f"{self.file(stage)}: the record says type {record.get('type')!r} but the {stage} stage "
                             f"saves {STAGE_TYPES[stage]!r}; the file was edited or comes from another tool. "
                             f"Delete it and run the {stage} stage again.")
        cls = getattr(importlib.import_module(module), name)
        try:
            check_values(cls, record["result"], "result")
            return cls.from_dict(local_paths(record["result"], base=self.path))
        except (KeyError, TypeError, ValueError) as exc:
            raise BatchError(f"{self.file(stage)}: not a readable {stage} record ({type(exc).__name__}: {exc}); "
                             f"delete it and run the {stage} stage again.") from None

    # -- inputs -------------------------------------------------------------------------------
    @cached_property
    def data(self) -> Any:
        """The dataset (loaded once; the spec's when the folder has one)."""
        if self._spec is not None and self._spec.resolved:
            return self._spec.data
        from .data.loaders import load_dataset
        return load_dataset(self.dataset_name)

    @cached_property
    def reference(self) -> Any:
        """The built-in model (``reference`` or another of the registry; trained once, then cached); None for a
        user model."""
        from .models.builtin import builtin_model, is_builtin
        return builtin_model(self.model_name) if is_builtin(self.model_name) else None

    @property
    def source_model(self) -> str:
        """The FP32 model file quantization starts from: the reference's ``.keras`` file, or the model
        given (Keras file, SavedModel folder, ``.onnx`` or FP32 ``.tflite``).  Calibration (the
        ``coverage`` strategy) and the coverage audit read it too."""
        return self.reference.keras if self.reference is not None else self.model_name

    @property
    def fp32_baseline(self) -> str:
        """The FP32 model the INT8 model's accuracy is measured against: the reference's FP32 ``.tflite``
        (the same network the board runs in float), or the model given."""
        return self.reference.tflite if self.reference is not None else self.model_name

    def recipe(self, recipe: str = "auto") -> str:
        """``recipe``, or the target's default recipe for ``"auto"``."""
        from .chain import resolve_recipe
        return str(resolve_recipe(recipe, self.target))

    def chain(self, *, recipe: str = "auto", bsp: str | None = None) -> StageChain:
        """This folder's calibrate -> quantize -> place chain: the source model, the dataset, the target,
        the input contract (``input_spec``), ``recipe`` and ``bsp`` (:class:`~workbench.chain.StageChain`)."""
        from .chain import StageChain
        return StageChain(self.source_model, self.data, target=self.target, recipe=recipe,
                          input_spec=self.input_spec, bsp=bsp)

    # -- earlier stages: load, or compute what is missing -------------------------------------
    def _options(self, **changes: Any) -> RunSpec:
        return self.spec.replace(**changes)

    def calibration_set(self, *, size: int = 200, strategy: str = "stratified", seed: int = 0) -> Any:
        """The calibration set saved by stage 10, or one curated (and saved) now (``self.pipeline().calibrate()``
        with these options)."""
        return self.pipeline(self._options(calibration={"n": size, "strategy": strategy, "seed": seed})).calibrate()

    def quantized_model(self, *, recipe: str = "auto", calibration: Any) -> Any:
        """The INT8 model saved by stage 20, or the model quantized (and saved) now."""
        return self.pipeline(self._options(recipe=recipe)).quantize(calibration)

    def placement(self, *, quantized: Any, bsp: str | None = None) -> Any:
        """The placement report saved by stage 40, or the placement analysed (and saved) now.

        ``bsp``: the NXP BSP release whose rules decide; None takes a saved report of any release
        (stage 40's ``bsp`` parameter) and places a new one under the newest release."""
        return self.pipeline(self._options(bsp=bsp or "")).place(quantized)

    def deployable_model(self, quantized: Any, placement: Any = None, *, board: str | None = None) -> str:
        """The file a board loads: the target's compiled model (``Target.deploys_compiled``) on a board,
        else the INT8 model.  On the host CPU (no ``board``) the plain INT8 model runs (the host has no NPU)."""
        from .targets import get_target
        compiled = getattr(placement, "vela_model", None) if placement is not None else None
        if board and compiled and get_target(self.target).deploys_compiled:
            return str(compiled)
        return quantized.path

    # -- the manifest -------------------------------------------------------------------------
    def manifest(self, results: Mapping[str, Any] | None = None) -> RunManifest:
        """What this target's saved results were computed from, read from the typed stage results
        (``results``: those already loaded, by stage; default: loaded now, a damaged record counts as not run)."""
        if results is None:
            results = {s: _load_typed(self, s) if self.has(s) else None for s in ("calibration", "quantize", "timing")}
        cal, q, timing = results.get("calibration"), results.get("quantize"), results.get("timing")
        fingerprint = timing.fingerprint.to_dict() if timing is not None and timing.fingerprint is not None else {}
        return RunManifest(
            run_id=self.run_id, target=self.target,
            model=self.model_name if _is_builtin(self.model_name) else Path(self.model_name).name,
            model_sha256=q.source_sha256 if q is not None else None, dataset=self.dataset_name,
            dataset_hash=cal.dataset_hash if cal is not None else None,
            calibration_id=(q.calibration_id if q is not None else None) or (cal.id if cal is not None else None),
            calibration_hash=(q.calibration_hash if q is not None else None) or (cal.hash if cal is not None else None),
            calibration_size=(q.calibration_size if q is not None else None) or (cal.n if cal is not None else None),
            recipe=q.recipe.name if q is not None else None, quantized_sha256=q.sha256 if q is not None else None,
            latency_where=timing.where if timing is not None else None,
            board=timing.board if timing is not None else None,
            board_fingerprint={k: v for k, v in fingerprint.items() if v not in (None, "")}
            if timing is not None and timing.on_board else {},
            tools={**tool_versions(), **(q.toolchain if q is not None else {})})


# -- summary across targets --------------------------------------------------------------------
@dataclass(frozen=True)
class StageFailure(Result):
    """``<target>/error.json``, written by the batch when a stage notebook failed: the stage, the error
    message, the index of the failing cell and the executed notebook (relative to the output folder)."""

    stage: str
    message: str | None = None
    cell: int | None = None
    notebook: str | None = None

    FILE = "error.json"

    @classmethod
    def read(cls, folder: str | os.PathLike) -> StageFailure | None:
        """The failure recorded in ``folder`` (a target's run folder), or None when no stage failed."""
        path = Path(folder) / cls.FILE
        if not path.is_file():
            return None
        try:
            return cls.from_dict(read_json(path))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return cls(stage="?", message=f"{path}: unreadable ({type(exc).__name__}: {exc})")

    def summary(self) -> str:
        return f"{self.stage} failed" + (f" at cell {self.cell}" if self.cell is not None else "") + (
            f": {self.message}" if self.message else "")


def check_run_records(run_dir: str | os.PathLike) -> None:
    """Raise :class:`BatchError` naming the first stage record of ``run_dir`` that cannot be read as its
    type (invalid JSON, a NaN, text where a number belongs...).  ``findings`` and ``diff`` call it first:
    a verdict on a run whose records are damaged would leave the damaged stage out silently."""
    root = Path(run_dir)
    if not root.is_dir():
        return
    for sub in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        folder = RunFolder.__new__(RunFolder)          # read-only: no folder is created
        folder.root, folder.target, folder.path = root, sub.name, sub
        for stage in STAGES:
            if folder.has(stage):
                folder.load(stage)


def _load_typed(folder: RunFolder, stage: str) -> Any:
    """The stage's saved result as its type; a damaged record is warned about and counts as not run."""
    try:
        return folder.load(stage)
    except BatchError as exc:
        warnings.warn(f"{exc} (the run summary leaves the {stage} stage out)", WorkbenchWarning, stacklevel=3)
        return None


#: names that moved to :mod:`workbench.run_summary` (the old import path keeps working)
_MOVED = ("ConditionAccuracy", "TargetSummary", "RunSummary", "summarize_target", "summarize_run")


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        return getattr(importlib.import_module("workbench.run_summary"), name)
    raise AttributeError(f"module 'workbench.runs' has no attribute {name!r}")
