"""+cle / +bc: batch-norm folding, cross-layer equalisation and bias correction on float weights."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import QuantizationError
from workbench.quantize.equalize import (
    apply_transforms,
    channel_range,
    equalize_pair,
    fake_quant_weights,
    make_imbalanced,
)
from workbench.quantize.recipe import get_recipe


def _tiny(tmp_path, relu6=False):
    import keras
    from keras import layers
    keras.utils.set_random_seed(0)
    inputs = keras.Input(shape=(16, 16, 1), batch_size=1)
    x = layers.Conv2D(6, 3, strides=2, padding="same", use_bias=False, name="c1")(inputs)
    x = layers.BatchNormalization(name="c1_bn")(x)
    x = layers.ReLU(6.0 if relu6 else None, name="c1_act")(x)
    x = layers.DepthwiseConv2D(3, padding="same", use_bias=False, name="dw")(x)
    x = layers.BatchNormalization(name="dw_bn")(x)
    x = layers.ReLU(name="dw_act")(x)
    x = layers.MaxPooling2D(2, name="pool")(x)
    x = layers.Conv2D(8, 1, name="pw")(x)
    x = layers.ReLU(name="pw_act")(x)
    x = layers.Flatten(name="flat")(x)
    outputs = layers.Dense(4, name="logits")(x)
    model = keras.Model(inputs, outputs)
    rng = np.random.default_rng(0)
    for layer in model.layers:   # non-trivial batch-norm statistics
        if isinstance(layer, layers.BatchNormalization):
            n = layer.gamma.shape[0]
            layer.set_weights([rng.uniform(0.5, 2, n), rng.normal(0, 0.3, n), rng.normal(0, 0.2, n),
                               rng.uniform(0.2, 2, n)])
    path = tmp_path / ("tiny6.keras" if relu6 else "tiny.keras")
    model.save(path)
    return str(path)


def _run(path, x):
    import keras
    m = keras.models.load_model(path, compile=False)
    return np.concatenate([np.asarray(m(x[i:i + 1], training=False)) for i in range(len(x))])


def test_equalize_pair_balances_ranges_and_keeps_the_product():
    rng = np.random.default_rng(0)
    w_a = rng.normal(size=(3, 3, 2, 4)) * np.array([0.01, 1, 10, 0.5])
    b_a = rng.normal(size=4)
    w_b = rng.normal(size=(1, 1, 4, 3))
    before = w_a[..., 2].copy(), w_b[:, :, 2].copy()
    s = equalize_pair(w_a, b_a, w_b, a_axis=3, b_axis=2)
    np.testing.assert_allclose(channel_range(w_a, 3), channel_range(w_b, 2))
    np.testing.assert_allclose(w_a[..., 2] * s[2], before[0])
    np.testing.assert_allclose(w_b[:, :, 2] / s[2], before[1])


def test_fake_quant_per_tensor_is_coarser_than_per_channel():
    rng = np.random.default_rng(1)
    w = rng.normal(size=(3, 3, 4, 8)) * np.geomspace(0.01, 1, 8)
    err_pt = np.abs(fake_quant_weights(w, axis=None) - w).mean()
    err_pc = np.abs(fake_quant_weights(w, axis=3) - w).mean()
    assert err_pc < err_pt


def test_cle_keeps_the_float_function_and_equalises(tmp_path, digits):
    src = _tiny(tmp_path)
    imbalanced = str(tmp_path / "imb.keras")
    made = make_imbalanced(src, imbalanced, spread=1000.0)
    assert set(made.folded_batch_norms) == {"c1_bn", "dw_bn"}
    x = np.asarray(digits.select(split="test").x[:6, ::2, ::2], np.float32)
    np.testing.assert_allclose(_run(imbalanced, x), _run(src, x), rtol=1e-4, atol=1e-4)
    out, fmt, report = apply_transforms(imbalanced, "keras", ("cle",), weights="per_tensor")
    assert fmt == "keras" and report.folded_batch_norms == ()      # folded already
    pairs = {(p.first, p.second) for p in report.pairs}
    assert pairs == {("c1", "dw"), ("dw", "pw"), ("pw", "logits")}   # through ReLU, max pool, flatten
    assert max(p.range_ratio_before for p in report.pairs) > 20
    assert all(p.range_ratio_after < p.range_ratio_before for p in report.pairs)
    np.testing.assert_allclose(_run(str(out), x), _run(src, x), rtol=1e-4, atol=1e-4)
    again = apply_transforms(imbalanced, "keras", ("cle",), weights="per_tensor")[2]
    assert again.cache_hit and again.pairs == report.pairs
    assert "pair(s) equalised" in report.summary() and "<table" in report._repr_html_()
    # a damaged cache entry (the equalised model rewritten) is never used: it warns and is redone
    from workbench.errors import WorkbenchWarning
    out.write_bytes(out.read_bytes()[:100])
    with pytest.warns(WorkbenchWarning, match="does not match its sha256"):
        redone_out, _, redone = apply_transforms(imbalanced, "keras", ("cle",), weights="per_tensor")
    assert not redone.cache_hit and redone.pairs == report.pairs
    np.testing.assert_allclose(_run(str(redone_out), x), _run(src, x), rtol=1e-4, atol=1e-4)


def test_relu6_that_clips_is_not_equalised(tmp_path, digits):
    src = _tiny(tmp_path, relu6=True)
    x = np.asarray(digits.select(split="calibration").x[:32, ::2, ::2], np.float32) * 50.0   # drives the clip
    _, _, report = apply_transforms(src, "keras", ("cle",), weights="per_tensor", calibration=x)
    assert ("c1", "dw") not in {(p.first, p.second) for p in report.pairs}
    assert any(s.startswith("c1 -> dw: ReLU6") and ">= 6" in s for s in report.skipped)
    _, _, free = apply_transforms(src, "keras", ("cle",), weights="per_tensor")
    assert any("no calibration samples" in s for s in free.skipped)


def test_bias_correction_moves_biases_towards_the_float_mean(tmp_path, digits):
    import keras
    src = _tiny(tmp_path)
    x = np.asarray(digits.select(split="calibration").x[:64, ::2, ::2], np.float32)
    out, _, report = apply_transforms(src, "keras", ("bc",), weights="per_tensor", calibration=x)
    assert set(report.bias_corrected) == {"c1", "dw", "pw", "logits"} and not report.pairs
    folded, _, _ = apply_transforms(src, "keras", ("cle",), weights="per_tensor", calibration=x, _iterations=0)
    m_bc = keras.models.load_model(str(out), compile=False)
    m_f = keras.models.load_model(str(folded), compile=False)
    assert not np.allclose(m_bc.get_layer("pw").get_weights()[1], m_f.get_layer("pw").get_weights()[1])
    with pytest.raises(QuantizationError, match="needs calibration samples"):
        apply_transforms(src, "keras", ("bc",), weights="per_tensor")


def test_recipe_names_carry_transforms():
    r = get_recipe("a8w8_pt+cle+bc")
    assert r.name == "a8w8_pt+cle+bc" and r.transforms == ("cle", "bc") and r.weights == "per_tensor"
    assert "transforms cle+bc" in r.summary()
    assert get_recipe("a8w8_pt").transforms == ()
    with pytest.raises(QuantizationError, match="`recipe transform` must be one of 'cle', 'bc'"):
        get_recipe("a8w8_pt+xyz")
    with pytest.raises(QuantizationError, match="rewrite Keras"):
        apply_transforms(__file__, "saved_model", ("cle",), weights="per_tensor")
    # a float .tflite takes +cle, measured on the calibration data (equalize/tflite_graph.py), and not +bc
    with pytest.raises(QuantizationError, match="give calibration samples"):
        apply_transforms(__file__, "tflite", ("cle",), weights="per_channel")
    with pytest.raises(QuantizationError, match=r"takes \+cle only"):
        apply_transforms(__file__, "tflite", ("cle", "bc"), weights="per_channel",
                         calibration=np.zeros((2, 4, 4, 3), np.float32))


@pytest.mark.slow
def test_cle_on_onnx_keeps_the_function(tmp_path, digits):
    import onnxruntime as ort
    import tensorflow as tf

    from workbench.models.reference import export_onnx
    src = _tiny(tmp_path)
    imbalanced = tmp_path / "imb.keras"
    make_imbalanced(src, imbalanced, spread=1000.0)
    import keras
    m = keras.models.load_model(str(imbalanced), compile=False)
    sm = tmp_path / "sm"
    m.export(str(sm), format="tf_saved_model",
             input_signature=[tf.TensorSpec((1, 16, 16, 1), tf.float32, name="image")])
    onnx_path = export_onnx(sm, tmp_path / "m.onnx")
    out, fmt, report = apply_transforms(onnx_path, "onnx", ("cle",), weights="per_tensor")
    assert fmt == "onnx" and len(report.pairs) >= 2
    assert all(p.range_ratio_after < p.range_ratio_before for p in report.pairs)
    x = np.asarray(digits.select(split="test").x[:1, ::2, ::2], np.float32)
    run = lambda p: ort.InferenceSession(str(p)).run(None, {ort.InferenceSession(str(p)).get_inputs()[0].name: x})[0]  # noqa: E731
    np.testing.assert_allclose(run(out), run(onnx_path), rtol=1e-4, atol=1e-4)


def test_onnx_bias_correction_counts_a_shared_input_once():
    """Two convs reading one tensor: each bias moves by (Q(W) - W) . E[x], E[x] measured once."""
    import onnx
    from onnx import helper, numpy_helper

    from workbench.quantize.equalize import fake_quant_weights
    from workbench.quantize.equalize.onnx_graph import _onnx_bias_correction

    rng = np.random.default_rng(0)
    w1 = rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    w2 = rng.normal(size=(5, 3, 1, 1)).astype(np.float32)
    arrays = {"w1": w1, "b1": np.zeros(4, np.float32), "w2": w2, "b2": np.zeros(5, np.float32)}
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1", "b1"], ["y1"], name="a", pads=[1, 1, 1, 1]),
         helper.make_node("Conv", ["x", "w2", "b2"], ["y2"], name="b")],
        "shared", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 3, 8, 8])],
        [helper.make_tensor_value_info("y1", onnx.TensorProto.FLOAT, None),
         helper.make_tensor_value_info("y2", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in arrays.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    x = rng.uniform(0.5, 1.5, size=(6, 3, 8, 8)).astype(np.float32)   # NCHW, channel means near 1

    out = dict(arrays)
    done = _onnx_bias_correction(model, out, lambda n: n.input[1], lambda n: 0, "per_tensor", x)
    assert done == ["a", "b"]
    mean_in = x.astype(np.float64).mean(axis=(0, 2, 3))
    for w, b in (("w1", "b1"), ("w2", "b2")):
        eps = fake_quant_weights(arrays[w], axis=None) - arrays[w]
        expected = -np.einsum("oihw,i->o", eps, mean_in)
        np.testing.assert_allclose(out[b], expected, rtol=1e-4, atol=1e-6)
