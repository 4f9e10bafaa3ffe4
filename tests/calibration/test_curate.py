"""Curation: reproducibility, stratification, coverage selection, warnings, errors, files."""

from __future__ import annotations

import json
import os
import warnings
from collections import Counter

import numpy as np
import pytest

from workbench.calibration.curate import CalibrationSet, curate_calibration_set, k_center_greedy
from workbench.calibration.strategies import allocate
from workbench.errors import CalibrationError, WorkbenchWarning

from .conftest import make_dataset


def quiet(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkbenchWarning)
        return curate_calibration_set(*args, **kwargs)


# -- reproducibility --------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["random", "stratified"])
def test_strategy_reproducible_from_seed(digits, strategy):
    a = quiet(digits, 200, strategy=strategy, seed=3)
    b = quiet(digits, 200, strategy=strategy, seed=3)
    c = quiet(digits, 200, strategy=strategy, seed=4)
    assert a.sample_ids == b.sample_ids and a.hash == b.hash
    assert a.sample_ids != c.sample_ids and a.hash != c.hash
    assert a.n == len(a.sample_ids) == 200 and len(set(a.sample_ids)) == 200
    pool = set(digits.select(split="calibration").ids.tolist())
    assert set(a.sample_ids) <= pool


def test_coverage_reproducible_and_reaches_rare_conditions(digits, reference):
    a = quiet(digits, 200, strategy="coverage", seed=0, model=reference)
    b = quiet(digits, 200, strategy="coverage", seed=0, model=reference.keras)
    random = quiet(digits, 200, strategy="random", seed=0)
    assert a.sample_ids == b.sample_ids and a.hash == b.hash
    assert a.params["embedding"] == "penultimate"
    rare = lambda s: sum(k for c, k in s.conditions.items() if c != "daylight")  # noqa: E731
    # farthest-point selection reaches past the 90% daylight majority more than a plain draw
    assert rare(a) > rare(random)


def test_hash_covers_ids_and_dataset(digits):
    cal = quiet(digits, 200, strategy="random", seed=0)
    other = CalibrationSet.from_dict({**cal.to_dict(), "dataset_hash": "0" * 64, "hash": ""})
    assert other.hash != cal.hash
    assert cal.id.startswith("random-200-")


# -- stratification ---------------------------------------------------------------------------
def test_stratified_histograms_match_weights(digits):
    weights = {"daylight": 0.5, "low-light": 0.3, "overexposed": 0.2}
    cal = quiet(digits, 200, strategy="stratified", seed=1, condition_weights=weights, pool="test")
    assert cal.conditions == {"daylight": 100, "low-light": 60, "overexposed": 40, "motion-blur": 0,
                              "sensor-noise": 0}
    taken = digits.take(cal.sample_ids)
    assert Counter(taken.condition.tolist()) == Counter({"daylight": 100, "low-light": 60, "overexposed": 40})
    # balanced over classes inside every condition: counts differ by at most one
    for cond, quota in (("daylight", 100), ("low-light", 60), ("overexposed", 40)):
        per_class = np.bincount(taken.y[taken.condition == cond], minlength=10)
        assert per_class.sum() == quota and per_class.max() - per_class.min() <= 1
    assert cal.target_shares == pytest.approx(weights)
    assert sum(cal.classes.values()) == 200


def test_stratified_takes_all_of_a_short_condition_and_redistributes(digits):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        cal = curate_calibration_set(digits, 300, strategy="stratified", seed=0)
    messages = [str(w.message) for w in record if w.category is WorkbenchWarning]
    assert any("cannot supply the quota" in m for m in messages)
    assert cal.conditions == {"daylight": 100, "low-light": 50, "overexposed": 50, "motion-blur": 50,
                              "sensor-noise": 50}
    assert any("low-light wants ~60, pool has 50" in m for m in messages)


def test_default_stratified_set_reaches_every_condition_share(digits):
    with warnings.catch_warnings():
        warnings.simplefilter("error", WorkbenchWarning)    # the default set of 200 is not under-represented
        cal = curate_calibration_set(digits, 200, strategy="stratified", seed=0)
    assert set(cal.conditions.values()) == {40}


def test_allocate_redistributes_by_weight():
    quotas, capped = allocate(100, {"a": 1, "b": 1, "c": 2}, {"a": 5, "b": 100, "c": 100})
    assert quotas == {"a": 5, "b": 32, "c": 63} and capped == ["a"]
    quotas, capped = allocate(10, {"a": 1}, {"a": 4, "z": 20})   # weighted keys exhausted: spare fills in
    assert quotas == {"a": 4, "z": 6} and capped == ["a"]


# -- coverage on a constructed 2-D case -------------------------------------------------------
def test_k_center_greedy_picks_spread_out_points():
    rng = np.random.default_rng(0)
    centers = np.array([[0, 0], [10, 0], [0, 10], [10, 10]], dtype=float)
    sizes = [300, 4, 4, 4]                      # one common situation, three rare ones
    points = np.concatenate([c + rng.normal(0, 0.3, (k, 2)) for c, k in zip(centers, sizes)])
    cluster = np.repeat(np.arange(4), sizes)
    for seed in range(5):
        picked = k_center_greedy(points, 4, seed=seed)
        assert sorted(cluster[picked].tolist()) == [0, 1, 2, 3]
    picked = k_center_greedy(points, 4, seed=0)
    spread = min(np.linalg.norm(points[i] - points[j]) for i in picked for j in picked if i < j)
    drawn = rng.choice(len(points), 4, replace=False)
    assert spread > 8 > min(np.linalg.norm(points[i] - points[j]) for i in drawn for j in drawn if i < j)
    assert np.array_equal(k_center_greedy(points, 10, seed=7), k_center_greedy(points, 10, seed=7))


# -- warnings ------------------------------------------------------------------------------------
def test_warns_when_fewer_than_200():
    data = make_dataset([("calibration", "daylight", 120), ("test", "daylight", 10)])
    with pytest.warns(WorkbenchWarning, match="fewer than 200"):
        curate_calibration_set(data, 100, strategy="random", seed=0)


def test_warns_when_random_underrepresents_conditions(digits):
    with pytest.warns(WorkbenchWarning, match="under-represented") as record:
        cal = curate_calibration_set(digits, 300, strategy="random", seed=0)
    assert cal.conditions["daylight"] > 150     # the pool is 64% daylight, so is a plain draw
    assert any("low-light" in str(w.message) for w in record)


def test_warns_when_deployment_condition_missing():
    data = make_dataset([("calibration", "daylight", 300), ("test", "daylight", 10), ("test", "low-light", 10)])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        cal = curate_calibration_set(data, 200, strategy="stratified", seed=0,
                                     condition_weights={"daylight": 0.7, "low-light": 0.3})
    messages = [str(w.message) for w in record if w.category is WorkbenchWarning]
    assert any("low-light missing from calibration set" in m for m in messages)
    assert cal.conditions == {"daylight": 200}


def test_no_warning_for_a_well_mixed_set():
    data = make_dataset([("calibration", "a", 300), ("calibration", "b", 300)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", WorkbenchWarning)
        cal = curate_calibration_set(data, 200, strategy="stratified", seed=0)
    assert cal.conditions == {"a": 100, "b": 100}


# -- errors --------------------------------------------------------------------------------------
def test_error_when_pool_cannot_supply_n(digits):
    with pytest.raises(CalibrationError, match=r"holds 559 samples .*cannot choose n=600.*at most 559"):
        curate_calibration_set(digits, 600, strategy="random", seed=0)


@pytest.mark.parametrize("kwargs, phrase", [
    ({"strategy": "smart"}, "`strategy` must be one of 'random', 'stratified', 'coverage'"),
    ({"strategy": "coverage"}, "needs the FP32 model"),
    ({"condition_weights": {"night": 1.0}}, "`condition_weights key` must be one of"),
    ({"condition_weights": {"daylight": -1.0}}, "must be a finite number >= 0"),
    ({"condition_weights": {"daylight": 0.0}}, "sum to 0"),
    ({"pool": "validation"}, "`pool` must be one of"),
    ({"seed": 1.5}, "`seed` must be an integer"),
])
def test_bad_arguments(digits, kwargs, phrase):
    with pytest.raises(CalibrationError, match=phrase.replace("(", r"\(")):
        curate_calibration_set(digits, 200, **{"strategy": "random", **kwargs})


def test_bad_n(digits):
    with pytest.raises(CalibrationError, match="`n` must be a positive integer"):
        curate_calibration_set(digits, 0, strategy="random")


def test_images_refuses_another_dataset(digits):
    cal = quiet(digits, 200, strategy="random", seed=0)
    assert len(cal.images(digits)) == 200
    other = make_dataset([("calibration", "daylight", 10)])
    with pytest.raises(CalibrationError, match="was drawn from dataset 'digits-conditions'"):
        cal.images(other)


# -- files and display ------------------------------------------------------------------------
def test_save_load_round_trip(digits, tmp_path):
    cal = quiet(digits, 200, strategy="stratified", seed=2, condition_weights={"daylight": 1, "low-light": 1})
    path = cal.save(tmp_path / "sets" / "cal.json")
    assert os.listdir(tmp_path / "sets") == ["cal.json"]   # no temporary left behind
    back = CalibrationSet.load(path)
    assert back == cal and isinstance(back.sample_ids, tuple)
    assert CalibrationSet.from_dict(json.loads(json.dumps(cal.to_dict()))) == cal


def test_load_refuses_edited_missing_and_foreign_files(digits, tmp_path):
    cal = quiet(digits, 200, strategy="random", seed=0)
    path = cal.save(tmp_path / "cal.json")
    data = json.loads(path.read_text())
    data["sample_ids"][0] = data["sample_ids"][1]
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match="does not match its sample ids"):
        CalibrationSet.load(path)
    with pytest.raises(CalibrationError, match="calibration set file .* does not exist"):
        CalibrationSet.load(tmp_path / "nope.json")
    (tmp_path / "other.json").write_text('{"a": 1}')
    with pytest.raises(CalibrationError, match="not a calibration set file"):
        CalibrationSet.load(tmp_path / "other.json")
    (tmp_path / "broken.json").write_text('{"a": ')
    with pytest.raises(CalibrationError, match="invalid JSON"):
        CalibrationSet.load(tmp_path / "broken.json")


def test_html_summary_and_plot(digits):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cal = quiet(digits, 200, strategy="random", seed=0)
    html = cal._repr_html_()
    assert "Calibration set" in html and "low-light" in html and "<script" not in html
    assert "200 samples" in cal.summary()
    ax = cal.plot()
    assert len(ax.patches) == 3 * len(cal.shares())
    plt.close("all")
