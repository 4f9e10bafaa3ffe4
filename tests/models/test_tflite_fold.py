"""Folds of a data-moving op into the compute op beside it: PAD -> SAME convolution, requantize -> producer."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from .tflite_bytes import ops as _ops
from .tflite_bytes import run as _run


def _int8(model, x):
    import tensorflow as tf
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([x[i:i + 1]] for i in range(len(x)))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = conv.inference_output_type = tf.int8
    with contextlib.redirect_stdout(io.StringIO()):
        return conv.convert()


@pytest.fixture(scope="module")
def padded_model():
    """PyTorch-style symmetric padding as onnx2tf writes it: PAD(1, 1) before VALID 3x3 stride-2 CONV_2D and
    DEPTHWISE_CONV_2D on even sizes (SAME would pad 0 before, 1 after) and on an odd width (what SAME pads), and
    two PADs that must stay: one read by two convolutions, one padding channels."""
    import keras
    keras.utils.set_random_seed(5)
    inp = keras.Input((16, 12, 3), batch_size=1)
    h = keras.layers.Conv2D(8, 3, strides=2)(keras.layers.ZeroPadding2D(1)(inp))
    h = keras.layers.DepthwiseConv2D(3, strides=2, activation="relu")(keras.layers.ZeroPadding2D(1)(h))
    h = keras.layers.Conv2D(8, 3, strides=2)(keras.layers.ZeroPadding2D(1)(h))           # 4 x 3 -> 2 x 2
    shared = keras.layers.ZeroPadding2D(1)(h)
    h = keras.layers.Add()([keras.layers.Conv2D(8, 3, strides=2)(shared), keras.layers.Conv2D(8, 3, strides=2)(shared)])
    h = keras.layers.Lambda(lambda t: __import__("tensorflow").pad(t, [[0, 0], [0, 0], [0, 0], [0, 8]]))(h)
    model = keras.Model(inp, keras.layers.Conv2D(4, 1)(h))
    x = np.random.default_rng(6).uniform(-1, 1, (24, 16, 12, 3)).astype(np.float32)
    return _int8(model, x), x


@pytest.mark.slow
def test_pad_is_folded_into_a_same_convolution_bit_exact(padded_model):
    from workbench.models.tflite_fold import fold_lines, fold_pad_into_conv, model_macs
    from workbench.models.tflite_graph import parse_tflite_bytes
    data, x = padded_model
    assert _ops(data)["PAD"] == 5 and _ops(data)["CONV_2D"] == 5
    new, folds = fold_pad_into_conv(data)
    assert _ops(new)["PAD"] == 2, folds           # the shared PAD and the channel PAD stay
    assert [(f["op"], f["kernel"], f["folded_kernel"]) for f in folds] == [
        ("CONV_2D", (3, 3), (4, 4)), ("DEPTHWISE_CONV_2D", (3, 3), (4, 4)), ("CONV_2D", (3, 3), (4, 3))]
    assert folds[0]["folded_macs"] * 9 == folds[0]["macs"] * 16
    assert model_macs(new) - model_macs(data) == sum(f["folded_macs"] - f["macs"] for f in folds)
    g = parse_tflite_bytes(new)
    convs = [op for op in g.ops if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D")][:3]
    assert [op.options["padding"] for op in convs] == ["SAME"] * 3
    assert g.tensors[convs[1].inputs[1]].quantized_dimension == 3 and len(g.tensors[convs[1].inputs[1]].scales) == 8
    for i in range(4):
        for a, b in zip(_run(data, x[i:i + 1]), _run(new, x[i:i + 1])):
            assert a.dtype == b.dtype and np.array_equal(a, b)
    again, lines = fold_lines(data)
    assert any(line.startswith("PAD folded into the convolution's SAME padding: 3 op(s); 3 kernel(s) grown")
               for line in lines), lines
    assert _ops(again) == _ops(new) and fold_lines(again)[1] == []


@pytest.mark.slow
def test_requantize_after_a_reshape_is_folded_into_the_convolution(tmp_path):
    """AI Edge Quantizer gives each CONCATENATION input the output's scale with a QUANTIZE when a RESHAPE sits
    between the convolution and the concatenation (BlazeFace's heads); the convolution can write that scale."""
    import keras
    import tensorflow as tf

    from workbench.models.tflite_fold import fold_requantize
    from workbench.quantize.aeq_backend import quantize_float_tflite
    from workbench.quantize.recipe import get_recipe
    keras.utils.set_random_seed(7)
    inp = keras.Input((8, 8, 4), batch_size=1)
    small = keras.layers.Reshape((128, 1))(keras.layers.Conv2D(2, 1)(inp))
    big = keras.layers.Reshape((64, 1))(keras.layers.Rescaling(20.0)(keras.layers.Conv2D(1, 1)(inp)))
    model = keras.Model(inp, keras.layers.Concatenate(axis=1)([small, big]))
    with contextlib.redirect_stdout(io.StringIO()):
        (tmp_path / "m.tflite").write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    x = np.random.default_rng(8).uniform(-1, 1, (32, 8, 8, 4)).astype(np.float32)
    data, _ = quantize_float_tflite(tmp_path / "m.tflite", get_recipe("a8w8_pc"), x)
    assert _ops(data)["QUANTIZE"] >= 1
    new, n = fold_requantize(data)
    assert n >= 1 and _ops(new)["QUANTIZE"] == _ops(data)["QUANTIZE"] - n
    ref = np.concatenate([model(x[i:i + 1]).numpy() for i in range(8)])
    a = np.concatenate([_run(data, x[i:i + 1])[0] for i in range(8)]).astype(np.float64)
    b = np.concatenate([_run(new, x[i:i + 1])[0] for i in range(8)]).astype(np.float64)
    assert np.max(np.abs(a - b)) <= 1                     # one rounding instead of two: at most one step
    from ai_edge_litert.interpreter import Interpreter
    out = Interpreter(model_content=new).get_output_details()[0]
    s, z = out["quantization"]
    err_a, err_b = np.sum(((a - z) * s - ref) ** 2), np.sum(((b - z) * s - ref) ** 2)
    assert err_b <= err_a
