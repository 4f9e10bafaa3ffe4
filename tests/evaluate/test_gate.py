"""The quality gate on constructed reports."""

from __future__ import annotations

import warnings

import pytest

from workbench.errors import EvaluationError, WorkbenchWarning
from workbench.evaluate.accuracy import AccuracyReport, AccuracyRow
from workbench.evaluate.gate import ConditionLimit, Gate, GateResult, check_gate


def _row(cond, model, acc, fp32, agreement=1.0, ci=0.5):
    drop = (fp32 - acc) * 100
    return AccuracyRow(condition=cond, model=model, n=500, correct=int(round(acc * 500)), accuracy=acc,
                       ci_low=acc - 0.02, ci_high=acc + 0.02, drop_pp=drop, drop_ci_low=drop - ci,
                       drop_ci_high=drop + ci, agreement=agreement, is_reference=model == "fp32")


def make_report(table):
    """table: {condition: {"fp32": acc, model: (acc, agreement)}}"""
    rows, models = [], ["fp32"]
    for cond, entries in table.items():
        fp32 = entries["fp32"]
        rows.append(_row(cond, "fp32", fp32, fp32))
        for model, (acc, agreement) in ((m, v) for m, v in entries.items() if m != "fp32"):
            rows.append(_row(cond, model, acc, fp32, agreement))
            if model not in models:
                models.append(model)
    return AccuracyReport(dataset="made", dataset_hash="0", split="test", reference="fp32", models=tuple(models),
                          conditions=tuple(table), classes=("a", "b"), rows=tuple(rows), model_paths={},
                          model_sha256={}, modes={}, n_bootstrap=100, confidence=0.95, seed=0)


REPORT = make_report({
    "daylight": {"fp32": 0.99, "pc": (0.988, 0.995), "pt": (0.985, 0.99)},
    "low-light": {"fp32": 0.72, "pc": (0.715, 0.97), "pt": (0.69, 0.90)},
})


def test_passes_within_the_default_one_point():
    result = check_gate(make_report({"daylight": {"fp32": 0.99, "pc": (0.982, 0.99)}}))
    assert result.passed and result.violations == () and result.checked == 1
    assert "gate passed" in result.summary()


def test_fails_with_a_reason_per_violated_condition_and_model():
    result = check_gate(REPORT, Gate(max_drop_pp=1.0))
    assert not result.passed
    assert [(v.condition, v.model, v.metric) for v in result.violations] == [("low-light", "pt", "drop_pp")]
    assert result.reasons[0].startswith("low-light: pt drops 3.00 pp (72.0% FP32 -> 69.0%, n=500), more than "
                                        "the 1 pp allowed")
    assert "gate FAILED: 1 violation" in result.summary()


def test_per_condition_override_and_min_agreement():
    gate = Gate(max_drop_pp=0.2, min_agreement=0.95, overrides={"low-light": {"max_drop_pp": 5.0}})
    result = check_gate(REPORT, gate)
    found = {(v.condition, v.model, v.metric) for v in result.violations}
    assert found == {("daylight", "pt", "drop_pp"), ("low-light", "pt", "agreement")}
    assert any("agrees with FP32 on 90.0% of 500 samples, less than the 95.0% required" in r for r in result.reasons)
    assert gate.limits("low-light") == (5.0, 0.95) and gate.limits("daylight") == (0.2, 0.95)
    assert check_gate(REPORT, Gate(max_drop_pp=0.6, overrides={"low-light": 3.5})).passed


def test_upper_ci_is_stricter_than_the_point():
    report = make_report({"daylight": {"fp32": 0.99, "pc": (0.982, 1.0)}})     # drop 0.8, CI up to 1.3
    assert check_gate(report, max_drop_pp=1.0).passed
    result = check_gate(report, Gate(max_drop_pp=1.0, use_ci=True))
    assert not result.passed and "drop CI reaching 1.30 pp" in result.reasons[0]


def test_only_the_named_models_are_gated():
    assert check_gate(REPORT, Gate(models=("pc",))).passed
    with pytest.raises(EvaluationError, match="gate names model\\(s\\) 'int4' that the report does not hold"):
        check_gate(REPORT, Gate(models=("int4",)))


def test_override_for_an_unknown_condition_warns():
    with pytest.warns(WorkbenchWarning, match="gate override for condition 'fog' matches no condition"):
        check_gate(REPORT, Gate(max_drop_pp=5, overrides={"fog": {"max_drop_pp": 1}}))


def test_invalid_gates_are_rejected_at_construction():
    with pytest.raises(EvaluationError, match=r"`max_drop_pp` must be in \[0.0, 100.0\]. Got -1 instead"):
        Gate(max_drop_pp=-1)
    with pytest.raises(EvaluationError, match=r"`min_agreement` must be in \[0.0, 1.0\]. Got 97 instead"):
        Gate(min_agreement=97)
    with pytest.raises(EvaluationError, match="`max_drop_pp` must be a number of percentage points"):
        Gate(max_drop_pp="1pp")
    with pytest.raises(EvaluationError, match="unknown key\\(s\\) 'max_dorp'; allowed: max_drop_pp, min_agreement"):
        Gate(overrides={"low-light": {"max_dorp": 2}})
    with pytest.raises(EvaluationError, match=r"`conditions.low-light.min_agreement` must be in"):
        Gate(overrides={"low-light": {"min_agreement": 2}})
    with pytest.raises(EvaluationError, match="either a `gate` or gate keyword arguments"):
        check_gate(REPORT, Gate(), max_drop_pp=2)


def test_from_yaml(tmp_path):
    path = tmp_path / "gate.yaml"
    path.write_text("max_drop_pp: 0.5\nmin_agreement: 0.98\nconditions:\n  low-light: {max_drop_pp: 4}\n"
                    "  sensor-noise:\n    min_agreement: 0.9\n")
    gate = Gate.from_yaml(path)
    assert gate == Gate(max_drop_pp=0.5, min_agreement=0.98,
                        overrides=(ConditionLimit("low-light", 4.0), ConditionLimit("sensor-noise", None, 0.9)))
    nested = tmp_path / "nested.yaml"
    nested.write_text("gate:\n  max_drop: 2\n")
    assert Gate.from_yaml(nested) == Gate(max_drop_pp=2.0)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert Gate.from_yaml(empty) == Gate()


def test_from_yaml_errors(tmp_path):
    with pytest.raises(EvaluationError, match="no such gate file"):
        Gate.from_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("max_drop_pp: 1\nthreshold: 2\n")
    with pytest.raises(EvaluationError, match=r"bad.yaml: unknown gate key\(s\) 'threshold'; allowed: max_drop_pp"):
        Gate.from_yaml(bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(EvaluationError, match="a gate file holds a mapping"):
        Gate.from_yaml(bad)
    bad.write_text("max_drop_pp: [1\n")
    with pytest.raises(EvaluationError, match="not valid YAML"):
        Gate.from_yaml(bad)
    bad.write_text("conditions:\n  low-light: fast\n")
    with pytest.raises(EvaluationError, match="override for condition 'low-light' must be a mapping"):
        Gate.from_yaml(bad)


def test_results_round_trip_and_render():
    gate = Gate(max_drop_pp=0.2, min_agreement=0.95, overrides={"low-light": {"max_drop_pp": 5.0}})
    assert Gate.from_json(gate.to_json()) == gate
    result = check_gate(REPORT, gate)
    data = result.to_dict()
    assert data["passed"] is False and data["reasons"] == list(result.reasons)
    assert GateResult.from_dict(data) == result
    html = result._repr_html_()
    assert "Quality gate" in html and "low-light" in html
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "low-light: max drop 5 pp" in gate.summary()
