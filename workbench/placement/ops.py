"""One op's placement and the records a placement is made of: :class:`OpPlacement`, the compiler runs
compared (:class:`CompilerRun`, :class:`CompilerDisagreement`) and the segments of the op sequence."""

from __future__ import annotations

from dataclasses import dataclass

from ..targets import Reason
from ..vocab import Placement

NPU, CPU = Placement.NPU, Placement.CPU


@dataclass(frozen=True)
class OpPlacement:
    """One op: where it runs and every constraint it violates."""

    index: int
    type: str
    name: str
    placement: str                      # "NPU" or "CPU"
    reasons: tuple[Reason, ...] = ()
    cycles: int | None = None           # imx93: Vela's op cycles (all NNG ops of this TFLite op)
    macs: int | None = None
    notes: tuple[str, ...] = ()         # e.g. where NXP's Vela fork differs from upstream


@dataclass(frozen=True)
class CompilerRun:
    """One compiler's placement of the model, kept for comparison (``--vela-versions``)."""

    compiler: str                       # "vela"
    version: str                        # "5.2.0"
    cpu_ops: tuple[int, ...]
    npu_ops: int
    estimated_latency_ms: float | None = None
    bsp_compiler: bool = False          # True for the compiler the BSP ships (the report's placement)


@dataclass(frozen=True)
class CompilerDisagreement:
    """An op the BSP's compiler places differently from another compiler version."""

    index: int
    type: str
    name: str
    bsp_compiler: str                   # "vela 3.10.0"
    bsp_placement: str
    other_compiler: str                 # "vela 5.2.0"
    other_placement: str
    other_is_newest: bool
    reason: str                         # why the compiler that says CPU says so


@dataclass(frozen=True)
class Segment:
    """A maximal run of consecutive ops with the same placement."""

    placement: str
    ops: tuple[int, ...]

    @property
    def first(self) -> int:
        return self.ops[0]

    @property
    def last(self) -> int:
        return self.ops[-1]
