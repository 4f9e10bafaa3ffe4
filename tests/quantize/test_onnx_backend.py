import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from workbench.errors import QuantizationError
from workbench.quantize.engine import quantize
from workbench.quantize.inspect import inspect_model


def _dq_weights(path):
    """(consumer op, weight shape, scale shape, axis attr) for every weight DequantizeLinear."""
    m = onnx.load(path)
    init = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    consumers = {i: n for n in m.graph.node for i in n.input}
    out = []
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in init and init[n.input[0]].dtype.name == "int8":
            axis = next((onnx.helper.get_attribute_value(a) for a in n.attribute if a.name == "axis"), None)
            out.append((consumers[n.output[0]].op_type, init[n.input[0]].shape, init[n.input[1]].shape, axis,
                        init[n.input[2]]))
    return out


def test_onnx_per_channel_axis_is_the_output_channel(quantized_onnx):
    weights = _dq_weights(quantized_onnx["a8w8_pc"].path)
    assert {w[0] for w in weights} == {"Conv", "MatMul"}
    for op, wshape, sshape, axis, zp in weights:
        expected = 0 if op == "Conv" else 1
        assert axis == expected and sshape == (wshape[expected],) and not zp.any()
    insp = inspect_model(quantized_onnx["a8w8_pc"].path)
    assert insp.weight_granularity == "per_channel" and insp.full_integer
    assert all(w.axis == w.expected_axis and w.symmetric for w in insp.weights)


def test_onnx_per_tensor_has_one_scale_per_weight(quantized_onnx):
    for _op, _wshape, sshape, _axis, zp in _dq_weights(quantized_onnx["a8w8_pt"].path):
        assert sshape == () and int(zp) == 0
    q = quantized_onnx["a8w8_pt"]
    assert q.weight_granularity == "per_tensor" and q.full_integer
    assert q.input_quantization.dtype == "FLOAT32" and "onnxruntime" in q.toolchain


def test_onnx_exclude_and_calibrators(models, calib):
    q = quantize(models["onnx"], "a8w8_pc", calib, backend="onnx", exclude=["Softmax"])
    assert any(op.startswith("Softmax #") for op in q.float_ops)
    from workbench.quantize.recipe import get_recipe
    perc = quantize(models["onnx"], get_recipe("a8w8_pc", backend="onnx", calibrator="percentile",
                                               percentile=99.0), calib)
    assert perc.full_integer and perc.recipe.calibrator == "percentile"
    mm = quantize(models["onnx"], "a8w8_pc", calib, backend="onnx")
    assert perc.sha256 != mm.sha256  # the calibrator changed the ranges


def test_onnx_unknown_exclude_is_an_error(models, calib):
    with pytest.raises(QuantizationError, match="nothing to exclude named 'NoSuchOp'"):
        quantize(models["onnx"], "a8w8_pc", calib, backend="onnx", exclude=["NoSuchOp"])


def test_qdq_models_are_measured_as_their_integer_arithmetic(reference, digits):
    """ORT's fused int8 kernels saturate on x86 CPUs without VNNI (VPMADDUBSW): the workbench
    runs a QDQ model at the basic optimisation level, so the ONNX and TFLite a8w8_pc models of
    the reference network agree on daylight (measured with the fused kernels here: 64.8%)."""
    import onnxruntime as ort

    from workbench.models.builtin import builtin_path
    from workbench.models.predict import is_qdq, load_predictor, ort_session_options
    from workbench.quantize.engine import quantize

    fp32_onnx = builtin_path("reference", export="onnx")
    q_onnx = quantize(fp32_onnx, "a8w8_pc", dataset=digits, backend="onnx")
    q_tflite = quantize(reference.keras, "a8w8_pc", dataset=digits, backend="tflite")
    content = open(q_onnx.path, "rb").read()
    assert is_qdq(content) and not is_qdq(open(fp32_onnx, "rb").read())
    assert ort_session_options(content).graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_BASIC

    m = (digits.split == "test") & (digits.condition == "daylight")
    x, y = np.asarray(digits.x[m], np.float32), np.asarray(digits.y[m])
    top1 = {name: float(np.mean(np.argmax(load_predictor(q).predict(x), axis=1) == y))
            for name, q in (("onnx", q_onnx), ("tflite", q_tflite))}
    assert top1["tflite"] > 0.95
    assert abs(top1["onnx"] - top1["tflite"]) < 0.02, top1
