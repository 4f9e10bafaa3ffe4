"""Bad input on the surfaces added since the first round: sweep schedulers, metric plug-ins, damaged run folders.

Each case is exit 2 with a message that names the value (never exit 3, never a traceback, never a sweep sent
to an address nobody checked)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .conftest import run_cli


# -- the Dask scheduler address: trusted like code, so it is checked before anything else -------------------
@pytest.mark.parametrize("address", ["garbage", "tcp://", "tcp://host", "tcp://host:0", "tcp://host:99999",
                                     "http://host:8786", "tcp://ho st:8786", "tcp://-oProxyCommand=x:1",
                                     "tcp://host:8786/extra", "tcp://host:8786\n", "file:///etc/passwd"])
def test_a_bad_scheduler_flag_is_exit_2_naming_it(address):
    result = run_cli("sweep", "--scheduler", address, "--no-progress")
    assert result.code == 2, result
    assert f"--scheduler {address!r} is not a Dask scheduler address" in result.err
    assert "Traceback" not in result.err


def test_a_bad_scheduler_environment_variable_is_exit_2_naming_it(monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "not-an-address")
    result = run_cli("sweep", "--no-progress")
    assert result.code == 2, result
    assert "$DASK_SCHEDULER_ADDRESS 'not-an-address' is not a Dask scheduler address" in result.err
    assert "unset DASK_SCHEDULER_ADDRESS" in result.err


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "tls://sched.example.org:8786", "tcp://[::1]:8786"])
def test_a_well_formed_scheduler_address_passes_the_check(address):
    from workbench.sweep.run import scheduler_address
    assert scheduler_address(address) == (address, "--scheduler")


def test_the_environment_is_named_as_the_source(monkeypatch):
    from workbench.sweep.run import scheduler_address
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://10.0.0.5:8786")
    assert scheduler_address(None) == ("tcp://10.0.0.5:8786", "$DASK_SCHEDULER_ADDRESS")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS")
    assert scheduler_address(None) == (None, "")


# -- a metric plug-in that returns something that is not a number ---------------------------------------------
METRICS = {
    "text": ('return "0.93"', "returned str '0.93'"),
    "none": ("return None", "returned NoneType None"),
    "mixed": ('return [1, "a"] * (len(labels) // 2)', "returned list [1, 'a'"),
    "dict": ('return {"acc": 1.0}', "returned dict {'acc': 1.0}"),
    "ragged": ("return [[1.0], [1.0, 2.0]]", "returned list [[1.0], [1.0, 2.0]]"),
    "nan": ('return float("nan")', "returned nan"),
}


@pytest.fixture(scope="module")
def reference_tflite(reference):
    return reference.tflite            # the session's build (its own call built it again in a fresh worker)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(METRICS))
def test_a_metric_that_returns_no_number_is_exit_2_naming_it(tmp_path, reference_tflite, name):
    body, phrase = METRICS[name]
    module = f"hostile_metric_{name}"            # one module per case: Python imports a module name once
    (tmp_path / f"{module}.py").write_text(f"def m(outputs, labels):\n    {body}\n")
    result = run_cli("evaluate", "reference", reference_tflite, "--metric", f"{module}:m",
                     "--conditions", "daylight", "--bootstrap", "50", "--no-cache", cwd=tmp_path)
    assert result.code == 2, result
    assert f"metric '{module}:m'" in result.err and phrase in result.err, result.err
    assert "Traceback" not in result.err


# -- damaged stage records: findings and diff refuse, naming the file and the value ---------------------------
@pytest.fixture(scope="module")
def run_folder(tmp_path_factory, digits):
    """A real run folder (calibration, quantize, accuracy, placement) of a tiny trained model on imx8mp."""
    from workbench.calibration.curate import curate_calibration_set
    from workbench.evaluate.accuracy import compare_accuracy
    from workbench.placement.analyze import analyze_placement
    from workbench.quantize.engine import quantize
    from workbench.runs import RunFolder

    from ..test_diff import _tiny
    model = _tiny(tmp_path_factory, digits)
    root = tmp_path_factory.mktemp("runs") / "run-a"
    calib = curate_calibration_set(digits, 64, strategy="random", seed=0)
    qm = quantize(model, "a8w8_pt", calib, dataset=digits)
    acc = compare_accuracy(model, {"a8w8_pt": qm}, digits, n_bootstrap=50)
    folder = RunFolder(root, target="imx8mp", model=model, dataset="digits-conditions")
    folder.save("calibration", calib)
    folder.save("quantize", qm)
    folder.save("accuracy", acc)
    folder.save("placement", analyze_placement(qm.path, "imx8mp"))
    return root


def _set(obj, path, value):
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


DAMAGE = [
    ("accuracy", ("result", "rows", 1, "accuracy"), float("nan"), "result.rows[1].accuracy is nan, not a finite number"),
    ("accuracy", ("result", "rows", 0, "n"), float("inf"), "result.rows[0].n is inf, not a whole number"),
    ("accuracy", ("result", "rows", 0, "accuracy"), "high", "result.rows[0].accuracy is 'high', not a finite number"),
    ("accuracy", ("result", "rows", 0, "accuracy"), None, "result.rows[0].accuracy is None"),
    ("accuracy", ("result", "rows", 0, "drop_pp"), -float("inf"), "result.rows[0].drop_pp is -inf"),
    ("calibration", ("result", "target_shares", "low-light"), float("inf"), "result.target_shares['low-light'] is inf"),
    ("calibration", ("result", "target_shares", "low-light"), "x", "result.target_shares['low-light'] is 'x'"),
    ("placement", ("result", "npu_share"), "most", "result.npu_share is 'most'"),
    ("placement", ("result", "ops"), {"a": 1}, "result.ops is {'a': 1}, not a list"),
    ("quantize", ("result", "sha256"), 12, "result.sha256 is 12, not text"),
]


@pytest.mark.slow
@pytest.mark.parametrize("stage,path,value,phrase", DAMAGE, ids=[f"{d[0]}-{d[1][-1]}-{d[2]!r}" for d in DAMAGE])
def test_findings_and_diff_refuse_a_damaged_record_naming_the_value(tmp_path, run_folder, stage, path, value,
                                                                    phrase):
    damaged = tmp_path / "run-b"
    shutil.copytree(run_folder, damaged)
    record = damaged / "imx8mp" / f"{stage}.json"
    data = json.loads(record.read_text())
    _set(data, path, value)
    record.write_text(json.dumps(data))              # Python's json writes NaN/Infinity, as an editor might
    for args in (("findings", damaged), ("diff", run_folder, damaged), ("diff", damaged, run_folder)):
        result = run_cli(*args)
        assert result.code == 2, (args, result)
        assert f"{stage}.json: not a readable {stage} record" in result.err and phrase in result.err, result.err
        assert "Traceback" not in result.err


@pytest.mark.slow
def test_the_undamaged_run_passes_findings_and_diff(run_folder):
    assert run_cli("findings", run_folder).code == 0
    assert run_cli("diff", run_folder, run_folder).code == 0


@pytest.mark.slow
def test_a_record_that_is_not_json_is_named(tmp_path, run_folder):
    damaged = tmp_path / "run-b"
    shutil.copytree(run_folder, damaged)
    path = damaged / "imx8mp" / "placement.json"
    path.write_bytes(path.read_bytes()[:100])
    result = run_cli("findings", damaged)
    assert result.code == 2 and "placement.json: not a stage record" in result.err, result


@pytest.mark.slow
def test_every_stage_record_of_a_real_run_reads_back(run_folder):
    from workbench.runs import check_run_records
    check_run_records(run_folder)
    assert sorted(p.stem for p in Path(run_folder, "imx8mp").glob("*.json")) == [
        "accuracy", "calibration", "placement", "quantize"]
