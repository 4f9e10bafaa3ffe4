"""Calibrated activation ranges against the data: percentiles, and the edit before quantization.

Both TFLite routes calibrate first and quantize after, and the calibrated ranges can be edited in
between: the TFLite converter's calibration (``_experimental_calibrate_only``) writes min/max into
each tensor of a float flatbuffer that :func:`tensorflow.lite.python.convert.mlir_quantize` then
quantizes; AI Edge Quantizer's ``calibrate`` returns ``{tensor: {"min", "max"}}`` that its
``quantize`` reads.  :func:`activation_percentiles` runs the float model on the calibration samples
(LiteRT, every tensor kept) and gives each tensor's low/high percentile; the percentile calibrator
sets each calibrated range to them, and :func:`range_outliers` lists the
tensors whose calibrated range is far wider than the one holding 99.8% of their values
(``quantize.range-outliers``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

#: values kept per tensor to estimate its percentiles (a random subset when the data has more)
SAMPLE_LIMIT = 200_000
#: the percentile the outlier finding compares with (0.1th..99.9th)
OUTLIER_PERCENTILE = 99.9
#: a calibrated range this many times wider than the 0.1..99.9 percentile range is "far outside"
OUTLIER_RATIO = 10.0
#: a calibrated range holding less than this fraction of the 0.1..99.9 percentile range clips what the data
#: reaches (``quantize.range-clipped``: AI Edge Quantizer's moving average of each sample's min/max)
CLIPPED_FRACTION = 0.75


def activation_percentiles(model: bytes, x: np.ndarray, names: Iterable[str], percentiles: Iterable[float],
                           *, seed: int = 0, channels: dict[str, np.ndarray] | None = None
                           ) -> dict[str, dict[float, float]]:
    """``{tensor name: {p: value}}`` for the float ``.tflite`` ``model`` on samples ``x`` (model inputs),
    for each named tensor the interpreter holds; ``percentiles`` in [0, 100].  0 and 100 are the exact
    min and max over every value of every sample (the other percentiles: of a random subset).  ``channels``:
    its keys name tensors whose range per channel (last axis, 0 included) is filled in, in the same pass."""
    import warnings

    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # "preserve_all_tensors is for debugging" - that is what we do
        it = Interpreter(model_content=model, experimental_preserve_all_tensors=True, num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    names = list(names)
    wanted = set(names) | set(channels or ())
    index = {d["name"]: d["index"] for d in it.get_tensor_details() if d["name"] in wanted}
    inp = it.get_input_details()[0]
    rng = np.random.default_rng(seed)
    per_sample = max(1, SAMPLE_LIMIT // max(len(x), 1))
    kept: dict[str, list[np.ndarray]] = {n: [] for n in index}
    lows: dict[str, float] = {}
    highs: dict[str, float] = {}
    asked = set(names)
    c_lo: dict[str, np.ndarray] = {}
    c_hi: dict[str, np.ndarray] = {}
    for i in range(len(x)):
        it.set_tensor(inp["index"], np.ascontiguousarray(x[i:i + 1], np.float32).reshape(inp["shape"]))
        it.invoke()
        for name, t in index.items():
            try:
                full = np.asarray(it.get_tensor(t), np.float32)
            except ValueError:             # a tensor the interpreter does not hold (optimised away)
                continue
            if channels is not None and name in channels and full.ndim:
                per = full.reshape(-1, full.shape[-1])
                c_lo[name] = np.minimum(c_lo.get(name, 0.0), per.min(0))
                c_hi[name] = np.maximum(c_hi.get(name, 0.0), per.max(0))
            if name not in asked:          # wanted for its channels only: the sampling below is unchanged
                continue
            v = full.reshape(-1)
            if v.size:
                lows[name] = min(lows.get(name, np.inf), float(v.min()))
                highs[name] = max(highs.get(name, -np.inf), float(v.max()))
            if v.size > per_sample:
                v = v[rng.choice(v.size, per_sample, replace=False)]
            kept[name].append(v)
    if channels is not None:
        channels.update({n: (c_hi[n] - c_lo[n]).astype(np.float64) for n in c_hi})
    ps = list(percentiles)
    out = {}
    for name, parts in kept.items():
        if name not in asked:
            continue
        if parts:
            values = np.concatenate(parts)
            out[name] = dict(zip(ps, (float(q) for q in np.percentile(values, ps))))
            out[name].update({p: lows[name] if p == 0 else highs[name] for p in ps if p in (0, 100)})
    return out


def percentile_range(lo: float, hi: float, p_lo: float, p_hi: float) -> tuple[float, float]:
    """The range of the percentile calibrator: the data's ``[p_lo, p_hi]`` (holding 0, as the quantizers
    do), in place of the calibrated ``[lo, hi]`` (kept for a constant tensor).  Narrower than a global
    min/max (the TFLite converter's); it may be wider than AI Edge Quantizer's moving average of each
    sample's min/max, which clips values the data does reach."""
    new_lo, new_hi = min(p_lo, 0.0), max(p_hi, 0.0)
    if new_hi <= new_lo:              # a constant tensor: keep what calibration saw
        return lo, hi
    return new_lo, new_hi


def _against_percentiles(ranges: dict[str, tuple[float, float]], pct: dict[str, dict[float, float]]):
    """(row, calibrated width / 0.1..99.9 percentile width) of each tensor with both ranges (and neither empty);
    ``row`` holds the tensor's name, its calibrated range and the two percentiles."""
    lo_p, hi_p = 100.0 - OUTLIER_PERCENTILE, OUTLIER_PERCENTILE
    for name, (lo, hi) in ranges.items():
        p = pct.get(name)
        if not p or lo_p not in p or hi_p not in p:
            continue
        inner = max(p[hi_p], 0.0) - min(p[lo_p], 0.0)
        width = hi - lo
        if inner <= 0 or width <= 0:
            continue
        yield ({"tensor": name, "calibrated": [float(lo), float(hi)], "p0.1": float(p[lo_p]), "p99.9": float(p[hi_p])},
               float(width / inner))


def range_outliers(ranges: dict[str, tuple[float, float]], pct: dict[str, dict[float, float]],
                   *, ratio: float = OUTLIER_RATIO) -> list[dict[str, Any]]:
    """Tensors whose calibrated range is at least ``ratio`` times the 0.1..99.9 percentile range, widest first."""
    rows = [{**row, "ratio": round(held, 1)} for row, held in _against_percentiles(ranges, pct) if held >= ratio]
    return sorted(rows, key=lambda r: -r["ratio"])


def range_clipped(ranges: dict[str, tuple[float, float]], pct: dict[str, dict[float, float]],
                  *, fraction: float = CLIPPED_FRACTION) -> list[dict[str, Any]]:
    """Tensors whose calibrated range holds less than ``fraction`` of the 0.1..99.9 percentile range (more than
    0.1% of their values clipped, by a quarter of the span or more), the most clipped first."""
    rows = [{**row, "held": round(held, 2)} for row, held in _against_percentiles(ranges, pct) if held < fraction]
    return sorted(rows, key=lambda r: r["held"])


# -- TFLite converter: the calibrated flatbuffer ------------------------------------------------------
def calibrated_ranges(calibrated: bytes) -> tuple[dict[str, tuple[float, float]], set[str]]:
    """``{tensor name: (min, max)}`` of the activation tensors a calibrated flatbuffer holds, and the
    names of the graph's inputs (whose range is the data's, never narrowed)."""
    from ai_edge_litert.tools import flatbuffer_utils as fu
    model = fu.read_model_from_bytearray(bytearray(calibrated))
    out: dict[str, tuple[float, float]] = {}
    inputs: set[str] = set()
    for sg in model.subgraphs:
        inputs |= {_name(sg.tensors[i].name) for i in sg.inputs}
        for t in sg.tensors:
            q = t.quantization
            if q is None or q.min is None or q.max is None or len(q.min) != 1 or len(q.max) != 1:
                continue
            out[_name(t.name)] = (float(q.min[0]), float(q.max[0]))
    return out, inputs


def set_calibrated_ranges(calibrated: bytes, ranges: dict[str, tuple[float, float]]) -> bytes:
    """The calibrated flatbuffer with the min/max of the named tensors replaced."""
    from ai_edge_litert.tools import flatbuffer_utils as fu
    model = fu.read_model_from_bytearray(bytearray(calibrated))
    for sg in model.subgraphs:
        for t in sg.tensors:
            new = ranges.get(_name(t.name))
            if new is not None and t.quantization is not None and t.quantization.min is not None:
                t.quantization.min = [float(new[0])]
                t.quantization.max = [float(new[1])]
    return bytes(fu.convert_object_to_bytearray(model))


def _name(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


def percentile_edit(float_model: bytes, x: np.ndarray, ranges: dict[str, tuple[float, float]], skip: set[str],
                    percentile: float | None, *, channels: dict[str, np.ndarray] | None = None
                    ) -> tuple[dict[str, tuple[float, float]], list[dict[str, Any]]]:
    """Percentiles of each calibrated tensor on ``x``: the ranges set to the data's ``100 - percentile`` ..
    ``percentile`` (100: the global min/max; None: unchanged), and the outlier rows
    (``quantize.range-outliers``) of the calibrated ranges as they were."""
    edited, outliers, _ = range_edit(float_model, x, ranges, skip, percentile, channels=channels)
    return edited, outliers


def range_edit(float_model: bytes, x: np.ndarray, ranges: dict[str, tuple[float, float]], skip: set[str],
               percentile: float | None, *, channels: dict[str, np.ndarray] | None = None
               ) -> tuple[dict[str, tuple[float, float]], list[dict[str, Any]], list[dict[str, Any]]]:
    """:func:`percentile_edit`, and the rows of the calibrated ranges that clip the data
    (``quantize.range-clipped``, :func:`range_clipped`)."""
    ps = {100.0 - OUTLIER_PERCENTILE, OUTLIER_PERCENTILE}
    if percentile is not None:
        ps |= {100.0 - percentile, percentile}
    names = [n for n in ranges if n not in skip]
    pct = activation_percentiles(float_model, x, names, sorted(ps), channels=channels)
    outliers = range_outliers({n: ranges[n] for n in names}, pct)
    clipped = range_clipped({n: ranges[n] for n in names}, pct)
    if percentile is None:
        return ranges, outliers, clipped
    edited = dict(ranges)
    for n in names:
        if n in pct:
            edited[n] = percentile_range(*ranges[n], pct[n][100.0 - percentile], pct[n][percentile])
    return edited, outliers, clipped
