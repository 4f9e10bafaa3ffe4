"""The gate's checks: :func:`check_gate` on an accuracy report (``workbench evaluate --gate``) and
:func:`check_quality_gate` on a run summary (``workbench batch --gate``); every violation with its reason
(:class:`GateViolation`, :class:`GateResult`), never only the first."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..._results import Result
from ...errors import GateError, WorkbenchWarning
from ...vocab import LatencySource, is_board_source
from .schema import DEFAULT_MAX_DROP_PP, Gate, load_gate


# -- results -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class GateViolation(Result):
    """One broken limit: ``check`` is ``<section>.<key>`` (``accuracy.max_drop_pp``...)."""

    check: str
    reason: str
    value: float | None = None
    limit: float | None = None
    target: str | None = None
    condition: str | None = None
    model: str | None = None

    def summary(self) -> str:
        return self.reason


@dataclass(frozen=True)
class GateResult(Result):
    """Pass/fail of a gate, with one reason per violation and notes on what was not checked."""

    passed: bool
    gate: Gate
    violations: tuple[GateViolation, ...] = ()
    checked: int = 0
    notes: tuple[str, ...] = ()

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(v.reason for v in self.violations)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["reasons"] = list(self.reasons)
        return out

    def summary(self) -> str:
        if self.passed:
            return f"gate passed: {self.checked} check(s) within {self.gate.summary()}"
        return f"gate FAILED: {len(self.violations)} violation(s) of {self.gate.summary()}"

    def text(self) -> str:
        return "\n".join([self.summary(), *[f"  - {r}" for r in self.reasons],
                          *[f"  note: {n}" for n in self.notes]])

    def _repr_html_(self) -> str:
        from ... import display
        rows = [(v.target or "", v.condition or "", v.model or "", v.check,
                 "" if v.value is None else f"{v.value:.4g}", "" if v.limit is None else f"{v.limit:.4g}", v.reason)
                for v in self.violations]
        body = display.table(("target", "condition", "model", "check", "value", "limit", "reason"), rows,
                             row_styles=[display.BAD_STYLE] * len(rows)) if rows else ""
        return (display.heading("Quality gate") + display.paragraph(self.summary()) + body
                + "".join(display.paragraph(n) for n in self.notes))


#: the name the batch used for the same type
GateReport = GateResult


# -- check an accuracy report (workbench evaluate --gate) ---------------------------------------
def check_gate(report: Any, gate: Gate | None = None, **kwargs: Any) -> GateResult:
    """Check every candidate under every condition of ``report`` against ``gate``'s accuracy limits.

    ``gate`` defaults to ``Gate(**kwargs)`` with ``max_drop_pp`` defaulting to
    :data:`DEFAULT_MAX_DROP_PP` (so ``check_gate(report)`` and ``check_gate(report, max_drop_pp=2)`` work).
    Placement and latency limits are not in an accuracy report: they are noted, not checked.
    """
    if gate is None:
        gate = Gate(**{"max_drop_pp": DEFAULT_MAX_DROP_PP, **kwargs})
    elif kwargs:
        raise GateError("give either a `gate` or gate keyword arguments, not both.")
    for o in gate.overrides:
        if o.condition not in report.conditions:
            warnings.warn(f"gate override for condition {o.condition!r} matches no condition of the report "
                          f"({', '.join(report.conditions)}); it is not applied.", WorkbenchWarning, stacklevel=2)
    candidates = report.candidates
    missing = [m for m in gate.models if m not in candidates]
    if missing:
        raise GateError(f"gate names model(s) {', '.join(map(repr, missing))} that the report does not hold; "
                        f"candidates: {', '.join(candidates) or 'none'}.")
    notes = []
    if gate.min_npu_share or gate.max_cpu_islands is not None or gate.max_latency_ms is not None:
        notes.append("placement and latency limits are not checked on an accuracy report "
                     "(`workbench batch --gate` checks them per target)")
    chosen = gate.models or candidates
    violations, checked = [], 0
    for cond in report.conditions:
        max_drop, min_agreement = gate.limits(cond)
        if max_drop is None and min_agreement is None:
            continue
        for model in chosen:
            row = report.row(cond, model)
            checked += 1
            fp32 = report.accuracy(cond, report.reference)
            drop = row.drop_ci_high if gate.use_ci else row.drop_pp
            if max_drop is not None and drop > max_drop + 1e-9:
                what = "has a drop CI reaching" if gate.use_ci else "drops"
                violations.append(GateViolation(
                    check="accuracy.max_drop_pp", condition=cond, model=model, value=float(drop),
                    limit=float(max_drop),
                    reason=(f"{cond}: {model} {what} {drop:.2f} pp ({fp32:.1%} FP32 -> {row.accuracy:.1%}, "
                            f"n={row.n}), more than the {max_drop:g} pp allowed")))
            if min_agreement is not None and row.agreement < min_agreement - 1e-12:
                violations.append(GateViolation(
                    check="accuracy.min_agreement", condition=cond, model=model, value=float(row.agreement),
                    limit=float(min_agreement),
                    reason=(f"{cond}: {model} agrees with FP32 on {row.agreement:.1%} of {row.n} samples, "
                            f"less than the {min_agreement:.1%} required")))
    return GateResult(passed=not violations, gate=gate, violations=tuple(violations), checked=checked,
                      notes=tuple(notes))


# -- check a run summary (workbench batch --gate) ------------------------------------------------
def check_quality_gate(summary: Any, gate: Gate | str | os.PathLike, *, findings: Any = None) -> GateResult:
    """Check every target of a :class:`~workbench.runs.RunSummary`; every violation, not the first.

    ``findings`` (a :class:`~workbench.findings.Findings` of the run) feeds the ``findings`` section;
    by default each target summary's own ``findings`` are used."""
    gate = load_gate(gate)
    out: list[GateViolation] = []
    notes: list[str] = []
    checked = 0

    def add(target: str, check: str, reason: str, **kw: Any) -> None:
        out.append(GateViolation(check=check, target=target, reason=f"{target}: {reason}", **kw))

    if gate.use_ci or gate.models:
        notes.append("accuracy.use_ci and accuracy.models apply to `workbench evaluate` only")
    for t in summary.targets:
        if t.status == "failed":
            add(t.target, "target.failed", f"the run failed at {t.failed_stage or '?'} ({t.error}); nothing to check")
            continue
        if gate.checks_accuracy:
            if not t.accuracy:
                add(t.target, "accuracy.max_drop_pp", "no accuracy results (the accuracy stage did not run)")
            for a in t.accuracy:
                limit, agreement = gate.limits(a.condition)
                if limit is not None and a.drop_pp is not None:
                    checked += 1
                    if a.drop_pp > limit + 1e-9:
                        add(t.target, "accuracy.max_drop_pp", f"accuracy drop under {a.condition} is "
                            f"{a.drop_pp:.2f} pp (FP32 {a.fp32:.2%} -> INT8 {a.int8:.2%}), above the limit of "
                            f"{limit:g} pp", condition=a.condition, limit=limit, value=a.drop_pp)
                value = getattr(a, "agreement", None)
                if agreement is not None and value is not None:
                    checked += 1
                    if value < agreement - 1e-12:
                        add(t.target, "accuracy.min_agreement", f"FP32/INT8 agreement under {a.condition} is "
                            f"{value:.1%}, below the minimum of {agreement:.1%}", condition=a.condition,
                            limit=agreement, value=value)
        share = gate.share_for(t.target)
        if share is not None:
            checked += 1
            if t.npu_share is None:
                add(t.target, "placement.min_npu_share", "no placement result (the placement stage did not run)")
            elif t.npu_share < share:
                add(t.target, "placement.min_npu_share", f"NPU op share is {t.npu_share:.1%} ({t.npu_ops}/"
                    f"{(t.npu_ops or 0) + (t.cpu_ops or 0)} ops), below the minimum of {share:.1%}",
                    limit=share, value=t.npu_share)
        if gate.max_cpu_islands is not None:
            checked += 1
            if t.cpu_islands is None:
                add(t.target, "placement.max_cpu_islands", "no placement result (the placement stage did not run)")
            elif t.cpu_islands > gate.max_cpu_islands:
                add(t.target, "placement.max_cpu_islands", f"{t.cpu_islands} CPU island(s) between NPU segments, "
                    f"above the maximum of {gate.max_cpu_islands}", limit=gate.max_cpu_islands, value=t.cpu_islands)
        if gate.max_latency_ms is not None:
            checked += 1
            _check_latency(t, gate, add, notes)
        if gate.findings_max_severity is not None:
            checked += 1
            _check_findings(t, gate, add, findings)
    return GateResult(passed=not out, gate=gate, violations=tuple(out), checked=checked, notes=tuple(notes))


def _check_findings(t: Any, gate: Gate, add: Callable[..., None], findings: Any) -> None:
    """One violation per finding of target ``t`` more severe than ``findings.max_severity``."""
    from ...findings import severity_rank
    found = getattr(t, "findings", None) if findings is None else [f for f in findings if f.target == t.target]
    if gate.findings_max_severity is None:
        return
    limit = severity_rank(gate.findings_max_severity)
    for f in found or ():
        if f.rank > limit:
            add(t.target, "findings.max_severity", f"{f.severity} {f.code}: {f.message}", value=f.rank, limit=limit)


def _check_latency(t: Any, gate: Gate, add: Callable[..., None], notes: list[str]) -> None:
    limit = gate.max_latency_ms
    assert limit is not None
    if gate.latency_source == "vela":
        if t.vela_estimate_ms is None and not get_target(t.target).compiler_estimates_latency:
            notes.append(f"{t.target}: latency not checked (its compiler gives no latency estimate; a Vela "
                         "estimate exists for Ethos-U targets only)")
        elif t.vela_estimate_ms is None:
            add(t.target, "latency.max_ms", "no Vela estimate (the placement stage did not run)")
        elif t.vela_estimate_ms > limit:
            add(t.target, "latency.max_ms", f"Vela-estimated latency is {t.vela_estimate_ms:.3f} ms, above the limit "
                f"of {limit:g} ms (a compiler estimate, not a board measurement)", limit=limit,
                value=t.vela_estimate_ms)
        return
    value = t.latency_ms if gate.latency_statistic == "p50" else t.latency_p99_ms
    source = getattr(t, "latency_source", None)
    # a replayed recording is a board measurement (CI without a board gates on replays)
    on_board = is_board_source(source) or source == LatencySource.REPLAYED
    if gate.latency_source == "board" and not on_board:
        reason = (f"no board measurement: latency was timed on the {t.latency_kind}" if t.latency_kind
                  else "no board measurement (the timing stage did not run)")
        if gate.latency_allow_missing:
            notes.append(f"{t.target}: latency not checked ({reason}; allow_missing: true)")
        else:
            add(t.target, "latency.max_ms", f"{reason}, and the gate asks for a board (latency source: board). "
                "Next: time on a board, replay a board recording (--replay), or set allow_missing: true")
        return
    if t.latency_kind is None or value is None:
        add(t.target, "latency.max_ms", f"no {gate.latency_statistic} latency (the timing stage did not run)")
        return
    if value > limit:
        add(t.target, "latency.max_ms", f"{gate.latency_statistic} latency is {value:.3f} ms ({t.latency_kind}), "
            f"above the limit of {limit:g} ms", limit=limit, value=value)
    else:   # a passing latency line names where the number comes from, too
        notes.append(f"{t.target}: {gate.latency_statistic} latency {value:.3f} ms ({t.latency_kind}) within "
                     f"the limit of {limit:g} ms")


def get_target(target: str) -> Any:
    """The target's table (the gate reads what its compiler reports from it)."""
    from ...targets import get_target as _get
    return _get(target)
