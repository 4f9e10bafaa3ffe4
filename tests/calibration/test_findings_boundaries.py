"""The calibration set's findings at each rule's boundary (fast: sets built from counts, no images)."""

from __future__ import annotations

from workbench.calibration.curate import RECOMMENDED_MIN, UNDER_REPRESENTED, CalibrationSet
from workbench.calibration.findings import set_findings


def _set(conditions, target_shares, n=None):
    n = sum(conditions.values()) if n is None else n
    ids = tuple(f"cal-{i}" for i in range(n))
    return CalibrationSet(sample_ids=ids, strategy="random", seed=0, n=n, dataset="d", dataset_hash="h",
                          pool="calibration", conditions=dict(conditions), classes={},
                          pool_conditions={c: 500 for c in target_shares}, target_shares=dict(target_shares))


def _codes(cal):
    return {f.code: f for f in set_findings(cal)}


def test_a_condition_is_missing_only_with_a_target_share_and_no_sample():
    found = _codes(_set({"day": 300}, {"day": 0.5, "night": 0.5}))        # night: absent from the counts
    assert found["calibration.condition-missing"].evidence["missing"] == ["night"]
    found = _codes(_set({"day": 300, "night": 0}, {"day": 0.5, "night": 0.5}))   # night: counted zero
    assert found["calibration.condition-missing"].evidence["missing"] == ["night"]
    assert "calibration.condition-under-represented" not in found        # missing, not also "under"
    # a condition the deployment does not see (share 0) is not missing; one sample is not missing (it is few)
    assert "calibration.condition-missing" not in _codes(_set({"day": 300}, {"day": 1.0, "night": 0.0}))
    found = _codes(_set({"day": 299, "night": 1}, {"day": 0.5, "night": 0.5}))
    assert "calibration.condition-missing" not in found
    assert [c["condition"] for c in found["calibration.condition-under-represented"].evidence["conditions"]] == [
        "night"]


def test_under_represented_below_half_its_target_share_not_at_it():
    half = UNDER_REPRESENTED * 0.5                  # night's target share 0.5: under below 0.25 of the set
    at = _set({"day": 300, "night": 100}, {"day": 0.5, "night": 0.5})       # 100/400 = 0.25: at the line
    assert at.shares()["night"] == half and "calibration.condition-under-represented" not in _codes(at)
    below = _set({"day": 301, "night": 100}, {"day": 0.5, "night": 0.5})    # 100/401 < 0.25
    (row,) = _codes(below)["calibration.condition-under-represented"].evidence["conditions"]
    assert row["condition"] == "night" and row["samples"] == 100 and row["target_share"] == 0.5
    # a share of 0 in the deployment is never under-represented, whatever the set holds
    assert "calibration.condition-under-represented" not in _codes(_set({"day": 400, "night": 1},
                                                                        {"day": 1.0, "night": 0.0}))


def test_too_small_below_the_recommended_minimum_only():
    assert "calibration.too-small" not in _codes(_set({"day": RECOMMENDED_MIN}, {"day": 1.0}))
    small = _codes(_set({"day": RECOMMENDED_MIN - 1}, {"day": 1.0}))["calibration.too-small"]
    assert small.evidence["n"] == RECOMMENDED_MIN - 1 and small.evidence["recommended_min"] == RECOMMENDED_MIN


def test_the_evidence_counts_what_the_pool_offered_zero_when_it_names_none():
    cal = _set({"day": 301, "night": 100}, {"day": 0.5, "night": 0.5, "fog": 0.2})
    cal = CalibrationSet(**{**cal.to_dict(), "pool_conditions": {"day": 900}, "hash": ""})   # counts of day only
    found = _codes(cal)
    assert found["calibration.condition-missing"].evidence["pool"] == {"fog": 0}
    (row,) = found["calibration.condition-under-represented"].evidence["conditions"]
    assert (row["condition"], row["samples"], row["pool"]) == ("night", 100, 0)


def test_an_id_listed_twice_is_a_duplicate():
    from workbench.calibration.findings import id_findings
    (f,) = id_findings(["cal-1", "cal-2", "cal-1"], where="set")
    assert f.code == "calibration.duplicates" and f.evidence["duplicates"] == {"cal-1": 2}
    assert f.evidence["n_ids"] == 3 and f.evidence["n_unique"] == 2
    assert id_findings(["cal-1", "cal-2"], where="set") == []


def test_test_ids_by_the_datasets_splits_else_by_the_prefix():
    from types import SimpleNamespace

    import numpy as np

    from workbench.calibration.findings import id_findings
    data = SimpleNamespace(ids=np.array(["img-1", "img-2"]), split=np.array(["test", "calibration"]))
    (f,) = id_findings(["img-1"], where="set", dataset=data)
    assert f.evidence["test_ids"] == ["img-1"] and f.evidence["checked_against"] == "dataset splits"
    assert id_findings(["img-2"], where="set", dataset=data) == []
    no_splits = SimpleNamespace(ids=np.array(["test-1"]))            # no split column: the id prefix decides
    (f,) = id_findings(["test-1"], where="set", dataset=no_splits)
    assert f.evidence["checked_against"] == "id prefix 'test-'"


def test_a_calibration_file_is_checked_only_when_it_states_ids_a_dataset_and_a_hash(tmp_path):
    import json

    from workbench.calibration.curate import content_hash
    from workbench.calibration.findings import file_findings
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"sample_ids": ["a"], "hash": "x"}))                 # no dataset hash: not a set
    assert file_findings(path) == []
    path.write_text(json.dumps({"sample_ids": ["a"], "dataset_hash": "h"}))         # no stored hash: nothing to compare
    assert file_findings(path) == []
    path.write_text(json.dumps({"sample_ids": ["a"], "dataset_hash": "h", "hash": content_hash(("a",), "h")}))
    assert file_findings(path) == []
    path.write_text(json.dumps({"sample_ids": ["a", "b"], "dataset_hash": "h", "hash": content_hash(("a",), "h")}))
    assert [f.code for f in file_findings(path)] == ["calibration.hash-mismatch"]


def test_the_audits_leak_finding_counts_exact_copies_and_copies_after_resize():
    """The coverage audit's ``test_copies`` as the audit computes them (content_leaks on a dataset whose pool
    holds 60 pixel copies and 17 re-encoded copies of test images): exact and after-resize counted apart."""
    from tests.traps.zoo import leaky_dataset
    from workbench.calibration.audit import CoverageAudit
    from workbench.calibration.findings import audit_findings
    from workbench.calibration.leakage import content_leaks
    data = leaky_dataset()

    def audit(ids):
        return CoverageAudit(calibration_id="cal", calibration_hash="h", calibration_conditions={}, model="m",
                             dataset=data.name, split="test", layers=(), conditions=(), calibrated_ranges={},
                             rows=(), clip_threshold=0.01, activation_bits=8, add_conditions=(), findings=(),
                             test_copies=tuple(content_leaks(ids, data)))
    (f,) = audit_findings(audit([f"img-{i:04d}" for i in range(40, 300)]))     # 20 exact, 17 after resize
    assert (f.evidence["n_leaks"], f.evidence["n_exact"], f.evidence["n_after_resize"]) == (37, 20, 17)
    assert "37 calibration samples are test images under other ids (20 exact pixel copies, 17 after resize)" \
        in f.message and f.severity == "error"
    (exact,) = audit_findings(audit([f"img-{i:04d}" for i in range(0, 60)]))    # the 60 exact copies only
    assert (exact.evidence["n_exact"], exact.evidence["n_after_resize"]) == (60, 0)
    assert audit_findings(audit([f"img-{i:04d}" for i in range(100, 300)])) == []   # the clean part of the pool
