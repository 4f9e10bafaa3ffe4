"""How much of the graph a delegate took, as the board's output says, and the ops the board placed
otherwise than the host's prediction (:func:`coverage_from_log`, :func:`placement_mismatches`).

The NPU share comes only from lines that state node counts, or from an op profile against the
model's op count: "the delegate was applied" is never taken to mean "the ops ran on the NPU".
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from .._results import Result
from ..errors import WorkbenchWarning
from .parse import BenchmarkLog


@dataclass(frozen=True)
class DelegateCoverage(Result):
    """How much of the graph the delegate took, as far as the board's output says.

    ``source`` is ``"node counts"`` (a delegate line stating N of M nodes) or
    ``"op profile"`` (op-profiling rows other than the delegate kernel are CPU ops,
    compared with the model's op count).  ``npu_share`` is ``None`` when neither exists.
    """

    coverage: str                       # a vocab.Coverage: complete | partial | none | unknown
    source: str
    npu_ops: int | None = None
    total_ops: int | None = None
    npu_share: float | None = None
    kernels: int | None = None
    cpu_op_types: tuple[str, ...] = ()

    def summary(self) -> str:
        if self.npu_share is None:
            return f"delegate coverage {self.coverage} ({self.source}); NPU op share not stated"
        return (f"{self.npu_ops}/{self.total_ops} ops on the delegate ({self.npu_share:.0%}, "
                f"{self.coverage}, from {self.source})")


@dataclass(frozen=True)
class CoverageCheck(Result):
    """Measured NPU share against the host's placement prediction."""

    agree: bool | None
    measured_share: float | None
    predicted_share: float | None
    measured_npu_ops: int | None
    predicted_npu_ops: int | None
    measured_total_ops: int | None
    predicted_total_ops: int | None
    detail: str

    def summary(self) -> str:
        return self.detail


@dataclass(frozen=True)
class PlacementMismatch(Result):
    """An op the board ran elsewhere than the placement prediction said.

    ``predicted``/``measured`` are ``"NPU"`` or ``"CPU"``; ``evidence`` names the
    board output that shows it (an op-profiling row, or a delegate line's counts).
    """

    op: str                       # op type as the board names it (``TFLite_Detection_PostProcess``)
    predicted: str
    measured: str
    evidence: str
    count: int = 1

    def summary(self) -> str:
        return (f"{self.count}x {self.op}: predicted on the {self.predicted}, ran on the "
                f"{self.measured} ({self.evidence})")


def coverage_from_log(log: BenchmarkLog, *, total_ops: int | None = None) -> DelegateCoverage | None:
    """Delegate coverage from a parsed log; ``None`` when the log says nothing about delegates."""
    from .parse import is_cpu_delegate
    npu_delegates = [d for d in log.delegates if not is_cpu_delegate(d.name)]
    for d in npu_delegates:
        if d.nodes_total is not None:
            return DelegateCoverage(coverage=d.coverage, source="node counts",
                                    npu_ops=d.nodes_delegated, total_ops=d.nodes_total,
                                    npu_share=(d.nodes_delegated / d.nodes_total
                                               if d.nodes_total and d.nodes_delegated is not None
                                               else None),
                                    kernels=d.kernels)
    applied = next(iter(npu_delegates), None)
    cpu_rows = log.cpu_op_rows
    if cpu_rows is not None and total_ops and applied is not None:
        cpu = len(cpu_rows)
        npu = max(0, total_ops - cpu)
        kernels = len(log.op_profile) - cpu
        coverage = "none" if npu == 0 else ("complete" if cpu == 0 else "partial")
        return DelegateCoverage(coverage=coverage, source="op profile", npu_ops=npu,
                                total_ops=total_ops, npu_share=npu / total_ops, kernels=kernels,
                                cpu_op_types=tuple(sorted({r.node_type for r in cpu_rows})))
    if applied is not None:
        return DelegateCoverage(coverage=applied.coverage, source="delegate line",
                                kernels=applied.kernels)
    return None


def placement_mismatches(log: BenchmarkLog, placement: Any) -> tuple[PlacementMismatch, ...]:
    """Op types the board ran elsewhere than ``placement`` predicted, from the op profile.

    Rows of the regular-runs op profile that are not an NPU delegate kernel are ops the
    CPU ran; per op type, more CPU rows than the prediction's CPU ops means ops predicted
    on the NPU ran on the CPU, fewer means ops predicted on the CPU ran inside a delegate
    kernel.  Without an op profile (no ``--enable_op_profiling``) nothing can be named:
    returns ``()``.  ``placement`` needs ``ops`` with ``type`` and ``placement``.
    """
    cpu_rows = log.cpu_op_rows
    ops = getattr(placement, "ops", None)
    if cpu_rows is None or not ops:
        return ()
    from collections import Counter

    from ..vocab import ALL_NPU_CUSTOM_OPS
    from .parse import is_npu_kernel
    measured_cpu = Counter(r.node_type for r in cpu_rows)
    predicted_cpu = Counter(o.type for o in ops if o.placement == "CPU")
    predicted_npu = Counter(o.type for o in ops if o.placement == "NPU")
    has_kernel = any(is_npu_kernel(r.node_type) for r in log.op_profile)
    out = []
    for op_type in sorted(set(measured_cpu) | set(predicted_cpu)):
        if op_type in ALL_NPU_CUSTOM_OPS:
            continue
        diff = measured_cpu[op_type] - predicted_cpu[op_type]
        if diff > 0 and predicted_npu[op_type]:
            out.append(PlacementMismatch(op_type, "NPU", "CPU", count=min(diff, predicted_npu[op_type]),
                                         evidence=f"{measured_cpu[op_type]} {op_type} row(s) in the "
                                                  "op profile outside the delegate kernel"))
        elif diff < 0 and has_kernel:
            out.append(PlacementMismatch(op_type, "CPU", "NPU", count=-diff,
                                         evidence=f"{measured_cpu[op_type]} of {predicted_cpu[op_type]} "
                                                  f"predicted-CPU {op_type} op(s) in the op profile; "
                                                  "the rest ran inside the delegate kernel"))
    if out:
        warnings.warn("the board placed ops otherwise than the prediction: "
                      + "; ".join(m.summary() for m in out), WorkbenchWarning, stacklevel=3)
    return tuple(out)
