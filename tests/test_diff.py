"""workbench diff on two real run folders (tiny model, real stages): what changed, accuracy CI, placement, exit code."""

from __future__ import annotations

import json

import pytest

from workbench.diff import DiffError, RunDiff, diff_runs


def _tiny(tmp_path_factory, digits):
    import keras

    from tests.sweep.conftest import build_tiny
    keras.utils.set_random_seed(1)
    model = build_tiny()
    config = model.get_config()
    for layer in config["layers"]:
        if layer["class_name"] == "InputLayer":
            layer["config"]["batch_shape"] = [None, 32, 32, 1]
    batched = keras.Model.from_config(config)
    batched.compile(optimizer=keras.optimizers.Adam(1e-2),
                    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    train = digits.select(split="train", condition="daylight")
    batched.fit(train.x[:300], train.y[:300], batch_size=32, epochs=2, verbose=0)
    model.set_weights(batched.get_weights())
    path = tmp_path_factory.mktemp("diff-model") / "tiny.keras"
    model.save(path)
    return str(path)


def _write_run(root, model, digits, recipe, exclude=()):
    from workbench.calibration.curate import curate_calibration_set
    from workbench.evaluate.accuracy import compare_accuracy
    from workbench.placement.analyze import analyze_placement
    from workbench.quantize.engine import quantize
    from workbench.runs import RunFolder
    calib = curate_calibration_set(digits, 64, strategy="random", seed=0)
    qm = quantize(model, recipe, calib, dataset=digits, exclude=exclude)
    acc = compare_accuracy(model, {recipe: qm}, digits, n_bootstrap=100)
    for target in ("imx8mp", "imx95"):
        folder = RunFolder(root, target=target, model=model, dataset="digits-conditions")
        folder.save("calibration", calib)
        folder.save("quantize", qm)
        folder.save("accuracy", acc)
        folder.save("placement", analyze_placement(qm.path, target))
    return root


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory, digits):
    model = _tiny(tmp_path_factory, digits)
    base = tmp_path_factory.mktemp("runs")
    a = _write_run(base / "run-a", model, digits, "a8w8_pc")
    b = _write_run(base / "run-b", model, digits, "a8w8_pc", exclude=("MEAN",))
    c = _write_run(base / "run-c", model, digits, "a8w8_pt")
    return a, b, c


def test_diff_of_different_recipes_shows_inputs_and_accuracy(three_runs):
    a, _, c = three_runs
    d = diff_runs(a, c, max_drop_pp=100.0)
    assert [t.target for t in d.targets] == ["imx8mp", "imx95"]
    t = d.targets[0]
    fields = {ch.field: ch for ch in t.changes}
    assert fields["recipe"].a == "a8w8_pc" and fields["recipe"].b == "a8w8_pt"
    assert "INT8 model sha256" in fields and "model sha256" not in fields
    assert {c.condition for c in t.accuracy} >= {"daylight", "low-light"}
    for row in t.accuracy:
        assert row.ci_low <= row.diff_pp <= row.ci_high
        assert row.diff_pp == pytest.approx(100 * (row.b - row.a))
    assert not d.regressed
    text = d.text()
    assert "recipe: a8w8_pc -> a8w8_pt" in text and "95% CI" in text
    back = RunDiff.from_dict(json.loads(d.to_json()))
    assert back == d
    assert "<table" in d._repr_html_()


def test_op_moved_to_cpu_is_a_regression_and_exit_1(three_runs, capsys):
    from workbench.cli import main
    a, b, _ = three_runs
    d = diff_runs(a, b, targets="imx95", max_drop_pp=100.0)
    t = d.targets[0]
    assert any(o.op.startswith("MEAN") and o.a == "NPU" and o.b == "CPU" for o in t.placement)
    assert d.regressed and any("NPU op share" in r for r in t.regressions)
    assert main(["diff", str(a), str(b), "--targets", "imx95", "--max-drop", "100"]) == 1
    out = capsys.readouterr().out
    assert "MEAN #1: NPU -> CPU" in out and "REGRESSION" in out
    assert main(["diff", str(a), str(a), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["targets"][0]["regressions"] == []


def test_accuracy_threshold_decides_regression(three_runs):
    a, _, c = three_runs
    d = diff_runs(a, c, max_drop_pp=0.0, max_npu_share_drop=None)
    assert d.regressed == any(r.diff_pp < 0 and r.ci_high < 0 for t in d.targets for r in t.accuracy)


def test_bad_input_errors(three_runs, tmp_path):
    from workbench.cli import main
    a, _, _ = three_runs
    with pytest.raises(DiffError, match="no such run folder"):
        diff_runs(a, tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DiffError, match="no target folders"):
        diff_runs(a, tmp_path / "empty")
    with pytest.raises(DiffError, match="max_drop_pp"):
        diff_runs(a, a, max_drop_pp=float("nan"))
    assert main(["diff", str(a), str(tmp_path / "missing")]) == 2


def _summary(target, int8, n=300):
    from workbench.runs import ConditionAccuracy, TargetSummary
    return TargetSummary(target=target, status="ok", accuracy=(ConditionAccuracy(condition="daylight", n=n, int8=int8),))


def test_a_drop_within_its_ci_is_not_a_regression():
    """-1.11 pp on 300 + 300 images (95% CI about [-5.2, +3.0]) is reported, not called a regression."""
    from workbench.diff import _target_diff
    t = _target_diff("imx93", _summary("imx93", 0.9), _summary("imx93", 0.9 - 0.0111), None, None, 1.0, None, None)
    (row,) = t.accuracy
    assert row.diff_pp == pytest.approx(-1.11) and row.ci_low < 0 < row.ci_high
    assert not row.regression and not t.regressions
    # the same drop with a CI that excludes zero (many images) is one; below the threshold it is not
    big = _target_diff("imx93", _summary("imx93", 0.9, 10**6), _summary("imx93", 0.9 - 0.0111, 10**6), None, None,
                       1.0, None, None)
    assert big.accuracy[0].ci_high < 0 and big.accuracy[0].regression and "beyond noise" in big.regressions[0]
    small = _target_diff("imx93", _summary("imx93", 0.9, 10**6), _summary("imx93", 0.9 - 0.0111, 10**6), None, None,
                         2.0, None, None)
    assert not small.regressions


def _batch_out(tmp_path, run, run_id="20260101-000000"):
    """A batch --out folder around a copy of ``run``: index.html, summary.json, <target>/ notebooks, runs/<id>/."""
    import shutil
    out = tmp_path / "out"
    shutil.copytree(run, out / "runs" / run_id)
    for t in ("imx8mp", "imx95"):
        (out / t).mkdir(parents=True, exist_ok=True)
        (out / t / "20_quantize.ipynb").write_text("{}")
    (out / "summary.json").write_text(json.dumps({"run_id": run_id, "run_dir": f"runs/{run_id}", "targets": {}}))
    (out / "index.html").write_text("<html></html>")
    return out


def test_diff_reads_a_batch_out_folder_from_any_working_folder(three_runs, tmp_path, monkeypatch):
    a, b, _ = three_runs
    _batch_out(tmp_path / "A", a)
    out_b = _batch_out(tmp_path / "B", b)
    direct = diff_runs(a, b, targets="imx95", max_drop_pp=100.0)
    monkeypatch.chdir(tmp_path / "A")
    via_out = diff_runs("out", out_b, targets="imx95", max_drop_pp=100.0)
    assert via_out.run_a.endswith("runs/20260101-000000") and via_out.regressed == direct.regressed is True
    assert via_out.targets[0].regressions == direct.targets[0].regressions
    assert via_out.targets[0].accuracy == direct.targets[0].accuracy


def test_diff_refuses_an_unreadable_record(three_runs, tmp_path):
    import shutil

    from workbench.cli import main
    a, _, _ = three_runs
    broken = tmp_path / "broken"
    shutil.copytree(a, broken)
    record = broken / "imx95" / "quantize.json"
    record.write_text(record.read_text()[:200])               # truncated
    with pytest.raises(DiffError, match="quantize record cannot be read"):
        diff_runs(a, broken, targets="imx95")
    assert main(["diff", str(a), str(broken), "--targets", "imx95"]) == 2
