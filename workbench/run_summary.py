"""Every target of a run side by side: :func:`summarize_run` reads the run folder's typed stage records
into a :class:`RunSummary` (no TensorFlow needed): what ``90_summary.ipynb``, ``summary.json`` and
``summary.csv`` show; :class:`ConditionAccuracy` is the per-condition row every report uses."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._io import read_json
from ._results import Result
from ._validation import check_choice
from .errors import BatchError
from .findings import Finding
from .runs import REFERENCE, VELA_ESTIMATE, RunFolder, RunManifest, StageFailure, _load_typed
from .vocab import LATENCY_SOURCES, STAGES, LatencySource, Status, latency_label


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
        from .findings import collect
        from .findings_html import findings_html
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
    from .run_findings import target_findings
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

