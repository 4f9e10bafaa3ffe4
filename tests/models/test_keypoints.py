"""The built-in keypoint model end to end: trained, quantized by the workbench (its card picked up),
evaluated with per-output fidelity and PCK per condition instead of top-1 - from Python and the CLI."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from workbench import cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def keypoints(workbench_cache):
    """The shipped keypoint model (no training: its weights ship in workbench/models/weights/)."""
    from workbench.models.keypoints import keypoint_model
    return keypoint_model()


@pytest.fixture(scope="module")
def int8(keypoints, tmp_path_factory):
    from workbench.data.loaders import load_dataset
    from workbench.quantize.engine import quantize
    data = load_dataset("digits-keypoints")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = quantize(keypoints.keras, "a8w8_pc", dataset=data, calibration_size=100,
                     output=tmp_path_factory.mktemp("kp") / "int8")
    return q.path


def test_the_model_ships_with_its_card(keypoints):
    from workbench.models.contract import resolve_contract
    for path in (keypoints.keras, keypoints.tflite, keypoints.saved_model):
        contract = resolve_contract(path)
        assert contract.task == "keypoints" and contract.output_kind(0) == "keypoints"
        assert contract.source.endswith("card.yaml")
    assert set(keypoints.pck) == {"daylight", "low-light", "overexposed", "motion-blur", "sensor-noise"}
    assert keypoints.pck["daylight"] > 0.5          # well above a constant guess
    from workbench.models.builtin import shipped_weights
    shipped = shipped_weights("keypoints")
    assert keypoints.origin == "shipped" and keypoints.weights_sha256 == shipped["weights_sha256"]
    assert keypoints.pck == pytest.approx(shipped["pck"], abs=1e-9)     # the PCK recorded when they were trained


def test_cli_prints_the_shipped_keypoint_model(keypoints, capsys):
    assert cli.main(["model", "keypoints", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["origin"] == "shipped" and data["tflite"] == keypoints.tflite and data["pck"] == keypoints.pck
    assert cli.main(["model", "keypoints"]) == 0
    assert "FP32 PCK" in capsys.readouterr().out


def test_a_retrain_reports_its_distance_from_the_shipped_pck(tmp_path):
    """2 epochs to stay quick: labelled as a retrain and compared per condition with the shipped PCK."""
    from workbench.models.builtin import shipped_weights
    from workbench.models.keypoints import keypoint_model
    model = keypoint_model(retrain=True, epochs=2, cache_root=tmp_path)
    assert model.origin == "retrained" and model.shipped_pck == shipped_weights("keypoints")["pck"]
    assert "vs shipped: daylight" in model.summary() and model.distance_from_shipped().endswith(" pp")


def test_report_shows_fidelity_and_pck_per_condition(keypoints, int8):
    from workbench.evaluate.accuracy import AccuracyReport, compare_accuracy
    from workbench.evaluate.metrics import pck
    from workbench.models.predict import load_predictor
    rep = compare_accuracy(keypoints.tflite, {"int8": int8}, "digits-keypoints", cache=False)
    assert rep.metric == "pck" and rep.task == "keypoints" and rep.issues == ()
    assert {(r.condition, r.model) for r in rep.rows} == {(c, m) for c in rep.conditions for m in ("fp32", "int8")}
    assert {(f.condition, f.output, f.kind) for f in rep.fidelity} == {(c, "keypoints", "keypoints")
                                                                       for c in rep.conditions}
    for f in rep.fidelity:
        assert f.values == 6 and f.topk == () and f.sqnr_db > 15 and f.cosine > 0.99
    # the row's value is PCK of the model's own outputs, computed independently here
    data = __import__("workbench.data.loaders", fromlist=["x"]).load_dataset("digits-keypoints")
    low = data.select(split="test", condition="low-light")
    own = load_predictor(int8).predict(np.asarray(low.x))
    assert rep.row("low-light", "int8").accuracy == pytest.approx(float(np.mean(pck(own, low.y))))
    assert AccuracyReport.from_json(rep.to_json()) == rep
    html = rep._repr_html_()
    assert "Task metric per condition (pck)" in html and "FP32 vs INT8 fidelity per output" in html
    assert "top-1" not in rep.text().split("FP32 vs INT8")[0]


def test_cli_takes_a_custom_metric(capsys, keypoints, int8, tmp_path, monkeypatch):
    (tmp_path / "kp_metric.py").write_text(
        "import numpy as np\n"
        "def centroid_error(outputs, labels):\n"
        "    return -np.abs(outputs[:, :2] - labels[:, 0, :]).sum(axis=1)\n")
    monkeypatch.chdir(tmp_path)
    code = cli.main(["evaluate", keypoints.tflite, int8, "--data", "digits-keypoints", "--conditions",
                     "daylight,overexposed", "--metric", "kp_metric:centroid_error", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["metric"] == "kp_metric:centroid_error"
    assert all(r["accuracy"] < 0 for r in data["rows"])
    assert {f["condition"] for f in data["fidelity"]} == {"daylight", "overexposed"}
