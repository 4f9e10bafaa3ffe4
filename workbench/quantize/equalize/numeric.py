"""The numpy that both graph formats share: a pair's scales, channel ranges, the INT8 weight round trip."""

from __future__ import annotations

import numpy as np

CLE_ITERATIONS = 30
CLE_TOLERANCE = 1e-6


def equalize_pair(w_a: np.ndarray, b_a: np.ndarray | None, w_b: np.ndarray, *, a_axis: int,
                  b_axis: int, b_repeat: int = 1) -> np.ndarray:
    """Equalise one pair in place; returns the scales ``s`` (A's channel ``i`` is divided by ``s_i``).

    ``a_axis``: A's output-channel axis; ``b_axis``: B's input-channel axis;
    ``b_repeat``: B's input axis holds each channel ``b_repeat`` times (a flatten of
    H x W x C: index ``k`` is channel ``k % C``).
    """
    r_a = channel_range(w_a, a_axis)
    r_b = channel_range(w_b, b_axis, repeat=b_repeat)
    ok = (r_a > 0) & (r_b > 0)
    s = np.ones_like(r_a)
    s[ok] = np.sqrt(r_a[ok] * r_b[ok]) / r_b[ok]
    shape_a = [1] * w_a.ndim
    shape_a[a_axis] = -1
    w_a /= s.reshape(shape_a)
    if b_a is not None:
        b_a /= s
    shape_b = [1] * w_b.ndim
    shape_b[b_axis] = -1
    w_b *= np.tile(s, b_repeat).reshape(shape_b)
    return s


def channel_range(w: np.ndarray, axis: int, *, repeat: int = 1) -> np.ndarray:
    """Largest absolute weight per channel along ``axis`` (folding ``repeat`` copies of each channel)."""
    moved = np.moveaxis(np.abs(w), axis, 0).reshape(w.shape[axis], -1).max(axis=1)
    if repeat > 1:
        moved = moved.reshape(repeat, -1).max(axis=0)
    return moved


def fake_quant_weights(w: np.ndarray, *, axis: int | None) -> np.ndarray:
    """Symmetric INT8 round trip of ``w`` (per channel along ``axis``, or per tensor when ``axis`` is None)."""
    if axis is None:
        scale = np.max(np.abs(w)) / 127.0
        return np.zeros_like(w) if scale == 0 else np.clip(np.round(w / scale), -127, 127) * scale
    r = channel_range(w, axis)
    scale = np.where(r > 0, r / 127.0, 1.0)
    shape = [1] * w.ndim
    shape[axis] = -1
    scale = scale.reshape(shape)
    return np.clip(np.round(w / scale), -127, 127) * scale


def _ratio(r: np.ndarray) -> float:
    r = r[r > 0]
    return float(r.max() / r.min()) if len(r) else 1.0
