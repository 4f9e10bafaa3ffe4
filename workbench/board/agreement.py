"""Host against board, tensor by tensor: the comparison of one tensor (:func:`compare_tensor`), the
computed tensors a bisection halves (:func:`candidates`) and the results (:class:`TensorAgreement`,
:class:`BisectResult`).  The bisection itself is :mod:`workbench.board.divergence`.

Comparison is on the exact integer codes (count of differing codes, the largest code difference) plus the
SQNR of the board's values against the host's, dequantized with the tensor's own parameters; float tensors
(a model with float islands) agree when their SQNR is at least ``FLOAT_AGREE_DB``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .._results import Result
from ..errors import BoardError

FLOAT_AGREE_DB = 60.0


def short_name(name: str, limit: int = 60) -> str:
    """A tensor name for a line of text: TensorFlow's fused names (``a;b;c``) cut to their first part."""
    first = name.split(";")[0]
    return first if len(first) <= limit else "..." + first[-(limit - 3):]


@dataclass(frozen=True)
class TensorAgreement(Result):
    """One tensor, host against board, over the samples."""

    tensor: int
    name: str
    op_index: int | None            # the op that computes it (None: a model input)
    op: str | None
    dtype: str
    shape: tuple[int, ...]
    values: int
    differing: int                  # values whose codes differ
    max_code_diff: float            # largest |board - host| in codes (float tensors: in value)
    sqnr_db: float | None           # board against host, dequantized; None when identical
    agrees: bool

    def summary(self) -> str:
        if self.differing == 0:
            return (f"tensor {self.tensor} {short_name(self.name)!r} ({self.op or 'input'}): bit-exact "
                    f"({self.values} values)")
        sqnr = "" if self.sqnr_db is None else f", SQNR {self.sqnr_db:.1f} dB"
        return (f"tensor {self.tensor} {short_name(self.name)!r} ({self.op or 'input'}): {self.differing} of "
                f"{self.values} "
                f"codes differ, max difference {self.max_code_diff:g}{sqnr}"
                f"{'' if not self.agrees else ' (within the tolerance)'}")


@dataclass(frozen=True)
class BisectResult(Result):
    """Where (and whether) the board's INT8 run departs from the host's."""

    model_name: str
    model_sha256: str
    where: str                      # the board label
    host_kernels: str
    board_kernels: str
    samples: int
    tolerance: int
    candidates: int                 # computed tensors in execution order
    board_runs: int
    max_runs: int                   # ceil(log2(candidates)) + 2
    outputs_agree: bool
    first_divergence: TensorAgreement | None = None
    op_inputs: tuple[TensorAgreement, ...] = ()
    compared: tuple[TensorAgreement, ...] = ()      # every tensor compared, in run order
    probes: tuple[tuple[int, ...], ...] = ()        # the tensors each board run exposed
    condition: str | None = None
    delegate: str | None = None
    target: str | None = None
    placement: str | None = None    # where the diverging op runs on the target ("NPU", "CPU: ...")
    notes: tuple[str, ...] = ()
    replayed_from: str | None = None

    @property
    def op_by_op_agree(self) -> bool:
        return self.outputs_agree and all(t.agrees for t in self.compared)

    def summary(self) -> str:
        runs = f"{self.board_runs} board run{'s' if self.board_runs != 1 else ''} (at most {self.max_runs})"
        if self.first_divergence is None:
            if self.outputs_agree:
                exact = all(t.differing == 0 for t in self.compared)
                what = "bit-exact" if exact else f"within {self.tolerance} code(s)"
                return (f"{self.where}: host ({self.host_kernels} kernels) and board agree {what} op by op "
                        f"on {len({t.tensor for t in self.compared})} tensors, {self.samples} samples; {runs}")
            return (f"{self.where}: the outputs depart but no exposed tensor does: the departure is inside "
                    f"a fused delegate partition; {runs}")
        d = self.first_divergence
        if not self.op_inputs and d.op_index is not None:
            inputs = "its input is the model input (the same codes on both sides)"
        else:
            inputs = ("its inputs agree" if all(t.agrees for t in self.op_inputs) else "its inputs already depart")
        where = f", runs on {self.placement}" if self.placement else ""
        masked = "; the outputs still agree (a later op masks it)" if self.outputs_agree else ""
        return (f"{self.where}: first departure at op #{d.op_index} {d.op} -> tensor {d.tensor} "
                f"{short_name(d.name)!r} "
                f"({d.differing} of {d.values} codes differ, max {d.max_code_diff:g}"
                f"{'' if d.sqnr_db is None else f', SQNR {d.sqnr_db:.1f} dB'}); {inputs}{where}{masked}; {runs}")

    def _repr_html_(self) -> str:
        from .. import display
        last = {t.tensor: t for t in self.compared}          # each tensor once, as last compared, in op order
        shown = sorted(last.values(), key=lambda t: (t.op_index if t.op_index is not None else 1 << 30, t.tensor))
        rows = [(t.tensor, t.op_index if t.op_index is not None else "-", t.op or "input", short_name(t.name),
                 t.differing,
                 t.values, f"{t.max_code_diff:g}", "-" if t.sqnr_db is None else f"{t.sqnr_db:.1f}",
                 "agrees" if t.agrees else "DEPARTS") for t in shown]
        return (display.heading("Host against board, tensor by tensor")
                + display.paragraph(self.summary())
                + display.table(("tensor", "op #", "op", "name", "codes differing", "values", "max diff",
                                 "SQNR dB", "check"), rows,
                                caption=f"host kernels {self.host_kernels}, board kernels {self.board_kernels}; "
                                        f"tolerance {self.tolerance} code(s)"))


# --- the model's tensors --------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    tensor: int
    op_index: int
    op: str


def candidates(graph: Any) -> tuple[Candidate, ...]:
    """Every computed tensor in execution order (each op's outputs; constants and inputs aside)."""
    inputs = set(graph.inputs)
    out = []
    seen: set[int] = set()
    for op in graph.ops:
        for t in op.outputs:
            if t < 0 or t in inputs or t in seen or graph.tensors[t].is_constant:
                continue
            seen.add(t)
            out.append(Candidate(t, op.index, op.type))
    return tuple(out)


def max_board_runs(n: int) -> int:
    return (math.ceil(math.log2(n)) if n > 1 else 0) + 2


def compare_tensor(host: Any, board: Any, info: Any, *, tolerance: int, op_index: int | None,
                   op: str | None) -> TensorAgreement:
    """Host against board for one tensor (arrays of the same shape, raw values)."""
    import numpy as np
    h, b = np.asarray(host), np.asarray(board)
    if h.shape != b.shape:
        raise BoardError(f"tensor {info.index} {info.name!r}: the board returned shape {b.shape}, the host "
                         f"{h.shape}. Next: check that the board ran the same file (sha256).")
    if h.dtype.kind in "iu":
        diff = np.abs(h.astype(np.int64) - b.astype(np.int64))
        differing = int(np.count_nonzero(diff))
        max_diff = float(diff.max()) if diff.size else 0.0
        scale = info.scales[0] if len(info.scales) == 1 else 1.0
        zp = info.zero_points[0] if len(info.zero_points) == 1 else 0
        hf = (h.astype(np.float64) - zp) * scale
        bf = (b.astype(np.float64) - zp) * scale
        agrees = max_diff <= tolerance
    else:
        hf, bf = h.astype(np.float64), b.astype(np.float64)
        diff = np.abs(hf - bf)
        differing = int(np.count_nonzero(diff))
        max_diff = float(diff.max()) if diff.size else 0.0
        agrees = True
    sqnr = None
    if differing:
        noise = float(np.sum((hf - bf) ** 2))
        signal = float(np.sum(hf ** 2))
        sqnr = round(10.0 * math.log10(signal / noise), 2) if signal > 0 else -math.inf
        if h.dtype.kind not in "iu":
            agrees = sqnr >= FLOAT_AGREE_DB
        if sqnr == -math.inf:
            sqnr = -999.0
    return TensorAgreement(tensor=info.index, name=info.name, op_index=op_index, op=op, dtype=info.dtype,
                           shape=tuple(int(v) for v in h.shape[1:]), values=int(h.size), differing=differing,
                           max_code_diff=max_diff, sqnr_db=sqnr, agrees=bool(agrees))
