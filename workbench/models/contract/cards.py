"""Where a contract comes from: ``input_spec``, the model card beside the model, or the model's input tensor
(:func:`resolve_contract`); reading and writing the YAML cards."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import ModelError, missing_file
from .input_contract import InputContract, OutputSpec

CARD_SUFFIX = ".card.yaml"
SAVED_MODEL_CARD = "card.yaml"
_CARD_KEYS = ("layout", "color", "size", "resize", "range", "mean", "std", "pixel_max", "scale", "offset",
              "task", "classes", "classes_file", "outputs", "name", "description")


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
    from ..formats import model_format
    from ..predict import resolve_model_path
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
    from ..predict import load_predictor
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
        from ..predict import resolve_model_path
        card = card_path(resolve_model_path(model))
        if card.is_file():
            return contract_from_mapping(read_card(card), source=str(card), model_input=model_input,
                                         model_layout=layout)
    return contract_from_mapping({}, source="inferred from the model" if model_input else "default",
                                 model_input=model_input, model_layout=layout)


def write_card(contract: InputContract, path: str | os.PathLike) -> Path:
    """Write ``contract`` as a YAML card (atomically)."""
    import yaml

    from ..._io import atomic_write_text
    return atomic_write_text(path, yaml.safe_dump(contract.card(), sort_keys=False))
