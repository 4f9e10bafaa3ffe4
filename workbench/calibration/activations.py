"""Per-layer activations of an FP32 model: the tensors an INT8 model quantizes.

Keras ``.keras``/``.h5`` models are tapped layer by layer (below).  Other formats (``.onnx``,
FP32 ``.tflite``, SavedModel) are tapped as graphs by :class:`GraphTaps`
(:mod:`workbench.calibration.graph_taps`), with the same folding/fusion rule; the functions here
dispatch to it, so callers import everything from this module.

The TFLite converter folds batch normalization into the convolution before it and
fuses a following ReLU, so the tensor that gets an INT8 scale and zero point is the
*activation's* output, not the convolution's.  :func:`quantized_layers` applies that
rule to a functional Keras model: a layer is tapped unless its only consumer is a
batch normalization or activation layer that will be fused into it; reshapes,
flattens and dropouts are skipped because they share their input's quantization.
The model input is tapped too (its range is calibrated like any other tensor).

For the reference CNN: ``image, conv1_relu, dw1_relu, pw1_relu, pool1, dw2_relu,
pw2_relu, pool2, logits``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import ModelError, missing_file
from .graph_taps import (  # noqa: F401 - re-exported: the public import path of the graph taps
    FOLDED_ONNX,
    FUSED_ONNX,
    FUSING_ONNX,
    HEAD_ONNX,
    HEAD_TFLITE,
    INPUT,
    SHAPE_ONLY_ONNX,
    SHAPE_ONLY_TFLITE,
    GraphTaps,
)

FUSING_OPS = ("Conv2D", "DepthwiseConv2D", "SeparableConv2D", "Conv1D", "Dense", "Conv2DTranspose")
FOLDED = ("BatchNormalization",)
FUSED = ("ReLU", "Activation", "ReLU6")
SHARES_INPUT_RANGE = ("Flatten", "Reshape", "Dropout", "InputLayer")


def model_label(model: Any) -> str:
    """A printable name for what ``model`` refers to."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    keras_path = getattr(model, "keras", None)
    if isinstance(keras_path, str):
        return keras_path
    return getattr(model, "name", type(model).__name__)


def load_activation_model(model: Any) -> Any:
    """What the activation functions run: a batch-free ``keras.Model`` for Keras input, a
    :class:`GraphTaps` for an ``.onnx``/FP32 ``.tflite`` file or a SavedModel folder."""
    if isinstance(model, GraphTaps):
        return model
    path = _model_path(model)
    if path is not None:
        from ..models.formats import model_format
        fmt = model_format(path)
        if fmt != "keras":
            return GraphTaps(path, fmt)
    return _batch_free(load_keras(model))


def _model_path(model: Any) -> str | None:
    keras_path = getattr(model, "keras", None)
    if isinstance(keras_path, str):
        return keras_path
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise missing_file("model file", path, "check the path (a .keras/.h5 file is expected)", ModelError)
        return path
    return None


def load_keras(model: Any) -> Any:
    """A Keras model from a ``.keras``/``.h5`` path, a ``ReferenceModel`` or a ``keras.Model``."""
    keras_path = getattr(model, "keras", None)
    if isinstance(keras_path, str):
        model = keras_path
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise missing_file("model file", path, "check the path (a .keras/.h5 file is expected)", ModelError)
        if not path.lower().endswith((".keras", ".h5", ".hdf5")):
            raise ModelError(f"{path}: not a Keras model (.keras or .h5); got {os.path.basename(path)!r}. "
                             "Other formats are read with load_activation_model(path).")
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import keras
        try:
            return keras.models.load_model(path, compile=False)
        except Exception as exc:   # Keras raises many types for unreadable files
            raise ModelError(f"{path}: Keras could not load the model ({type(exc).__name__}: {exc}).") from exc
    if hasattr(model, "layers") and hasattr(model, "inputs"):
        return model
    raise ModelError(f"model must be a .keras/.h5 path, a ReferenceModel or a keras.Model. "
                     f"Got {type(model).__name__} instead.")


def _batch_free(model: Any) -> Any:
    """A twin of a functional model with an unknown batch size (exports often fix batch 1)."""
    shape = tuple(model.inputs[0].shape)
    if shape and shape[0] is None:
        return model
    config = model.get_config()
    for layer in config.get("layers", []):
        if layer.get("class_name") == "InputLayer":
            cfg = layer["config"]
            key = "batch_shape" if "batch_shape" in cfg else "batch_input_shape"
            if key in cfg and cfg[key]:
                cfg[key] = (None, *tuple(cfg[key])[1:])
    try:
        twin = type(model).from_config(config)
        twin.set_weights(model.get_weights())
        return twin
    except Exception:   # not rebuildable from its config: run with the fixed batch instead
        return model


def _consumers(model: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {layer.name: [] for layer in model.layers}
    for layer in model.layers:
        for node in getattr(layer, "_inbound_nodes", []):
            for tensor in getattr(node, "input_tensors", []) or []:
                history = getattr(tensor, "_keras_history", None)
                if history is not None:
                    out.setdefault(history[0].name, []).append(layer)
    return out


def quantized_layers(model: Any) -> tuple[str, ...]:
    """Names of the layers (graph tensors for non-Keras models) whose outputs become quantized
    tensors (plus ``"input"``)."""
    model = load_activation_model(model) if not _is_keras(model) else model
    if isinstance(model, GraphTaps):
        return (INPUT, *model.tapped)
    model = load_keras(model)
    consumers = _consumers(model)
    names = [INPUT]
    for layer in model.layers:
        kind = type(layer).__name__
        if kind in SHARES_INPUT_RANGE:
            continue
        after = consumers.get(layer.name, [])
        follower = type(after[0]).__name__ if len(after) == 1 else None
        if kind in FUSING_OPS and follower in FOLDED + FUSED:
            continue   # batch norm folds into it / the activation fuses into it
        if kind in FOLDED and follower in FUSED:
            continue   # folded batch norm whose activation is fused: the activation's output is quantized
        names.append(layer.name)
    return tuple(names)


def _tap_model(model: Any, layers: Sequence[str]) -> Any:
    import keras
    outputs = [model.get_layer(name).output for name in layers if name != INPUT]
    return keras.Model(model.inputs, outputs)


def iter_activations(model: Any, x: np.ndarray, *, layers: Sequence[str] | None = None,
                     batch_size: int = 256) -> Iterator[dict[str, np.ndarray]]:
    """Yield ``{layer: activations}`` for consecutive batches of ``x`` (float32 NHWC)."""
    loaded = model if _is_keras(model) else load_activation_model(model)
    if isinstance(loaded, GraphTaps):
        yield from loaded.iter_activations(x, layers=layers, batch_size=batch_size)
        return
    keras_model = _batch_free(load_keras(loaded))
    names = tuple(layers) if layers is not None else quantized_layers(keras_model)
    unknown = [n for n in names if n != INPUT and n not in {layer.name for layer in keras_model.layers}]
    if unknown:
        raise ModelError(f"model {keras_model.name!r} has no layer(s) {', '.join(unknown)}; layers: "
                         f"{', '.join(layer.name for layer in keras_model.layers)}.")
    tapped = [n for n in names if n != INPUT]
    tap = _tap_model(keras_model, tapped) if tapped else None
    fixed = tuple(keras_model.inputs[0].shape)[0]
    step = fixed if fixed else batch_size
    for start in range(0, len(x), step):
        batch = np.ascontiguousarray(x[start:start + step], dtype=np.float32)
        out: dict[str, np.ndarray] = {}
        if tap is not None:
            values = tap([batch], training=False)
            values = values if isinstance(values, (list, tuple)) else [values]
            out.update({n: np.asarray(v) for n, v in zip(tapped, values)})
        if INPUT in names:
            out[INPUT] = batch
        yield {n: out[n] for n in names}


def activation_ranges(model: Any, x: np.ndarray, *, layers: Sequence[str] | None = None,
                      batch_size: int = 256) -> dict[str, tuple[float, float]]:
    """``{layer: (min, max)}`` over ``x``: the ranges MinMax calibration would fix."""
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    for batch in iter_activations(model, x, layers=layers, batch_size=batch_size):
        for name, v in batch.items():
            lo[name] = min(lo.get(name, np.inf), float(v.min()))
            hi[name] = max(hi.get(name, -np.inf), float(v.max()))
    return {name: (lo[name], hi[name]) for name in lo}


def embeddings(model: Any, x: np.ndarray, *, batch_size: int = 256) -> np.ndarray:
    """The penultimate-layer features (the input of the model's head), flattened per sample."""
    loaded = model if _is_keras(model) else load_activation_model(model)
    if isinstance(loaded, GraphTaps):
        return loaded.embeddings(x, batch_size=batch_size)
    import keras
    keras_model = _batch_free(load_keras(loaded))
    # the head is the last layer that computes (a Reshape, Flatten or Softmax after it only reshapes or
    # normalises its scores): its input is the feature
    head = len(keras_model.layers) - 1
    while head > 1 and type(keras_model.layers[head]).__name__ in ("Reshape", "Flatten", "Softmax", "Activation"):
        head -= 1
    feature = keras.Model(keras_model.inputs, keras_model.layers[head].input)
    fixed = tuple(keras_model.inputs[0].shape)[0]
    step = fixed if fixed else batch_size
    parts = [np.asarray(feature([np.ascontiguousarray(x[i:i + step], dtype=np.float32)], training=False))
             for i in range(0, len(x), step)]
    feats = np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)
    return feats.reshape(len(feats), -1)


def _is_keras(model: Any) -> bool:
    return hasattr(model, "layers") and hasattr(model, "inputs")
