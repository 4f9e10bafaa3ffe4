"""Findings of the timing stage, computed from a :class:`TimingResult` (and the placement report).

- ``timing.cold-start-in-steady-state``: a timed run far slower than the median (start-up cost kept);
- ``timing.still-falling``: the kept runs still trend down (``TimingResult.still_falling``);
  both are ``info`` for a host-CPU timing (a shared machine, not the device: indicative only);
- ``timing.too-few-runs``: a p99 from fewer than ``MIN_RUNS_FOR_P99`` runs;
- ``timing.host-cpu`` (info): measured on the host CPU, not a board;
- ``board.placement-mismatch``: ops the board ran on the CPU that placement put on the NPU
  (``placement_mismatches``, or the delegate's coverage against the placement report);
- ``board.int8-disagreement``: host-vs-board INT8 agreement below its threshold.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..findings import Finding, make

MIN_RUNS_FOR_P99 = 100
COLD_FACTOR = 3.0          # a timed run this many times the median is a cold start
COLD_MIN_US = 50.0         # ...and at least this much slower (timer noise on tiny models is not)


def findings(result: Any, *, target: str = "", placement: Any = None, **_: Any) -> list[Finding]:
    target = target or (result.target or "")
    out: list[Finding] = []
    where = result.where
    # on the host CPU (shared with other work, not the device) warm-up effects are indicative only: info
    quality = None if result.on_board or getattr(result, "replayed_from", None) else "info"
    runs = np.asarray(result.runs_us, dtype=float)
    if runs.size >= 3:
        median = float(np.median(runs))
        is_slow = (runs > COLD_FACTOR * median) & (runs - median >= COLD_MIN_US)
        # a cold start is where the timed runs begin: the slow runs from run #0 on (one spike later on is
        # the host being busy, not start-up cost)
        early = []
        for i, slow in enumerate(is_slow[: max(3, runs.size // 10)]):
            if not slow:
                break
            early.append(i)
        if early:
            out.append(make("timing.cold-start-in-steady-state",
                            f"{where}: timed run(s) {', '.join(f'#{i}' for i in early[:5])} took "
                            f"{runs[early[0]] / 1000:.3f} ms, {runs[early[0]] / median:.1f}x the median "
                            f"{median / 1000:.3f} ms", target=target, severity=quality,
                            evidence={"runs": [{"run": i, "us": round(float(runs[i]), 3)} for i in early[:10]],
                                      "median_us": round(median, 3), "factor": COLD_FACTOR,
                                      "n_warmup": result.n_warmup, "mean_us": result.latency_us.mean}))
    if result.still_falling:
        out.append(make("timing.still-falling", f"{where}: {result.still_falling.split('. Next:')[0]}",
                        target=target, severity=quality, evidence={"n_warmup": result.n_warmup, "n_runs": result.n_runs,
                                                 "detail": result.still_falling}))
    if result.latency_us.p99 is not None and result.n_runs < MIN_RUNS_FOR_P99:
        out.append(make("timing.too-few-runs", f"{where}: p99 {result.latency_us.p99 / 1000:.3f} ms from "
                        f"{result.n_runs} runs (at least {MIN_RUNS_FOR_P99} needed)", target=target,
                        evidence={"n_runs": result.n_runs, "min_runs": MIN_RUNS_FOR_P99,
                                  "p99_us": result.latency_us.p99}))
    if not result.on_board and not getattr(result, "replayed_from", None):
        out.append(make("timing.host-cpu", f"{where}: latency measured on the host CPU, not on a board",
                        target=target, evidence={"where": where, "runner": result.runner}))
    out += _placement_mismatch(result, target, placement)
    out += _accuracy(result, target)
    return out


def _placement_mismatch(result: Any, target: str, placement: Any) -> list[Finding]:
    mismatches = [m for m in getattr(result, "placement_mismatches", ()) or ()
                  if m.predicted == "NPU" and m.measured == "CPU"]
    if mismatches:
        listed = ", ".join(f"{m.count}x {m.op}" for m in mismatches[:8])
        return [make("board.placement-mismatch", f"{result.where}: ran on the CPU what placement put on the "
                     f"NPU: {listed}", target=target,
                     evidence={"ops": [{"op": m.op, "count": m.count, "predicted": m.predicted,
                                        "measured": m.measured, "evidence": m.evidence} for m in mismatches]})]
    if result.coverage is None or placement is None or not result.on_board:
        return []
    from .timing import cross_check
    check = cross_check(result, placement)
    if check.agree is False:
        return [make("board.placement-mismatch", f"{result.where}: {check.detail}", target=target,
                     evidence={"measured_share": check.measured_share, "predicted_share": check.predicted_share,
                               "measured_npu_ops": check.measured_npu_ops,
                               "predicted_npu_ops": check.predicted_npu_ops,
                               "cpu_op_types": list(result.coverage.cpu_op_types)})]
    return []


def _accuracy(result: Any, target: str) -> list[Finding]:
    acc = getattr(result, "accuracy", None)
    if acc is None:
        return []
    bad = [r for r in acc.rows if r.flagged]
    if not bad:
        return []
    listed = ", ".join(f"{r.condition} {r.agreement:.1%}" for r in bad)
    return [make("board.int8-disagreement", f"{acc.where}: host-vs-board INT8 agreement below "
                 f"{acc.min_agreement:.0%}: {listed}", target=target,
                 evidence={"min_agreement": acc.min_agreement, "conditions": [
                     {"condition": r.condition, "n": r.n, "agreement": r.agreement, "int8_host": r.int8_host,
                      "int8_board": r.int8_board} for r in bad]})]
