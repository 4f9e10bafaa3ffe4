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
    assert spread([100 / 128, 1 / 128]) is not None              # exactly 100x (exact in float32)
    assert spread([99 / 128, 1 / 128]) is None                    # 99x
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
            assert found[0].evidence["inputs"][0]["dynamic_axes"] == [0]


def _per_tensor_tflite(tmp_path, levels, *, empty_buffer_of=None):
    """The tiny .tflite with its CONV_2D weight (8 output channels) re-quantized per tensor: output channel c has
    largest |q| ``levels[c]``; ``empty_buffer_of``: {op index: None or no bytes} for weights whose bytes were stripped."""
    import numpy as np
    from ai_edge_litert.tools import flatbuffer_utils as fu
    model = fu.read_model_from_bytearray(bytearray(TINY.read_bytes()))
    sg = model.subgraphs[0]
    w = sg.tensors[sg.operators[0].inputs[1]]
    q = np.zeros(tuple(w.shape), np.int8)
    q[:, 0, 0, 0] = levels
    model.buffers[w.buffer].data = q.view(np.uint8).ravel()
    w.quantization.scale, w.quantization.zeroPoint, w.quantization.quantizedDimension = [0.01], [0], 0
    for op, data in (empty_buffer_of or {}).items():
        model.buffers[sg.tensors[sg.operators[op].inputs[1]].buffer].data = data
    path = tmp_path / f"pt{len(list(tmp_path.iterdir()))}.tflite"
    path.write_bytes(bytes(fu.convert_object_to_bytearray(model)))
    return path


def test_per_tensor_collapse_reads_the_weight_bytes_of_a_tflite_file(tmp_path):
    import numpy as np

    from workbench.quantize.inspect import inspect_model
    levels = [127, 4, 127, 127, 127, 127, 127, 127]

    def collapse(path):
        insp = inspect_model(path)
        assert [w.n_scales for w in insp.weights if w.op.startswith("CONV_2D")] == [1]
        f = {f.code: f for f in inspection_findings(insp)}.get("quantize.per-tensor-collapse")
        return None if f is None else [(c["op"], c["index"], c["first_collapsed"]) for c in f.evidence["layers"]]
    assert collapse(_per_tensor_tflite(tmp_path, levels)) == [("CONV_2D", 0, [1])]
    assert collapse(_per_tensor_tflite(tmp_path, [127] * 8)) is None
    # the depthwise and dense weights' bytes stripped (no buffer data / an empty one): those weights are left
    # unchecked, the convolution's is still read
    stripped = {1: None, 3: np.zeros(0, np.uint8)}
    assert collapse(_per_tensor_tflite(tmp_path, levels, empty_buffer_of=stripped)) == [("CONV_2D", 0, [1])]


def _quantized_onnx(tmp_path):
    """The real quantize stage (ONNX backend, float fallback allowed) on a small ONNX CNN with a Sin."""
    from tests.traps.zoo import _nchw_calibration, _onnx_model
    from workbench.quantize.engine import quantize
    from workbench.quantize.recipe import get_recipe
    _onnx_model(tmp_path / "sin.onnx", middle="Sin")
    return quantize(tmp_path / "sin.onnx", get_recipe("a8w8_pc", backend="onnx", allow_float_fallback=True),
                    _nchw_calibration(), output=tmp_path / "q")


def test_a_quantized_models_float_ops_by_its_file_its_recipe_or_its_record(tmp_path):
    from workbench.quantize.findings import quantized_findings
    q = _quantized_onnx(tmp_path)
    (left,) = [f for f in quantized_findings(q) if f.code == "quantize.float-op-left"]
    assert left.severity == "error" and [o["op"] for o in left.evidence["ops"]] == ["Sin"]
    assert "the file is gone" not in left.message
    # the recipe excluded the Sin (kept in float on purpose): info, not an error
    on_purpose = replace(q, recipe=replace(q.recipe, exclude=("Sin",)))
    (kept,) = [f for f in quantized_findings(on_purpose) if f.code == "quantize.float-op-left"]
    assert kept.severity == "info" and kept.evidence["excluded"] == ["Sin"]
    # the file is gone: the result's own record of its float ops is read
    gone = replace(q, path=str(tmp_path / "gone.onnx"))
    (recorded,) = [f for f in quantized_findings(gone) if f.code == "quantize.float-op-left"]
    assert "(recorded; the file is gone): Sin #" in recorded.message
    assert len(recorded.evidence["ops"]) == len(q.float_ops) and recorded.evidence["ops"][0]["op"] == "Sin"
    assert f"{len(q.float_ops)} op(s) compute in float" in recorded.message
    # the deployed-model check needs both files: a manifest without its model says nothing (and does not fail)
    from workbench.quantize.findings import deployed_findings
    assert deployed_findings(tmp_path / "gone.onnx", q.manifest_path) == []
    assert deployed_findings(q.path, tmp_path / "no-manifest.json") == []


def _source_onnx(path, *, depthwise=1, pool="GlobalAveragePool"):
    """The source an INT8 file stands for, as ONNX: Conv, ``depthwise`` depthwise Convs, a pool, Flatten?, Gemm."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "w0"),
             numpy_helper.from_array(np.zeros((8, 1, 3, 3), np.float32), "dw"),
             numpy_helper.from_array(np.zeros((8, 4), np.float32), "fc")]
    nodes, last = [helper.make_node("Conv", ["x", "w0"], ["c0"])], "c0"
    for i in range(depthwise):
        nodes.append(helper.make_node("Conv", [last, "dw"], [f"d{i}"], group=8))
        last = f"d{i}"
    nodes += [helper.make_node(pool, [last], ["p"]), helper.make_node("Gemm", ["p", "fc"], ["y"])]
    graph = helper.make_graph(nodes, "src", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 16, 16))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 4))], initializer=inits)
    onnx.save(helper.make_model(graph), str(path))
    return path


def _swap_mean(tmp_path, op):
    """The tiny .tflite with its MEAN (op #2) turned into ``op`` ("RESHAPE": a layout op the conversion adds)."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu
    model = fu.read_model_from_bytearray(bytearray(TINY.read_bytes()))
    code = fb.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = getattr(fb.BuiltinOperator, op)
    code.version = 1
    model.operatorCodes.append(code)
    mean = model.subgraphs[0].operators[2]
    mean.opcodeIndex, mean.builtinOptionsType, mean.builtinOptions = len(model.operatorCodes) - 1, 0, None
    path = tmp_path / f"{op.lower()}.tflite"
    path.write_bytes(bytes(fu.convert_object_to_bytearray(model)))
    return path


def test_structure_findings_name_added_layout_ops_and_lost_depthwise(tmp_path):
    from workbench.models.structure import structural_diff
    from workbench.quantize.findings import structure_findings

    def codes(source, int8):
        return {f.code: f for f in structure_findings(structural_diff(source, "onnx", int8), "m.tflite")}
    plain = _source_onnx(tmp_path / "plain.onnx")
    assert codes(plain, TINY) == {}                               # MEAN, 1 depthwise: as in the source
    added = codes(plain, _swap_mean(tmp_path, "RESHAPE"))["convert.added-ops"]
    assert added.severity == "info" and added.evidence["added"] == {"RESHAPE": 1}
    assert added.message == "m.tflite: the conversion added RESHAPE x1 that the source model does not have"
    assert "convert.added-ops" not in codes(plain, _swap_mean(tmp_path, "SIN"))    # no layout op: placement's
    lost = codes(_source_onnx(tmp_path / "two.onnx", depthwise=2), TINY)["convert.depthwise-lost"]
    assert lost.evidence["depthwise"] == {"source": 2, "int8": 1}
    assert "1 of 2 depthwise convolution(s) of the source are not DEPTHWISE_CONV_2D" in lost.message
    # nothing compared (a source the converter read directly), no structure, or one without depthwise counts
    diff = structural_diff(plain, "onnx", _swap_mean(tmp_path, "RESHAPE"))
    assert structure_findings({**diff, "compared": False}, "m.tflite") == []
    assert structure_findings(None, "m.tflite") == []
    assert [f.code for f in structure_findings({k: v for k, v in diff.items() if k != "depthwise"}, "m.tflite")] == [
        "convert.added-ops"]


def _manifest(tmp_path, ranges):
    import json
    path = tmp_path / f"manifest{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps({"ranges": ranges}))
    return path


def test_range_outliers_are_reported_for_minmax_calibration_only(tmp_path):
    """The manifest's record as the AI Edge backend writes it: range_outliers of calibrated min/max ranges against
    the data's 0.1..99.9th percentiles (data with one far sample per tensor)."""
    import numpy as np

    from workbench.quantize.findings import range_findings
    from workbench.quantize.ranges import OUTLIER_PERCENTILE, range_outliers
    rng = np.random.default_rng(0)
    lo_p, hi_p = 100.0 - OUTLIER_PERCENTILE, OUTLIER_PERCENTILE        # the keys ranges.py computes them under

    def record(n_tensors, calibrator="minmax"):
        data = {f"t{i}": np.append(rng.uniform(-1, 1, 5000), 50.0 + i) for i in range(n_tensors)}
        ranges = {n: (float(v.min()), float(v.max())) for n, v in data.items()}
        pct = {n: {lo_p: float(np.percentile(v, lo_p)), hi_p: float(np.percentile(v, hi_p))} for n, v in data.items()}
        outliers = range_outliers(ranges, pct)
        assert len(outliers) == n_tensors
        return {"calibrator": calibrator, "percentile": None, "tensors": n_tensors, "changed": 0,
                "outliers": outliers[:12], "n_outliers": len(outliers)}
    (four,) = range_findings(_manifest(tmp_path, record(4)), "m.tflite")
    assert four.evidence["n_outliers"] == 4 and "more" not in four.message
    assert "4 tensor(s) calibrated far wider" in four.message
    (five,) = range_findings(_manifest(tmp_path, record(5)), "m.tflite")
    assert five.message.endswith(" and 1 more")
    assert range_findings(_manifest(tmp_path, record(5, "percentile")), "m.tflite") == []
    assert range_findings(_manifest(tmp_path, {**record(0), "outliers": []}), "m.tflite") == []
    assert range_findings(_manifest(tmp_path, None), "m.tflite") == []            # a backend that records none
    assert range_findings(tmp_path / "missing.json", "m.tflite") == []


def test_a_depthwise_channel_ten_times_the_median_is_named(tmp_path):
    import numpy as np

    from workbench.quantize.aeq_backend import DEPTHWISE_SPREAD, depthwise_spread
    from workbench.quantize.findings import depthwise_spread_findings
    assert DEPTHWISE_SPREAD == 10.0
    rows = depthwise_spread({"dw1": np.array([1.0, 1.0, 1.0, 10.0]), "dw2": np.array([1.0, 1.0, 9.99])})
    (f,) = depthwise_spread_findings(_manifest(tmp_path, {"depthwise_spread": rows}), "m.tflite")
    assert [(r["tensor"], r["channel"]) for r in f.evidence["tensors"]] == [("dw1", 3)]
    assert "1 depthwise output(s) with one channel far wider" in f.message
    assert depthwise_spread_findings(_manifest(tmp_path, {"depthwise_spread": []}), "m.tflite") == []
    assert depthwise_spread_findings(_manifest(tmp_path, None), "m.tflite") == []
    assert depthwise_spread_findings(tmp_path / "missing.json", "m.tflite") == []


def test_a_weight_the_file_cannot_give_as_int8_levels_is_left_unchecked(tmp_path):
    """INT4 weight bytes (not read as INT8), or a weight whose output-channel axis the array does not have (an
    inspection of another version of the file): that weight is unchecked, the others are read, nothing fails."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu

    from workbench.quantize.findings import _weight_arrays
    from workbench.quantize.inspect import inspect_model
    model = fu.read_model_from_bytearray(bytearray(TINY.read_bytes()))
    sg = model.subgraphs[0]
    sg.tensors[sg.operators[0].inputs[1]].type = fb.TensorType.INT4
    path = tmp_path / "int4.tflite"
    path.write_bytes(bytes(fu.convert_object_to_bytearray(model)))
    insp = inspect_model(path)
    assert [w.dtype for w in insp.weights] == ["INT4", "INT8", "INT8"]
    assert len(_weight_arrays(insp)) == 2                          # the depthwise and dense weights
    assert [f.code for f in inspection_findings(insp)] == ["model.dynamic-batch"]
    levels = [127, 4, 127, 127, 127, 127, 127, 127]
    collapsing = inspect_model(_per_tensor_tflite(tmp_path, levels))
    conv = collapsing.weights[0]
    assert conv.expected_axis == 0 and "quantize.per-tensor-collapse" in _codes(collapsing)
    other = replace(collapsing, weights=(replace(conv, expected_axis=4),) + collapsing.weights[1:])
    assert "quantize.per-tensor-collapse" not in _codes(other)


def test_clipped_ranges_are_reported_for_minmax_calibration_only(tmp_path):
    """The manifest's ``ranges.clipped`` as ranges.py computes it: calibrated ranges (half the data's span: the
    moving average) against the data's 0.1..99.9th percentiles, 4 and 5 tensors."""
    import numpy as np

    from workbench.quantize.findings import clipped_range_findings
    from workbench.quantize.ranges import OUTLIER_PERCENTILE, range_clipped
    rng = np.random.default_rng(1)
    lo_p, hi_p = 100.0 - OUTLIER_PERCENTILE, OUTLIER_PERCENTILE

    def record(n_tensors, calibrator="minmax"):
        data = {f"t{i}": rng.uniform(-1, 1, 5000) for i in range(n_tensors)}
        ranges = {n: (float(v.min()) / 2, float(v.max()) / 2) for n, v in data.items()}
        pct = {n: {lo_p: float(np.percentile(v, lo_p)), hi_p: float(np.percentile(v, hi_p))} for n, v in data.items()}
        clipped = range_clipped(ranges, pct)
        assert len(clipped) == n_tensors
        return {"calibrator": calibrator, "clipped": clipped[:12], "n_clipped": len(clipped)}
    (four,) = clipped_range_findings(_manifest(tmp_path, record(4)), "m.tflite")
    assert four.evidence["n_clipped"] == 4 and " more" not in four.message
    assert "4 tensor(s) calibrated narrower than the data's" in four.message and "(50%)" in four.message
    (five,) = clipped_range_findings(_manifest(tmp_path, record(5)), "m.tflite")
    assert " and 1 more; --calibrator percentile" in five.message
    assert clipped_range_findings(_manifest(tmp_path, record(5, "percentile")), "m.tflite") == []
    assert clipped_range_findings(_manifest(tmp_path, {**record(0), "clipped": []}), "m.tflite") == []
    assert clipped_range_findings(_manifest(tmp_path, None), "m.tflite") == []
    assert clipped_range_findings(tmp_path / "missing.json", "m.tflite") == []
