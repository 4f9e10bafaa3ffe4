"""The structural diff: source ops in TFLite's names, what the conversion added, and its findings."""

from __future__ import annotations

import numpy as np


def _onnx_with_convs(path):
    """Conv (plain), Conv group == channels (depthwise, weights as a Constant node as Paddle2ONNX writes
    them), Conv group 2 (grouped), BatchNormalization (folded), Transpose."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(size=(8, 3, 3, 3)).astype(np.float32), "w0"),
             numpy_helper.from_array(rng.normal(size=(8, 4, 1, 1)).astype(np.float32), "w2")]
    dw = helper.make_node("Constant", [], ["w1"], value=numpy_helper.from_array(
        rng.normal(size=(8, 1, 3, 3)).astype(np.float32), "w1v"))
    nodes = [dw,
             helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1], name="Conv@0"),
             helper.make_node("Conv", ["a", "w1"], ["b"], group=8, pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["b", "w2"], ["c"], group=2),
             helper.make_node("Transpose", ["c"], ["y"], perm=[0, 2, 3, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def test_onnx_source_is_counted_in_tflite_names(tmp_path):
    from workbench.models.structure import _onnx_histogram
    hist, counted = _onnx_histogram(_onnx_with_convs(tmp_path / "m.onnx"))
    assert hist == {"CONV_2D": 2, "DEPTHWISE_CONV_2D": 1, "grouped CONV_2D": 1, "TRANSPOSE": 1}, hist
    assert "DEPTHWISE_CONV_2D" in counted


def test_structure_findings():
    from workbench.models.structure import op_origin, summary_lines
    from workbench.quantize.findings import structure_findings
    structure = {"compared": True, "source_total": 10, "int8_total": 13,
                 "source_ops": {"CONV_2D": 4, "DEPTHWISE_CONV_2D": 3, "TRANSPOSE": 1},
                 "int8_ops": {"CONV_2D": 6, "DEPTHWISE_CONV_2D": 1, "TRANSPOSE": 3, "HARD_SWISH": 1},
                 "added": {"CONV_2D": 2, "TRANSPOSE": 2, "HARD_SWISH": 1}, "removed": {"DEPTHWISE_CONV_2D": 2},
                 "transposes_added": 2, "depthwise": {"source": 3, "int8": 1},
                 "grouped_conv": {"source": 0, "int8": 2}}
    found = {f.code: f for f in structure_findings(structure, "m.tflite")}
    assert found["convert.added-ops"].severity == "info" and "TRANSPOSE x2" in found["convert.added-ops"].message
    assert "HARD_SWISH" not in found["convert.added-ops"].message        # a fused op, not data movement
    assert found["convert.depthwise-lost"].severity == "warning" and "2 of 3" in found["convert.depthwise-lost"].message
    assert op_origin(structure, "HARD_SWISH") == "converter" and op_origin(structure, "TRANSPOSE") == "converter?"
    assert op_origin(structure, "DEPTHWISE_CONV_2D") == "model" and op_origin(None, "TRANSPOSE") == "model"
    text = "\n".join(summary_lines(structure))
    assert "depthwise kept 1/3" in text and "TRANSPOSE added 2" in text
    clean = dict(structure, added={}, depthwise={"source": 3, "int8": 3})
    assert structure_findings(clean, "m.tflite") == []
    assert structure_findings({"compared": False}, "m.tflite") == []
