"""Float to integer and back with a model's own scale and zero point, as TFLite's QUANTIZE/DEQUANTIZE do."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

_SIGN_BIT, _HALF_BITS, _INF_BITS = np.uint32(0x80000000), np.uint32(0x3F000000), np.uint32(0x7F800000)
# float32 bit patterns: the sign bit, 0.5, +infinity


def quantize_input(x: np.ndarray, scale: float, zero_point: int, dtype: np.dtype, *,
                   out: np.ndarray | None = None, scratch: tuple[np.ndarray, ...] | None = None) -> np.ndarray:
    """Float to integer with the model's input parameters, as TFLite's QUANTIZE does:
    ``round(x / scale) + zero_point`` (half away from zero), clipped to the type's range.

    Computed in float32 as ``trunc(v + copysign(0.5, v)) + zero_point`` clipped, ``v = x / scale``,
    in as few passes over the data as that allows (the same numbers every way):

    - the clip is taken before the truncation (``trunc`` is monotone and the bounds are integers,
      so the result is the same) and the truncation is the float-to-int cast itself;
    - one reduction tells whether any ``v`` is negative and finds the largest (read as unsigned
      32-bit integers, float32 values from +0 up keep their order and every negative one lies
      above them).  With none negative, ``copysign`` is just 0.5, the clip is needed only if the
      largest value lands above the range, and the cast writes the unsigned type of the same size,
      to which the zero point is added with wrap-around: exactly the signed sum, as it is in range;
    - otherwise ``copysign`` is two bit operations and the cast goes through a wider integer.

    ``out`` (an integer array of ``x``'s shape, e.g. an interpreter's own input buffer) receives
    the result; ``scratch`` (from :func:`quantize_scratch`) holds intermediate values between
    calls.  Both only spare allocations.
    """
    dtype = np.dtype(dtype)
    info = _int_range(dtype)
    low, high = info.min - zero_point, info.max - zero_point             # the clip, before adding the zero point
    x = np.asarray(x, np.float32)
    v, half, whole = scratch if scratch is not None else quantize_scratch(x.shape, dtype)
    if out is None:
        out = np.empty(x.shape, dtype)
    np.divide(x, np.float32(scale), out=v)
    top = v.view(np.uint32).max() if v.size else np.uint32(0)
    if top <= _INF_BITS:                                              # no value negative (nor -0.0, nor NaN)
        v += np.float32(0.5)
        if top.view(np.float32) + np.float32(0.5) >= high + 1:
            np.clip(v, np.float32(0), _bound(dtype, high), out=v)
        unsigned = out.view(np.dtype(f"u{dtype.itemsize}"))
        np.copyto(unsigned, v, casting="unsafe")                     # float -> int truncates toward zero
        np.add(unsigned, unsigned.dtype.type(zero_point % (1 << 8 * dtype.itemsize)), out=unsigned)
        return out
    np.bitwise_and(v.view(np.uint32), _SIGN_BIT, out=half)          # copysign(0.5, v) ...
    np.bitwise_or(half, _HALF_BITS, out=half)
    v += half.view(np.float32)                                       # ... added to v
    np.clip(v, _bound(dtype, low), _bound(dtype, high), out=v)
    np.copyto(whole, v, casting="unsafe")                            # float -> int truncates toward zero
    np.add(whole, zero_point, out=out, casting="unsafe")             # in range after the clip
    return out


def _bound(dtype: np.dtype, value: int) -> Any:
    """A clip bound: float32 for 8- and 16-bit types (exact, and a faster clip), else a Python float."""
    return np.float32(value) if dtype.itemsize <= 2 else float(value)


@functools.cache
def _int_range(dtype: np.dtype) -> np.iinfo:
    return np.iinfo(dtype)                                           # built once per type: it costs microseconds


def quantize_scratch(shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Work arrays for :func:`quantize_input` on inputs of ``shape`` quantized to ``dtype``."""
    wide = np.int16 if np.dtype(dtype).itemsize == 1 else np.int64
    return np.empty(shape, np.float32), np.empty(shape, np.uint32), np.empty(shape, wide)


def dequantize_output(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Integer to float32: ``(q - zero_point) * scale``, in float32 (a new array)."""
    y = q.astype(np.float32)
    y -= np.float32(zero_point)
    y *= np.float32(scale)
    return y
