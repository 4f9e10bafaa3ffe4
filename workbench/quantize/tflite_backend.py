"""TFLite backend: the TFLite converter with a representative dataset.

The source model (Keras ``.keras``/``.h5`` or a SavedModel folder) becomes one
frozen TensorFlow function with a static batch-1 input, then the converter
quantizes it with the recipe's settings:

* per-tensor weights through the converter's per-channel switch
  (``_experimental_disable_per_channel``);
* 16-bit activations through the 16x8 ops set;
* excluded ops or nodes through the QuantizationDebugger's selective
  quantization (denylisted ops/nodes).

ONNX input never reaches this module directly: the engine converts it first
(:func:`workbench.models.convert.convert_onnx`, onnx2tf in its own pinned tool
environment) and gives the converted SavedModel here.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError, QuantizationError
from .recipe import QuantRecipe

_PRELOAD: list[Any] = []     # the thread of preload_tensorflow(), while it runs


def preload_tensorflow() -> None:
    """Start importing TensorFlow in a background thread.  The import takes 15-40 s on the shared 2-core machine
    (a third of quantizing a small ONNX model); the ONNX route spends longer than that waiting on onnx2tf's own
    process first, so the two overlap (benchmarks/bench_zoo.py).  :func:`_tf` waits for it: a failed import there
    is raised by the ordinary import, in the caller's thread."""
    import sys
    import threading
    if "tensorflow" in sys.modules or _PRELOAD:
        return

    def run() -> None:
        try:
            _import_tf()
        except Exception:  # noqa: BLE001 - _tf() imports again and raises it where it is needed
            pass
    thread = threading.Thread(target=run, name="workbench-preload-tensorflow", daemon=True)
    _PRELOAD.append(thread)
    thread.start()


def _import_tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    return tf


def _tf() -> Any:
    for thread in list(_PRELOAD):     # never two threads inside TensorFlow's import at once
        thread.join()
    _PRELOAD.clear()
    return _import_tf()


def toolchain() -> dict[str, str]:
    """Versions that enter the cache key, read without importing TensorFlow (a cache hit stays fast)."""
    from importlib import metadata
    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            return {"tensorflow": metadata.version(dist), "numpy": np.__version__}
        except metadata.PackageNotFoundError:
            continue
    return {"tensorflow": _tf().__version__, "numpy": np.__version__}


def _frozen_batch1(fn: Any, spec: Any) -> Any:
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    return convert_variables_to_constants_v2(fn.get_concrete_function(spec))


def _static_shape(path: Path, name: str, shape: tuple[Any, ...]) -> tuple[int, ...]:
    """The input shape with batch fixed to 1; other unknown dimensions are an error."""
    dims = [None if d is None or (isinstance(d, int) and d < 0) else int(d) for d in shape]
    if not dims:
        raise ModelError(f"{path}: input {name!r} is a scalar; an image model input (N, H, W, C) is expected.")
    rest = [d for d in dims[1:] if d is not None]
    if len(rest) < len(dims) - 1:
        shown = tuple(-1 if d is None else d for d in dims)
        raise ModelError(
            f"{path}: input {name!r} has dynamic shape {shown}; only the batch dimension may be unknown. "
            "Export a batch-1 model with a static shape, e.g. "
            "tf.function(model).get_concrete_function(tf.TensorSpec([1, H, W, C])) or "
            "`tf2onnx --inputs name:0[1,H,W,C]`, then quantize that.")
    return (1, *rest)


def load_function(path: str | os.PathLike, fmt: str) -> tuple[Any, tuple[int, ...], str]:
    """A frozen batch-1 concrete function for the model, its input shape and input name."""
    tf = _tf()
    path = Path(path)
    if fmt in ("onnx", "tflite"):
        raise QuantizationError(
            f"{path}: the TFLite converter reads Keras or SavedModel input; convert the {fmt} model first "
            "(quantize() does: workbench.models.convert).")
    if fmt == "keras":
        import keras
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                model = keras.models.load_model(str(path), compile=False)
        except Exception as exc:
            raise ModelError(f"{path}: cannot load the Keras model ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''}). The file may be corrupt or "
                             "truncated; re-save it with model.save().") from exc
        if len(model.inputs) != 1:
            raise ModelError(f"{path}: the model has {len(model.inputs)} inputs; one image input is expected.")
        name = model.inputs[0].name
        shape = _static_shape(path, name, tuple(model.inputs[0].shape))
        spec = tf.TensorSpec(shape, tf.float32, name="input")
        fn = tf.function(lambda t: model(t, training=False))
        return _frozen_batch1(fn, spec), shape, name
    if fmt == "saved_model":
        try:
            loaded = tf.saved_model.load(str(path))
        except Exception as exc:
            raise ModelError(f"{path}: cannot load the SavedModel ({type(exc).__name__}). The folder may be "
                             "incomplete or corrupt; export it again.") from exc
        signatures = getattr(loaded, "signatures", {})
        if "serving_default" not in signatures:
            raise ModelError(f"{path}: the SavedModel has no 'serving_default' signature "
                             f"(signatures: {', '.join(signatures) or 'none'}); export one.")
        sig = signatures["serving_default"]
        specs = sig.structured_input_signature[1]
        if len(specs) != 1:
            raise ModelError(f"{path}: the signature has {len(specs)} inputs; one image input is expected.")
        (name, in_spec), = specs.items()
        shape = _static_shape(path, name, tuple(in_spec.shape.as_list()))
        spec = tf.TensorSpec(shape, tf.float32, name="input")
        keys = sorted(sig.structured_outputs, key=_natural)   # output_2 before output_10 (onnx2tf's order)
        fn = tf.function(lambda t: [sig(**{name: t})[k] for k in keys])
        frozen = _frozen_batch1(fn, spec)
        frozen._workbench_keepalive = loaded  # the function refers to the loaded object's resources
        return frozen, shape, name
    raise ModelError(f"{path}: the TFLite backend takes Keras (.keras/.h5) or SavedModel input; got {fmt!r}.")


def _natural(key: str) -> tuple[Any, ...]:
    import re
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", key))


def _representative(x: np.ndarray) -> Any:
    def gen() -> Iterator[list[np.ndarray]]:
        for i in range(len(x)):
            yield [x[i:i + 1]]
    return gen


_IO_TYPES = {"int8": "int8", "uint8": "uint8", "int16": "int16", "float32": "float32"}


def make_converter(fn: Any, recipe: QuantRecipe, x: np.ndarray) -> Any:
    """A TFLite converter set up for ``recipe`` with ``x`` as representative dataset."""
    tf = _tf()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn])
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = _representative(x)
    if recipe.activation_bits == 16:
        ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    else:
        ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if recipe.allow_float_fallback:
        ops.append(tf.lite.OpsSet.TFLITE_BUILTINS)
    conv.target_spec.supported_ops = ops
    conv.inference_input_type = getattr(tf, _IO_TYPES[recipe.input_dtype])
    conv.inference_output_type = getattr(tf, _IO_TYPES[recipe.output_dtype])
    if not recipe.per_channel:
        conv._experimental_disable_per_channel = True
    return conv


def _denylists(recipe: QuantRecipe) -> tuple[list[str], list[str]]:
    """Split ``exclude`` into op types (upper-case TFLite names) and node names."""
    ops = [e for e in recipe.exclude if e.isupper() and " " not in e and "/" not in e]
    nodes = [e for e in recipe.exclude if e not in ops]
    return ops, nodes


def quantize_tflite(path: str | os.PathLike, fmt: str, recipe: QuantRecipe, x: np.ndarray,
                    report: dict[str, Any] | None = None, *, fn: Any = None) -> bytes:
    """Quantized .tflite bytes for the model at ``path``.  ``report`` (a dict) receives what the percentile
    calibrator did (``ranges``: the tensors changed, the outliers of the calibrated ranges).  ``fn``: the
    model's frozen function when the caller loaded it already (:func:`load_function`; else loaded here)."""
    tf = _tf()
    if fn is None:
        fn, _, _ = load_function(path, fmt)
    conv = make_converter(fn, recipe, x)
    import warnings
    if recipe.calibrator == "percentile" and recipe.activation_bits == 16:
        raise QuantizationError(f"{path}: recipe {recipe.name!r}: the TFLite converter's 16x8 mode calibrates and "
                                "quantizes in one step (no calibrated model to edit), so 'percentile' is not available "
                                "with 16-bit activations. Use calibrator='minmax' (16-bit steps are 256x finer).")
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Statistics for quantized inputs were expected")
            warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated")
            if recipe.calibrator == "percentile":
                return _calibrate_edit_quantize(conv, recipe, x, report)
            if recipe.exclude:
                deny_ops, deny_nodes = _denylists(recipe)
                options = tf.lite.experimental.QuantizationDebugOptions(
                    denylisted_ops=deny_ops or None, denylisted_nodes=deny_nodes or None,
                    fully_quantize=recipe.input_dtype != "float32")
                debugger = tf.lite.experimental.QuantizationDebugger(
                    converter=conv, debug_dataset=_representative(x), debug_options=options)
                return bytes(debugger.get_nondebug_quantized_model())
            return bytes(conv.convert())
    except (QuantizationError, ModelError):
        raise
    except Exception as exc:
        message = " ".join(str(exc).split())[:600]
        raise QuantizationError(
            f"{path}: the TFLite converter failed for recipe {recipe.name!r}: {message}. "
            "If an op cannot be quantized, exclude it (--exclude OP, float fallback) or choose another "
            "recipe.") from exc


def _calibrate_edit_quantize(conv: Any, recipe: QuantRecipe, x: np.ndarray, report: dict[str, Any] | None) -> bytes:
    """The converter's quantization in its two steps with an edit between: calibrate only (min/max written into
    the float flatbuffer's tensors), set each activation's range to its percentiles on ``x`` (ranges.py), then
    the MLIR quantizer with the arguments ``convert()`` passes it (and the denylists of excluded ops)."""
    from tensorflow.lite.python.convert import deduplicate_readonly_buffers, mlir_quantize

    from .ranges import calibrated_ranges, percentile_edit, set_calibrated_ranges
    tf = _tf()
    conv._experimental_calibrate_only = True
    calibrated = bytes(conv.convert())
    ranges, inputs = calibrated_ranges(calibrated)
    edited, outliers = percentile_edit(calibrated, x, ranges, inputs, recipe.percentile)
    changed = {n: r for n, r in edited.items() if r != ranges[n]}
    calibrated = set_calibrated_ranges(calibrated, changed)
    if report is not None:
        report["ranges"] = {"calibrator": recipe.calibrator, "percentile": recipe.percentile, "tensors": len(ranges),
                            "changed": len(changed), "outliers": outliers[:12], "n_outliers": len(outliers)}
    if recipe.exclude:
        deny_ops, deny_nodes = _denylists(recipe)
        data = mlir_quantize(calibrated, disable_per_channel=not recipe.per_channel,
                             fully_quantize=recipe.input_dtype != "float32",
                             denylisted_ops=deny_ops or None, denylisted_nodes=deny_nodes or None)
    else:
        data = mlir_quantize(calibrated, not recipe.per_channel,
                             input_data_type=getattr(tf, _IO_TYPES[recipe.input_dtype]),
                             output_data_type=getattr(tf, _IO_TYPES[recipe.output_dtype]))
    return bytes(deduplicate_readonly_buffers(data))
