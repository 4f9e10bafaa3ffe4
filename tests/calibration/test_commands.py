"""`workbench calibrate` and `workbench audit` (in process, through the real argument parser)."""

from __future__ import annotations

import json

import pytest

from workbench.calibration.curate import CalibrationSet
from workbench.cli import main


def run_json(capsys, argv):
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


@pytest.mark.parametrize("strategy", ["random", "stratified", "coverage"])
def test_calibrate_builds_each_kind_of_set(capsys, tmp_path, reference, strategy):
    path = tmp_path / f"{strategy}.json"
    code, data = run_json(capsys, ["calibrate", "--data", "digits-conditions", "--model", reference.keras,
                                   "--strategy", strategy, "-n", "200", "-o", str(path)])
    assert code == 0
    assert data["n"] == 200 and data["strategy"] == strategy and len(data["hash"]) == 64
    assert sum(data["conditions"].values()) == 200 and set(data["conditions"]) >= {"daylight", "low-light"}
    saved = CalibrationSet.load(path)
    assert saved.hash == data["hash"] and saved.conditions == data["conditions"]
    # a mostly-daylight pool: a plain draw under-represents the other conditions, stratified quotas do not
    warned = any("under-represented" in w for w in data["warnings"])
    if strategy != "coverage":
        assert warned == (strategy == "random")


def test_calibrate_weights_and_text_output(capsys):
    code = main(["calibrate", "--strategy", "stratified", "-n", "300", "--pool", "test",
                 "--weights", "daylight=2,low-light=1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "daylight           200" in out and "low-light          100" in out


def test_calibrate_errors(capsys):
    code = main(["calibrate", "--strategy", "random", "-n", "5000", "--json"])
    captured = capsys.readouterr()
    assert code == 2 and "cannot choose n=5000" in json.loads(captured.out)["message"]
    assert main(["calibrate", "--strategy", "coverage", "-n", "200"]) == 2
    assert "needs the FP32 model" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["calibrate", "--strategy", "random", "-n", "200", "--weights", "daylight"])
    assert "--weights takes CONDITION=WEIGHT" in capsys.readouterr().err


def test_audit_json_rows_and_plot(capsys, tmp_path, reference):
    cal_path = tmp_path / "daylight.json"
    assert main(["calibrate", "--strategy", "stratified", "--weights", "daylight=1", "-n", "300",
                 "-o", str(cal_path)]) == 0
    capsys.readouterr()
    png = tmp_path / "audit.png"
    code, data = run_json(capsys, ["audit", "--model", reference.keras, "--calibration", str(cal_path),
                                   "--conditions", "daylight,overexposed", "--plot", str(png)])
    assert code == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    rows = {(r["layer"], r["condition"]): r["clip_rate"] for r in data["rows"]}
    assert rows[("input", "overexposed")] > 0.1 and rows[("input", "daylight")] == 0.0
    assert data["add_conditions"][0] == "overexposed"


def test_audit_refuses_a_missing_calibration_file(capsys, tmp_path, reference):
    code = main(["audit", "--model", reference.keras, "--calibration", str(tmp_path / "none.json")])
    err = capsys.readouterr().err
    assert code == 2 and "calibration set file" in err and "does not exist. Next: create one" in err
