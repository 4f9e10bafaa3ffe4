"""imx93 placement by the Vela the BSP ships (3.10.0 in its own tool env), checked against Vela's own output.

The models are small Keras networks built here and quantized with the real TFLite converter
(per-channel weights, as recipe a8w8_pc writes them).  ``ref_like`` repeats the reference model's
architecture: conv / depthwise / conv / max pool / depthwise / conv / AVERAGE_POOL_2D with stride 4
/ flatten / per-channel FULLY_CONNECTED.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from workbench import cli
from workbench.placement.analyze import CPU, NPU, OpPlacement, PlacementReport, _fork_notes, analyze_placement
from workbench.placement.vela import vela_ini, vela_version
from workbench.targets import get_target
from workbench.targets.imx93 import VELA_CONFIG

from .conftest import _convert

BSP = "lf-6.6.3_1.0.0"


def _ref_like():
    import keras
    inp = keras.Input((32, 32, 1), batch_size=1)
    x = keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(inp)
    x = keras.layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    x = keras.layers.Conv2D(32, 1, activation="relu")(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    x = keras.layers.Conv2D(64, 1, activation="relu")(x)
    x = keras.layers.AveragePooling2D(4, strides=4)(x)          # 8x8 -> 2x2: stride 4
    x = keras.layers.Flatten()(x)
    return keras.Model(inp, keras.layers.Dense(10)(x))


def _strided_head():
    """Stride-2 conv, stride-3 average pool, 1x1-conv classifier: every op on the NPU."""
    import keras
    inp = keras.Input((24, 24, 1), batch_size=1)
    x = keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu6")(inp)
    x = keras.layers.AveragePooling2D(3, strides=3)(x)
    x = keras.layers.Conv2D(8, 1)(x)
    return keras.Model(inp, keras.layers.Reshape((4 * 4 * 8,))(x))


def _wide_stride_conv():
    """A CONV_2D with stride 4 (Vela folds it when the width divides) and a per-channel Dense."""
    import keras
    inp = keras.Input((16, 16, 2), batch_size=1)
    x = keras.layers.Conv2D(8, 4, strides=4, padding="valid", activation="relu")(inp)
    x = keras.layers.MaxPooling2D(2, strides=2)(x)
    x = keras.layers.Flatten()(x)
    return keras.Model(inp, keras.layers.Dense(3)(x))


ARCHITECTURES = {"ref_like": (_ref_like, (1, 32, 32, 1)), "strided_head": (_strided_head, (1, 24, 24, 1)),
                 "wide_stride_conv": (_wide_stride_conv, (1, 16, 16, 2))}


@pytest.fixture(scope="module")
def arch_models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bsp-models")
    return {name: _convert(build(), folder / f"{name}_int8.tflite", shape=shape)
            for name, (build, shape) in ARCHITECTURES.items()}


def _own_vela_310(model: Path, out: Path):
    """Vela 3.10.0 run directly (not through the workbench), with the imx93 flags."""
    from workbench import toolenv
    env = toolenv.ensure("vela-3.10.0")
    proc = env.run(["vela", str(model), "--accelerator-config", VELA_CONFIG["accelerator_config"],
                    "--config", str(vela_ini(VELA_CONFIG["config"])),
                    "--system-config", VELA_CONFIG["system_config"], "--memory-mode", VELA_CONFIG["memory_mode"],
                    "--verbose-performance", "--output-dir", str(out)], check=True)
    layers = list(csv.DictReader((out / f"{model.stem}_per-layer.csv").read_text().splitlines()))
    summary = next(csv.DictReader(
        (out / f"{model.stem}_summary_{VELA_CONFIG['system_config']}.csv").read_text().splitlines()))
    refused = set(re.findall(r"^Warning: \S+ '(.*)' is not supported on the NPU", proc.stdout, flags=re.M))
    return {row["Name"] for row in layers}, refused, summary, proc.stdout


def test_bsp_placement_agrees_op_by_op_with_vela_310_own_output(arch_models, tmp_path, capsys):
    model = arch_models["ref_like"]
    assert cli.main(["placement", str(model), "--target", "imx93", "--bsp", BSP, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    npu_names, refused, summary, stdout = _own_vela_310(model, tmp_path / "own")
    assert (data["bsp"], data["compiler"], data["compiler_version"]) == (BSP, "vela", "3.10.0")
    for op in data["ops"]:                                   # op by op, against Vela's per-layer CSV
        assert op["placement"] == (NPU if op["name"] in npu_names else CPU), op
    cpu_ops = {op["name"] for op in data["ops"] if op["placement"] == CPU}
    assert cpu_ops == refused                                # and against Vela's own warnings
    assert {op["type"] for op in data["ops"] if op["placement"] == CPU} == {"AVERAGE_POOL_2D", "FULLY_CONNECTED"}
    assert (data["npu_ops"], len(data["ops"])) == (7, 9)
    assert re.search(r"^CPU operators = 2 ", stdout, flags=re.M)
    # the latency shown is Vela's own summary CSV inference_time, not the rounded stdout line
    assert data["estimated_latency_ms"] == pytest.approx(float(summary["inference_time"]) * 1000.0, rel=1e-9)
    assert data["latency_label"] == "Vela 3.10.0 estimate"
    # the newest Vela here places both on the NPU: exposed as data for findings
    report = PlacementReport.from_dict(data)
    newest = report.disagreements_with_newest()
    assert {d.type for d in newest} == {"AVERAGE_POOL_2D", "FULLY_CONNECTED"}
    assert all(d.other_compiler == f"vela {vela_version()}" and d.reason for d in newest)
    assert "per-axis" in next(d.reason for d in newest if d.type == "FULLY_CONNECTED").lower()


def test_vela_versions_show_the_per_op_disagreement(arch_models, capsys):
    model = arch_models["ref_like"]
    newest = vela_version()
    assert cli.main(["placement", str(model), "--target", "imx93", "--vela-versions", f"3.10.0,{newest}"]) == 0
    out = capsys.readouterr().out
    assert "vela 3.10.0 (BSP): 7/9 NPU" in out and f"vela {newest}: 9/9 NPU" in out
    starred = [line for line in out.splitlines() if line.rstrip().endswith("*")]
    assert [line.split()[1] for line in starred] == ["AVERAGE_POOL_2D", "FULLY_CONNECTED"]
    report = analyze_placement(model, "imx93", vela_versions=())
    assert report.compiler_runs == () and report.compiler_disagreements == ()


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_imx93_table_agrees_with_vela_310_on_real_architectures(arch_models, name):
    """The table claims to mirror Vela 3.10.0: its prediction must match 3.10.0 compiling the model."""
    model = arch_models[name]
    vela = analyze_placement(model, "imx93", bsp=BSP, vela_versions=())
    table = analyze_placement(model, "imx93", bsp=BSP, use_vela=False)
    assert vela.compiler_version == "3.10.0" and table.compiler == "rule table"
    assert [o.placement for o in table.ops] == [o.placement for o in vela.ops], (
        [(o.type, o.placement) for o in table.ops], [(o.type, o.placement) for o in vela.ops])
    reason_ids = {o.index: {r.constraint for r in o.reasons} for o in vela.ops if o.placement == CPU}
    for o in table.ops:
        if o.placement == CPU:
            assert {r.constraint for r in o.reasons} & reason_ids[o.index], (o, reason_ids[o.index])


def test_fork_notes_name_the_ops_nxps_vela_treats_differently():
    tgt = get_target("imx93", bsp=BSP)
    ops = (OpPlacement(0, "CONV_2D", "c", NPU), OpPlacement(1, "LOG", "l", CPU),
           OpPlacement(2, "SPACE_TO_BATCH_ND", "s", CPU), OpPlacement(3, "TILE", "t", CPU))
    noted = _fork_notes(ops, tgt, "3.10.0")
    assert [bool(o.notes) for o in noted] == [False, True, True, False]
    assert "LUT" in noted[1].notes[0] and "dilated convolution" in noted[2].notes[0]
    assert _fork_notes(ops, get_target("imx93", bsp="lf-6.1.55_2.2.0"), "3.9.0") == ops
