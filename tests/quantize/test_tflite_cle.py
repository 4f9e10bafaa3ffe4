"""``+cle`` on a float ``.tflite`` (workbench/quantize/equalize/tflite_graph.py): the channels of a depthwise
output that feeds a convolution, equalised by the ranges the float model reaches on the calibration data.

The model is BlazeFace's trouble in small: one channel of a depthwise output (a bias of -300) spans a range
about 100x the others, so its tensor's one INT8 scale leaves the other channels a few steps."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import QuantizationError


@pytest.fixture(scope="module")
def wide_channel_model(tmp_path_factory):
    import contextlib
    import io

    import keras
    import tensorflow as tf
    keras.utils.set_random_seed(0)
    inp = keras.Input((16, 16, 3), batch_size=1, name="image")
    h = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    dw = keras.layers.DepthwiseConv2D(3, padding="same")           # no activation: a CLE pair with the 1x1 conv
    h = dw(h)
    h = keras.layers.Conv2D(8, 1)(h)
    model = keras.Model(inp, keras.layers.ReLU()(h))
    kernel, bias = dw.get_weights()
    bias[2] = -300.0                                                  # one channel 100x wider than the others
    dw.set_weights([kernel, bias])
    with contextlib.redirect_stdout(io.StringIO()):
        data = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    path = tmp_path_factory.mktemp("cle") / "wide.tflite"
    path.write_bytes(data)
    return path, model


def _run(path_or_bytes, x):
    from ai_edge_litert.interpreter import Interpreter
    kw = {"model_content": path_or_bytes} if isinstance(path_or_bytes, bytes) else {"model_path": str(path_or_bytes)}
    it = Interpreter(**kw)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    ys = []
    for i in range(len(x)):
        it.set_tensor(inp["index"], x[i:i + 1])
        it.invoke()
        ys.append(it.get_tensor(out["index"]).copy())
    return np.concatenate(ys)


@pytest.mark.slow
def test_the_wide_channel_is_narrowed_and_the_float_function_kept(wide_channel_model):
    from workbench.quantize.equalize.tflite_graph import equalize_depthwise
    path, _ = wide_channel_model
    x = np.random.default_rng(0).uniform(0, 1, (20, 16, 16, 3)).astype(np.float32)
    data, pairs = equalize_depthwise(path.read_bytes(), x)
    assert len(pairs) == 1 and pairs[0].channels >= 1, pairs
    assert pairs[0].range_ratio_before > 20 and pairs[0].range_ratio_after <= 1.0 + 1e-6, pairs
    ref, got = _run(path, x), _run(data, x)
    assert np.allclose(ref, got, rtol=1e-4, atol=1e-3 * float(np.abs(ref).max()))


@pytest.mark.slow
def test_a8w8_cle_recovers_what_the_wide_channel_cost(wide_channel_model):
    from workbench.models.predict import load_predictor
    from workbench.quantize.engine import quantize
    path, keras_model = wide_channel_model
    x = np.random.default_rng(1).uniform(0, 1, (60, 16, 16, 3)).astype(np.float32)
    ref = keras_model.predict(x[:20], verbose=0)

    def sqnr(recipe):
        q = quantize(path, recipe, x, cache=False)
        out = load_predictor(q.path).predict(x[:20]).reshape(ref.shape)
        return 10 * np.log10(np.sum(ref ** 2) / np.sum((ref - out) ** 2)), q
    plain, q_plain = sqnr("a8w8_pc")
    equalized, q = sqnr("a8w8_pc+cle")
    assert q.full_integer and equalized > plain + 6, (plain, equalized)
    from workbench.findings import findings_for  # the finding that points to +cle, then not
    spread = [f for f in findings_for(q_plain) if f.code == "quantize.depthwise-spread"]
    assert len(spread) == 1 and spread[0].evidence["tensors"][0]["channel"] == 2, spread
    assert spread[0].evidence["tensors"][0]["ratio"] >= 20
    assert not [f for f in findings_for(q) if f.code == "quantize.depthwise-spread"]
    with pytest.raises(QuantizationError, match=r"\+bc"):
        quantize(path, "a8w8_pc+cle+bc", x, cache=False)
