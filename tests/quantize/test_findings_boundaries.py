"""The quantized model's own findings at their boundaries (fast: inspections built from fields, no file)."""

from __future__ import annotations

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
