"""The pipeline (workbench/pipeline/): a resolved RunSpec, Pipeline(spec, store) and its three stores,
on the real reference model, dataset, converter and placement rules."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

from workbench.errors import BatchError, TargetError, WorkbenchWarning
from workbench.pipeline import (
    CalibrationOptions,
    CellStore,
    MemoStore,
    Pipeline,
    RunFolderStore,
    RunSpec,
    Store,
    parameter_names,
)

N = 60


@pytest.fixture(scope="module")
def spec(reference, digits):
    return RunSpec("reference", digits, target="imx93", calibration=CalibrationOptions(n=N, seed=4))


def quiet():
    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("ignore", WorkbenchWarning)        # 60 samples: the small-set warning
    return ctx


def test_spec_is_resolved_once_at_construction(spec, reference, digits):
    assert spec.resolved
    assert spec.source_model == reference.keras and spec.fp32_model == reference.tflite
    assert spec.model_format == "keras"
    assert spec.data is digits and spec.dataset_hash == digits.hash
    assert spec.quant_recipe.name == "a8w8_pc" == spec.recipe_name        # imx93's default for "auto"
    assert spec.bsp_release and spec.bsp == ""
    assert not spec.contract_stated and spec.stage_input_spec is None
    assert spec.contract.source != ""                                       # inferred from the model, once
    assert spec.contract is spec.contract
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.target = "imx95"  # type: ignore[misc]


def test_spec_refuses_what_it_cannot_resolve(digits):
    with pytest.raises(TargetError, match="imx8m"):
        RunSpec("reference", digits, target="imx8m", resolve=False)
    with pytest.raises(Exception, match="target"):
        RunSpec("reference", digits, recipe="auto", resolve=False)          # "auto" needs a target
    unresolved = RunSpec("reference", "digits-conditions", target="imx8mp", resolve=False)
    assert not unresolved.resolved and unresolved.data is None and unresolved.recipe_name == "a8w8_pt"
    with pytest.raises(BatchError, match="resolve"):
        Pipeline(unresolved)


def test_parameters_round_trip():
    spec = RunSpec("model.keras", "my-data", target="imx95", recipe="a16w8_pc", input_spec="card.yaml",
                   bsp="lf-6.6.3_1.0.0", calibration=CalibrationOptions(n=300, strategy="random", seed=7),
                   resolve=False)
    params = spec.to_parameters()
    assert params["calibration_size"] == 300 and params["calibration_strategy"] == "random" and params["seed"] == 7
    assert params["target"] == "imx95" and params["input_spec"] == "card.yaml" and params["recipe"] == "a16w8_pc"
    back = RunSpec.from_parameters({**params, "run_dir": "runs/x", "unrelated": object()}, resolve=False)
    assert back == spec
    assert set(spec.to_parameters(stage="calibration")) == set(parameter_names("calibration"))
    assert "timing_runs" not in parameter_names("calibration") and "timing_runs" in parameter_names("timing")
    with pytest.raises(BatchError, match="plain value"):
        RunSpec("m.keras", "d", target="imx93", input_spec={"color": "rgb"}, resolve=False).to_parameters()


def test_replace_keeps_what_is_resolved(spec):
    other = spec.replace(calibration={"n": N + 1})
    assert other.calibration.n == N + 1 and other.calibration.seed == 4
    assert other.data is spec.data and other.resolved and other.target == "imx93"


def test_pipeline_steps_load_what_still_fits(spec, reference, digits):
    store = MemoStore()
    assert isinstance(store, Store)
    pipe = Pipeline(spec, store)
    ctx = quiet()
    try:
        placement = pipe.place()
        assert pipe.computed == ["calibration", "quantize", "placement"]
        assert placement.target == "imx93" and placement.model_sha256 == pipe.quantize().sha256
        assert pipe.computed == ["calibration", "quantize", "placement"]     # loaded from the memo
        # the spec's quantization is the cache entry a direct call makes (nothing of its own in the key)
        from workbench.quantize.engine import quantize
        direct = quantize(reference.keras, "a8w8_pc", pipe.calibrate(), dataset=digits)
        assert direct.cache_hit and direct.cache_key == pipe.quantize().cache_key
        # another option is another result
        again = Pipeline(spec.replace(calibration={"seed": 5}), store)
        assert again.calibrate().seed == 5 and again.computed == ["calibration"]
    finally:
        ctx.__exit__(None, None, None)


def test_run_folder_store_reuses_records_and_refuses_stale_ones(spec, tmp_path):
    from workbench.runs import RunFolder
    folder = RunFolder(tmp_path / "run", target="imx93")
    ctx = quiet()
    try:
        first = Pipeline(spec, RunFolderStore(folder))
        q = first.quantize()
        assert folder.has("calibration") and folder.has("quantize")
        assert folder.record("calibration")["params"]["calibration_size"] == N
        assert q.path.startswith(str(folder.path / "model"))
        second = Pipeline(spec, RunFolderStore(folder))
        assert second.quantize().sha256 == q.sha256 and second.computed == []
    finally:
        ctx.__exit__(None, None, None)
    changed = Pipeline(spec.replace(calibration={"n": N + 2}), RunFolderStore(folder))
    with pytest.warns(WorkbenchWarning, match="other parameters"):
        assert changed.calibrate().n == N + 2
    assert folder.load("calibration").n == N + 2


def test_cell_store_keeps_sealed_records(spec):
    store = CellStore("test-pipeline")
    ctx = quiet()
    try:
        first = Pipeline(spec, store)
        cal = first.calibrate()
        second = Pipeline(spec, CellStore("test-pipeline"))
        assert second.calibrate() == cal and second.computed == []
    finally:
        ctx.__exit__(None, None, None)
