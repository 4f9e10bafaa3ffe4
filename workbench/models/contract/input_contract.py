"""The :class:`InputContract`: what a model expects to be fed, and :meth:`InputContract.apply`, the one
function that feeds it (colour, resize, normalisation, layout)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..._results import Result
from ..._validation import check_choice
from ...errors import ModelError
from .pixels import RESIZE_POLICIES, ContractError, ContractIssue, check_pixels, resize_images

LAYOUTS = ("NHWC", "NCHW")
COLORS = ("grayscale", "rgb", "bgr")
TASKS = ("classification", "keypoints", "detection", "other")
OUTPUT_KINDS = ("class_scores", "keypoints", "boxes", "other")
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)   # ITU-R BT.601, what Pillow's convert("L") uses


@dataclass(frozen=True)
class OutputSpec(Result):
    """What one output tensor means: ``kind`` is ``class_scores``, ``keypoints``, ``boxes`` or ``other``."""

    name: str
    kind: str = "other"
    meaning: str = ""

    def __post_init__(self) -> None:
        check_choice("outputs[].kind", self.kind, OUTPUT_KINDS, error=ModelError)


@dataclass(frozen=True)
class InputContract(Result):
    """How pixels (float32 NHWC in [0, 1]) become this model's input.

    ``model_input = resize(color(pixels)) * scale + offset`` per channel, then the layout.
    Normalisation is given one way: ``range`` (the model's input for pixel 0 and 1),
    ``mean``/``std`` (in units of ``pixel_max``: 1 for [0, 1] pixels, 255 for 0..255), or
    ``scale``/``offset``.  ``inferred`` names the fields that nobody stated (taken from the
    model's input tensor or defaults); ``source`` says where the contract came from.
    """

    layout: str = "NHWC"
    color: str = "grayscale"
    size: tuple[int, int] | None = None
    resize: str = "stretch"
    range: tuple[float, float] | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    pixel_max: float = 1.0
    scale: tuple[float, ...] | None = None
    offset: tuple[float, ...] | None = None
    task: str = "classification"
    classes: tuple[str, ...] = ()
    outputs: tuple[OutputSpec, ...] = ()
    source: str = "default"
    inferred: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        err = ModelError
        where = f" (contract from {self.source})" if self.source not in ("default", "") else ""
        check_choice("layout", self.layout, LAYOUTS, error=err)
        check_choice("color", self.color, COLORS, error=err)
        check_choice("resize", self.resize, RESIZE_POLICIES, error=err)
        check_choice("task", self.task, TASKS, error=err)
        if self.size is not None:
            if len(self.size) != 2 or any(not isinstance(v, int) or isinstance(v, bool) or v <= 0
                                          for v in self.size):
                raise err(f"`size` must be [height, width] with two positive integers. Got {self.size!r} "
                          f"instead{where}.")
        given = [name for name, present in (("range", self.range is not None),
                                            ("mean/std", self.mean is not None or self.std is not None),
                                            ("scale/offset", self.scale is not None or self.offset is not None))
                 if present]
        if len(given) > 1:
            raise err(f"the input contract gives the normalisation twice ({' and '.join(given)}){where}; "
                      "give one of range, mean/std or scale/offset.")
        channels = self.channels
        if self.range is not None:
            if len(self.range) != 2 or not all(_finite(v) for v in self.range) or self.range[0] >= self.range[1]:
                raise err(f"`range` must be [low, high] with finite low < high. Got {self.range!r} instead{where}.")
        if (self.mean is None) != (self.std is None):
            raise err(f"`mean` and `std` go together; got only {'mean' if self.std is None else 'std'}{where}.")
        if self.mean is not None and self.std is not None:    # both or neither (checked above)
            _check_per_channel("mean", self.mean, channels, where)
            _check_per_channel("std", self.std, channels, where)
            if any(v <= 0 for v in self.std):
                raise err(f"`std` must be > 0 for every channel. Got {self.std!r} instead{where}.")
        if not _finite(self.pixel_max) or self.pixel_max <= 0:
            raise err(f"`pixel_max` must be a positive number (1 or 255). Got {self.pixel_max!r} instead{where}.")
        if self.scale is not None or self.offset is not None:
            _check_per_channel("scale", self.scale if self.scale is not None else (1.0,), channels, where)
            _check_per_channel("offset", self.offset if self.offset is not None else (0.0,), channels, where)
            if self.scale is not None and any(v == 0 for v in self.scale):
                raise err(f"`scale` must not be 0 (every pixel would map to the offset){where}.")
        names = [o.name for o in self.outputs]
        if len(set(names)) != len(names):
            raise err(f"output names must be unique; got {names}{where}.")

    # -- derived ------------------------------------------------------------------------------
    @property
    def channels(self) -> int:
        return 1 if self.color == "grayscale" else 3

    @cached_property
    def input_scale(self) -> np.ndarray:
        """Per-channel (or one) multiplier applied to pixels in [0, 1]."""
        if self.range is not None:
            return np.array([self.range[1] - self.range[0]], np.float32)
        if self.mean is not None:
            return np.asarray(self.pixel_max, np.float32) / np.asarray(self.std, np.float32)
        return np.asarray(self.scale if self.scale is not None else (1.0,), np.float32)

    @cached_property
    def input_offset(self) -> np.ndarray:
        if self.range is not None:
            return np.array([self.range[0]], np.float32)
        if self.mean is not None:
            return -np.asarray(self.mean, np.float32) / np.asarray(self.std, np.float32)
        return np.asarray(self.offset if self.offset is not None else (0.0,), np.float32)

    @property
    def input_range(self) -> tuple[float, float]:
        """The model-input values that pixels 0 and 1 map to (lowest, highest over channels)."""
        a = self.input_offset
        b = self.input_offset + self.input_scale
        return float(np.minimum(a, b).min()), float(np.maximum(a, b).max())

    @cached_property
    def is_identity(self) -> bool:
        return bool(np.all(self.input_scale == 1.0) and np.all(self.input_offset == 0.0))

    def normalization(self) -> str:
        """One line: how pixel values become model inputs."""
        if self.range is not None:
            text = f"range [{self.range[0]:g}, {self.range[1]:g}]"
        elif self.mean is not None:
            unit = "" if self.pixel_max == 1 else f" (pixels 0..{self.pixel_max:g})"
            text = (f"mean {_fmt_seq(self.mean)} std {_fmt_seq(self.std)}{unit}")
        elif self.scale is not None or self.offset is not None:
            text = f"scale {_fmt_seq(self.input_scale)} offset {_fmt_seq(self.input_offset)}"
        else:
            text = "range [0, 1]"
        return text + (" (assumed)" if "range" in self.inferred else "")

    def output_kind(self, index: int, n_outputs: int = 1) -> str:
        """The kind of output ``index``: from ``outputs``, else class scores for a one-output classifier."""
        if index < len(self.outputs):
            return self.outputs[index].kind
        if self.task == "classification" and (n_outputs == 1 or index == 0):
            return "class_scores"
        return {"keypoints": "keypoints", "detection": "boxes"}.get(self.task, "other")

    def output_name(self, index: int) -> str:
        return self.outputs[index].name if index < len(self.outputs) else f"output_{index}"

    # -- the one preprocessing ------------------------------------------------------------------
    def check_pixels(self, images: Any, *, ids: Sequence[str] | np.ndarray | None = None,
                     where: str = "") -> np.ndarray:
        """Pixels as float32 NHWC in [0, 1] (see :func:`check_pixels`); errors name this contract's range."""
        return check_pixels(images, ids=ids, where=where, maps_to=self.normalization)

    def apply(self, images: Any, *, ids: Sequence[str] | np.ndarray | None = None, layout: str = "NHWC",
              where: str = "") -> np.ndarray:
        """Pixels (uint8, or float32 in [0, 1], NHWC or NHW) -> float32 model inputs.

        Checks the pixel values (:meth:`check_pixels`), converts channels (grayscale <-> RGB,
        RGB -> BGR), resizes to ``size`` by the ``resize`` policy, normalises, and returns
        NHWC (``layout="NCHW"`` to get the model's own channels-first layout; predictors
        transpose themselves).  ``ids`` name samples in errors.
        """
        check_choice("layout", layout, LAYOUTS, error=ModelError)
        x = self.check_pixels(images, ids=ids, where=where)
        x = self._convert_color(x, where)
        if self.size is not None and tuple(x.shape[1:3]) != tuple(self.size):
            x = self._resize(x, where)
        if not self.is_identity:
            x = x * self.input_scale + self.input_offset
        x = x.astype(np.float32, copy=False)
        if layout == "NCHW":
            x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        return x

    def _convert_color(self, x: np.ndarray, where: str) -> np.ndarray:
        c = x.shape[3]
        if c == 4:
            x, c = x[..., :3], 3                       # drop alpha
        if c not in (1, 3):
            raise ContractError(ContractIssue(
                "pixels-channels", f"{where + ': ' if where else ''}images have {c} channels; the workbench reads "
                "grayscale (1) or RGB (3) pixels.", evidence={"channels": int(c)}))
        if self.color == "grayscale":
            return x if c == 1 else (x @ _LUMA)[..., None].astype(np.float32)
        if c == 1:
            x = np.repeat(x, 3, axis=3)
        return x[..., ::-1] if self.color == "bgr" else x

    def _resize(self, x: np.ndarray, where: str) -> np.ndarray:
        assert self.size is not None    # apply() resizes only to a size the contract gives
        h, w = self.size
        if self.resize == "none" or "resize" in self.inferred:
            raise ContractError(ContractIssue(
                "pixels-size",
                f"{where + ': ' if where else ''}images are {x.shape[2]}x{x.shape[1]} but the model takes {w}x{h} "
                f"and the contract {'says resize: none' if self.resize == 'none' else 'states no resize policy'}; "
                "resize the dataset (--resize HxW) or set a resize policy "
                "(stretch, center-crop, letterbox) in the model card.",
                evidence={"image_hw": [int(x.shape[1]), int(x.shape[2])], "model_hw": [h, w]}))
        return resize_images(x, (h, w), self.resize)

    # -- plain-data forms ------------------------------------------------------------------------
    def to_params(self) -> dict[str, Any]:
        """What a runner without the workbench needs (JSON): channels, color, size, resize,
        per-channel ``scale``/``offset`` and the model layout."""
        return {"color": self.color, "size": list(self.size) if self.size else None, "resize": self.resize,
                "scale": [float(v) for v in self.input_scale], "offset": [float(v) for v in self.input_offset],
                "layout": self.layout}

    def card(self) -> dict[str, Any]:
        """The contract as a model card (YAML-ready mapping, only the stated keys)."""
        out: dict[str, Any] = {"layout": self.layout, "color": self.color}
        if self.size is not None:
            out["size"] = list(self.size)
        out["resize"] = self.resize
        for key in ("range", "mean", "std", "scale", "offset"):
            if getattr(self, key) is not None:
                out[key] = list(getattr(self, key))
        if self.mean is not None:
            out["pixel_max"] = self.pixel_max
        out["task"] = self.task
        if self.classes:
            out["classes"] = list(self.classes)
        if self.outputs:
            out["outputs"] = [{"name": o.name, "kind": o.kind, **({"meaning": o.meaning} if o.meaning else {})}
                              for o in self.outputs]
        return out

    def rows(self) -> list[tuple[str, str]]:
        """``(field, value)`` display rows; inferred values are marked."""
        mark = lambda key, text: text + (" (inferred)" if key in self.inferred and key != "range" else "")  # noqa: E731
        classes = ", ".join(self.classes[:12]) + (f" ... ({len(self.classes)})" if len(self.classes) > 12 else "")
        rows = [("source", self.source), ("layout", mark("layout", self.layout)),
                ("color", mark("color", self.color)),
                ("size", mark("size", "from the data" if self.size is None else f"{self.size[0]}x{self.size[1]}")),
                ("resize", mark("resize", self.resize)), ("normalisation", self.normalization()),
                ("model input range", "[{:g}, {:g}]".format(*self.input_range)), ("task", mark("task", self.task))]
        if self.classes:
            rows.append(("classes", classes))
        for i, o in enumerate(self.outputs):
            rows.append((f"output {i}", f"{o.name}: {o.kind}" + (f" ({o.meaning})" if o.meaning else "")))
        return rows

    def summary(self) -> str:
        size = "data size" if self.size is None else f"{self.size[0]}x{self.size[1]}"
        return (f"input contract ({self.source}): {self.layout} {self.color} {size} ({self.resize}), "
                f"{self.normalization()}, task {self.task}")

    def _repr_html_(self) -> str:
        from ... import display
        return (display.heading("Input contract") + display.paragraph(self.summary())
                + display.table(("field", "value"), self.rows()))


# -- helpers -----------------------------------------------------------------------------------

def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_per_channel(name: str, values: Any, channels: int, where: str) -> None:
    if values is None or len(values) not in (1, channels) or not all(_finite(v) for v in values):
        raise ModelError(f"`{name}` must hold 1 or {channels} finite number(s) (one per channel of a "
                         f"{'grayscale' if channels == 1 else 'colour'} input). Got {values!r} instead{where}.")


def _fmt_seq(values: Any) -> str:
    values = list(values)
    return "[" + ", ".join(f"{float(v):.4g}" for v in values) + "]"
