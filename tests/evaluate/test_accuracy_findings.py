"""The accuracy stage's findings from saved reports: drops beyond noise and threshold, their cause and
measured fixes, and the input-contract guards' issues (fast: reports built from numbers, no model)."""

from __future__ import annotations

import pytest

from workbench.evaluate.accuracy import AccuracyReport, AccuracyRow, FixTrial
from workbench.evaluate.findings import contract_findings, drop_findings, findings
from workbench.evaluate.remedies import drops_beyond, remedy_recipes
from workbench.models.contract import ContractIssue


def _row(cond, model, acc, drop=0.0, low=0.0, high=0.0, n=540):
    return AccuracyRow(condition=cond, model=model, n=n, correct=round(acc * n), accuracy=acc, ci_low=acc - 0.02,
                       ci_high=min(1.0, acc + 0.02), drop_pp=drop, drop_ci_low=low, drop_ci_high=high,
                       agreement=1.0, is_reference=model == "fp32")


def _report(rows, *, trials=(), issues=(), classes=10, conditions=("daylight", "overexposed")):
    return AccuracyReport(dataset="d", dataset_hash="h", split="test", reference="fp32", models=("fp32", "int8"),
                          conditions=conditions, classes=tuple(str(i) for i in range(classes)), rows=tuple(rows),
                          model_paths={"fp32": "a", "int8": "b"}, model_sha256={}, modes={}, n_bootstrap=100,
                          confidence=0.95, seed=0, fix_trials=tuple(trials), issues=tuple(issues))


def _spread(drop=27.6, low=23.0, high=31.7, **kw):
    return _report([_row("daylight", "fp32", 0.998), _row("daylight", "int8", 0.997, 0.1, -0.2, 0.4),
                    _row("overexposed", "fp32", 0.715), _row("overexposed", "int8", 0.715 - drop / 100, drop, low,
                                                                   high)], **kw)


def test_a_drop_beyond_its_ci_and_the_threshold_is_a_finding():
    (f,) = drop_findings(_spread(), target="imx93")
    assert f.code == "accuracy.drop" and f.severity == "warning" and f.target == "imx93"
    assert f.evidence["condition"] == "overexposed" and f.evidence["drop_pp"] == pytest.approx(27.6)
    assert f.evidence["drop_ci"] == [23.0, 31.7] and f.evidence["threshold_pp"] == 1.0
    assert "27.6 pp on overexposed" in f.message and "71.5% -> 43.9%" in f.message
    assert f.evidence["cause"] is None and f.evidence["fix"] is None


@pytest.mark.parametrize("drop,low,high,limit", [
    (0.9, 0.2, 1.6, None),       # beyond noise but not past 1 pp
    (1.0, 0.2, 1.8, None),       # exactly the threshold: not past it
    (3.0, -0.5, 6.5, None),      # past the threshold but within noise (CI includes 0)
    (3.0, 0.0, 6.0, None),       # CI touching 0: still noise
    (3.0, 1.0, 5.0, 4.0),        # a looser threshold (the gate's max_drop)
])
def test_drops_within_noise_or_threshold_are_not_findings(drop, low, high, limit):
    assert drop_findings(_spread(drop, low, high), max_drop_pp=limit) == []
    assert findings(_spread(drop, low, high), max_drop_pp=limit) == []


def test_just_past_the_threshold_and_above_zero_is_a_finding():
    (f,) = drop_findings(_spread(1.01, 0.01, 2.0))
    assert f.severity == "info" and "its CI reaches below the 1 pp threshold" in f.message
    (f,) = drop_findings(_spread(2.0, 1.01, 3.0))
    assert f.severity == "warning" and "reaches below" not in f.message
    (f,) = drop_findings(_spread(2.0, 1.0, 3.0))
    assert f.severity == "info"
    assert [r.condition for r in drops_beyond(_spread(1.01, 0.01, 2.0), 1.0)] == ["overexposed"]
    assert drop_findings(_spread(4.5, 1.0, 8.0), max_drop_pp=4.0)


def test_the_measured_fix_is_named_with_its_numbers():
    trials = [FixTrial("a8w8_pc+cle", "overexposed", -0.9, -1.9, 0.0, 0.724),
              FixTrial("a8w8_pt+cle", "overexposed", 2.5, 1.2, 3.8, 0.69),
              FixTrial("a8w8_pc", "daylight", 0.0, 0.0, 0.0, 0.99),
              FixTrial("a8w8_pt", "overexposed", None, None, None, None, error="QuantizationError: boom")]
    (f,) = drop_findings(_spread(trials=trials))
    assert f.evidence["fix"] == "a8w8_pc+cle"
    assert "a8w8_pc+cle -0.9 pp [-1.9, +0.0]" in f.message and "a8w8_pt+cle +2.5 pp" in f.message
    assert "a8w8_pt not measured (QuantizationError: boom)" in f.message
    assert [t["recipe"] for t in f.evidence["fix_trials"]] == ["a8w8_pc+cle", "a8w8_pt+cle", "a8w8_pt"]
    assert f.next_step.startswith("Quantize with a8w8_pc+cle: measured drop -0.9 pp on overexposed")


def test_a_trial_that_still_drops_is_not_called_a_fix():
    trials = [FixTrial("a8w8_pc+cle", "overexposed", 5.0, 2.0, 8.0, 0.66)]
    (f,) = drop_findings(_spread(trials=trials))
    assert f.evidence["fix"] is None and "a8w8_pc+cle +5.0 pp" in f.message
    assert f.next_step.startswith("Use the recipe the finding measured")
    # past the threshold but within its own noise: a fix (the drop is no longer shown beyond noise)
    trials = [FixTrial("a8w8_pt+cle", "overexposed", 1.5, -0.5, 3.5, 0.70)]
    assert drop_findings(_spread(trials=trials))[0].evidence["fix"] == "a8w8_pt+cle"
    trials = [FixTrial("a8w8_pt+cle", "overexposed", 1.0, 0.5, 1.5, 0.70)]
    assert drop_findings(_spread(trials=trials))[0].evidence["fix"] == "a8w8_pt+cle"


def test_a_wrong_card_explains_the_drops():
    issue = ContractIssue("contract-probably-wrong", "the input contract is probably wrong: ...", severity="warning",
                          evidence={"condition": "overexposed", "n": 256, "accuracy": 0.35,
                                    "probe_top1": {"contract: range [0, 1], rgb": 0.35, "BGR with [0, 1]": 0.95},
                                    "best_alternative": "BGR with [0, 1]", "contract": {"color": "rgb"},
                                    "contract_source": "m.card.yaml", "fix": "Fix the model card (m.card.yaml)."})
    found = findings(_spread(issues=[issue]), target="imx95")
    assert [f.code for f in found] == ["model.input-contract"]
    (f,) = found
    assert f.evidence["conditions"] == ["overexposed"] and f.evidence["issue"] == "contract-probably-wrong"
    assert "35.0% with the card, 95.0% with BGR with [0, 1]" in f.message and "1 of 2 condition(s)" in f.message
    assert f.next_step.startswith("Fix the model card (m.card.yaml).")


def test_near_chance_issue_and_other_issues():
    near = ContractIssue("baseline-near-chance", "near chance", severity="warning",
                         evidence={"condition": "daylight", "accuracy": 0.11})
    other = ContractIssue("candidate-is-float", "float", severity="warning", evidence={"model": "int8"})
    (f,) = contract_findings(_spread(issues=[near, other]))
    assert f.evidence["issue"] == "baseline-near-chance" and "near chance on daylight" in f.message
    assert contract_findings(_spread(issues=[near]), skip_near_chance=True) == []
    assert contract_findings(_spread(issues=[other])) == []
    assert contract_findings(_spread()) == []


def test_near_chance_on_every_condition_is_one_finding_not_two():
    rows = [_row("daylight", "fp32", 0.11), _row("daylight", "int8", 0.10, 1.0, -3, 5),
            _row("overexposed", "fp32", 0.09), _row("overexposed", "int8", 0.09)]
    near = ContractIssue("baseline-near-chance", "near chance", severity="warning",
                         evidence={"condition": "daylight", "accuracy": 0.11})
    found = findings(_report(rows, issues=[near]))
    assert [f.code for f in found] == ["model.input-contract"] and "every condition" in found[0].message
    # 19% for 10 classes is near chance (threshold 20%), 21% is not
    rows[0] = _row("daylight", "fp32", 0.19)
    assert findings(_report(rows))
    rows[0] = _row("daylight", "fp32", 0.21)
    assert not findings(_report(rows))


def test_remedy_recipes_address_the_recipe_used():
    assert remedy_recipes("a8w8_pt") == ["a8w8_pt+cle", "a8w8_pc"]
    assert remedy_recipes("a8w8_pc") == ["a8w8_pc+cle", "a8w8_pt+cle"]
    assert remedy_recipes("a8w8_pt+cle") == ["a8w8_pc"]
    assert remedy_recipes("a8w8_pc+cle") == []


def test_reports_round_trip_with_their_trials():
    report = _spread(trials=[FixTrial("a8w8_pc+cle", "overexposed", -0.9, -1.9, 0.0, 0.724),
                             FixTrial("a8w8_pt", "overexposed", None, None, None, None, error="x")])
    assert AccuracyReport.from_dict(report.to_dict()) == report
    assert "not measured" in report.fix_trials[1].summary() and "-0.9 pp" in report.fix_trials[0].summary()


def test_the_suspected_cause_is_read_from_the_quantized_model(tmp_path):
    """The 1000x spread ONNX model: per-tensor weights -> weight collapse; per-channel -> activation spread."""
    import warnings

    from tests.traps.zoo import _nchw_calibration, _onnx_model
    from workbench.evaluate.findings import suspected_cause
    from workbench.quantize.engine import quantize
    model = tmp_path / "spread.onnx"
    _onnx_model(model, depthwise_spread=1000.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pt = quantize(model, "a8w8_pt", _nchw_calibration(), backend="onnx", output=tmp_path / "pt")
        pc = quantize(model, "a8w8_pc", _nchw_calibration(), backend="onnx", output=tmp_path / "pc")
    cause = suspected_cause(pt, target="imx8mp")
    assert cause["kind"] == "per-tensor weight collapse" and "depthwise" in cause["layers"][0]
    cause = suspected_cause(pc, target="imx93")
    assert cause["kind"].startswith("per-channel activation-range spread") and "depthwise" in cause["layers"][0]
    assert suspected_cause(None) is None
    (f,) = drop_findings(_spread(), target="imx93", quantized=pc)
    assert f.evidence["cause"] == cause and "suspected: per-channel activation-range spread" in f.message


def test_an_exclusion_is_the_fix_only_when_no_integer_recipe_fixes_the_drop():
    names = ("m/dw1/depthwise", "m/pw1/Conv2D")
    excl = FixTrial("a8w8_pc excluding DEPTHWISE_CONV_2D #1, CONV_2D #2", "overexposed", -0.6, -1.5, 0.2, 0.72,
                    exclude=names)
    cle = FixTrial("a8w8_pc+cle", "overexposed", 0.7, -0.4, 1.8, 0.70)
    (f,) = drop_findings(_spread(trials=[excl, cle]))
    assert f.evidence["fix"] == "a8w8_pc+cle"                  # integer first, though the exclusion drops less
    assert "excluding DEPTHWISE_CONV_2D #1, CONV_2D #2 -0.6 pp [-1.5, +0.2]" in f.message
    assert f.evidence["fix_trials"][0]["exclude"] == list(names)
    assert "--exclude" not in f.next_step
    still = FixTrial("a8w8_pc+cle", "overexposed", 12.0, 9.0, 15.0, 0.60)
    (f,) = drop_findings(_spread(trials=[still, excl]))
    assert f.evidence["fix"] == excl.recipe
    assert f.next_step.startswith(f"Quantize with {excl.recipe}: measured drop -0.6 pp")
    assert "--exclude" in f.next_step and "fix_trials[].exclude" in f.next_step
    (f,) = drop_findings(_spread(trials=[FixTrial("a8w8_pc+cle", "overexposed", 0.7, -0.4, 1.8, 0.70),
                                         FixTrial("a8w8_pt+cle", "overexposed", 0.2, -0.9, 1.3, 0.71)]))
    assert f.evidence["fix"] == "a8w8_pt+cle"                  # among integer recipes: the smaller drop


def _fid(cond, sqnr, cosine, output="logits", model="int8"):
    from workbench.evaluate.fidelity import FidelityRow
    return FidelityRow(condition=cond, model=model, output=output, output_index=0, kind="logits", n=100, values=1000,
                       sqnr_db=sqnr, sqnr_ci_low=None, sqnr_ci_high=None, cosine=cosine, cosine_ci_low=None,
                       cosine_ci_high=None, max_abs_error=1.0, max_abs_ci_low=1.0, max_abs_ci_high=1.0)


def _collapsed(*rows):
    import dataclasses

    from workbench.evaluate.findings import collapsed_outputs
    return collapsed_outputs(dataclasses.replace(_spread(), fidelity=tuple(rows)), target="imx93")


@pytest.mark.parametrize("sqnr,cosine,flagged", [
    (10.0, 0.95, False),     # at the SQNR line: not under it
    (9.99, 0.95, True),
    (20.0, 0.9, False),      # at the cosine line
    (20.0, 0.899, True),
    (None, 0.5, True),       # no SQNR (a constant output): the cosine alone decides
    (None, 0.95, False),
    (5.0, None, True),       # no cosine: the SQNR alone decides
    (15.0, None, False),
    (None, None, False),     # nothing measured: nothing to say
])
def test_an_output_is_collapsed_under_either_line_not_at_it(sqnr, cosine, flagged):
    found = _collapsed(_fid("daylight", sqnr, cosine))
    assert len(found) == int(flagged)
    if flagged:
        (f,) = found
        assert f.code == "accuracy.output-collapsed" and f.target == "imx93"
        assert f.evidence["conditions"] == {"daylight": {"sqnr_db": sqnr, "cosine": cosine, "n": 100}}
        assert f.evidence["sqnr_threshold_db"] == 10.0 and f.evidence["cosine_threshold"] == 0.9


def test_collapsed_outputs_are_one_finding_per_model_and_output_naming_each_condition():
    found = _collapsed(_fid("daylight", 3.0, 0.5), _fid("overexposed", 25.0, 0.99), _fid("low-light", 4.0, 0.6),
                       _fid("daylight", 2.0, 0.4, output="boxes"), _fid("daylight", 2.0, 0.4, model="int8b"))
    by = {(f.evidence["model"], f.evidence["output"]): f for f in found}
    assert set(by) == {("int8", "logits"), ("int8", "boxes"), ("int8b", "logits")}
    assert list(by["int8", "logits"].evidence["conditions"]) == ["daylight", "low-light"]
    assert "on 2 condition(s)" in by["int8", "logits"].message
    # the rule's entry point reports them before the drops
    import dataclasses
    report = dataclasses.replace(_spread(), fidelity=(_fid("daylight", 3.0, 0.5),))
    assert [f.code for f in findings(report)] == ["accuracy.output-collapsed", "accuracy.drop"]


def test_a_trial_is_a_fix_when_its_ci_reaches_zero_not_when_it_stays_above():
    touching = FixTrial("a8w8_pt+cle", "overexposed", 1.5, 0.0, 3.0, 0.70)      # past 1 pp, CI reaching 0
    above = FixTrial("a8w8_pc+cle", "overexposed", 1.5, 0.5, 2.5, 0.70)         # past 1 pp, CI above 0
    assert drop_findings(_spread(trials=[touching]))[0].evidence["fix"] == "a8w8_pt+cle"
    assert drop_findings(_spread(trials=[above]))[0].evidence["fix"] is None


def test_a_binary_classifier_near_chance_everywhere_is_a_contract_finding():
    rows = [_row("daylight", "fp32", 0.45), _row("daylight", "int8", 0.45),
            _row("overexposed", "fp32", 0.40), _row("overexposed", "int8", 0.40)]
    (f,) = findings(_report(rows, classes=2))
    assert f.code == "model.input-contract" and f.evidence["n_classes"] == 2 and f.evidence["threshold"] == 0.5
    assert f.evidence["chance"] == 0.5 and "near chance (50.0% for 2 classes)" in f.message
    assert findings(_report(rows[:2] + [_row("overexposed", "fp32", 0.5), _row("overexposed", "int8", 0.5)],
                            classes=2)) == []                  # 50% somewhere: at the line, not under it


def test_a_collapsed_output_names_the_calibrated_ranges_that_clip_or_overshoot(tmp_path):
    """The quantized model's manifest records (ranges.py's range_clipped / range_outliers on real arrays) are
    appended to the finding for the minmax calibrator only; no manifest, no ranges, no quantized model: no hint."""
    import dataclasses
    import json
    from types import SimpleNamespace

    import numpy as np

    from workbench.quantize.ranges import OUTLIER_PERCENTILE, range_clipped, range_outliers
    rng = np.random.default_rng(0)
    lo_p, hi_p = 100.0 - OUTLIER_PERCENTILE, OUTLIER_PERCENTILE
    data = {f"t{i}": np.append(rng.uniform(-1, 1, 4000), 40.0) for i in range(5)}
    pct = {n: {lo_p: float(np.percentile(v, lo_p)), hi_p: float(np.percentile(v, hi_p))} for n, v in data.items()}
    narrow = {n: (float(v.min()) / (3 + i), 1.0 / (3 + i)) for i, (n, v) in enumerate(list(data.items())[:3])}
    wide = {n: (float(v.min()), float(v.max())) for n, v in list(data.items())[3:]}
    clipped, outliers = range_clipped(narrow, pct), range_outliers(wide, pct)
    assert (len(clipped), len(outliers)) == (3, 2) and clipped[0]["tensor"] == "t2"    # the most clipped first

    def quantized(ranges, name):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"ranges": ranges}))
        return SimpleNamespace(manifest_path=str(path))      # the quantize result: the hint reads its manifest
    record = {"calibrator": "minmax", "clipped": clipped, "n_clipped": 3, "outliers": outliers, "n_outliers": 2}
    report = dataclasses.replace(_spread(), fidelity=(_fid("daylight", 3.0, 0.5),))
    (f,) = [f for f in findings(report, quantized=quantized(record, "minmax"))
            if f.code == "accuracy.output-collapsed"]
    c, o = clipped[0], outliers[0]
    assert f.message.endswith(
        f"; 3 tensor(s) calibrated narrower than the data's 0.1..99.9th percentiles (e.g. 't2' "
        f"[{c['calibrated'][0]:.4g}, {c['calibrated'][1]:.4g}] vs [{c['p0.1']:.4g}, {c['p99.9']:.4g}]) and "
        f"2 tensor(s) calibrated far wider than the data's 0.1..99.9th percentiles (e.g. {o['tensor']!r} "
        f"[{o['calibrated'][0]:.4g}, {o['calibrated'][1]:.4g}] vs [{o['p0.1']:.4g}, {o['p99.9']:.4g}]): "
        "try --calibrator percentile"), f.message
    only_wide = {**record, "clipped": []}
    (g,) = _collapsed_with(report, quantized(only_wide, "wide"))
    assert "narrower" not in g.message and "2 tensor(s) calibrated far wider" in g.message
    for q in (quantized({**record, "calibrator": "percentile"}, "pct"), quantized(None, "none"),
              SimpleNamespace(manifest_path=str(tmp_path / "missing.json")), None):
        (h,) = _collapsed_with(report, q)
        assert "calibrated" not in h.message and h.message.endswith("cosine 0.500")


def _collapsed_with(report, quantized):
    from workbench.evaluate.findings import collapsed_outputs
    return collapsed_outputs(report, target="imx93", quantized=quantized)
