"""Pixels as the workbench holds them, checked: float32 NHWC in [0, 1] (uint8 read as /255), the errors that
name the sample at fault (:class:`ContractError` carrying a :class:`ContractIssue`), and the one resize."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._results import Result
from ..._validation import check_choice
from ...errors import DataError, ModelError

RESIZE_POLICIES = ("stretch", "center-crop", "letterbox", "none")
_RANGE_TOL = 1e-4


def _top_pixel_bits() -> np.uint32:
    """The bit pattern of the largest float32 pixel ``check_pixels`` accepts (<= 1 + tolerance).

    Read as unsigned 32-bit integers, float32 values from +0 to +infinity keep their order and
    every negative value, NaN and infinity lies above this pattern: one ``max`` of the bits tells
    that a whole batch is in [+0, 1 + tolerance].  Other batches get the exact checks."""
    top = np.float32(1.0 + _RANGE_TOL)
    if float(top) > 1.0 + _RANGE_TOL:
        top = np.nextafter(top, np.float32(0))
    return np.uint32(np.array([top], np.float32).view(np.uint32)[0])


_TOP_PIXEL_BITS = _top_pixel_bits()


class ContractError(DataError):
    """Data that breaks a model's input contract (values out of range, NaN, wrong type).

    ``issue`` holds the structured form (code, message, evidence) for reports.
    """

    def __init__(self, issue: ContractIssue):
        super().__init__(issue.message)
        self.issue = issue


@dataclass(frozen=True)
class ContractIssue(Result):
    """A problem with the input contract, as data: ``code`` (stable id), ``message``,
    ``severity`` (``"error"`` or ``"warning"``) and ``evidence`` (what was checked, plain data)."""

    code: str
    message: str
    severity: str = "error"
    evidence: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        return f"[{self.code}] {self.message}"


def check_pixels(images: Any, *, ids: Sequence[str] | np.ndarray | None = None, where: str = "",
                 maps_to: Any = "") -> np.ndarray:
    """Pixels as float32 NHWC in [0, 1]; uint8 is read as /255.  Anything else (uint16, ints,
    float values outside [0, 1] such as 0..255, NaN/inf) raises :class:`ContractError`."""
    x = np.asarray(images)
    label = f"{where}: " if where else ""
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4:
        raise ContractError(ContractIssue(
            "pixels-shape", f"{label}images must be NHWC (4 dims) or NHW; got shape {x.shape}.",
            evidence={"shape": list(x.shape)}))
    if x.dtype == np.uint8:
        # u / 255 correctly rounded: the float32 a user's ``x / 255.0`` gives, bit for bit.  A [-1, 1] input
        # with scale 2/255 puts every pixel on a .5 tie of the INT8 grid, so a one-ulp difference between the
        # uint8 and the float path (u * float32(1/255) differs for 47 of 256 values) is another INT8 code.
        return x.astype(np.float32) / np.float32(255.0)
    if x.dtype.kind in "iub":
        info = np.iinfo(x.dtype) if x.dtype.kind in "iu" else None
        raise ContractError(ContractIssue(
            "pixels-dtype",
            f"{label}images are {x.dtype.name}{f' (0..{info.max})' if info is not None else ''}; the workbench "
            "reads pixels as uint8 0..255 or float in [0, 1]. Convert them (e.g. x / 65535.0 for 16-bit "
            "sensor data, or to 8-bit) before loading.",
            evidence={"dtype": x.dtype.name}))
    x = x.astype(np.float32, copy=False)
    if x.size == 0 or x.view(np.uint32).max() <= _TOP_PIXEL_BITS:
        return x           # one reduction: every value is in [+0, 1 + tolerance] (see _TOP_PIXEL_BITS)
    low, high = float(x.min()), float(x.max())
    if math.isnan(low) or math.isnan(high) or not (math.isfinite(low) and math.isfinite(high)):
        bad = np.flatnonzero(~np.isfinite(x.reshape(len(x), -1)).all(axis=1))
        i = int(bad[0])
        raise ContractError(ContractIssue(
            "pixels-nonfinite",
            f"{label}sample {_sample(ids, i)} has NaN or infinite pixel values ({len(bad)} sample(s) in all); "
            "fix or drop them: a NaN would show up as a quantization drop.",
            evidence={"sample": _sample(ids, i), "index": i, "n_bad": int(len(bad))}))
    if low < -_RANGE_TOL or high > 1.0 + _RANGE_TOL:
        flat = x.reshape(len(x), -1)
        lows, highs = flat.min(axis=1).astype(np.float64), flat.max(axis=1).astype(np.float64)   # as `low`/`high`
        bad = np.flatnonzero((lows < -_RANGE_TOL) | (highs > 1.0 + _RANGE_TOL))
        i = int(bad[0])
        hint = (" They look like 0..255 values stored as float: store uint8 or divide by 255."
                if high > 1.5 and high <= 255.0 + _RANGE_TOL and low >= -_RANGE_TOL else
                " The model's own range (e.g. [-1, 1] or mean/std) belongs in its card, not in the data.")
        maps_to = maps_to() if callable(maps_to) else maps_to
        raise ContractError(ContractIssue(
            "pixels-out-of-range",
            f"{label}sample {_sample(ids, i)} has pixel values in [{float(flat[i].min()):g}, "
            f"{float(flat[i].max()):g}] but datasets hold pixels in [0, 1]"
            + (f" (the input contract maps them to the model's {maps_to})" if maps_to else "")
            + f"; {len(bad)} sample(s) are outside.{hint}",
            evidence={"sample": _sample(ids, i), "index": i, "min": low, "max": high, "n_bad": int(len(bad)),
                      "expected": [0.0, 1.0]}))
    return x


# -- resize ------------------------------------------------------------------------------------

def resize_images(x: np.ndarray, size: tuple[int, int], policy: str = "stretch") -> np.ndarray:
    """Resize float32 NHWC images to ``size`` (height, width) with Pillow's bilinear filter.

    ``stretch`` ignores the aspect ratio; ``center-crop`` scales the short side to fit and crops
    the middle; ``letterbox`` scales the long side to fit and pads with black (0).
    """
    from PIL import Image
    check_choice("resize", policy, RESIZE_POLICIES[:3], error=ModelError)
    h, w = size
    n, ih, iw, c = x.shape
    out = np.zeros((n, h, w, c), np.float32)
    if policy == "stretch":
        rh, rw, top, left = h, w, 0, 0
    else:
        ratio = max(h / ih, w / iw) if policy == "center-crop" else min(h / ih, w / iw)
        rh, rw = max(1, round(ih * ratio)), max(1, round(iw * ratio))
        top, left = (h - rh) // 2, (w - rw) // 2
    for i in range(n):
        for k in range(c):
            img = Image.fromarray(np.ascontiguousarray(x[i, :, :, k]), mode="F")
            plane = np.asarray(img.resize((rw, rh), Image.Resampling.BILINEAR), np.float32)
            if policy == "center-crop":
                out[i, :, :, k] = plane[-top:-top + h, -left:-left + w]
            else:
                out[i, top:top + rh, left:left + rw, k] = plane
    return np.clip(out, 0.0, 1.0)

def _sample(ids: Sequence[str] | np.ndarray | None, i: int) -> str:
    if ids is not None and i < len(ids):
        return repr(str(ids[i]))
    return f"#{i}"
