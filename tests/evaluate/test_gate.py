"""The one quality gate on constructed reports; its YAML form; the committed gate.yaml."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest

from workbench.errors import EvaluationError, GateError, WorkbenchWarning
from workbench.evaluate.accuracy import AccuracyReport, AccuracyRow
from workbench.evaluate.gate import SCHEMA, ConditionLimit, Gate, GateResult, check_gate, load_gate

ROOT = Path(__file__).resolve().parents[2]


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
    assert [(v.condition, v.model, v.check) for v in result.violations] == [("low-light", "pt", "accuracy.max_drop_pp")]
    assert result.reasons[0].startswith("low-light: pt drops 3.00 pp (72.0% FP32 -> 69.0%, n=500), more than "
                                        "the 1 pp allowed")
    assert "gate FAILED: 1 violation" in result.summary()


def test_per_condition_override_and_min_agreement():
    gate = Gate(max_drop_pp=0.2, min_agreement=0.95, overrides={"low-light": {"max_drop_pp": 5.0}})
    result = check_gate(REPORT, gate)
    found = {(v.condition, v.model, v.check) for v in result.violations}
    assert found == {("daylight", "pt", "accuracy.max_drop_pp"), ("low-light", "pt", "accuracy.min_agreement")}
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


def test_a_limit_not_stated_is_not_checked():
    assert Gate().summary() == "no limits" and not Gate().checks_accuracy
    result = check_gate(REPORT, Gate(min_agreement=0.5))
    assert result.passed and result.checked == 4


def test_invalid_gates_are_rejected_at_construction():
    with pytest.raises(GateError, match=r"`accuracy.max_drop_pp` must be in \[0.0, 100.0\]. Got -1.0 instead"):
        Gate(max_drop_pp=-1)
    with pytest.raises(GateError, match=r"`accuracy.min_agreement` must be in \[0.0, 1.0\]. Got 97.0 instead"):
        Gate(min_agreement=97)
    with pytest.raises(EvaluationError, match="`accuracy.max_drop_pp` must be a finite number. Got '1pp'"):
        Gate(max_drop_pp="1pp")
    with pytest.raises(GateError, match="unknown key\\(s\\) 'max_dorp'; allowed: max_drop_pp, min_agreement"):
        Gate(overrides={"low-light": {"max_dorp": 2}})
    with pytest.raises(GateError, match=r"`accuracy.per_condition.low-light.min_agreement` must be in"):
        Gate(overrides={"low-light": {"min_agreement": 2}})
    with pytest.raises(GateError, match=r"`placement.min_npu_share.\*` must be in \[0.0, 1.0\]"):
        Gate(min_npu_share=1.5)
    with pytest.raises(GateError, match="`placement.min_npu_share target` must be one of '\\*', 'imx8mp'"):
        Gate(min_npu_share={"imx9": 0.5})
    with pytest.raises(GateError, match="`latency.statistic` must be one of 'p50', 'p99'"):
        Gate(latency_statistic="p90")
    with pytest.raises(EvaluationError, match="either a `gate` or gate keyword arguments"):
        check_gate(REPORT, Gate(), max_drop_pp=2)


def test_from_yaml(tmp_path):
    path = tmp_path / "gate.yaml"
    path.write_text("accuracy:\n  max_drop_pp: 0.5\n  min_agreement: 0.98\n  per_condition:\n"
                    "    low-light: {max_drop_pp: 4}\n    sensor-noise:\n      min_agreement: 0.9\n"
                    "    fog: 6\nplacement:\n  min_npu_share: {imx93: 1.0}\nlatency:\n  max_ms: 2\n  statistic: p99\n")
    gate = Gate.from_yaml(path)
    assert gate == Gate(max_drop_pp=0.5, min_agreement=0.98,
                        overrides=(ConditionLimit("low-light", 4.0), ConditionLimit("sensor-noise", None, 0.9),
                                   ConditionLimit("fog", 6.0)),
                        min_npu_share={"imx93": 1.0}, max_latency_ms=2.0, latency_statistic="p99")
    assert gate.source == "gate.yaml" and gate.share_for("imx93") == 1.0 and gate.share_for("imx8mp") is None
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert Gate.from_yaml(empty) == Gate()


def test_the_committed_gate_file_loads_and_gates_an_accuracy_report():
    gate = load_gate(ROOT / "gate.yaml")
    assert gate.max_drop_pp is not None and gate.min_npu_share["*"] > 0 and gate.max_cpu_islands == 0
    with pytest.warns(WorkbenchWarning, match="'sensor-noise' matches no condition"):
        result = check_gate(REPORT, gate)
    assert result.checked == 4 and any("placement and latency limits are not checked" in n for n in result.notes)


@pytest.mark.parametrize("text", ["accuracy:\n  max_drop_pp: .nan\n", "latency:\n  max_ms: .inf\n",
                                  "placement:\n  min_npu_share: .nan\n",
                                  "accuracy:\n  per_condition:\n    fog: {min_agreement: .nan}\n"])
def test_non_finite_limits_are_refused_with_the_key(tmp_path, text):
    path = tmp_path / "gate.yaml"
    path.write_text(text)
    key = {"accuracy:\n  max": "accuracy.max_drop_pp", "latency:": "latency.max_ms",
           "placement": "placement.min_npu_share", "accuracy:\n  per": "min_agreement"}
    with pytest.raises(GateError, match="must be a finite number") as info:
        Gate.from_yaml(path)
    assert next(v for k, v in key.items() if text.startswith(k)) in str(info.value)
    assert "gate.yaml" in str(info.value)
    with pytest.raises(GateError, match="`max_latency_ms` must be a finite number"):
        Gate(max_latency_ms=math.nan)


def test_every_schema_key_is_documented_in_the_committed_gate_file():
    text = (ROOT / "gate.yaml").read_text()
    for section, keys in SCHEMA.items():
        assert f"{section}:" in text
        for key in keys:
            assert key in text, f"{section}.{key} is missing from gate.yaml"


def test_from_yaml_errors(tmp_path):
    with pytest.raises(EvaluationError, match="gate file '.*missing.yaml' does not exist. Next: copy gate.yaml"):
        Gate.from_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("accuracy:\n  max_drop_pp: 1\n  threshold: 2\n")
    with pytest.raises(GateError, match=r"bad.yaml: unknown key accuracy.threshold; accuracy takes max_drop_pp"):
        Gate.from_yaml(bad)
    bad.write_text("max_drop_pp: 1\n")
    with pytest.raises(GateError, match=r"unknown section 'max_drop_pp'; sections are accuracy, placement"):
        Gate.from_yaml(bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(EvaluationError, match="a gate file is a mapping with sections"):
        Gate.from_yaml(bad)
    bad.write_text("max_drop_pp: [1\n")
    with pytest.raises(EvaluationError, match="not valid YAML"):
        Gate.from_yaml(bad)
    bad.write_text("accuracy:\n  per_condition:\n    low-light: fast\n")
    with pytest.raises(EvaluationError, match="override for condition 'low-light' must be a number \\(max_drop_pp\\) or a mapping"):
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


def test_cli_evaluate_takes_the_committed_gate_file(capsys, reference, int8_models, report):
    """`workbench evaluate --gate gate.yaml`, the command docs/evaluate.md shows, with the file CI uses."""
    import json

    from workbench import cli
    code = cli.main(["evaluate", reference.tflite, int8_models["pc"], "--names", "pc", "--conditions",
                     "daylight,sensor-noise", "--gate", str(ROOT / "gate.yaml"), "--json"])
    data = json.loads(capsys.readouterr().out)
    limits = {"daylight": 3.0, "sensor-noise": 5.0}          # max_drop_pp and its sensor-noise override
    worse = [c for c, limit in limits.items() if report.drop(c, "pc") > limit]
    assert data["gate"]["passed"] is (not worse) and code == (1 if worse else 0)
    assert data["gate"]["checked"] == 2 and [v["condition"] for v in data["gate"]["violations"]] == worse
    assert "placement and latency limits are not checked" in data["gate"]["notes"][0]
