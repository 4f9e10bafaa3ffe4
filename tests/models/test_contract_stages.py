"""The input contract given only as ``--input-spec`` (no card beside the model) reaches every stage
a run folder computes: the quantize stage's calibration and the coverage strategy's embeddings.

A model trained on [-1, 1] inputs calibrated with [0, 1] pixels gets an INT8 input quantization for
[0, 1] (scale 1/255, zero point -128): every negative input it will be fed clips to 0.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from workbench.errors import WorkbenchWarning

SPEC = "range: [-1, 1]\ntask: classification\n"


@pytest.fixture(scope="module")
def pm1_keras(tiny_keras):
    """The tiny Keras classifier (conftest) and its [-1, 1] input spec, not beside it."""
    spec = tiny_keras.parent / "spec" / "pm1-input.yaml"     # not beside the model: only --input-spec tells
    spec.parent.mkdir()
    spec.write_text(SPEC)
    return tiny_keras, spec


def _quantize_in_run(root, model, spec):
    from workbench.runs import RunFolder
    run = RunFolder(root, target="imx93", model=str(model), dataset="digits-conditions", input_spec=spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkbenchWarning)        # "fewer than 200 calibration samples"
        cal = run.calibration_set(size=32, strategy="random", seed=0)
    return run, cal


def test_the_quantize_stage_calibrates_with_the_input_spec(pm1_keras, tmp_path):
    model, spec = pm1_keras
    run, cal = _quantize_in_run(tmp_path / "run", model, str(spec))
    assert run.input_spec == str(spec)
    q = run.quantized_model(recipe="a8w8_pc", calibration=cal)
    inq = q.input_quantization
    # [-1, 1] inputs: scale 2/255, zero point ~0; [0, 1] pixels would give 1/255 and -128
    assert inq.scale == pytest.approx(2 / 255, rel=0.02), inq
    assert abs(inq.zero_point) <= 1, inq
    assert q.calibration_hash != cal.hash            # the contract is part of what calibrated the model
    # the notebook after it (same input_spec) reuses the saved model without recomputing it
    again, _ = _quantize_in_run(tmp_path / "run", model, str(spec))
    with warnings.catch_warnings():
        warnings.simplefilter("error", WorkbenchWarning)
        assert again.quantized_model(recipe="a8w8_pc", calibration=cal).sha256 == q.sha256
    # the same run folder without the spec does not reuse a model calibrated with it (and vice versa)
    plain, _ = _quantize_in_run(tmp_path / "run", model, "")
    assert plain.input_spec is None
    with pytest.warns(WorkbenchWarning, match="computed with other parameters"):
        q01 = plain.quantized_model(recipe="a8w8_pc", calibration=cal)
    assert q01.input_quantization.scale == pytest.approx(1 / 255, rel=0.02)
    assert q01.input_quantization.zero_point == -128


def test_coverage_embeddings_see_contract_applied_inputs(pm1_keras, digits, monkeypatch):
    """k-center greedy runs on the embeddings of what the model is fed, not of the raw pixels."""
    from workbench.calibration import activations
    from workbench.calibration.curate import curate_calibration_set
    model, spec = pm1_keras
    seen = []
    real = activations.embeddings

    def spy(m, x, **kwargs):
        seen.append(np.asarray(x))
        return real(m, x, **kwargs)

    monkeypatch.setattr(activations, "embeddings", spy)
    pool = digits.select(split="calibration")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkbenchWarning)
        with_spec = curate_calibration_set(digits, 20, strategy="coverage", model=str(model), input_spec=str(spec))
        without = curate_calibration_set(digits, 20, strategy="coverage", model=str(model))
    x_spec, x_raw = seen
    np.testing.assert_allclose(x_spec, np.asarray(pool.x) * 2 - 1, atol=1e-6)
    np.testing.assert_allclose(x_raw, np.asarray(pool.x), atol=1e-6)
    assert x_spec.min() < -0.5
    assert with_spec.params["input_contract"] == {"source": str(spec), "normalization": "range [-1, 1]"}
    assert "input_contract" not in without.params
    # a card beside the model is read the same way
    (model.parent / "tiny.card.yaml").write_text(SPEC)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", WorkbenchWarning)
            carded = curate_calibration_set(digits, 20, strategy="coverage", model=str(model))
    finally:
        (model.parent / "tiny.card.yaml").unlink()
    np.testing.assert_allclose(seen[-1], x_spec, atol=1e-6)
    assert carded.sample_ids == with_spec.sample_ids


def test_the_coverage_audit_feeds_contract_applied_inputs(pm1_keras, digits):
    """Stage 10's audit compares activation ranges: on a [-1, 1] model its input layer sees [-1, 1]."""
    from workbench.calibration.activations import INPUT
    from workbench.calibration.audit import audit_coverage
    from workbench.calibration.curate import curate_calibration_set
    model, spec = pm1_keras
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkbenchWarning)
        cal = curate_calibration_set(digits, 20, strategy="random")
        with_spec = audit_coverage(str(model), cal, dataset=digits, conditions=["daylight"], input_spec=str(spec))
        without = audit_coverage(str(model), cal, dataset=digits, conditions=["daylight"])
    lo, hi = with_spec.calibrated_ranges[INPUT]
    assert lo < -0.9 and hi > 0.9, with_spec.calibrated_ranges[INPUT]
    lo0, hi0 = without.calibrated_ranges[INPUT]
    assert lo0 >= 0.0 and hi0 <= 1.0


def test_the_calibration_commands_take_the_input_spec(pm1_keras, tmp_path, capsys):
    """`workbench calibrate` and `workbench audit` apply --input-spec as notebook 10 does."""
    import json

    from workbench.calibration.activations import INPUT
    from workbench.cli import main
    model, spec = pm1_keras
    cal = tmp_path / "cal.json"
    assert main(["calibrate", "--strategy", "coverage", "-n", "20", "--model", str(model),
                 "--input-spec", str(spec), "-o", str(cal), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"]["input_contract"] == {"source": str(spec), "normalization": "range [-1, 1]"}
    assert main(["audit", "--model", str(model), "--calibration", str(cal), "--conditions", "daylight",
                 "--input-spec", str(spec), "--json"]) == 0
    lo, hi = json.loads(capsys.readouterr().out)["calibrated_ranges"][INPUT]
    assert lo < -0.9 and hi > 0.9


def test_the_calibration_experiment_quantizes_with_the_input_spec(pm1_keras, digits):
    from ai_edge_litert.interpreter import Interpreter

    from workbench.calibration.experiment import compare_calibration_strategies
    model, spec = pm1_keras
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkbenchWarning)
        exp = compare_calibration_strategies(str(model), digits, n=20, strategies=("random", "stratified"),
                                             recipe="a8w8_pt", conditions=["daylight"], input_spec=str(spec))
    for path in exp.models.values():
        scale, zero_point = Interpreter(model_path=path).get_input_details()[0]["quantization"]
        assert abs(zero_point) <= 1 and scale == pytest.approx(2 / 255, rel=0.02), (path, scale, zero_point)
