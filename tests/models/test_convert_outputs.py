"""Several outputs through onnx2tf: each ONNX output is matched to the right converted output.

The converter makes the FP32 ``.tflite`` from onnx2tf's SavedModel, whose signature names the outputs
``output_0``, ``output_1``... in the ONNX graph's order.  Two outputs of the same shape and different
values (logits and their ReLU) listed out of graph order would be swapped by a wrong mapping, and the
agreement check would refuse the conversion.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.models.onnx_tiny import nhwc_images


def _three_outputs(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.normal(0, 0.5, (4, 8)).astype(np.float32), "w2"),
             numpy_helper.from_array(np.array([-0.4, 0.1, -0.2, 0.3], np.float32), "b2")]
    nodes = [helper.make_node("Conv", ["image", "w1"], ["conv"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["conv"], ["gap"]),
             helper.make_node("Flatten", ["gap"], ["features"]),
             helper.make_node("Gemm", ["features", "w2", "b2"], ["logits"], transB=1),
             helper.make_node("Relu", ["logits"], ["positive"])]
    outputs = [helper.make_tensor_value_info("positive", TensorProto.FLOAT, [1, 4]),
               helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 8]),
               helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 4])]
    graph = helper.make_graph(nodes, "three", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                                            [1, 3, 16, 16])], outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.mark.slow          # onnx2tf in its tool environment: 12 CPU s
def test_each_output_is_matched_by_its_place_in_the_graph(tmp_path):
    from workbench.models.convert import convert_onnx
    source = _three_outputs(tmp_path / "three.onnx")
    converted = convert_onnx(source, samples=nhwc_images(8, seed=2))
    assert [t.name for t in converted.outputs] == ["positive", "features", "logits"]
    assert [t.tflite_name for t in converted.outputs] == ["output_0", "output_1", "output_2"]
    assert [t.tflite_shape for t in converted.outputs] == [(1, 4), (1, 8), (1, 4)]
    assert all(a.ok for a in converted.agreement), converted.agreement
    by_name = {a.name: a for a in converted.agreement}
    assert by_name["logits"].max_abs_reference > 0 and by_name["positive"].max_abs_error < 1e-4


def test_sum_becomes_adds_with_the_same_values(tmp_path):
    """ONNX ``Sum`` (old residual adds) would become TFLite ADD_N, which has no INT8 kernel: the converter
    feeds onnx2tf ``Add`` chains instead, computing the same values (ONNX Runtime on both files)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from workbench.models.convert import exact_rewrites
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3, 4, 4]) for n in ("a", "b", "c")]
    nodes = [helper.make_node("Sum", ["a", "b", "c"], ["s3"], name="three"),
             helper.make_node("Sum", ["s3", "a"], ["s2"], name="two"),
             helper.make_node("Sum", ["s2"], ["out"], name="one")]
    graph = helper.make_graph(nodes, "sums", vi, [helper.make_tensor_value_info("out", TensorProto.FLOAT,
                                                                                [1, 3, 4, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 7
    onnx.save(model, str(tmp_path / "sums.onnx"))
    assert exact_rewrites(tmp_path / "sums.onnx", tmp_path / "adds.onnx") == ["Sum -> Add: 3 node(s)"]
    rewritten = onnx.load(str(tmp_path / "adds.onnx"))
    onnx.checker.check_model(rewritten)
    assert [n.op_type for n in rewritten.graph.node] == ["Add", "Add", "Add", "Identity"]
    rng = np.random.default_rng(0)
    feed = {n: rng.normal(size=(1, 3, 4, 4)).astype(np.float32) for n in ("a", "b", "c")}
    before = ort.InferenceSession(str(tmp_path / "sums.onnx")).run(None, feed)[0]
    after = ort.InferenceSession(str(tmp_path / "adds.onnx")).run(None, feed)[0]
    np.testing.assert_array_equal(before, after)
    plain = tmp_path / "plain.onnx"
    assert exact_rewrites(tmp_path / "adds.onnx", plain) == [] and plain.read_bytes() == (tmp_path / "adds.onnx").read_bytes()
