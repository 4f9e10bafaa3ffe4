"""Session fixtures: tiny Keras models converted with the real TFLite converter (batch 1).

- ``clean``: conv / depthwise / max pool / conv / global average pool / dense, full INT8.
- ``reject``: INT8 conv, SOFTMAX mid-graph (not on the Neutron-S list), TILE mid-graph (not in
  the VX op map; Vela 5.2 supports it), then conv / pool / dense.
- ``float_op``: a FLOOR_MOD left in float mid-graph (DEQUANTIZE -> FLOOR_MOD -> QUANTIZE).
- ``dynamic``: batch None -> dynamic shape signature (SHAPE/STRIDED_SLICE/PACK before RESHAPE).
- ``float_model``: no quantization at all.
Vela output is cached per session in a private cache folder.
"""

from __future__ import annotations

import os

import numpy as np
import pytest


@pytest.fixture(scope="package", autouse=True)
def _private_cache(tmp_path_factory):
    """Package-scoped: a session-scoped switch stayed on after these tests and moved every later test of the
    worker to another cache folder (the session's reference model then resolved to a second copy)."""
    old = os.environ.get("NPU_WORKBENCH_CACHE")
    os.environ["NPU_WORKBENCH_CACHE"] = str(tmp_path_factory.mktemp("wb-cache"))
    yield
    if old is None:
        os.environ.pop("NPU_WORKBENCH_CACHE", None)
    else:
        os.environ["NPU_WORKBENCH_CACHE"] = old


def _convert(model, path, *, int8=True, allow_float=False, shape=(1, 16, 16, 3)):
    import tensorflow as tf
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if int8:
        rng = np.random.default_rng(0)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: (
            [rng.random(shape, dtype=np.float32)] for _ in range(4))
        ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if allow_float:
            ops.append(tf.lite.OpsSet.TFLITE_BUILTINS)
        converter.target_spec.supported_ops = ops
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    path.write_bytes(converter.convert())
    return path


def _head(x):
    """Global average pool and a 1x1-conv classifier (Vela 3.10.0 keeps a per-channel Dense on the CPU)."""
    import keras
    x = keras.layers.GlobalAveragePooling2D(keepdims=True)(x)
    x = keras.layers.Conv2D(4, 1)(x)
    return keras.layers.Reshape((4,))(x)


def _clean_keras(batch_size=1, size=16):
    """Ops every target (and Vela 3.10.0, the imx93 BSP's compiler) runs on the NPU.

    16 channels into the pooling (Neutron-S: a multiple of NUM_MACS) and a 1x1 convolution as the
    classifier: Vela 3.10.0 refuses per-channel FULLY_CONNECTED weights, which the converter writes.
    """
    import keras
    inp = keras.Input((size, size, 3), batch_size=batch_size)
    x = keras.layers.Conv2D(16, 3, padding="same", activation="relu")(inp)
    x = keras.layers.DepthwiseConv2D(3, padding="same", activation="relu6")(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(16, 1, activation="relu")(x)
    return keras.Model(inp, _head(x))


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("placement-models")


@pytest.fixture(scope="session")
def clean_keras_file(models_dir):
    path = models_dir / "clean.keras"
    _clean_keras().save(path)
    return path


@pytest.fixture(scope="session")
def clean_tflite(models_dir):
    return _convert(_clean_keras(), models_dir / "clean_int8.tflite")


@pytest.fixture(scope="session")
def reject_tflite(models_dir):
    import keras
    import tensorflow as tf
    inp = keras.Input((16, 16, 3), batch_size=1)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    x = keras.layers.Softmax(axis=-1)(x)
    x = keras.layers.Conv2D(8, 1, activation="relu")(x)
    x = keras.layers.Lambda(lambda t: tf.tile(t, [1, 1, 1, 2]))(x)
    x = keras.layers.Conv2D(8, 1, activation="relu")(x)
    out = _head(x)
    return _convert(keras.Model(inp, out), models_dir / "reject_int8.tflite")


@pytest.fixture(scope="session")
def float_op_tflite(models_dir):
    import keras
    import tensorflow as tf
    inp = keras.Input((16, 16, 3), batch_size=1)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    x = keras.layers.Lambda(lambda t: tf.math.floormod(t, 1.5))(x)
    x = keras.layers.Conv2D(8, 1, activation="relu")(x)
    out = _head(x)
    return _convert(keras.Model(inp, out), models_dir / "float_op_int8.tflite", allow_float=True)


@pytest.fixture(scope="session")
def dynamic_tflite(models_dir):
    import keras
    inp = keras.Input((8, 8, 3))                 # batch None
    x = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(inp)
    x = keras.layers.Flatten()(x)
    out = keras.layers.Dense(4)(x)
    return _convert(keras.Model(inp, out), models_dir / "dynamic_int8.tflite", shape=(1, 8, 8, 3))


@pytest.fixture(scope="session")
def float_model_tflite(models_dir):
    return _convert(_clean_keras(), models_dir / "clean_fp32.tflite", int8=False)
