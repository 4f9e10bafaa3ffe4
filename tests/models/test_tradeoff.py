"""The trade-off demo model ships its weights: every machine measures the same model, and the
trade-offs issue #17 asks of it hold on those weights (measured here, not recorded)."""

from __future__ import annotations

import json
import shutil
import warnings

import pytest

from workbench import cli
from workbench.errors import ModelError, WorkbenchWarning
from workbench.models import training
from workbench.models.tflite_graph import read_tflite

CONDITIONS = {"daylight", "low-light", "overexposed", "motion-blur", "sensor-noise"}


@pytest.fixture(scope="module")
def tradeoff(workbench_cache):
    from workbench.models.tradeoff import tradeoff_model
    return tradeoff_model()


@pytest.fixture(scope="module")
def int8(tradeoff, digits, tmp_path_factory):
    """The shipped model quantized per-channel and per-tensor on the full calibration split (399 samples)."""
    from workbench.quantize.engine import quantize
    out = tmp_path_factory.mktemp("tradeoff-int8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {r: quantize(tradeoff.keras, r, dataset=digits, output=out / r).path for r in ("a8w8_pc", "a8w8_pt")}


def test_the_shipped_weights_are_small_recorded_and_used(tradeoff):
    from workbench.models.builtin import builtin_entry, shipped_weights
    shipped = shipped_weights("tradeoff")
    npz = builtin_entry("tradeoff").weights / "tradeoff.npz"
    assert npz.stat().st_size < 100_000
    assert shipped["seed"] == 0 and shipped["epochs"] == 20 and shipped["dataset"] == "digits-conditions"
    assert {"split", "condition", "augment", "loss", "optimizer", "batch_size"} <= set(shipped["training"])
    assert {"tensorflow", "keras", "numpy"} <= set(shipped["trained_with"])
    assert set(shipped["accuracy"]) == CONDITIONS
    # what this machine measures with the shipped weights is what was recorded when they were trained
    assert tradeoff.origin == "shipped" and tradeoff.weights_sha256 == shipped["weights_sha256"]
    assert tradeoff.accuracy == pytest.approx(shipped["accuracy"], abs=1e-9)
    assert "shipped weights" in tradeoff.summary()


def test_the_exports_have_the_ops_that_make_the_trade_offs(tradeoff):
    ops = read_tflite(tradeoff.tflite).op_types()
    assert {"HARD_SWISH", "DEPTHWISE_CONV_2D", "RESIZE_BILINEAR", "SOFTMAX"} <= set(ops)
    assert read_tflite(tradeoff.tflite).input_tensors()[0].shape_signature == (1, 32, 32, 1)


def test_per_tensor_loses_visibly_more_than_per_channel_under_overexposure(tradeoff, int8, digits):
    """Issue #17: per-tensor and per-channel differ, and a condition loses more than daylight."""
    from workbench.evaluate.accuracy import compare_accuracy
    rep = compare_accuracy(tradeoff.tflite, int8, digits, conditions=["daylight", "overexposed"])
    pt, pc = rep.row("overexposed", "a8w8_pt"), rep.row("overexposed", "a8w8_pc")
    assert pt.drop_pp - pc.drop_pp >= 1.5, rep.text()
    assert pt.drop_ci_low > 0, rep.text()                       # per-tensor's loss is outside the noise
    assert pt.drop_pp > rep.drop("daylight", "a8w8_pt") + 1.0, rep.text()


@pytest.mark.parametrize(("target", "cpu_op"), [("imx93", "RESIZE_BILINEAR"), ("imx95", "SOFTMAX")])
def test_a_target_runs_an_op_on_the_cpu(int8, target, cpu_op):
    from workbench.placement.analyze import analyze_placement
    rep = analyze_placement(int8["a8w8_pt"], target)
    assert cpu_op in {op.type for op in rep.ops if op.placement == "CPU"}, rep.summary()


def test_imx8mp_runs_every_op_on_the_npu(int8):
    from workbench.placement.analyze import analyze_placement
    rep = analyze_placement(int8["a8w8_pc"], "imx8mp")
    assert rep.cpu_ops == 0, rep.summary()


def test_cli_prints_the_shipped_model(tradeoff, capsys):
    assert cli.main(["model", "tradeoff", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["origin"] == "shipped" and data["keras"] == tradeoff.keras and data["cache_hit"]
    assert cli.main(["model", "tradeoff"]) == 0
    text = capsys.readouterr().out
    assert "trade-off model (shipped weights, cached)" in text and "overexposed" in text


def test_damaged_shipped_weights_are_refused_or_warned_about(tmp_path, monkeypatch):
    import dataclasses

    from workbench.models import builtin
    from workbench.models.tradeoff import tradeoff_model
    entry = builtin.builtin_entry("tradeoff")
    copy = tmp_path / "weights"
    shutil.copytree(entry.weights, copy)
    data = bytearray((copy / "tradeoff.npz").read_bytes())
    data[-10] ^= 0xFF
    (copy / "tradeoff.npz").write_bytes(bytes(data))
    monkeypatch.setitem(builtin.BUILTIN_MODELS, "tradeoff", dataclasses.replace(entry, weights=copy))
    with pytest.raises(ModelError, match=r"tradeoff.npz: sha256 .* differs .*restore them.*model tradeoff --retrain"):
        builtin.shipped_weights("tradeoff")
    with pytest.raises(ModelError, match="differs"):     # the default model refuses to load other weights
        tradeoff_model(cache_root=tmp_path / "cache")
    with pytest.warns(WorkbenchWarning, match="not comparing with the shipped accuracy"):
        assert builtin.shipped_weights("tradeoff", strict=False) is None   # what a --retrain does


def test_weights_of_another_architecture_are_refused(tmp_path):
    import numpy as np

    from workbench.models.tradeoff import build_model
    np.savez(tmp_path / "tradeoff.npz", w000=np.zeros(3, np.float32))
    with pytest.raises(ModelError, match="1 weight arrays, the tradeoff_mobilenet architecture has"):
        training.load_shipped("tradeoff", build_model((32, 32, 1), 10, batch_size=1), directory=tmp_path)


@pytest.mark.slow
def test_retrain_reports_its_distance_from_the_shipped_accuracy(tmp_path, digits):
    """A retrain (2 epochs here, to stay quick) is labelled and compared per condition with the shipped model."""
    from workbench.models.builtin import shipped_weights
    from workbench.models.tradeoff import tradeoff_model
    model = tradeoff_model(dataset=digits, retrain=True, epochs=2, cache_root=tmp_path)
    assert model.origin == "retrained" and model.shipped_accuracy == shipped_weights("tradeoff")["accuracy"]
    assert model.weights_sha256 != shipped_weights("tradeoff")["weights_sha256"]
    text = model.distance_from_shipped()
    assert [part.split()[0] for part in text.split(", ")] == list(model.accuracy)
    assert all(part.endswith(" pp") for part in text.split(", ")) and "vs shipped" in model.summary()
