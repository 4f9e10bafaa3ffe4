"""FP32 .tflite sources quantized as they are (AI Edge Quantizer): op for op, recipes kept."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from workbench.errors import QuantizationError


def _old_style_fp16_tflite(tmp_path):
    """A float .tflite as MediaPipe ships them: float16 weights behind DEQUANTIZE, no SignatureDef,
    op types only in deprecated_builtin_code (builtin_code 0)."""
    import contextlib
    import io

    import keras
    import tensorflow as tf
    from ai_edge_litert.tools import flatbuffer_utils as fu
    keras.utils.set_random_seed(0)      # one model every run: unseeded weights made the SQNR bound flaky (14-20 dB)
    inp = keras.Input((16, 16, 3), batch_size=1, name="image")
    h = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    h = keras.layers.DepthwiseConv2D(3, padding="same", activation="relu")(h)
    h = keras.layers.Conv2D(8, 1)(h)
    model = keras.Model(inp, keras.layers.Dense(4)(keras.layers.GlobalAveragePooling2D()(h)))
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.target_spec.supported_types = [tf.float16]
    with contextlib.redirect_stdout(io.StringIO()):
        data = conv.convert()
    m = fu.read_model_from_bytearray(bytearray(data))
    m.signatureDefs = []
    for code in m.operatorCodes:
        if code.builtinCode < 127:
            code.deprecatedBuiltinCode, code.builtinCode = code.builtinCode, 0
    path = tmp_path / "fp16.tflite"
    path.write_bytes(bytes(fu.convert_object_to_bytearray(m)))
    return path, model


@pytest.fixture(scope="module")
def fp16_model(tmp_path_factory):
    return _old_style_fp16_tflite(tmp_path_factory.mktemp("aeq"))


def _ops(path):
    from workbench.models.tflite_graph import read_tflite
    return collections.Counter(o.type for o in read_tflite(path).ops)


@pytest.mark.slow
def test_fp16_tflite_is_quantized_op_for_op(fp16_model, tmp_path):
    from ai_edge_litert.interpreter import Interpreter

    from workbench.quantize.engine import quantize
    path, keras_model = fp16_model
    source = _ops(path)
    assert source["DEQUANTIZE"] >= 3 and source["DEPTHWISE_CONV_2D"] == 1
    x = np.random.default_rng(0).uniform(0, 1, (60, 16, 16, 3)).astype(np.float32)
    q = quantize(path, "a8w8_pc", x, cache=False)
    got = _ops(q.path)
    assert got == source - collections.Counter({"DEQUANTIZE": source["DEQUANTIZE"]}), got
    assert q.full_integer and q.weight_granularity == "per_channel"
    assert "float16 weights -> float32" in " ".join(q.manifest()["conversion"]["prepared"])
    st = q.manifest()["structure"]
    assert st == q.structure and st["compared"] and st["added"] == {} and st["transposes_added"] == 0
    assert st["depthwise"] == {"source": 1, "int8": 1} and st["source_total"] == st["int8_total"]
    from workbench.findings import findings_for
    assert not [f for f in findings_for(q) if f.code.startswith("convert.")]
    for t in q.inspect().tensors:         # symmetric per-channel weights: every zero point 0 (LiteRT's rule)
        if t.is_constant and len(t.scales) > 1:
            assert set(t.zero_points) == {0}, t.name
    interp = Interpreter(model_path=q.path)
    interp.allocate_tensors()             # loads in the default runtime
    ref = keras_model.predict(x[:20], verbose=0)
    from workbench.models.predict import load_predictor
    out = load_predictor(q.path).predict(x[:20])
    sqnr = 10 * np.log10(np.sum(ref ** 2) / np.sum((ref - out) ** 2))
    assert sqnr > 20, sqnr


@pytest.mark.slow
@pytest.mark.parametrize("recipe, changes, io, weights", [
    ("a8w8_pt", {}, ("INT8", "INT8"), "per_tensor"),
    ("a16w8_pc", {}, ("INT16", "INT16"), "per_channel"),
    ("a8w8_pc", {"input_dtype": "uint8", "output_dtype": "uint8"}, ("UINT8", "UINT8"), "per_channel"),
    ("a8w8_pc", {"input_dtype": "float32", "output_dtype": "float32"}, ("FLOAT32", "FLOAT32"), "per_channel"),
])
def test_recipes_keep_their_meaning(fp16_model, recipe, changes, io, weights):
    from workbench.models.predict import load_predictor
    from workbench.quantize.engine import quantize
    from workbench.quantize.recipe import get_recipe
    path, keras_model = fp16_model
    x = np.random.default_rng(1).uniform(0, 1, (50, 16, 16, 3)).astype(np.float32)
    q = quantize(path, get_recipe(recipe, **changes), x)
    assert (q.input_quantization.dtype, q.output_quantization.dtype) == io
    assert q.weight_granularity == weights and q.full_integer
    assert _ops(q.path)["DEPTHWISE_CONV_2D"] == 1 and not _ops(q.path)["TRANSPOSE"]
    ref = keras_model.predict(x[:10], verbose=0)
    out = load_predictor(q.path).predict(x[:10])
    assert 10 * np.log10(np.sum(ref ** 2) / np.sum((ref - out) ** 2)) > 15


@pytest.mark.slow
def test_exclusions_and_refusals(fp16_model):
    from workbench.quantize.engine import quantize
    path, _ = fp16_model
    x = np.random.default_rng(2).uniform(0, 1, (50, 16, 16, 3)).astype(np.float32)
    q = quantize(path, "a8w8_pc", x, exclude=["FULLY_CONNECTED"])
    assert "FULLY_CONNECTED" in " ".join(q.float_ops) and not q.full_integer
    with pytest.raises(Exception, match=r"\+bc"):       # +cle is taken (equalize/tflite_graph.py), +bc not
        quantize(path, "a8w8_pt+cle+bc", x)
    from workbench.quantize.aeq_backend import check_recipe
    from workbench.quantize.recipe import QuantRecipe
    with pytest.raises(QuantizationError, match="calibrator 'entropy'"):     # percentile is taken (ranges.py)
        check_recipe(QuantRecipe(backend="onnx", calibrator="entropy", input_dtype="float32",
                                 output_dtype="float32"), path)


@pytest.mark.slow
def test_custom_op_in_a_float_tflite_is_named_before_any_work(fp16_model, tmp_path):
    """A custom op is named from the file's operator codes, before calibration or conversion runs (it used to
    surface after 110 s as an onnx2tf traceback naming a cache file)."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu

    from workbench.errors import ModelError
    from workbench.quantize.engine import quantize
    m = fu.read_model_from_bytearray(bytearray(fp16_model[0].read_bytes()))
    for code in m.operatorCodes:
        if max(code.builtinCode, code.deprecatedBuiltinCode) == fb.BuiltinOperator.DEPTHWISE_CONV_2D:
            code.builtinCode = code.deprecatedBuiltinCode = fb.BuiltinOperator.CUSTOM
            code.customCode = b"Convolution2DTransposeBias"
    path = tmp_path / "custom.tflite"
    path.write_bytes(bytes(fu.convert_object_to_bytearray(m)))
    with pytest.raises(ModelError, match=r"1 custom op\(s\) \('Convolution2DTransposeBias'\): #\d+ "
                                         r"'Convolution2DTransposeBias' \(output '.+'\)"):
        quantize(path, "a8w8_pc", None)      # no calibration data: refused before it is looked at
