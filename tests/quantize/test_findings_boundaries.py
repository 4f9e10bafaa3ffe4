"""The quantized model's own findings at their boundaries (fast: inspections built from fields, and small real
files: an ONNX QDQ convolution written here, the shipped tiny INT8 .tflite and flatbuffer edits of it)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from workbench.quantize.findings import inspection_findings
from workbench.quantize.inspect import ModelInspection, TensorQuant, WeightCheck


def _insp(*, weights=(), tensors=(), float_ops=(), qdq_inside=()):
    return ModelInspection(path="m.tflite", format="tflite", sha256="0" * 64, size_bytes=1, ops=(),
                           tensors=tuple(tensors), inputs=(), outputs=(), op_summary={}, float_ops=tuple(float_ops),
                           qdq_inside=tuple(qdq_inside), boundary_ops=(), weights=tuple(weights))


def _w(n_scales):
    return WeightCheck(op="CONV_2D #0 (conv)", tensor="conv/w", dtype="INT8" if n_scales else "FLOAT32", channels=8,
                       expected_axis=0, n_scales=n_scales, axis=None, symmetric=True)


def _codes(insp):
    return [f.code for f in inspection_findings(insp)]


def test_float_ops_are_a_finding_only_with_integer_ops_per_tensor_or_dynamic_range_too():
    float_op = ["SIN #1 (sin)"]
    # per-tensor INT8 weights (one scale each) and float activations: a dynamic-range model holds integer ops
    assert _codes(_insp(weights=[_w(1)], float_ops=float_op)) == ["quantize.float-op-left"]
    assert _codes(_insp(weights=[_w(8)], float_ops=float_op)) == ["quantize.float-op-left"]
    # float weights, but an activation tensor with a scale: integer ops too
    act = TensorQuant(index=3, name="act", dtype="INT8", shape=(1, 8), scales=(0.1,), zero_points=(0,))
    assert _codes(_insp(weights=[_w(0)], tensors=[act], float_ops=float_op)) == ["quantize.float-op-left"]
    # a float model: nothing quantized, so no op is "left" in float
    const = TensorQuant(index=4, name="w", dtype="INT8", shape=(8,), scales=(0.1,), zero_points=(0,), is_constant=True)
    assert _codes(_insp(weights=[_w(0)], tensors=[const], float_ops=float_op)) == []
    assert _codes(_insp(weights=[_w(0)], qdq_inside=["QUANTIZE #2 (q)"])) == []
    assert _codes(_insp(weights=[_w(1)], qdq_inside=["QUANTIZE #2 (q)"])) == ["quantize.qdq-inside"]


def test_ops_excluded_by_type_or_by_name_are_info_per_tensor_or_not():
    insp = _insp(weights=[_w(1)], float_ops=["SIN #1 (sin)", "COS #2 (m/cos)"])
    for excluded in (("SIN",), ("sin",)):          # by op type, by node name
        found = inspection_findings(insp, excluded=excluded)
        assert [(f.severity, [o["op"] for o in f.evidence["ops"]]) for f in found] == [
            ("error", ["COS"]), ("info", ["SIN"])]


# -- rules read from the model file: small real files (an ONNX QDQ convolution written here, the shipped
# tiny INT8 .tflite and flatbuffer edits of it), inspected by the real inspect_model ------------------------
TINY = Path(__file__).resolve().parents[1] / "board" / "fixtures" / "replay" / "tiny_int8.tflite"


def _qdq_conv(path, levels, *, scales=(0.01,), batch=1):
    """A QDQ ONNX Conv (what ORT's quantizer writes): output channel c of its INT8 weight has largest |q|
    ``levels[c]``; one scale (per tensor) or one per channel (axis 0)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    q = np.zeros((len(levels), 2, 1, 1), np.int8)
    q[:, 0, 0, 0] = levels
    s = np.asarray(scales, np.float32)
    inits = [numpy_helper.from_array(q, "w_q"), numpy_helper.from_array(s, "w_s"),
             numpy_helper.from_array(np.zeros(s.shape, np.int8), "w_z"),
             numpy_helper.from_array(np.float32(0.02), "a_s"), numpy_helper.from_array(np.int8(0), "a_z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "a_s", "a_z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "a_s", "a_z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["w"], **({"axis": 0} if s.size > 1 else {})),
             helper.make_node("Conv", ["xd", "w"], ["c"], name="conv"),
             helper.make_node("QuantizeLinear", ["c", "a_s", "a_z"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "a_s", "a_z"], ["y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (batch, 2, 4, 4))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (batch, len(levels), 4, 4))],
                              initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def _weights(tmp_path, levels, *, target="", **kw):
    from workbench.quantize.inspect import inspect_model
    path = _qdq_conv(tmp_path / f"w{len(list(tmp_path.iterdir()))}.onnx", levels, **kw)
    return {f.code: f for f in inspection_findings(inspect_model(path), target=target)}


def _collapsed(tmp_path, levels, **kw):
    f = _weights(tmp_path, levels, **kw).get("quantize.per-tensor-collapse")
    return None if f is None else f.evidence["layers"][0]


def test_per_tensor_collapse_at_each_limit(tmp_path):
    from workbench.quantize.findings import COLLAPSE_LEVELS, COLLAPSE_SPREAD
    assert (COLLAPSE_LEVELS, COLLAPSE_SPREAD) == (4, 16.0)
    layer = _collapsed(tmp_path, [127, 4])                       # 2 channels: checked; 4 levels: collapsed
    assert layer["collapsed_channels"] == 1 and layer["first_collapsed"] == [1] and layer["channels"] == 2
    assert (layer["levels_min"], layer["levels_max"], layer["zero_channels"]) == (4, 127, 0)
    assert _collapsed(tmp_path, [127, 5]) is None                # 5 levels: not collapsed
    assert _collapsed(tmp_path, [32, 2]) is not None             # the widest at 32 levels, exactly 16x the smallest
    assert _collapsed(tmp_path, [31, 1]) is None                 # the widest under 32 levels: a quiet layer
    assert _collapsed(tmp_path, [32, 3]) is None                 # 10.7x apart: under 16x
    assert _collapsed(tmp_path, [127, 1]) is not None            # a channel of one level is alive, and collapsed
    assert _collapsed(tmp_path, [127, 8, 0]) is None             # a zero channel aside, 127 / 8 < 16
    assert _collapsed(tmp_path, [127, 0]) is None                # a dead (all-zero) channel alone is no collapse
    three = _collapsed(tmp_path, [127, 4, 0])
    assert (three["collapsed_channels"], three["zero_channels"], three["first_collapsed"]) == (2, 1, [1, 2])
    assert _collapsed(tmp_path, [4]) is None                     # one channel: nothing to compare


def test_the_collapse_names_what_the_target_runs_and_the_fix(tmp_path):
    slow = _weights(tmp_path, [127, 4], target="imx8mp")["quantize.per-tensor-collapse"]
    assert "imx8mp takes per-channel weights but runs them slower" in slow.message
    assert slow.next_step.startswith("Quantize with a8w8_pt+cle")
    fast = _weights(tmp_path, [127, 4], target="imx93")["quantize.per-tensor-collapse"]
    assert "imx93 runs per-channel weights (a8w8_pc)" in fast.message
    assert fast.next_step == "Quantize with a8w8_pc (per-channel weights): imx93 runs them on the NPU."
    for target in ("", "imx99"):                                 # no target, or one the tables do not know
        plain = _weights(tmp_path, [127, 4], target=target)["quantize.per-tensor-collapse"]
        assert "use per-channel weights (a8w8_pc), or a8w8_pt+cle where per-tensor is required" in plain.message
        assert plain.next_step.startswith("Quantize with a8w8_pc (per-channel), or a8w8_pt+cle")


def test_per_channel_scale_spread_at_its_ratio(tmp_path):
    from workbench.quantize.findings import SPREAD_RATIO
    assert SPREAD_RATIO == 100.0

    def spread(scales):
        f = _weights(tmp_path, [127] * len(scales), scales=scales).get("quantize.channel-range-spread")
        return None if f is None else f.evidence["layers"][0]
    assert spread([1.0, 0.01]) is not None and spread([1.0, 0.0101]) is None       # 100x (float32: 100.0000x)
    # scales in 1/32 steps (exact in float32): 127 * scale / max is 127, 4, 5 and 1 levels per tensor
    layer = spread([127 / 32, 4 / 32, 5 / 32, 1 / 32])
    assert layer["scale_ratio"] == 127.0 and layer["per_tensor_levels_smallest"] == 1.0
    assert layer["channels_below_4_levels_per_tensor"] == 2                          # 4 levels and 1 level
    assert layer["channels"] == 4 and layer["op"] == "Conv"
    assert spread([1.0, 0.0]) is None                                               # an unscaled channel: not rated


def test_a_weight_of_invalid_granularity_is_neither_collapse_nor_spread(tmp_path):
    from workbench.quantize.inspect import inspect_model
    W = WeightCheck
    insp = inspect_model(_qdq_conv(tmp_path / "w.onnx", [127, 4, 127], scales=(1.0, 0.001, 1.0)))
    (w,) = insp.weights
    odd = replace(insp, weights=(W(op=w.op, tensor=w.tensor, dtype=w.dtype, channels=w.channels, expected_axis=0,
                                   n_scales=2, axis=0, symmetric=True),))
    assert odd.weights[0].granularity == "invalid"
    assert not [f for f in inspection_findings(odd) if f.code.startswith(("quantize.per-tensor", "quantize.channel"))]


def test_qdq_inside_lists_onnx_pairs_as_written_and_tflite_ops_by_reference(tmp_path):
    from workbench.quantize.inspect import inspect_model
    insp = inspect_model(_qdq_conv(tmp_path / "w.onnx", [127, 127]))
    onnx_ops = [f for f in inspection_findings(replace(insp, qdq_inside=("DequantizeLinear (xd) -> Conv #3 (conv)",)))
                if f.code == "quantize.qdq-inside"][0].evidence["ops"]
    assert onnx_ops == ["DequantizeLinear (xd) -> Conv #3 (conv)"]
    tfl = [f for f in inspection_findings(_insp(weights=[_w(1)], qdq_inside=["QUANTIZE #2 (q)"]))
           if f.code == "quantize.qdq-inside"][0].evidence["ops"]
    assert tfl == [{"op": "QUANTIZE", "index": 2, "name": "q"}]


def _tiny(tmp_path, name, *, static=False, absurd=None):
    """The shipped tiny INT8 .tflite (dynamic batch) edited: ``static`` shapes; ``absurd``: the output of that op
    index gets an activation scale of 1e8 (a range of 2.6e10: float32's lowest calibrated in)."""
    from ai_edge_litert.tools import flatbuffer_utils as fu
    model = fu.read_model_from_bytearray(bytearray(TINY.read_bytes()))
    sg = model.subgraphs[0]
    if static:
        for t in sg.tensors:
            t.shapeSignature = None
    if absurd is not None:
        sg.tensors[sg.operators[absurd].outputs[0]].quantization.scale = [1e8]
    path = tmp_path / name
    path.write_bytes(bytes(fu.convert_object_to_bytearray(model)))
    return path


def test_an_absurd_activation_scale_is_read_from_a_tflite_file_only(tmp_path):
    from workbench.quantize.inspect import inspect_model
    absurd = inspect_model(_tiny(tmp_path, "absurd.tflite", absurd=1))
    (f,) = [f for f in inspection_findings(absurd) if f.code == "quantize.absurd-scale"]
    assert (f.evidence["op"], f.evidence["op_index"], f.evidence["scale"]) == ("DEPTHWISE_CONV_2D", 1, 1e8)
    assert not [f for f in inspection_findings(inspect_model(TINY)) if f.code == "quantize.absurd-scale"]
    # the same inspection said to be of an ONNX file: the rule reads TFLite flatbuffers only
    assert not [f for f in inspection_findings(replace(absurd, format="onnx")) if f.code == "quantize.absurd-scale"]


def test_a_dynamic_dimension_is_read_from_the_tflite_signature_and_onnx_dims(tmp_path):
    from workbench.quantize.inspect import inspect_model
    (f,) = [f for f in inspection_findings(inspect_model(TINY)) if f.code == "model.dynamic-batch"]
    (row,) = f.evidence["inputs"]
    assert row["shape"] == [None, 16, 16, 3] and row["dynamic_axes"] == [0]      # the signature, not [1, 16, 16, 3]
    static = inspect_model(_tiny(tmp_path, "static.tflite", static=True))
    assert not [f for f in inspection_findings(static) if f.code == "model.dynamic-batch"]
    for batch, dynamic in ((0, True), ("N", True), (1, False)):  # ONNX: a 0 or a named dimension is dynamic
        insp = inspect_model(_qdq_conv(tmp_path / f"b{batch}.onnx", [127, 127], batch=batch))
        found = [f for f in inspection_findings(insp) if f.code == "model.dynamic-batch"]
        assert bool(found) is dynamic, (batch, found)
        if dynamic:
            assert found[0].evidence["inputs"][0]["shape"] == [None, 2, 4, 4]
