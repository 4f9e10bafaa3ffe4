"""load_predictor: every format, batched where possible, one sample at a time where not."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import ModelError, WorkbenchWarning
from workbench.models.builtin import builtin_path
from workbench.models.predict import (
    batch_free_tflite,
    dequantize_output,
    load_predictor,
    quantize_input,
    quantize_scratch,
    resolve_model_path,
)

W = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)


def _tflite(fn, shape=(1, 8, 8, 1)):
    import tensorflow as tf
    concrete = tf.function(fn, input_signature=[tf.TensorSpec(shape, tf.float32)]).get_concrete_function()
    return tf.lite.TFLiteConverter.from_concrete_functions([concrete]).convert()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Tiny .tflite models: a batch-1 one whose reshape hard-codes the batch (the twin frees it), one whose
    reshape splits the batch (cannot be resized), one that mixes samples across the batch, one with a free batch."""
    import tensorflow as tf
    folder = tmp_path_factory.mktemp("predict")
    models = {
        "fixed": lambda x: tf.matmul(tf.reshape(x, [1, 64]), W),
        "split": lambda x: tf.matmul(tf.reshape(tf.reduce_sum(tf.reshape(x, [2, 32]), axis=0), [1, 32]), W[:32]),
        "mixing": lambda x: tf.matmul(tf.reshape(tf.reduce_sum(
            tf.concat([tf.reshape(x, [1, 64]), tf.ones([1, 64])], axis=0), axis=0), [1, 64]), W),
    }
    out = {}
    for name, fn in models.items():
        out[name] = folder / f"{name}.tflite"
        out[name].write_bytes(_tflite(fn))
    out["free"] = folder / "free.tflite"
    out["free"].write_bytes(_tflite(lambda x: tf.matmul(tf.reshape(x, [-1, 64]), W), shape=(None, 8, 8, 1)))
    return out


def _expected(x, factor=1.0):
    return x.reshape(len(x), 64) @ W * factor


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(1).random((37, 8, 8, 1), dtype=np.float32)


def test_batch_one_tflite_runs_batched_through_its_twin(tiny, images):
    p = load_predictor(tiny["fixed"], batch_size=16)
    out = p.predict(images)
    assert p.mode == "batched" and out.shape == (37, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out, _expected(images), rtol=1e-4, atol=1e-4)
    assert batch_free_tflite(b"not a flatbuffer") is None


def test_free_batch_tflite_is_batched_as_is(tiny, images):
    p = load_predictor(tiny["free"], batch_size=8)
    np.testing.assert_allclose(p.predict(images), _expected(images), rtol=1e-4, atol=1e-4)
    assert p.mode == "batched"


def test_model_that_cannot_be_resized_falls_back_to_one_sample_at_a_time(tiny, images):
    p = load_predictor(tiny["split"])
    out = p.predict(images)
    assert p.mode == "per-sample"
    halves = images.reshape(len(images), 2, 32).sum(axis=1)
    np.testing.assert_allclose(out, halves @ W[:32], rtol=1e-4, atol=1e-4)


def test_twin_that_disagrees_is_not_used(tiny, images):
    p = load_predictor(tiny["mixing"])
    with pytest.warns(WorkbenchWarning, match="batch-free twin of this batch-1 model disagrees"):
        out = p.predict(images)
    assert p.mode == "per-sample"
    expected = _expected(images + 1.0)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_every_reference_format_gives_the_same_decisions(reference, digits):
    subset = digits.select(split="test", condition="motion-blur")
    x, y = subset.x[:96], subset.y[:96]
    outs = {}
    for kind in ("tflite", "onnx", "keras", "saved_model"):
        p = load_predictor(builtin_path("reference", export=kind), batch_size=32)     # the .onnx made if new
        outs[kind] = p.predict(x)
        assert outs[kind].shape == (96, 10)
        assert p.mode == ("per-sample" if kind == "saved_model" else "batched"), kind
    for kind, out in outs.items():
        np.testing.assert_allclose(out, outs["tflite"], rtol=1e-3, atol=1e-3, err_msg=kind)
        assert np.mean(out.argmax(1) == y) == np.mean(outs["tflite"].argmax(1) == y)
    # a ReferenceModel-like object means its Keras file
    assert load_predictor(reference).format == "keras"


def test_onnx_channels_first_model_gets_nchw(tmp_path, images):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(
        [helper.make_node("Flatten", ["x"], ["flat"], axis=1), helper.make_node("MatMul", ["flat", "w"], ["y"])],
        "nchw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [numpy_helper.from_array(W, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "nchw.onnx"
    onnx.save(model, str(path))
    p = load_predictor(path)
    assert p.input_shape == (1, 8, 8)
    p.adapt_layout((8, 8, 1))
    assert p.input_shape == (8, 8, 1)
    out = p.predict(images)
    assert p.mode == "batched"
    np.testing.assert_allclose(out, _expected(images.transpose(0, 3, 1, 2)), rtol=1e-4, atol=1e-4)


def test_quantization_helpers_use_the_given_parameters():
    x = np.array([0.0, 0.125, -0.125, 1.0, 100.0], np.float32)     # x / 0.25: 0, 0.5, -0.5, 4, 400
    assert quantize_input(x, 0.25, -128, np.int8).tolist() == [-128, -127, -128, -124, 127]
    assert quantize_input(x, 0.25, 3, np.uint8).tolist() == [3, 4, 2, 7, 255]
    np.testing.assert_allclose(dequantize_output(np.array([-128, 0, 127], np.int8), 0.5, -10), [-59.0, 5.0, 68.5])


def _quantize_plainly(x, scale, zero_point, dtype):
    """The definition quantize_input implements, written the plain way (one new array per step)."""
    info = np.iinfo(dtype)
    v = np.asarray(x, np.float32) / np.float32(scale)
    v = np.trunc(v + np.copysign(np.float32(0.5), v)) + np.float32(zero_point)
    return np.clip(v, info.min, info.max).astype(dtype)


@pytest.mark.parametrize("dtype, zero_points", [(np.int8, (-128, 0, 5, 127)), (np.uint8, (0, 3, 128, 255)),
                                                (np.int16, (0,))])
def test_quantize_input_equals_its_plain_definition_bit_for_bit(dtype, zero_points):
    rng = np.random.default_rng(0)
    patterns = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    patterns = patterns[np.isfinite(patterns)]                      # every magnitude and sign
    ties = np.arange(-70000, 70000, dtype=np.float32) / 2           # every .5 the types can reach
    edges = np.array([0.0, -0.0, 0.49999997, -0.49999997, 127.5, -128.5, 255.5, 1e-45, -1e-45, 3e38, -3e38,
                      np.inf, -np.inf], np.float32)
    with np.errstate(over="ignore"):
        for scale in (1 / 255, 2 / 255, 0.0123, 1.0, 7.5):
            for zero_point in zero_points:
                room = np.iinfo(dtype).max - zero_point                     # largest v that needs no clip
                in_range = (np.arange(0, 2 * room, dtype=np.float32) / 2,    # ties up to the top (shortcut)
                            rng.random(10_000, dtype=np.float32) * np.float32(room),
                            np.array([0.0, 1e-45, 0.49999997], np.float32))
                signed = (patterns, ties * np.float32(scale), edges, edges * np.float32(scale))
                unsigned = (np.abs(patterns), np.abs(ties) * np.float32(scale),
                            np.array([-0.0, 0.0, 0.5, 1.5], np.float32) * np.float32(scale),   # -0.0
                            np.arange(0, 2 * room + 2, dtype=np.float32) / 2 * np.float32(scale),   # just over
                            *(v * np.float32(scale) for v in in_range))
                for values in signed + unsigned:
                    want = _quantize_plainly(values, scale, zero_point, dtype)
                    got = quantize_input(values, scale, zero_point, np.dtype(dtype))
                    assert got.dtype == dtype
                    np.testing.assert_array_equal(got, want, err_msg=f"scale {scale}, zero point {zero_point}")
                    out = np.full(values.shape, 7, dtype)                 # into a given buffer, scratch reused
                    scratch = quantize_scratch(values.shape, np.dtype(dtype))
                    assert quantize_input(values, scale, zero_point, np.dtype(dtype), out=out, scratch=scratch) is out
                    np.testing.assert_array_equal(out, want)


def test_errors_name_the_model_and_what_did_not_fit(tiny, tmp_path):
    p = load_predictor(tiny["fixed"])
    with pytest.raises(ModelError, match=r"fixed.tflite: the model takes images of shape \(8, 8, 1\).*got \(9, 9, 1\)"):
        p.predict(np.zeros((2, 9, 9, 1), np.float32))
    with pytest.raises(ModelError, match="nothing to predict"):
        p.predict(np.zeros((0, 8, 8, 1), np.float32))
    with pytest.raises(ModelError, match="cannot evaluate a int: expected a model path"):
        resolve_model_path(3)
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"1234TFL3" + b"\0" * 16)
    with pytest.raises(ModelError, match="LiteRT cannot load this model"):
        load_predictor(bad)
    with pytest.raises(ModelError, match="`batch_size` must be a positive integer"):
        load_predictor(tiny["fixed"], batch_size=0)


def test_uint8_and_float_pixels_give_the_same_int8_codes_on_a_minus1_1_input():
    """Scale 2/255, zero point -1 puts every one of the 256 pixel values on a .5 tie of the INT8 grid: the
    uint8 path (the predictor's lookup table, the board runner) and float pixels ``u / 255`` must agree
    on every value (47 of 256 differed when uint8 was read as ``u * float32(1/255)``)."""
    import numpy as _np

    from workbench.board.remote_runner import apply_contract
    from workbench.models.contract import InputContract
    contract = InputContract(range=(-1.0, 1.0), color="grayscale")
    u = _np.arange(256, dtype=_np.uint8).reshape(1, 1, 256, 1)
    scale, zero_point = float(_np.float32(2 / 255)), -1
    codes_u8 = quantize_input(contract.apply(u), scale, zero_point, _np.dtype(_np.int8))
    board = apply_contract(_np, u, contract.to_params())
    for floats in ((u / 255.0).astype(_np.float32), u.astype(_np.float32) / 255):
        codes_f = quantize_input(contract.apply(floats), scale, zero_point, _np.dtype(_np.int8))
        assert int((codes_f != codes_u8).sum()) == 0
    assert _np.array_equal(board.reshape(-1), contract.apply(u).reshape(-1))
