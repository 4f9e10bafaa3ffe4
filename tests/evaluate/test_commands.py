"""`workbench evaluate` on the reference model and its per-channel and per-tensor INT8 versions."""

from __future__ import annotations

import json

from workbench import cli


def _run(capsys, *argv):
    code = cli.main(["evaluate", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_rows_and_gate(capsys, reference, int8_models, report, tmp_path):
    gate = tmp_path / "gate.yaml"
    gate.write_text("accuracy:\n  max_drop_pp: 100\n  per_condition:\n    overexposed: {max_drop_pp: 0}\n")
    code, out, _ = _run(capsys, reference.tflite, int8_models["pc"], int8_models["pt"], "--names", "pc,pt",
                        "--data", "digits-conditions", "--conditions", "daylight,overexposed", "--gate", str(gate),
                        "--json")
    data = json.loads(out)
    rows = {(r["condition"], r["model"]): r for r in data["rows"]}
    assert set(rows) == {(c, m) for c in ("daylight", "overexposed") for m in ("fp32", "pc", "pt")}
    for (cond, model), r in rows.items():
        assert {"condition", "model", "n", "accuracy", "drop_pp", "ci_low", "ci_high", "agreement"} <= set(r)
        assert r["n"] == 540 and r["accuracy"] == report.accuracy(cond, model)
    worse = [m for m in ("pc", "pt") if report.drop("overexposed", m) > 0]
    assert data["gate"]["passed"] is (not worse)
    assert code == (1 if worse else 0)
    assert [v["model"] for v in data["gate"]["violations"]] == worse


def test_text_table_and_gate_exit_codes(capsys, reference, int8_models, report):
    code, out, _ = _run(capsys, "reference", int8_models["pc"], int8_models["pt"], "--names", "pc,pt")
    assert code == 0
    assert "condition" in out and "drop CI (pp)" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("sensor-noise") and " pt " in ln)
    assert f"{report.accuracy('sensor-noise', 'pt'):.2%}" in line
    code, out, _ = _run(capsys, "reference", int8_models["pc"], int8_models["pt"], "--names", "pc,pt",
                        "--max-drop", "100", "--min-agreement", "1.0")
    all_agree = all(r.agreement == 1.0 for r in report.rows)
    assert code == (0 if all_agree else 1)
    assert ("gate passed" if all_agree else "agrees with FP32 on") in out


def test_errors_exit_2_with_a_message(capsys, reference, int8_models, tmp_path):
    code, out, err = _run(capsys, reference.tflite, int8_models["pc"], "--conditions", "fog")
    assert code == 2 and "no samples for condition(s) 'fog'" in err
    code, out, err = _run(capsys, reference.tflite, int8_models["pc"], "--names", "a,b", "--json")
    assert code == 2 and json.loads(out)["error"] == "EvaluationError" and "--names gives 2 name(s)" in err
    code, out, err = _run(capsys, reference.tflite, int8_models["pc"], "--gate", str(tmp_path / "none.yaml"))
    assert code == 2 and "gate file" in err and "does not exist" in err
