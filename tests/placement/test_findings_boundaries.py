"""The placement stage's findings at each rule's boundary (fast: no TensorFlow, no Vela run).

The reports are the real stage's (:func:`analyze_placement` with the target's rule table) on small INT8 files
made from the shipped ``tiny_int8.tflite`` (CONV_2D, DEPTHWISE_CONV_2D, MEAN, FULLY_CONNECTED) by editing its
flatbuffer: static shapes, its MEAN swapped for a SIN (a CPU op between NPU ops on imx95), or INT16 feature maps
after the first two ops.  Where an op came from is read from a quantize manifest whose structure is the real
:func:`structural_diff` against a small ONNX source.  A compiler crash is the record :func:`_after_crash` writes.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from workbench.findings import entry
from workbench.placement.analyze import analyze_placement
from workbench.placement.findings import findings
from workbench.placement.ops import CompilerDisagreement

TINY = Path(__file__).resolve().parents[1] / "board" / "fixtures" / "replay" / "tiny_int8.tflite"
NPU_OPS = ("CONV_2D #0", "DEPTHWISE_CONV_2D #1")


def _edit(out: Path, *, sin: bool = False, int16_after: int = 0) -> Path:
    """``tiny_int8.tflite`` with static shapes; ``sin``: op #2 (MEAN) becomes a SIN of its first input;
    ``int16_after``: the outputs of the first N ops become INT16 (the scales stay: quantized INT16)."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu
    model = fu.read_model_from_bytearray(bytearray(TINY.read_bytes()))
    sg = model.subgraphs[0]
    for t in sg.tensors:
        t.shapeSignature = None
    if sin:
        code = fb.OperatorCodeT()
        code.builtinCode = code.deprecatedBuiltinCode = fb.BuiltinOperator.SIN
        code.version = 1
        model.operatorCodes.append(code)
        op = sg.operators[2]
        op.opcodeIndex, op.inputs = len(model.operatorCodes) - 1, op.inputs[:1]
        op.builtinOptionsType, op.builtinOptions = 0, None
    for op in sg.operators[:int16_after]:
        for t in op.outputs:
            sg.tensors[t].type = fb.TensorType.INT16
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(bytes(fu.convert_object_to_bytearray(model)))
    return out


def _onnx_source(path: Path, *, middle: str | None = None) -> Path:
    """The source the INT8 file stands for, as ONNX: Conv, depthwise Conv, (``middle``,) Flatten, Gemm."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = [numpy_helper.from_array(np.zeros(s, np.float32), n) for n, s in
         (("w0", (8, 3, 3, 3)), ("w1", (8, 1, 3, 3)), ("fc", (8, 4)))]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"]),
             helper.make_node("Conv", ["a", "w1"], ["b"], group=8)]
    last = "b"
    if middle:
        nodes.append(helper.make_node(middle, ["b"], ["m"]))
        last = "m"
    nodes += [helper.make_node("GlobalMaxPool", [last], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
              helper.make_node("Gemm", ["f", "fc"], ["y"])]
    graph = helper.make_graph(nodes, "src", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 16, 16))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 4))], initializer=w)
    onnx.save(helper.make_model(graph), str(path))
    return path


def _with_manifest(folder: Path, source: Path | None, *, file: str = "model.tflite", structure: bool = True) -> Path:
    """A copy of the SIN model in ``folder`` with a quantize manifest beside it (its ``structure`` the real
    structural diff against ``source``; ``file``: the model the manifest is about)."""
    from workbench.models.structure import structural_diff
    from workbench.quantize.manifest import MANIFEST_NAME, SCHEMA, write_manifest
    model = _edit(folder / "model.tflite", sin=True)
    manifest: dict = {"schema": SCHEMA, "file": file}
    if structure and source is not None:
        manifest["structure"] = structural_diff(source, "onnx", model)
    write_manifest(folder / MANIFEST_NAME, manifest)
    return model


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("placement-findings")
    plain = _onnx_source(root / "src.onnx")
    with_sin = _onnx_source(root / "src-sin.onnx", middle="Sin")
    return {"sin": _edit(root / "sin.tflite", sin=True), "int16": _edit(root / "int16.tflite", int16_after=2),
            "int8": _edit(root / "int8.tflite"),
            "added": _with_manifest(root / "added", plain), "in-source": _with_manifest(root / "in-source", with_sin),
            "other-file": _with_manifest(root / "other-file", plain, file="another.tflite"),
            "no-structure": _with_manifest(root / "no-structure", plain, structure=False)}


def _place(model: Path, target: str):
    return analyze_placement(model, target, use_vela=False, use_converter=False)


def _by_code(found, code):
    return [f for f in found if f.code == code]


def test_a_cpu_op_between_npu_segments_is_an_island_of_the_models_own_ops(files):
    report = _place(files["sin"], "imx95")
    assert [str(o.placement) for o in report.ops] == ["NPU", "NPU", "CPU", "NPU"]
    (f,) = _by_code(findings(report), "placement.cpu-island")
    assert (f.evidence["first"], f.evidence["last"], f.evidence["origin"]) == (2, 2, "model")
    assert [(o["index"], o["op"], o["origin"]) for o in f.evidence["ops"]] == [(2, "SIN", "model")]
    assert "SIN #2 run(s) on the CPU between NPU segments (ops 2-2)" in f.message
    assert "conversion added" not in f.message and f.next_step == entry("placement.cpu-island").action
    assert not _by_code(findings(report), "convert.added-ops")   # no manifest: every op is the model's
    # a CPU segment at the end is no island: imx93's table puts the per-axis FULLY_CONNECTED on the CPU too
    imx93 = _place(files["sin"], "imx93")
    assert [str(o.placement) for o in imx93.ops] == ["NPU", "NPU", "CPU", "CPU"]
    assert not _by_code(findings(imx93), "placement.cpu-island")
    assert not _by_code(findings(_place(files["int8"], "imx95")), "placement.cpu-island")


def test_the_findings_name_the_target_asked_for_else_the_reports_own(files):
    report = _place(files["sin"], "imx95")
    assert {f.target for f in findings(report)} == {"imx95"}
    assert {f.target for f in findings(report, target="imx93")} == {"imx93"}


def test_an_island_of_ops_the_conversion_added_says_so_and_what_the_target_rules(files):
    report = _place(files["added"], "imx95")
    found = findings(report)
    (island,) = _by_code(found, "placement.cpu-island")
    assert island.evidence["origin"] == "converter" and island.evidence["ops"][0]["origin"] == "converter"
    assert "the conversion added them (the source model has 0 SIN, the INT8 file more)" in island.message
    assert island.next_step == entry("convert.added-ops").action
    (added,) = _by_code(found, "convert.added-ops")
    (op,) = added.evidence["ops"]
    assert (op["index"], op["op"], op["origin"]) == (2, "SIN", "converter")
    assert [r["rule"] for r in op["rules"]] == [r.constraint for r in report.ops[2].reasons]
    assert all(r["source"] for r in op["rules"])                 # each rule's source in the imx95 table
    assert added.message.endswith(": " + "; ".join(f"SIN by {r['rule']} ({r['source']})" for r in op["rules"]))
    assert added.evidence["source_ops"] == {"SIN": 0} and added.evidence["int8_ops"] == {"SIN": 1}
    assert "1 op(s) of a type the conversion added run on the CPU (SIN #2)" in added.message
    # an unknown target: no table to name the rules' sources, the rules still named
    (unknown,) = _by_code(findings(report, target="imx99"), "convert.added-ops")
    assert [r["source"] for r in unknown.evidence["ops"][0]["rules"]] == [""] * len(op["rules"])
    assert unknown.message.endswith(": " + "; ".join(f"SIN by {r['rule']}" for r in op["rules"]))


def test_only_cpu_ops_the_conversion_added_are_named_not_the_models_own_cpu_ops(files):
    # imx93's table: the SIN (added) and the per-axis FULLY_CONNECTED (the model's Gemm) both on the CPU
    report = _place(files["added"], "imx93")
    assert [str(o.placement) for o in report.ops] == ["NPU", "NPU", "CPU", "CPU"]
    (added,) = _by_code(findings(report), "convert.added-ops")
    assert [o["op"] for o in added.evidence["ops"]] == ["SIN"]
    # on imx8mp the added SIN runs on the NPU: nothing to say
    assert not _by_code(findings(_place(files["added"], "imx8mp")), "convert.added-ops")


@pytest.mark.parametrize("case", ["in-source", "other-file", "no-structure"])
def test_a_manifest_that_does_not_name_the_op_as_added_leaves_it_the_models(files, case):
    """The source has a Sin; the manifest is another file's; the manifest has no structure (an older quantize)."""
    found = findings(_place(files[case], "imx95"))
    (island,) = _by_code(found, "placement.cpu-island")
    assert island.evidence["origin"] == "model" and "conversion added" not in island.message
    assert not _by_code(found, "convert.added-ops")


def test_the_per_channel_check_of_the_target_table_is_a_finding_on_imx8mp_only(files):
    (f,) = _by_code(findings(_place(files["int8"], "imx8mp")), "placement.per-channel-slow")
    assert f.evidence["check"] == "vx.model.per_channel" and "per-channel" in f.message
    assert not _by_code(findings(_place(files["int8"], "imx95")), "placement.per-channel-slow")


def test_int16_activations_count_only_the_int16_ops_on_the_cpu(files):
    # imx8mp: CONV_2D and DEPTHWISE_CONV_2D (INT16 outputs) on the CPU; MEAN (an INT16 input) on the NPU
    report = _place(files["int16"], "imx8mp")
    assert [str(o.placement) for o in report.ops] == ["CPU", "CPU", "NPU", "NPU"]
    (f,) = _by_code(findings(report), "placement.int16-activations")
    assert f.evidence["int16_ops"] == 3 and [(o["index"], o["op"]) for o in f.evidence["ops"]] == [
        (0, "CONV_2D"), (1, "DEPTHWISE_CONV_2D")]
    assert "2 of 3 op(s) with INT16 activations fall back to the CPU: CONV_2D #0, DEPTHWISE_CONV_2D #1" in f.message
    assert all(o["reasons"] for o in f.evidence["ops"])
    # imx93's table runs INT16 on the NPU: no fallback, no finding; an INT8 file has no INT16 op
    assert [str(o.placement) for o in _place(files["int16"], "imx93").ops][:3] == ["NPU", "NPU", "NPU"]
    assert not _by_code(findings(_place(files["int16"], "imx93")), "placement.int16-activations")
    assert not _by_code(findings(_place(files["int8"], "imx8mp")), "placement.int16-activations")


def test_int16_activations_are_read_from_the_reports_tflite_file_only(files, tmp_path):
    report = _place(files["int16"], "imx8mp")
    renamed = shutil.copy(files["int16"], tmp_path / "int16.bin")   # the same bytes, not a .tflite
    assert not _by_code(findings(dataclasses.replace(report, model=str(renamed))), "placement.int16-activations")
    gone = dataclasses.replace(report, model=str(tmp_path / "gone.tflite"))
    assert not _by_code(findings(gone), "placement.int16-activations")
    (tmp_path / "broken.tflite").write_bytes(b"not a flatbuffer")
    broken = dataclasses.replace(report, model=str(tmp_path / "broken.tflite"))
    assert not _by_code(findings(broken), "placement.int16-activations")


def _crash(report, *, other: dict | None = None):
    """The record the stage writes when the BSP's Vela crashed: here the installed Vela's own version (so no
    other Vela runs), ``other`` what a second, working Vela adds."""
    from workbench.models.tflite_graph import read_tflite
    from workbench.placement.compilers import _after_crash
    from workbench.placement.vela import VelaCrash, vela_version
    from workbench.targets import get_target
    tail = "Traceback (most recent call last):\n  File \"vela.py\", line 1, in rewrite_graph\nAssertionError"
    exc = VelaCrash("failed", version=vela_version(), returncode=1, tail=tail)
    placements, _, crash = _after_crash(read_tflite(report.model), get_target("imx93"), exc, True)
    return dataclasses.replace(report, ops=placements, compiler_crash={**crash, **(other or {})})


def test_a_compiler_crash_names_the_other_vela_when_one_compiles_it(files):
    report = _place(files["int8"], "imx93")
    assert not _by_code(findings(report), "placement.compiler-crash")
    (alone,) = _by_code(findings(_crash(report)), "placement.compiler-crash")
    assert alone.message.endswith("every op runs on the CPU. no other Vela is installed")
    assert "AssertionError" in alone.evidence["reason"] and alone.evidence["other_version"] is None
    assert alone.next_step.startswith("Change the model where the compiler fails")
    (other,) = _by_code(findings(_crash(report, other={"other_version": "5.2.0", "other_npu_ops": 3})),
                        "placement.compiler-crash")
    assert other.message.endswith("Vela 5.2.0 (installed) compiles it: 3 of 4 ops on the NPU")
    assert "take a BSP release whose Vela compiles the model" in other.next_step
    (error,) = _by_code(findings(_crash(report, other={"other_error": "Vela 5.2.0: out of memory"})),
                        "placement.compiler-crash")
    assert error.message.endswith("every op runs on the CPU. Vela 5.2.0: out of memory")


def test_the_bsp_compiler_finding_needs_the_newest_compiler_to_place_the_op_on_the_npu(files):
    report = _place(files["int8"], "imx93")
    assert not _by_code(findings(report), "placement.bsp-compiler-cpu")

    def disagreement(newest):
        return CompilerDisagreement(index=3, type="FULLY_CONNECTED", name="fc", bsp_compiler="vela 3.10.0",
                                    bsp_placement="CPU", other_compiler="vela 5.2.0", other_placement="NPU",
                                    other_is_newest=newest, reason="FULLY_CONNECTED #3: Per-axis quantization")
    (f,) = _by_code(findings(dataclasses.replace(report, compiler_disagreements=(disagreement(True),))),
                    "placement.bsp-compiler-cpu")
    assert [(o["index"], o["bsp_placement"], o["newest_placement"]) for o in f.evidence["ops"]] == [(3, "CPU", "NPU")]
    assert "vela 3.10.0 (the BSP's) puts 1 op(s) on the CPU that vela 5.2.0 places on the NPU" in f.message
    older = dataclasses.replace(report, compiler_disagreements=(disagreement(False),))
    assert not _by_code(findings(older), "placement.bsp-compiler-cpu")


def test_the_manifest_read_is_the_one_beside_the_model(files):
    from workbench.placement.findings import model_structure
    structure = model_structure(str(files["added"]))
    assert structure is not None and structure["added"].get("SIN") == 1
    assert model_structure(str(files["other-file"])) is None and model_structure(str(files["sin"])) is None
    assert model_structure(str(files["no-structure"])) is None
    manifest = json.loads((files["added"].parent / "model_manifest.json").read_text())
    manifest["structure"]["compared"] = False
    folder = files["added"].parent.parent / "not-compared"
    folder.mkdir(exist_ok=True)
    shutil.copy(files["added"], folder / "model.tflite")
    (folder / "model_manifest.json").write_text(json.dumps(manifest))
    assert model_structure(str(folder / "model.tflite")) is None
