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

:func:`summarize_run` reads the folders of every target back into a
:class:`RunSummary` (no TensorFlow needed): what ``90_summary.ipynb``,
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
from .findings import Finding
from .vocab import HOST_CPU_LABEL, LATENCY_SOURCES, STAGES, LatencySource, Status, latency_label

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


#: the result type each stage saves: what ``RunFolder.load`` builds (a record never chooses code)
STAGE_TYPES = {
    "calibration": "workbench.calibration.curate:CalibrationSet",
    "quantize": "workbench.quantize.engine:QuantizedModel",
    "accuracy": "workbench.evaluate.accuracy:AccuracyReport",
    "placement": "workbench.placement.analyze:PlacementReport",
    "timing": "workbench.board.timing:TimingResult",
}


def _as_path(name: str) -> str:
    """A model or dataset name that is a file or folder here, made absolute (the record then writes it relative
    to its own folder); a built-in name as it is."""
    return os.path.abspath(name) if name and os.path.exists(name) else name


# -- the folder --------------------------------------------------------------------------------
class RunFolder:
    """``<run_dir>/<target>/``: save and load each stage's result as JSON.

    ``model`` is ``"reference"`` (the built-in reference CNN) or a path to a Keras
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
        """The built-in reference model (trained once, then cached); None for a user model."""
        if self.model_name != REFERENCE:
            return None
        from .models.reference import reference_model
        return reference_model()

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
            model=self.model_name if self.model_name == REFERENCE else Path(self.model_name).name,
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


@dataclass(frozen=True)
class ConditionAccuracy(Result):
    """One condition: FP32 and INT8 top-1 accuracy, the drop with its CI, the FP32/INT8 agreement.

    The per-condition accuracy row of every report across targets; built from an
    :class:`~workbench.evaluate.accuracy.AccuracyReport` by :meth:`from_report`.
    """

    condition: str
    n: int | None = None
    fp32: float | None = None
    int8: float | None = None
    drop_pp: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    agreement: float | None = None               # FP32/INT8 argmax agreement
    drop_ci_low: float | None = None             # the drop's paired-bootstrap CI (pp)
    drop_ci_high: float | None = None
    sqnr_db: float | None = None                 # the worst output's SQNR against FP32 (dB), from fidelity
    sqnr_output: str | None = None               # ... and which output it is

    @property
    def within_noise(self) -> bool:
        """The drop's confidence interval includes 0 (False without an interval)."""
        return (self.drop_ci_low is not None and self.drop_ci_high is not None
                and self.drop_ci_low <= 0 <= self.drop_ci_high)

    @property
    def worse_beyond_noise(self) -> bool:
        """The drop's confidence interval lies above 0: the quantized model is worse beyond sampling noise."""
        return self.drop_ci_low is not None and self.drop_ci_low > 0

    @classmethod
    def from_report(cls, report: Any, condition: str, model: str | None = None) -> ConditionAccuracy:
        """The row of ``condition`` for candidate ``model`` (default: the report's first candidate)."""
        model = model if model is not None else next(iter(report.candidates), None)
        ref = _row_or_none(report, condition, report.reference)
        row = _row_or_none(report, condition, model) if model is not None else None
        fid = [f for f in getattr(report, "fidelity", ()) or ()
               if f.condition == condition and f.model == model and f.sqnr_db is not None]
        worst_fid = min(fid, key=lambda f: f.sqnr_db, default=None)
        n = (row or ref).n if (row or ref) is not None else (worst_fid.n if worst_fid is not None else None)
        return cls(condition=str(condition), n=n,
                   sqnr_db=worst_fid.sqnr_db if worst_fid is not None else None,
                   sqnr_output=worst_fid.output if worst_fid is not None else None,
                   fp32=ref.accuracy if ref is not None else None,
                   int8=row.accuracy if row is not None else None,
                   drop_pp=row.drop_pp if row is not None else None,
                   ci_low=row.ci_low if row is not None else None, ci_high=row.ci_high if row is not None else None,
                   agreement=row.agreement if row is not None else None,
                   drop_ci_low=row.drop_ci_low if row is not None else None,
                   drop_ci_high=row.drop_ci_high if row is not None else None)


def _row_or_none(report: Any, condition: str, model: str) -> Any:
    from .errors import EvaluationError
    try:
        return report.row(condition, model)
    except (EvaluationError, KeyError):
        return None


@dataclass(frozen=True)
class TargetSummary(Result):
    """One target's results, read from its run folder."""

    target: str
    status: str                                     # a vocab.Status: ok | failed | incomplete
    stages: tuple[str, ...] = ()
    error: str | None = None
    failed_stage: str | None = None
    recipe: str | None = None
    accuracy: tuple[ConditionAccuracy, ...] = ()
    npu_share: float | None = None
    npu_ops: int | None = None
    cpu_ops: int | None = None
    npu_segments: int | None = None
    cpu_islands: int | None = None
    placement_authority: str | None = None
    latency_ms: float | None = None              # p50 of the timed runs
    latency_p99_ms: float | None = None
    latency_kind: str | None = None              # vocab.latency_label(): "board <name> via <delegate>" | HOST_CPU
    latency_source: str | None = None            # a vocab.LatencySource value
    vela_estimate_ms: float | None = None
    vela_label: str | None = None
    manifest: RunManifest | None = None
    findings: tuple[Finding, ...] = ()              # workbench.findings of every stage that ran

    @property
    def worst_sqnr(self) -> ConditionAccuracy | None:
        """The condition whose worst output has the lowest SQNR against FP32 (None without fidelity)."""
        return min((a for a in self.accuracy if a.sqnr_db is not None), key=lambda a: a.sqnr_db or 0.0, default=None)

    def summary(self) -> str:
        if self.status == "failed":
            return f"{self.target}: FAILED at {self.failed_stage or '?'}: {self.error}"
        worst = max(self.accuracy, key=lambda a: a.drop_pp or 0.0, default=None)
        parts = [f"{self.target} ({self.recipe or '?'})"]
        if worst is not None and worst.drop_pp is not None:
            parts.append(f"worst drop {worst.drop_pp:+.1f} pp ({worst.condition}"
                         + (", within noise: its CI includes 0)" if worst.within_noise else ")"))
        elif (low := self.worst_sqnr) is not None:
            parts.append(f"no task metric; worst SQNR {low.sqnr_db:.1f} dB ({low.sqnr_output}, {low.condition})")
        if self.npu_share is not None:
            parts.append(f"NPU {self.npu_share:.0%}, {self.cpu_islands} CPU island(s)")
        if self.latency_ms is not None:
            parts.append(f"p50 {self.latency_ms:.3f} ms [{self.latency_kind}]")
        if self.vela_estimate_ms is not None:
            parts.append(f"{self.vela_estimate_ms:.3f} ms [{VELA_ESTIMATE}]")
        return ", ".join(parts) + ("" if self.status == "ok" else f" [{self.status}]")


@dataclass(frozen=True)
class RunSummary(Result):
    """Every target of a run side by side."""

    run_id: str
    targets: tuple[TargetSummary, ...]

    @property
    def failed(self) -> tuple[TargetSummary, ...]:
        return tuple(t for t in self.targets if t.status == "failed")

    @classmethod
    def read(cls, path: str | os.PathLike) -> RunSummary:
        """The summary a batch wrote to ``summary.json``: its ``targets`` as :class:`TargetSummary`
        (the batch's own keys beside them, reports and gate, are left out)."""
        try:
            data = read_json(path)
            return cls(run_id=str(data["run_id"]),
                       targets=tuple(TargetSummary.from_dict(t) for t in data["targets"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BatchError(f"{path}: not a batch summary ({type(exc).__name__}: {exc}). Next: run `workbench "
                             "batch` again to write it.") from None

    def summary(self) -> str:
        ok = sum(t.status == "ok" for t in self.targets)
        return f"run {self.run_id}: {ok}/{len(self.targets)} target(s) complete" + (
            f"; failed: {', '.join(t.target for t in self.failed)}" if self.failed else "")

    def csv_rows(self) -> list[dict[str, Any]]:
        """One row per target and condition (a target without accuracy gets one row)."""
        rows = []
        for t in self.targets:
            base = {"target": t.target, "status": t.status, "recipe": t.recipe, "npu_share": t.npu_share,
                    "cpu_islands": t.cpu_islands, "latency_p50_ms": t.latency_ms,
                    "latency_p99_ms": t.latency_p99_ms, "latency_kind": t.latency_kind,
                    "latency_source": t.latency_source,
                    "vela_estimate_ms": t.vela_estimate_ms, "error": t.error}
            for a in t.accuracy or (None,):
                rows.append({"target": t.target, "condition": a.condition if a else None,
                             "n": a.n if a else None, "fp32_accuracy": a.fp32 if a else None,
                             "int8_accuracy": a.int8 if a else None, "drop_pp": a.drop_pp if a else None,
                             "worst_sqnr_db": a.sqnr_db if a else None,
                             "worst_sqnr_output": a.sqnr_output if a else None,
                             **{k: v for k, v in base.items() if k != "target"}})
        return rows

    def plot(self, ax: Any = None) -> Any:
        """INT8 accuracy per condition, one bar group per condition, one bar per target."""
        import matplotlib.pyplot as plt
        import numpy as np

        from . import display
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 3))
        done = [t for t in self.targets if t.accuracy]
        conditions = list(dict.fromkeys(a.condition for t in done for a in t.accuracy))
        pos = np.arange(len(conditions))
        width = 0.8 / max(len(done), 1)
        for i, t in enumerate(done):
            by = {a.condition: a for a in t.accuracy}
            ax.bar(pos + (i - (len(done) - 1) / 2) * width,
                   [by[c].int8 if c in by and by[c].int8 is not None else np.nan for c in conditions],
                   width, label=f"{t.target} {display.quantized_label(t.recipe)} ({t.recipe})")
        if done:
            fp32 = {a.condition: a.fp32 for a in done[0].accuracy}
            ax.scatter(pos, [fp32.get(c) if fp32.get(c) is not None else np.nan for c in conditions],
                       marker="_", s=400, color="black", label="FP32", zorder=3)
        ax.set_xticks(pos, conditions, rotation=15)
        ax.set_ylabel("top-1 accuracy")
        ax.set_title(f"run {self.run_id}: accuracy per condition")
        if done:   # below the axes, outside the bars
            ax.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=min(len(done) + 1, 4),
                      frameon=False)
        else:
            ax.text(0.5, 0.5, "no accuracy results", ha="center", va="center", transform=ax.transAxes)
        return ax

    def _repr_html_(self) -> str:
        from . import display
        rows, styles = [], []
        for t in self.targets:
            worst = max(t.accuracy, key=lambda a: a.drop_pp or 0.0, default=None)
            low = t.worst_sqnr
            rows.append((t.target, t.status, t.recipe or "-",
                         f"{display.drop_text(worst.drop_pp, worst.drop_ci_low, worst.drop_ci_high)} pp "
                         f"({worst.condition})" if worst and worst.drop_pp is not None else
                         f"no task metric; worst SQNR {low.sqnr_db:.1f} dB ({low.sqnr_output}, {low.condition})"
                         if low is not None else "-",
                         f"{t.npu_share:.0%}" if t.npu_share is not None else "-",
                         "-" if t.cpu_islands is None else t.cpu_islands,
                         f"{t.latency_ms:.3f} ms ({t.latency_kind})" if t.latency_ms is not None else "-",
                         f"{t.vela_estimate_ms:.3f} ms ({VELA_ESTIMATE})" if t.vela_estimate_ms is not None
                         else "-", t.error or ""))
            styles.append(display.BAD_STYLE if t.status == "failed" else "")
        acc_rows = [(t.target, a.condition, a.n, _pct(a.fp32),
                     f"{_pct(a.int8)} ({display.quantized_label(t.recipe)})",
                     display.drop_text(a.drop_pp, a.drop_ci_low, a.drop_ci_high))
                    for t in self.targets for a in t.accuracy]
        from .findings import collect, findings_html
        return (display.heading(f"Run {self.run_id}") + display.paragraph(self.summary())
                + findings_html(collect(*(t.findings for t in self.targets)), title="Findings (all targets)")
                + display.table(("target", "status", "recipe", "worst accuracy drop", "NPU op share",
                                 "CPU islands", "latency p50", "latency estimate", "error"), rows,
                                row_styles=styles, caption=f"Targets ({display.DROP_CONVENTION})")
                + display.table(("target", "condition", "n", "FP32", "quantized", "drop pp [95% CI]"), acc_rows,
                                caption=f"Accuracy per condition ({display.DROP_CONVENTION})"))


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.2%}"


def _accuracy_rows(report: Any) -> tuple[ConditionAccuracy, ...]:
    """Per condition of an ``AccuracyReport``: FP32 (the reference) and the INT8 candidate."""
    return tuple(ConditionAccuracy.from_report(report, c) for c in report.conditions)


def _latency_source(timing: Any) -> str:
    """Where a saved timing result was measured: a :class:`~workbench.vocab.LatencySource` value."""
    if getattr(timing, "latency_kind", None) in LATENCY_SOURCES:       # TimingResult states it
        return str(timing.latency_kind)
    if not timing.on_board:
        return LatencySource.HOST_CPU.value
    return (LatencySource.BOARD if timing.delegate else LatencySource.BOARD_CPU).value


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


def _raw_record(folder: RunFolder, stage: str) -> dict[str, Any] | None:
    """The stage's raw record; ``{}`` for one that is not valid JSON (it loads as not run, and
    :func:`~workbench.findings.target_findings` reports it as ``run.unreadable-record``)."""
    try:
        record = folder.record(stage)
    except BatchError:
        return {}
    return record if isinstance(record, dict) or record is None else {}


def summarize_target(run_dir: str | os.PathLike, target: str) -> TargetSummary:
    """Read one target's folder of a run (missing stages leave fields empty)."""
    folder = RunFolder.__new__(RunFolder)          # read-only: do not create folders
    folder.root, folder.target, folder.path = Path(run_dir), target, Path(run_dir) / target
    if not folder.path.is_dir():
        return TargetSummary(target=target, status="failed", error="no results (the target did not run)")
    records = {s: _raw_record(folder, s) for s in STAGES}
    first: dict[str, Any] = next((records[s] or {} for s in STAGES if records[s] is not None), {})
    folder.model_name = first.get("model", REFERENCE)
    folder.dataset_name = first.get("dataset", "")
    # typed results, never JSON keys: a field renamed in a result type is a type error here, not a silent None
    loaded = {s: _load_typed(folder, s) if records[s] is not None else None for s in STAGES}
    done = tuple(s for s in STAGES if loaded[s] is not None)
    q, accuracy, placement, timing = (loaded[s] for s in ("quantize", "accuracy", "placement", "timing"))
    error = StageFailure.read(folder.path)
    status = Status.FAILED if error else (Status.OK if len(done) == len(STAGES) else Status.INCOMPLETE)
    latency = timing.latency_us if timing is not None else None
    source = _latency_source(timing) if timing is not None else None
    vela_ms = placement.estimated_latency_ms if placement is not None else None
    vela_label = (placement.latency_label or VELA_ESTIMATE) if placement is not None and vela_ms is not None else None
    kind_label = None
    if timing is not None and source:
        kind_label = timing.latency_label or latency_label(source, board=timing.board or timing.destination,
                                                           delegate=os.path.basename(timing.delegate or "") or None)
    return TargetSummary(
        target=target, status=status, stages=done, error=error.message if error else None,
        failed_stage=error.stage if error else None,
        recipe=q.recipe.name if q is not None else None,
        accuracy=_accuracy_rows(accuracy) if accuracy is not None else (),
        npu_share=placement.npu_share if placement is not None else None,
        npu_ops=placement.npu_ops if placement is not None else None,
        cpu_ops=placement.cpu_ops if placement is not None else None,
        npu_segments=placement.npu_segments if placement is not None else None,
        cpu_islands=len(placement.cpu_islands) if placement is not None else None,
        placement_authority=placement.authority if placement is not None else None,
        latency_ms=None if latency is None or latency.p50 is None else latency.p50 / 1000.0,
        latency_p99_ms=None if latency is None or latency.p99 is None else latency.p99 / 1000.0,
        latency_kind=kind_label,
        latency_source=source,
        vela_estimate_ms=vela_ms,
        vela_label=vela_label,
        manifest=folder.manifest(loaded) if done else None,
        findings=tuple(_target_findings(folder)))


def _target_findings(folder: RunFolder) -> Any:
    from .findings import target_findings
    return target_findings(folder)


def summarize_run(run_dir: str | os.PathLike, *, targets: Any = None) -> RunSummary:
    """Every target of ``run_dir`` (default: the target folders present), read from JSON."""
    root = Path(run_dir)
    if isinstance(targets, str):
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    from .targets import target_ids
    known = target_ids()
    if not targets:
        targets = [t for t in known if (root / t).is_dir()]
    if not targets:
        raise BatchError(f"{run_dir}: no target folders ({', '.join(known)}); run the stage notebooks "
                         "or `workbench batch` first.")
    for t in targets:
        check_choice("target", t, known, error=BatchError)
    return RunSummary(run_id=root.name, targets=tuple(summarize_target(root, t) for t in targets))

