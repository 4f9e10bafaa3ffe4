"""Tiny real models for the quantize tests, built once per session."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest


def _build(tmp, name, *, sin=False, dynamic=False):
    import keras
    import tensorflow as tf
    shape = (None, None, 1) if dynamic else (8, 8, 1)
    inp = keras.Input(shape, batch_size=1, name="image")
    x = keras.layers.Conv2D(4, 3, activation="relu", name="conv")(inp)
    x = keras.layers.DepthwiseConv2D(3, name="dw")(x)
    if sin:  # SIN has no int8 kernel: the converter leaves it in float
        x = keras.layers.Lambda(lambda t: tf.math.sin(t), name="sin")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    x = keras.layers.Dense(3, name="dense")(x)
    out = keras.layers.Softmax(name="softmax")(x)
    model = keras.Model(inp, out)
    if sin:  # a Lambda layer does not reload from .keras safely: ship it as a SavedModel
        module = tf.Module()
        module.model = model
        module.serve = tf.function(lambda image: {"probs": model(image, training=False)},
                                   input_signature=[tf.TensorSpec([None, 8, 8, 1], tf.float32, name="image")])
        path = tmp / f"{name}_saved_model"
        tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
        return model, path
    path = tmp / f"{name}.keras"
    with contextlib.redirect_stdout(io.StringIO()):
        model.save(path)
    return model, path


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """Paths: `keras` (conv/dw/dense), `sin` (SavedModel, dynamic batch, float-only SIN in the middle),
    `dynamic` (unknown H and W), `onnx`."""
    import onnx
    import tensorflow as tf
    import tf2onnx
    tmp = tmp_path_factory.mktemp("qmodels")
    keras_model, keras_path = _build(tmp, "tiny")
    _, sin_path = _build(tmp, "tiny_sin", sin=True)
    _, dyn_path = _build(tmp, "tiny_dynamic", dynamic=True)
    fn = tf.function(lambda t: keras_model(t, training=False))
    proto, _ = tf2onnx.convert.from_function(
        fn, input_signature=[tf.TensorSpec([1, 8, 8, 1], tf.float32, name="input")], opset=17)
    onnx_path = tmp / "tiny.onnx"
    onnx.save(proto, str(onnx_path))
    return {"keras": keras_path, "sin": sin_path, "dynamic": dyn_path, "onnx": onnx_path, "dir": tmp}


@pytest.fixture(scope="session")
def calib():
    return np.random.default_rng(0).random((64, 8, 8, 1), dtype=np.float32)


@pytest.fixture(scope="session")
def tiny_dataset(calib):
    from workbench.data.dataset import Dataset
    n = len(calib)
    return Dataset(name="tiny", x=calib, y=np.arange(n) % 3, condition=np.array(["daylight"] * n),
                   split=np.array(["calibration"] * n), ids=np.array([f"s{i}" for i in range(n)]),
                   classes=("a", "b", "c"))


@pytest.fixture(scope="session")
def quantized(models, calib):
    """The tiny Keras model quantized with each TFLite recipe (session cache)."""
    from workbench.quantize.engine import quantize
    return {r: quantize(models["keras"], r, calib) for r in ("a8w8_pc", "a8w8_pt", "a16w8_pc")}


@pytest.fixture(scope="session")
def quantized_onnx(models, calib):
    from workbench.quantize.engine import quantize
    return {r: quantize(models["onnx"], r, calib, backend="onnx") for r in ("a8w8_pc", "a8w8_pt")}
