"""The strategy experiment: real quantized models, evaluated per condition (two conversions)."""

from __future__ import annotations

import json
import warnings

import pytest

from workbench.calibration.experiment import CalibrationExperiment, compare_calibration_strategies
from workbench.cli import main
from workbench.errors import CalibrationError, WorkbenchWarning

N = 120
STRATEGIES = ("random", "stratified")


@pytest.fixture(scope="module")
def experiment(reference, digits):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkbenchWarning)
        return compare_calibration_strategies(reference, digits, n=N, strategies=STRATEGIES, seed=0)


def test_every_strategy_is_quantized_and_evaluated_on_every_condition(experiment, digits):
    assert experiment.strategies == STRATEGIES
    assert experiment.conditions == tuple(digits.select(split="test").conditions)
    assert len(experiment.rows) == len(STRATEGIES) * len(experiment.conditions)
    assert len(set(experiment.model_sha256.values())) == 2          # two different INT8 files
    for s in STRATEGIES:
        assert experiment.calibration_set(s).n == N
    for row in experiment.rows:
        assert row.n == 540 and 0.0 <= row.accuracy <= 1.0
        assert row.drop_pp == pytest.approx((row.fp32_accuracy - row.accuracy) * 100, abs=1e-6)
    # stratified draws more of the rare conditions than the plain draw from a 90% daylight pool
    rare = lambda s: sum(k for c, k in experiment.calibration_set(s).conditions.items() if c != "daylight")  # noqa: E731
    assert rare("stratified") > rare("random")


def test_the_verdict_follows_the_measured_drops(experiment):
    gain = experiment.mean_drop("random") - experiment.mean_drop("stratified")
    verdict = experiment.verdicts["stratified"]
    if gain > experiment.margin_pp:
        assert verdict.startswith(("helped", "mixed"))
    elif gain < -experiment.margin_pp:
        assert verdict.startswith(("hurt", "mixed"))
    else:
        assert not verdict.startswith("helped")
    assert ("Curation helped" in experiment.conclusion) == verdict.startswith("helped")
    assert "random" not in experiment.verdicts


def test_round_trip_html_and_table(experiment):
    import matplotlib
    matplotlib.use("Agg")
    back = CalibrationExperiment.from_dict(json.loads(experiment.to_json()))
    assert back == experiment
    html = experiment._repr_html_()
    assert "display:flex" in html and "data:image/png;base64," in html
    assert experiment.table()[-1][0] == "mean"
    assert "random drop" in experiment.text()


def test_cli_reuses_the_cached_models(capsys, reference, experiment, tmp_path):
    png = tmp_path / "exp.png"
    code = main(["calibrate-experiment", "--model", reference.keras, "-n", str(N),
                 "--strategies", ",".join(STRATEGIES), "--plot", str(png), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and png.read_bytes()[:4] == b"\x89PNG"
    assert data["model_sha256"] == experiment.model_sha256     # same sets -> same cached INT8 files
    assert data["conclusion"] == experiment.conclusion


def test_experiment_errors(reference, digits):
    with pytest.raises(CalibrationError, match="`strategies` must be one of"):
        compare_calibration_strategies(reference, digits, n=N, strategies=("random", "best"))
    with pytest.raises(CalibrationError, match="`baseline` must be one of"):
        compare_calibration_strategies(reference, digits, n=N, strategies=("stratified", "coverage"),
                                       baseline="random")
    with pytest.raises(CalibrationError, match="must name at least two"):
        compare_calibration_strategies(reference, digits, n=N, strategies=("random",))
    with pytest.raises(CalibrationError, match="names a strategy twice"):
        compare_calibration_strategies(reference, digits, n=N, strategies=("random", "random"))
