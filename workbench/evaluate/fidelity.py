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

Outputs are matched by name (when both models name them alike), else by position, and by
**layout**: a converted model's NHWC output ``[16, 16, 17]`` is transposed back to the FP32
model's NCHW ``[17, 16, 16]`` before anything is compared (:func:`output_layouts` reads each
model's output names and per-sample shapes; :func:`layout_permutation` finds the permutation,
preferring the channels-last move a converter makes).  A **scalar** output (one value per
sample) has no direction: its cosine is ``None`` and its ``mean_abs_error`` is the figure to
read.  A sample where both vectors are all zeros has no defined cosine: it is left out of the
mean (``None`` when no sample has one), never counted as 1.
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
    cosine: float | None
    cosine_ci_low: float | None
    cosine_ci_high: float | None
    max_abs_error: float
    max_abs_ci_low: float
    max_abs_ci_high: float
    topk: tuple[int, ...] = ()
    topk_agreement: tuple[float, ...] = ()
    topk_ci_low: tuple[float, ...] = ()
    topk_ci_high: tuple[float, ...] = ()
    mean_abs_error: float | None = None
    shape: tuple[int, ...] = ()          # per-sample shape, in the FP32 model's layout
    permutation: tuple[int, ...] = ()    # how the candidate's output was transposed to it (() = as is)

    def summary(self) -> str:
        sqnr = "n/a" if self.sqnr_db is None else f"{self.sqnr_db:.1f} dB"
        cos = "n/a" if self.cosine is None else f"{self.cosine:.4f}"
        return (f"{self.model} {self.condition} {self.output}: SQNR {sqnr}, cosine {cos}, "
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
        if r.cosine is None:
            cos = "n/a (scalar)" if r.values == 1 else "n/a (all zeros)"
            cos_ci = "" if r.mean_abs_error is None else f"mean |err| {r.mean_abs_error:.4g}"
        else:
            cos = f"{r.cosine:.4f}"
            cos_ci = f"{r.cosine_ci_low:.4f}..{r.cosine_ci_high:.4f}"
        out.append((r.condition, r.model, f"{r.output} ({r.kind}, {r.values})", sqnr, sqnr_ci, cos, cos_ci,
                    f"{r.max_abs_error:.4g}", topk))
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
                    class_scores: bool = False, classes: int | None = None, confidence: float = 0.95,
                    top_k: Sequence[int] = TOP_K) -> dict[str, Any]:
    """The statistics of one output: ``reference`` and ``candidate`` ``(N, values)``, ``indices``
    ``(n_bootstrap, N)`` bootstrap resamples.  Returns a plain dict of the FidelityRow fields.

    ``classes``: with ``class_scores``, the size of the class axis when each sample holds several
    positions of scores (``[positions, classes]``, e.g. a CTC text recogniser's ``[40, 6625]``): top-k
    agreement is then counted per position and averaged per sample.  ``None``: one vector of scores."""
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
    ref_norm, cand_norm = np.linalg.norm(ref, axis=1), np.linalg.norm(cand, axis=1)
    norms = ref_norm * cand_norm
    # one zero vector against a non-zero one: orthogonal (0); both zero: no direction, left out (NaN)
    cos = np.where(norms > 0, np.sum(ref * cand, axis=1) / np.where(norms > 0, norms, 1.0),
                   np.where((ref_norm == 0) & (cand_norm == 0), np.nan, 0.0))
    out: dict[str, Any] = {"n": int(len(ref)), "values": int(ref.shape[1]),
                           "mean_abs_error": float(np.abs(err).mean()) if err.size else 0.0}

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
    if ref.shape[1] == 1 or np.isnan(cos).all():
        out.update(cosine=None, cosine_ci_low=None, cosine_ci_high=None)   # a scalar has no direction
    else:
        import warnings
        with warnings.catch_warnings():    # "Mean of empty slice": a resample of all-zero pairs only
            warnings.simplefilter("ignore", RuntimeWarning)
            boot_cos = np.nanmean(cos[indices], axis=1)
        low, high = _percentile(boot_cos[np.isfinite(boot_cos)], confidence)
        out.update(cosine=float(np.nanmean(cos)), cosine_ci_low=low, cosine_ci_high=high)
    low, high = _percentile(abs_max[indices].max(axis=1), confidence)
    out.update(max_abs_error=float(abs_max.max()), max_abs_ci_low=low, max_abs_ci_high=high)
    ks, agree, lows, highs = [], [], [], []
    width = classes if classes and ref.shape[1] % classes == 0 else ref.shape[1]
    if class_scores and width > 1:
        rows_ref = ref.reshape(-1, width)                   # (N * positions, classes)
        top_ref = rows_ref.argmax(axis=1)
        order = np.argsort(-cand.reshape(-1, width), axis=1, kind="stable")
        for k in top_k:
            if k > width or (k > 1 and k >= width):
                continue
            hit = np.any(order[:, :k] == top_ref[:, None], axis=1).astype(np.float64)
            hit = hit.reshape(len(ref), -1).mean(axis=1)    # per sample: the share of its positions
            low, high = _percentile(hit[indices].mean(axis=1), confidence)
            ks.append(int(k))
            agree.append(float(hit.mean()))
            lows.append(low)
            highs.append(high)
    out.update(topk=tuple(ks), topk_agreement=tuple(agree), topk_ci_low=tuple(lows), topk_ci_high=tuple(highs))
    return out


def layout_permutation(reference_shape: Sequence[int], candidate_shape: Sequence[int]) -> tuple[int, ...] | None:
    """The permutation ``p`` (of per-sample axes) with ``candidate.transpose(p)`` in the reference's layout.

    ``()`` when the shapes are equal (nothing to do); the channels-last move a converter makes
    (NCHW ``[C, H, W]`` -> NHWC ``[H, W, C]``, and ``[C, L]`` -> ``[L, C]``) is tried first, then
    any permutation that fits; ``None`` when none does (different number of values).
    """
    import itertools
    ref, cand = tuple(int(d) for d in reference_shape), tuple(int(d) for d in candidate_shape)
    if ref == cand:
        return ()
    if len(ref) != len(cand) or sorted(ref) != sorted(cand):
        return None
    rank = len(ref)
    # candidate axis k holds reference axis q[k]; undoing it is transposing by argsort(q)
    channels_last = tuple(range(1, rank)) + (0,)
    for q in (channels_last, *itertools.permutations(range(rank))):
        if tuple(ref[a] for a in q) == cand:
            return tuple(int(i) for i in np.argsort(q))
    return None


def output_layouts(path: Any, input_shape: Sequence[int] | None = None) -> list[tuple[str, tuple[int, ...]]] | None:
    """``[(name, per-sample shape)]`` of a model file's outputs, in the order the workbench's
    predictors return them; ``None`` for formats whose shapes are not read here (Keras, SavedModel).

    ``input_shape`` (per-sample, NHWC, e.g. ``(48, 192, 3)``) fills a dynamic input of an ONNX
    model, which is then run once on zeros to learn its output shapes.
    """
    from pathlib import Path
    path = Path(str(path))
    try:
        if path.suffix == ".tflite":
            from ai_edge_litert.interpreter import Interpreter
            interp = Interpreter(model_path=str(path))
            return [(o["name"], tuple(int(d) for d in o["shape"][1:])) for o in interp.get_output_details()]
        if path.suffix == ".onnx":
            import onnxruntime as ort
            session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            outs = session.get_outputs()
            static = lambda shape: all(isinstance(d, int) and d > 0 for d in shape[1:])  # noqa: E731
            if all(static(o.shape) for o in outs):
                return [(o.name, tuple(int(d) for d in o.shape[1:])) for o in outs]
            inp = session.get_inputs()[0]
            dims: list[int | None] = [d if isinstance(d, int) and d > 0 else None for d in inp.shape]
            if None in dims[1:]:
                if input_shape is None or len(input_shape) != 3 or len(dims) != 4:
                    return None
                h, w, c = (int(v) for v in input_shape)
                fill = (c, h, w) if dims[1] == c else (h, w, c)
                dims = [1, *(d if d is not None else f for d, f in zip(dims[1:], fill))]
            feed = np.zeros([1 if d is None else d for d in dims], np.float32)
            results = session.run(None, {inp.name: feed})
            return [(o.name, tuple(int(d) for d in r.shape[1:])) for o, r in zip(outs, results)]
    except Exception:  # noqa: BLE001 - a model we cannot read here keeps the flat comparison
        return None
    return None


def recorded_permutations(candidate_layout: Any, reference_layout: Sequence[tuple[str, Sequence[int]]] | None
                          ) -> list[tuple[int, ...] | None] | None:
    """Per reference output, the permutation the conversion recorded (``transposed_outputs`` of the
    ``model_manifest.json`` beside the candidate: the ONNX outputs onnx2tf turned channels-last), or
    ``None`` per output where it recorded nothing; ``None`` without a record.  It settles what the
    shapes cannot: an output ``[C, H, W]`` with ``C == H == W`` looks the same in either layout."""
    from pathlib import Path

    from .._io import read_json
    path = getattr(candidate_layout, "path", None)
    if path is None or not reference_layout:
        return None
    manifest = Path(str(path)).with_name("model_manifest.json")
    try:
        conversion = read_json(manifest).get("conversion") or {} if manifest.is_file() else {}
    except (OSError, ValueError):
        return None
    transposed = set(conversion.get("transposed_outputs") or ())
    if not transposed:
        return None
    out: list[tuple[int, ...] | None] = []
    for name, shape in reference_layout:
        rank = len(tuple(shape))
        out.append(tuple(int(i) for i in np.argsort((*range(1, rank), 0))) if name in transposed and rank > 1
                   else None)
    return out


def pair_outputs(reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray],
                 model: str = "candidate", *, reference_names: Sequence[str] | None = None,
                 candidate_names: Sequence[str] | None = None) -> list[tuple[int, int]]:
    """``(reference index, candidate index)`` pairs: by name when both models name their outputs
    alike, by position when the sizes line up, else by a unique number of values per sample
    (converters may reorder outputs)."""
    ref_sizes = [r.shape[1] for r in reference]
    cand_sizes = [c.shape[1] for c in candidate]
    if len(ref_sizes) != len(cand_sizes):
        raise EvaluationError(f"the FP32 model has {len(ref_sizes)} output(s) but {model!r} has {len(cand_sizes)}; "
                              "compare models of the same graph.")
    if (reference_names and candidate_names and len(set(reference_names)) == len(reference_names)
            and sorted(reference_names) == sorted(candidate_names)):
        pairs = [(i, list(candidate_names).index(n)) for i, n in enumerate(reference_names)]
        if all(ref_sizes[i] == cand_sizes[j] for i, j in pairs):
            return pairs
    if ref_sizes == cand_sizes:
        return list(enumerate(range(len(ref_sizes))))
    if sorted(ref_sizes) == sorted(cand_sizes) and len(set(ref_sizes)) == len(ref_sizes):
        return [(i, cand_sizes.index(s)) for i, s in enumerate(ref_sizes)]
    raise EvaluationError(f"the outputs of {model!r} ({cand_sizes} values per sample) do not match the FP32 "
                          f"model's ({ref_sizes}); compare models of the same graph.")


def fidelity_rows(condition: str, model: str, reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray],
                  indices: np.ndarray, *, names: Sequence[str], kinds: Sequence[str],
                  confidence: float = 0.95,
                  reference_layout: Sequence[tuple[str, Sequence[int]]] | None = None,
                  candidate_layout: Sequence[tuple[str, Sequence[int]]] | None = None,
                  permutations: Sequence[Sequence[int] | None] | None = None) -> list[FidelityRow]:
    """One :class:`FidelityRow` per output of ``candidate`` against ``reference``.

    ``reference_layout`` / ``candidate_layout`` (from :func:`output_layouts`) give each output's
    name and per-sample shape: outputs are then paired by name where the names agree, and a
    candidate output in another layout is transposed to the reference's first.
    ``permutations`` (per reference output, as a conversion recorded it) overrides the
    permutation found from the shapes.
    """
    ref_names = [n for n, _ in reference_layout] if reference_layout else None
    cand_names = [n for n, _ in candidate_layout] if candidate_layout else None
    rows = []
    for i, j in pair_outputs(reference, candidate, model, reference_names=ref_names, candidate_names=cand_names):
        cand = np.asarray(candidate[j])
        perm: tuple[int, ...] = ()
        shape: tuple[int, ...] = ()
        if reference_layout and candidate_layout:
            ref_shape, cand_shape = tuple(reference_layout[i][1]), tuple(candidate_layout[j][1])
            shape = tuple(int(d) for d in ref_shape)
            recorded = permutations[i] if permutations is not None and i < len(permutations) else None
            found = tuple(recorded) if recorded is not None else layout_permutation(ref_shape, cand_shape)
            if (found and int(np.prod(cand_shape)) == cand.reshape(len(cand), -1).shape[1]
                    and len(found) == len(cand_shape)):
                perm = tuple(int(a) for a in found)
                cand = cand.reshape((len(cand), *cand_shape)).transpose((0, *(a + 1 for a in perm)))
                cand = cand.reshape(len(cand), -1)
        # class scores per position ([positions, classes], classes on the source model's last axis)
        classes = shape[-1] if len(shape) == 2 else None
        stats = output_fidelity(reference[i], cand, indices, class_scores=kinds[i] == "class_scores",
                                classes=classes, confidence=confidence)
        rows.append(FidelityRow(condition=condition, model=model, output=names[i], output_index=i, kind=kinds[i],
                                shape=shape, permutation=perm, **stats))
    return rows
