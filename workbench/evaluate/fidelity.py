"""FP32 against INT8 output by output: how faithfully a candidate reproduces the FP32 model.

Task-free: every model has outputs, not every model has a top-1.  For each
condition, candidate and output tensor (each ``(N, values)``, the FP32 model's
output as reference):

- **SQNR** in dB: ``10 log10(sum ref^2 / sum (ref - q)^2)`` over the condition's samples
  (signal-to-quantization-noise ratio; +6 dB is one more bit of precision);
- **cosine** similarity, the mean over samples of ``cos(ref_i, q_i)``;
- **max abs error**, the largest ``|ref - q|`` of any value of any sample;
- **top-k agreement** (outputs that are class scores): the share of samples whose FP32
  top-1 class is among the candidate's top k (k = 1 is argmax agreement).

Each comes with a paired bootstrap CI: the same resampled sample indices as the accuracy
of that condition (so every statistic and model sees the same resamples).  An output
whose FP32 reference is all zeros has no defined SQNR (reported as ``None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._results import Result
from ..errors import EvaluationError

TOP_K = (1, 5)


@dataclass(frozen=True)
class FidelityRow(Result):
    """One candidate, one condition, one output tensor."""

    condition: str
    model: str
    output: str
    output_index: int
    kind: str
    n: int
    values: int
    sqnr_db: float | None
    sqnr_ci_low: float | None
    sqnr_ci_high: float | None
    cosine: float
    cosine_ci_low: float
    cosine_ci_high: float
    max_abs_error: float
    max_abs_ci_low: float
    max_abs_ci_high: float
    topk: tuple[int, ...] = ()
    topk_agreement: tuple[float, ...] = ()
    topk_ci_low: tuple[float, ...] = ()
    topk_ci_high: tuple[float, ...] = ()

    def summary(self) -> str:
        sqnr = "n/a" if self.sqnr_db is None else f"{self.sqnr_db:.1f} dB"
        return (f"{self.model} {self.condition} {self.output}: SQNR {sqnr}, cosine {self.cosine:.4f}, "
                f"max |err| {self.max_abs_error:.4g}")


HEADERS = ("condition", "model", "output", "SQNR dB", "95% CI", "cosine", "cosine CI", "max |err|",
           "top-k agreement")


def table_rows(rows: Sequence[FidelityRow]) -> list[tuple[Any, ...]]:
    """Display rows (strings) for :data:`HEADERS`."""
    out = []
    for r in rows:
        sqnr = "n/a" if r.sqnr_db is None else f"{r.sqnr_db:.1f}"
        sqnr_ci = "" if r.sqnr_ci_low is None else f"{r.sqnr_ci_low:.1f}..{r.sqnr_ci_high:.1f}"
        topk = ", ".join(f"top-{k} {a:.1%} ({lo:.1%}..{hi:.1%})"
                         for k, a, lo, hi in zip(r.topk, r.topk_agreement, r.topk_ci_low, r.topk_ci_high)) or "-"
        out.append((r.condition, r.model, f"{r.output} ({r.kind}, {r.values})", sqnr, sqnr_ci, f"{r.cosine:.4f}",
                    f"{r.cosine_ci_low:.4f}..{r.cosine_ci_high:.4f}", f"{r.max_abs_error:.4g}", topk))
    return out


def text(rows: Sequence[FidelityRow]) -> str:
    cells = [tuple(str(c) for c in row) for row in table_rows(rows)]
    if not cells:
        return ""
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(HEADERS)]
    fmt = lambda row: "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(HEADERS), *(fmt(r) for r in cells)])


def html(rows: Sequence[FidelityRow]) -> str:
    from .. import display
    return (display.heading("FP32 vs INT8 fidelity per output")
            + display.paragraph("SQNR and cosine of each candidate's outputs against the FP32 model's on the same "
                                "samples, with paired bootstrap CIs; top-k agreement where an output is class scores.")
            + display.table(HEADERS, table_rows(rows)))


def _percentile(values: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.nanpercentile(values, [tail, 100.0 - tail])
    return float(low), float(high)


def output_fidelity(reference: np.ndarray, candidate: np.ndarray, indices: np.ndarray, *,
                    class_scores: bool = False, confidence: float = 0.95,
                    top_k: Sequence[int] = TOP_K) -> dict[str, Any]:
    """The statistics of one output: ``reference`` and ``candidate`` ``(N, values)``, ``indices``
    ``(n_bootstrap, N)`` bootstrap resamples.  Returns a plain dict of the FidelityRow fields."""
    ref = np.asarray(reference, np.float64).reshape(len(reference), -1)
    cand = np.asarray(candidate, np.float64).reshape(len(candidate), -1)
    if ref.shape != cand.shape:
        raise EvaluationError(f"fidelity needs outputs of the same shape; FP32 gives {ref.shape[1:]} values per "
                              f"sample but the candidate {cand.shape[1:]}.")
    if indices.shape[1] != len(ref):
        raise EvaluationError(f"bootstrap indices are for {indices.shape[1]} samples but the outputs have {len(ref)}.")
    err = cand - ref
    signal = np.sum(ref * ref, axis=1)                   # per-sample power, summed over values
    noise = np.sum(err * err, axis=1)
    abs_max = np.max(np.abs(err), axis=1)
    norms = np.linalg.norm(ref, axis=1) * np.linalg.norm(cand, axis=1)
    cos = np.where(norms > 0, np.sum(ref * cand, axis=1) / np.where(norms > 0, norms, 1.0),
                   np.where(np.linalg.norm(ref, axis=1) == np.linalg.norm(cand, axis=1), 1.0, 0.0))
    out: dict[str, Any] = {"n": int(len(ref)), "values": int(ref.shape[1])}

    def sqnr(s: np.ndarray, e: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return 10.0 * np.log10(s / e)

    total_s, total_e = signal.sum(), noise.sum()
    if total_s <= 0:
        out.update(sqnr_db=None, sqnr_ci_low=None, sqnr_ci_high=None)
    else:
        point = float(sqnr(total_s, total_e)) if total_e > 0 else float("inf")
        boot = sqnr(signal[indices].sum(axis=1), noise[indices].sum(axis=1))
        finite = np.isfinite(boot)
        low, high = _percentile(boot[finite], confidence) if finite.any() else (point, point)
        cap = 200.0                                       # identical outputs: report a large finite number
        out.update(sqnr_db=min(point, cap), sqnr_ci_low=min(low, cap), sqnr_ci_high=min(high, cap))
    low, high = _percentile(cos[indices].mean(axis=1), confidence)
    out.update(cosine=float(cos.mean()), cosine_ci_low=low, cosine_ci_high=high)
    low, high = _percentile(abs_max[indices].max(axis=1), confidence)
    out.update(max_abs_error=float(abs_max.max()), max_abs_ci_low=low, max_abs_ci_high=high)
    ks, agree, lows, highs = [], [], [], []
    if class_scores and ref.shape[1] > 1:
        top_ref = ref.argmax(axis=1)
        order = np.argsort(-cand, axis=1, kind="stable")
        for k in top_k:
            if k > ref.shape[1] or (k > 1 and k >= ref.shape[1]):
                continue
            hit = np.any(order[:, :k] == top_ref[:, None], axis=1).astype(np.float64)
            low, high = _percentile(hit[indices].mean(axis=1), confidence)
            ks.append(int(k))
            agree.append(float(hit.mean()))
            lows.append(low)
            highs.append(high)
    out.update(topk=tuple(ks), topk_agreement=tuple(agree), topk_ci_low=tuple(lows), topk_ci_high=tuple(highs))
    return out


def pair_outputs(reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray],
                 model: str = "candidate") -> list[tuple[int, int]]:
    """``(reference index, candidate index)`` pairs: by position when the shapes line up, else by
    a unique number of values per sample (converters may reorder outputs)."""
    ref_sizes = [r.shape[1] for r in reference]
    cand_sizes = [c.shape[1] for c in candidate]
    if len(ref_sizes) != len(cand_sizes):
        raise EvaluationError(f"the FP32 model has {len(ref_sizes)} output(s) but {model!r} has {len(cand_sizes)}; "
                              "compare models of the same graph.")
    if ref_sizes == cand_sizes:
        return list(enumerate(range(len(ref_sizes))))
    if sorted(ref_sizes) == sorted(cand_sizes) and len(set(ref_sizes)) == len(ref_sizes):
        return [(i, cand_sizes.index(s)) for i, s in enumerate(ref_sizes)]
    raise EvaluationError(f"the outputs of {model!r} ({cand_sizes} values per sample) do not match the FP32 "
                          f"model's ({ref_sizes}); compare models of the same graph.")


def fidelity_rows(condition: str, model: str, reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray],
                  indices: np.ndarray, *, names: Sequence[str], kinds: Sequence[str],
                  confidence: float = 0.95) -> list[FidelityRow]:
    """One :class:`FidelityRow` per output of ``candidate`` against ``reference``."""
    rows = []
    for i, j in pair_outputs(reference, candidate, model):
        stats = output_fidelity(reference[i], candidate[j], indices, class_scores=kinds[i] == "class_scores",
                                confidence=confidence)
        rows.append(FidelityRow(condition=condition, model=model, output=names[i], output_index=i, kind=kinds[i],
                                **stats))
    return rows
