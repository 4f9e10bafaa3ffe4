"""Placement on real INT8 models converted in the session, with Vela for imx93."""

from __future__ import annotations

import json

import pytest

from workbench import cli
from workbench.errors import ModelError, TargetError
from workbench.models.tflite_graph import read_tflite
from workbench.placement.analyze import PlacementReport, analyze_placement

TARGETS = ("imx8mp", "imx93", "imx95")


def cpu(report):
    return {o.index for o in report.ops if o.placement == "CPU"}


@pytest.mark.parametrize("target", TARGETS)
def test_clean_model_is_all_npu(clean_tflite, target):
    r = analyze_placement(clean_tflite, target)
    assert (r.cpu_ops, r.npu_segments, len(r.cpu_islands), r.npu_share) == (0, 1, 0, 1.0)
    assert r.label == ("vela" if target == "imx93" else "predicted")


def test_rejected_ops_mid_graph(reject_tflite):
    types = [op.type for op in read_tflite(reject_tflite).ops]
    tile, softmax = types.index("TILE"), types.index("SOFTMAX")
    vx = analyze_placement(reject_tflite, "imx8mp")
    assert cpu(vx) == {tile}
    assert (vx.npu_segments, [s.ops for s in vx.cpu_islands]) == (2, [(tile,)])
    assert vx.ops[tile].reasons[0].constraint == "vx.op_map"
    neutron = analyze_placement(reject_tflite, "imx95")
    assert cpu(neutron) == {softmax, tile}
    assert (neutron.npu_segments, len(neutron.cpu_islands)) == (3, 2)
    assert {r.constraint for r in neutron.ops[softmax].reasons} == {"neutron.op_list"}


def test_float_op_left_in(float_op_tflite):
    types = [op.type for op in read_tflite(float_op_tflite).ops]
    floats = {types.index(t) for t in ("DEQUANTIZE", "FLOOR_MOD", "QUANTIZE")}
    for target in TARGETS:
        r = analyze_placement(float_op_tflite, target)
        assert set(r.non_integer_ops) == floats
        assert any(f.check.endswith("full_integer") for f in r.findings)
        assert (r.npu_segments, len(r.cpu_islands)) == (2, 1)
    assert cpu(analyze_placement(float_op_tflite, "imx8mp")) == {types.index("FLOOR_MOD")}
    neutron = analyze_placement(float_op_tflite, "imx95")
    assert cpu(neutron) == floats
    floor_mod = neutron.ops[types.index("FLOOR_MOD")]
    assert {"neutron.op_list", "neutron.generic.dtype"} <= {r.constraint for r in floor_mod.reasons}
    vela = analyze_placement(float_op_tflite, "imx93")
    assert cpu(vela) == floats
    floor_mod = vela.ops[types.index("FLOOR_MOD")]      # Vela 3.10.0's own semantic reason (scalar input)
    assert floor_mod.reasons[0].constraint.startswith("ethosu.") and "FLOOR_MOD #" in floor_mod.reasons[0].detail


def test_dynamic_batch(dynamic_tflite):
    graph = read_tflite(dynamic_tflite)
    assert graph.input_tensors()[0].shape_signature[0] == -1
    for target in TARGETS:
        r = analyze_placement(dynamic_tflite, target)
        assert any(f.check == "model.dynamic_shapes" for f in r.findings)
    neutron = analyze_placement(dynamic_tflite, "imx95")
    assert neutron.npu_ops == 0
    assert "neutron.generic.static_shape" in {x.constraint for x in neutron.ops[0].reasons}
    vx = analyze_placement(dynamic_tflite, "imx8mp")
    reshape = [o for o in vx.ops if o.type == "RESHAPE"][0]
    assert reshape.placement == "CPU" and reshape.reasons[0].constraint == "vx.const_input"


@pytest.mark.parametrize("fixture", ["clean_tflite", "reject_tflite", "float_op_tflite", "dynamic_tflite"])
def test_imx93_agrees_with_vela(fixture, request):
    path = request.getfixturevalue(fixture)
    r = analyze_placement(path, "imx93")
    vela_cpu = {name for _, name in r.vela.cpu_ops}
    assert {o.name for o in r.ops if o.placement == "CPU"} == vela_cpu
    compiled = read_tflite(r.vela_model)
    assert {op.name for op in compiled.ops if op.type != "ethos-u"} == vela_cpu
    assert sum(1 for s in r.segments if s.placement == "NPU") == sum(
        1 for op in compiled.ops if op.type == "ethos-u")


def test_vela_details(float_op_tflite, tmp_path):
    r = analyze_placement(float_op_tflite, "imx93", vela_output=tmp_path)
    v = r.vela
    assert v.vela_version and "--system-config" in v.command and "Ethos_U65_High_End" in v.command
    assert r.estimated_latency_ms and r.estimated_latency_ms > 0 and "estimate" in r.latency_label
    import csv
    from pathlib import Path
    own = next(csv.DictReader(next(Path(v.output_dir).glob("*_summary_*.csv")).read_text().splitlines()))
    assert r.estimated_latency_ms == pytest.approx(float(own["inference_time"]) * 1000.0, rel=1e-9)
    assert r.latency_label == f"Vela {v.vela_version} estimate" and r.bsp == "lf-6.6.3_1.0.0"
    assert v.sram_used_kib is not None and v.dram_used_kib is not None and v.total_cycles > 0
    conv = r.ops[0]
    assert conv.type == "CONV_2D" and conv.cycles > 0 and conv.macs > 0
    assert sum(o.macs or 0 for o in r.ops) == sum(layer.mac_count for layer in v.layers)
    assert (tmp_path / f"{float_op_tflite.stem}_vela.tflite").is_file()
    again = analyze_placement(float_op_tflite, "imx93")
    assert again.vela.cached and cpu(again) == cpu(r)


def test_imx93_prediction_without_vela(float_op_tflite):
    r = analyze_placement(float_op_tflite, "imx93", use_vela=False)
    assert r.label == "predicted" and r.vela is None
    assert cpu(r) == cpu(analyze_placement(float_op_tflite, "imx93"))


def test_vela_compiled_model_is_read_back(float_op_tflite):
    r = analyze_placement(float_op_tflite, "imx93")
    again = analyze_placement(r.vela_model, "imx93")
    assert again.label == "compiled" and again.npu_segments == r.npu_segments
    with pytest.raises(TargetError, match="already compiled for another NPU"):
        analyze_placement(r.vela_model, "imx8mp")


def test_report_round_trip_html_plot(reject_tflite):
    import matplotlib
    matplotlib.use("Agg")
    for target in ("imx95", "imx93"):
        r = analyze_placement(reject_tflite, target)
        assert PlacementReport.from_dict(json.loads(r.to_json())) == r
        html = r._repr_html_()
        assert "<table" in html and "Ops" in html
        ax = r.plot()
        assert len(ax.patches) == len(r.ops)
    assert "#fde2e2" in analyze_placement(reject_tflite, "imx95")._repr_html_()


def test_float_model_names_the_recipe(float_model_tflite):
    with pytest.raises(TargetError, match=r"float model.*workbench quantize .* --recipe a8w8_pt"):
        analyze_placement(float_model_tflite, "imx8mp")
    with pytest.raises(TargetError, match="--recipe a8w8_pc"):
        analyze_placement(float_model_tflite, "imx93")


def test_not_a_tflite_file(tmp_path):
    bad = tmp_path / "notes.tflite"
    bad.write_text("hello, this is not a flatbuffer")
    with pytest.raises(ModelError, match="not a TFLite flatbuffer"):
        analyze_placement(bad, "imx95")


def test_unknown_target(clean_tflite):
    with pytest.raises(TargetError, match="must be one of 'imx8mp', 'imx93', 'imx95'"):
        analyze_placement(clean_tflite, "imx94")


def test_cli_json(reject_tflite, capsys):
    assert cli.main(["placement", str(reject_tflite), "--target", "imx93", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"target", "ops", "npu_ops", "cpu_ops", "npu_segments", "estimated_latency_ms"} <= set(data)
    assert {"index", "type", "placement", "reasons"} <= set(data["ops"][0])


def test_cli_all_targets_text(reject_tflite, capsys):
    assert cli.main(["placement", str(reject_tflite), "--target", "all"]) == 0
    out = capsys.readouterr().out
    assert out.count("CPU island") >= 3 and "neutron.op_list" in out and "vx.op_map" in out


@pytest.mark.parametrize("argv, phrase", [
    (["--target", "imx93"], "not a TFLite flatbuffer"),
    (["--target", "imx8m"], "must be one of"),
])
def test_cli_errors_name_the_problem(tmp_path, capsys, argv, phrase):
    bad = tmp_path / "model.bin"            # (a .onnx name gets the ONNX-specific message)
    bad.write_bytes(b"\x08\x07garbage-bytes")
    assert cli.main(["placement", str(bad)] + argv) == 2
    err = capsys.readouterr().err
    assert phrase in err and (str(bad) in err or "target" in err)


def test_cli_missing_file(tmp_path, capsys):
    assert cli.main(["placement", str(tmp_path / "nope.tflite"), "--target", "imx95"]) == 2
    err = capsys.readouterr().err
    assert "model file '" in err and "nope.tflite' does not exist. Next: give the path" in err


def test_16bit_activation_model_is_not_predicted_on_neutron(clean_tflite, models_dir):
    """npu-facts.md §3.1: Neutron-S takes UINT8/INT8 tensors (INT32 bias); a 16x8 model stays on the CPU."""
    import numpy as np
    import tensorflow as tf

    from .conftest import _clean_keras
    converter = tf.lite.TFLiteConverter.from_keras_model(_clean_keras())
    rng = np.random.default_rng(0)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([rng.random((1, 16, 16, 3), dtype=np.float32)] for _ in range(4))
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    path = models_dir / "clean_a16w8.tflite"
    path.write_bytes(converter.convert())
    r = analyze_placement(path, "imx95")
    assert r.npu_ops == 0 and r.cpu_ops == len(r.ops) > 0
    conv = next(o for o in r.ops if o.type == "CONV_2D")
    assert {"neutron.generic.dtype", "neutron.types.int8_io"} <= {x.constraint for x in conv.reasons}
    assert analyze_placement(clean_tflite, "imx95").npu_ops == len(read_tflite(clean_tflite).ops)
