"""Placement findings know where an op came from: an island of ops the converter added points at the conversion."""

from __future__ import annotations

import json

import pytest

from tests.models.test_tflite_passes import grouped_models  # noqa: F401 - the fixture (Keras FP32 + INT8 models)


@pytest.mark.slow
def test_island_of_converter_ops_points_at_the_conversion(grouped_models, tmp_path):  # noqa: F811
    from workbench.findings import entry
    from workbench.models.structure import structural_diff
    from workbench.placement.analyze import analyze_placement
    from workbench.placement.findings import findings
    _, int8, _, source = grouped_models      # int8 carries a TRANSPOSE pair the FP32 source does not have
    (tmp_path / "src.tflite").write_bytes(source)
    model = tmp_path / "model.tflite"
    model.write_bytes(int8)
    structure = structural_diff(tmp_path / "src.tflite", "tflite", model)
    assert structure["transposes_added"] == 2 and structure["added"]["TRANSPOSE"] == 2
    seen = []
    for target in ("imx8mp", "imx93", "imx95"):
        report = analyze_placement(model, target, use_vela=False, use_converter=False)
        cpu_transposes = [o for o in report.ops if o.type == "TRANSPOSE" and o.placement == "CPU"]
        before = findings(report)             # no manifest yet: origin unknown, the old wording
        assert not [f for f in before if f.code == "convert.added-ops"]
        (tmp_path / "model_manifest.json").write_text(json.dumps({"file": "model.tflite", "structure": structure}))
        after = findings(report)
        (tmp_path / "model_manifest.json").unlink()
        if not cpu_transposes:
            continue
        seen.append(target)
        added = [f for f in after if f.code == "convert.added-ops"]
        assert added and added[0].severity == "warning" and "TRANSPOSE" in added[0].message
        from workbench.targets import get_target
        for op in added[0].evidence["ops"]:      # each op says which rule put it there, and the rule's source
            assert op["rules"], op
            for rule in op["rules"]:
                assert rule["source"] == get_target(target).constraint(rule["rule"]).source != ""
                assert f"TRANSPOSE by {rule['rule']} ({rule['source']})" in added[0].message
        for f in after:
            if f.code == "placement.cpu-island" and {o["op"] for o in f.evidence["ops"]} == {"TRANSPOSE"}:
                assert f.evidence["origin"] == "converter" and "the conversion added them" in f.message
                assert f.next_step == entry("convert.added-ops").action
    assert seen, "no target puts TRANSPOSE on the CPU"
