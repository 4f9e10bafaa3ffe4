"""The model's input contract: what a model expects to be fed, and the one function that feeds it.

Every dataset of the workbench holds *pixels*: float32 NHWC in [0, 1] (or uint8
0..255, read as /255), grayscale (1 channel) or RGB (3 channels), as the camera
gave them.  A model wants something else: its own size, RGB or BGR or one
channel, and values in its own range ([0, 1], [-1, 1], ImageNet mean/std, ...).
:class:`InputContract` says which, and :meth:`InputContract.apply` is the only
code that turns pixels into model inputs: calibration, evaluation, layer errors,
the explorer and the board runner all call it (the board runner gets
:meth:`InputContract.to_params` as plain JSON and repeats the same arithmetic).

The contract comes from, in this order:

1. ``--input-spec FILE`` / ``input_spec=`` (a YAML file, a dict or an ``InputContract``);
2. the **model card** beside the model: ``<model>.card.yaml`` for ``model.onnx``,
   ``model.keras``, ``model.tflite`` ... (the model's file name with its suffix replaced),
   or ``card.yaml`` inside a SavedModel folder;
3. inference from the model's input tensor: size and channels (1 -> grayscale, 3 -> RGB),
   everything else at its default (NHWC, stretch, range [0, 1]).  The result records
   which fields were inferred, so a report can say "range [0, 1] assumed".

A card (every key optional)::

    layout: NHWC            # NHWC | NCHW: the model's input tensor layout
    color: rgb              # grayscale | rgb | bgr
    size: [224, 224]        # height, width (default: the model's input)
    resize: stretch         # stretch | center-crop | letterbox | none
    range: [-1, 1]          # the model's input range for pixels 0..1; or
    # mean: [123.68, 116.78, 103.94]  std: [58.4, 57.1, 57.4]  pixel_max: 255
    # scale: 0.00392  offset: 0        (input = pixel * scale + offset, pixel in [0, 1])
    task: classification    # classification | keypoints | detection | other
    classes: [cat, dog]     # or classes_file: labels.txt (one per line, beside the card)
    outputs:                # what each output tensor means (in the model's output order)
      - {name: logits, kind: class_scores}
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from .._results import Result
from .._validation import check_choice
from ..errors import DataError, ModelError, missing_file

LAYOUTS = ("NHWC", "NCHW")
COLORS = ("grayscale", "rgb", "bgr")
RESIZE_POLICIES = ("stretch", "center-crop", "letterbox", "none")
TASKS = ("classification", "keypoints", "detection", "other")
OUTPUT_KINDS = ("class_scores", "keypoints", "boxes", "other")
CARD_SUFFIX = ".card.yaml"
SAVED_MODEL_CARD = "card.yaml"

_CARD_KEYS = ("layout", "color", "size", "resize", "range", "mean", "std", "pixel_max", "scale", "offset",
              "task", "classes", "classes_file", "outputs", "name", "description")
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)   # ITU-R BT.601, what Pillow's convert("L") uses
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
        from .. import display
        return (display.heading("Input contract") + display.paragraph(self.summary())
                + display.table(("field", "value"), self.rows()))


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


# -- reading cards and inferring ------------------------------------------------------------------

def card_path(model: str | os.PathLike) -> Path:
    """Where the card of ``model`` lives: ``<model>.card.yaml`` beside a file (suffix replaced),
    ``card.yaml`` inside a SavedModel folder."""
    path = Path(model)
    if path.is_dir():
        return path / SAVED_MODEL_CARD
    return path.with_name(path.stem + CARD_SUFFIX)


def read_card(path: str | os.PathLike) -> dict[str, Any]:
    """The mapping of a YAML card, with keys checked (typos are errors)."""
    import yaml
    path = Path(path)
    if not path.is_file():
        raise missing_file("input spec / model card file", path, "check the path of the YAML card", ModelError)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ModelError(f"{path}: not valid YAML ({exc}).") from exc
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ModelError(f"{path}: a model card is a mapping of keys (layout, color, size, range, ...); "
                         f"got a {type(data).__name__}.")
    if "input" in data and isinstance(data["input"], Mapping):   # nested form: input: {...}
        data = {**{k: v for k, v in data.items() if k != "input"}, **data["input"]}
    data = dict(data)
    if "classes_file" in data:
        labels = path.parent / str(data.pop("classes_file"))
        if not labels.is_file():
            raise ModelError(f"{path}: classes_file {labels.name!r} not found beside the card ({labels}).")
        data["classes"] = [line.strip() for line in labels.read_text(encoding="utf-8").splitlines() if line.strip()]
    return data


def contract_from_mapping(data: Mapping[str, Any], *, source: str = "mapping",
                          model_input: tuple[int | None, ...] | None = None,
                          model_layout: str | None = None) -> InputContract:
    """Build a contract from card keys; unstated size/channels come from ``model_input``
    (the model's per-sample input shape) and are recorded as inferred."""
    unknown = sorted(set(data) - set(_CARD_KEYS))
    if unknown:
        raise ModelError(f"{source}: unknown model-card key(s) {', '.join(map(repr, unknown))}; known keys: "
                         f"{', '.join(k for k in _CARD_KEYS if k not in ('name', 'description'))}.")
    kwargs: dict[str, Any] = {}
    try:
        for key in ("layout", "color", "resize", "task"):
            if key in data:
                kwargs[key] = str(data[key]).strip()
        if "layout" in kwargs:
            kwargs["layout"] = kwargs["layout"].upper()
        if "color" in kwargs:
            kwargs["color"] = {"gray": "grayscale", "l": "grayscale"}.get(kwargs["color"].lower(),
                                                                          kwargs["color"].lower())
        if "size" in data:
            size = data["size"]
            size = [size, size] if isinstance(size, int) else list(size)
            kwargs["size"] = tuple(int(v) if float(v) == int(v) else v for v in size)
        for key in ("range", "mean", "std", "scale", "offset"):
            if key in data and data[key] is not None:
                value = data[key]
                kwargs[key] = tuple(float(v) for v in (value if isinstance(value, (list, tuple)) else [value]))
        if "pixel_max" in data:
            kwargs["pixel_max"] = float(data["pixel_max"])
        if "classes" in data:
            kwargs["classes"] = tuple(str(c) for c in data["classes"])
        if "outputs" in data:
            outs = []
            for i, o in enumerate(data["outputs"] or ()):
                if isinstance(o, str):
                    outs.append(OutputSpec(name=o))
                elif isinstance(o, Mapping):
                    outs.append(OutputSpec(name=str(o.get("name", f"output_{i}")), kind=str(o.get("kind", "other")),
                                           meaning=str(o.get("meaning", ""))))
                else:
                    raise ModelError(f"{source}: outputs[{i}] must be a name or a mapping with name/kind/meaning.")
            kwargs["outputs"] = tuple(outs)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ModelError):
            raise
        raise ModelError(f"{source}: cannot read the model card ({exc}).") from exc
    inferred = []
    layout = kwargs.get("layout") or model_layout
    if "layout" not in kwargs:
        inferred.append("layout")
        kwargs["layout"] = model_layout or "NHWC"
    if model_input is not None and len(model_input) == 3:
        h, w, c = (model_input[1], model_input[2], model_input[0]) if layout == "NCHW" else model_input
        if "size" not in kwargs and h is not None and w is not None:
            kwargs["size"] = (int(h), int(w))
            inferred.append("size")
        if "color" not in kwargs and c in (1, 3):
            kwargs["color"] = "grayscale" if c == 1 else "rgb"
            inferred.append("color")
        elif "color" in kwargs and c in (1, 3) and (c == 1) != (kwargs["color"] == "grayscale"):
            raise ModelError(f"{source}: the card says color {kwargs['color']!r} but the model's input has {c} "
                             "channel(s); fix the card's color (grayscale for 1 channel, rgb/bgr for 3).")
        if "size" in kwargs and h is not None and w is not None and tuple(kwargs["size"]) != (h, w):
            raise ModelError(f"{source}: the card says size {list(kwargs['size'])} but the model takes "
                             f"{h}x{w} (height x width); fix the card or leave size out.")
    if "color" not in kwargs:
        inferred.append("color")
    if not any(k in kwargs for k in ("range", "mean", "std", "scale", "offset")):
        inferred.append("range")
    if "task" not in kwargs:
        inferred.append("task")
    if "resize" not in kwargs:
        inferred.append("resize")
    return InputContract(**kwargs, source=source, inferred=tuple(inferred))


def model_input_shape(model: Any) -> tuple[tuple[int | None, ...] | None, str | None]:
    """The model's per-sample input shape as stored, and its layout guess (``NCHW`` for a
    channels-first ONNX input), without running it.  ``(None, None)`` when unknown."""
    from .formats import model_format
    from .predict import resolve_model_path
    path = resolve_model_path(model)
    fmt = model_format(path)
    if fmt == "tflite":
        from ai_edge_litert.interpreter import Interpreter
        detail = Interpreter(model_path=path).get_input_details()[0]
        shape = tuple(None if d < 0 else int(d) for d in detail["shape_signature"][1:])
        return shape, "NHWC"
    if fmt == "onnx":
        import onnx
        graph = onnx.load(path, load_external_data=False).graph
        inits = {t.name for t in graph.initializer}
        inp = next(i for i in graph.input if i.name not in inits)
        dims = tuple(d.dim_value if d.dim_value > 0 else None for d in inp.type.tensor_type.shape.dim)[1:]
        layout = "NCHW" if len(dims) == 3 and dims[0] in (1, 3) and dims[2] not in (1, 3) else "NHWC"
        return dims, layout
    from .predict import load_predictor
    return tuple(load_predictor(path).input_shape), "NHWC"


def resolve_contract(model: Any = None, input_spec: Any = None, *,
                     model_input: tuple[int | None, ...] | None = None) -> InputContract:
    """The contract of ``model``: ``input_spec`` (an ``InputContract``, a dict, or a YAML path), else the
    card beside the model, else inferred from the model's input.  The model's input shape fills the
    unstated size and channels (pass ``model_input`` to skip reading the model)."""
    if isinstance(input_spec, InputContract):
        return input_spec
    layout = None
    if model is not None and model_input is None:
        try:
            model_input, layout = model_input_shape(model)
        except (ModelError, StopIteration, OSError, ValueError):
            model_input = None
    if isinstance(input_spec, Mapping):
        return contract_from_mapping(input_spec, source="input_spec", model_input=model_input, model_layout=layout)
    if input_spec is not None:
        path = Path(os.fspath(input_spec))
        return contract_from_mapping(read_card(path), source=str(path), model_input=model_input, model_layout=layout)
    if model is not None:
        from .predict import resolve_model_path
        card = card_path(resolve_model_path(model))
        if card.is_file():
            return contract_from_mapping(read_card(card), source=str(card), model_input=model_input,
                                         model_layout=layout)
    return contract_from_mapping({}, source="inferred from the model" if model_input else "default",
                                 model_input=model_input, model_layout=layout)


def write_card(contract: InputContract, path: str | os.PathLike) -> Path:
    """Write ``contract`` as a YAML card (atomically)."""
    import yaml

    from .._io import atomic_write_text
    return atomic_write_text(path, yaml.safe_dump(contract.card(), sort_keys=False))


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


def _sample(ids: Sequence[str] | np.ndarray | None, i: int) -> str:
    if ids is not None and i < len(ids):
        return repr(str(ids[i]))
    return f"#{i}"
