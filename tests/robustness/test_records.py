"""Run-folder records: never choose code, hold portable paths, are checked before reuse;
notebook parameters are plain data only."""

from __future__ import annotations

import json
import os

import pytest

from workbench._validation import check_plain
from workbench.errors import BatchError, WorkbenchError, WorkbenchWarning
from workbench.runs import RunFolder, local_paths, portable_paths


@pytest.mark.parametrize("value", [(1, 2), {1, 2}, b"x", 1j, float("nan"), float("-inf"), [1, (2,)],
                                   {"a": {3}}, {1: "x"}, object(), bytearray(b"x"), range(3)])
def test_only_plain_values_reach_a_notebook(value):
    with pytest.raises(WorkbenchError, match="`p"):
        check_plain("p", value)


def test_plain_values_pass_unchanged():
    value = {"a": [1, 2.5, None, True, "x;import os"], "b": {"c": []}}
    assert check_plain("p", value) == value


def test_run_batch_refuses_a_crafted_parameter_before_any_kernel(tmp_path):
    from workbench.batch import run_batch
    with pytest.raises(BatchError, match="parameter seed"):
        run_batch(["imx93"], out=tmp_path / "r", parameters={"seed": (1, "__import__('os')")}, progress=False)
    with pytest.raises(BatchError, match="parameter imx93:seed"):
        run_batch(["imx93"], out=tmp_path / "r", target_parameters={"imx93": {"seed": b"x"}}, progress=False)
    assert not (tmp_path / "r").exists()


def _record(tmp_path, stage="calibration", type_="workbench.calibration.curate:CalibrationSet"):
    run = RunFolder(tmp_path / "runs" / "r1", target="imx93")
    run.file(stage).write_text(json.dumps({"stage": stage, "type": type_, "result": {}}))
    return run


@pytest.mark.parametrize("type_", ["os:system", "subprocess:Popen", "workbench.quantize.engine:QuantizedModel",
                                   "builtins:eval", ""])
def test_a_record_never_chooses_the_code_that_reads_it(tmp_path, type_, monkeypatch):
    imported = []
    import importlib
    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: imported.append(name) or real(name, *a))
    run = _record(tmp_path, type_=type_)
    with pytest.raises(BatchError, match="the file was edited"):
        run.load("calibration")
    assert imported == []


def test_a_truncated_record_is_a_message(tmp_path):
    run = RunFolder(tmp_path / "runs" / "r1", target="imx93")
    run.file("quantize").write_text('{"stage": "quantize", "type": "workbench.quan')
    with pytest.raises(BatchError, match="quantize.json: not a stage record"):
        run.load("quantize")


def test_an_incomplete_record_is_a_message(tmp_path):
    run = _record(tmp_path)
    with pytest.raises(BatchError, match="not a readable calibration record"):
        run.load("calibration")


def test_records_hold_portable_paths(tmp_path, monkeypatch):
    from workbench._io import cache_dir
    monkeypatch.chdir(tmp_path)
    cache = str(cache_dir())
    home = os.path.expanduser("~")
    record = {"model": f"{cache}/reference/k/model.keras", "out": f"{tmp_path}/runs/r1/imx93/model/model.tflite",
              "home": f"{home}/models/m.onnx", "board": "/usr/lib/libvx_delegate.so", "name": "a8w8_pc",
              "nested": [{"p": f"{cache}/eval/x.npz"}]}
    portable = portable_paths(record)
    text = json.dumps(portable)
    assert cache not in text and str(tmp_path) not in text
    assert portable["model"] == "$NPU_WORKBENCH_CACHE/reference/k/model.keras"
    assert portable["out"] == "runs/r1/imx93/model/model.tflite"
    assert portable["board"] == "/usr/lib/libvx_delegate.so" and portable["name"] == "a8w8_pc"
    back = local_paths(portable)
    assert back["model"] == record["model"] and back["nested"][0]["p"] == record["nested"][0]["p"]


def test_a_reused_quantize_record_is_checked_against_the_model_bytes(tmp_path, monkeypatch):
    """The model a quantize.json names was rewritten: the record is not reused."""
    from types import SimpleNamespace

    from workbench.chain import _model_intact
    model = tmp_path / "model.tflite"
    model.write_bytes(b"int8 model")
    from workbench._io import sha256_file
    q = SimpleNamespace(path=str(model), sha256=sha256_file(model))
    assert _model_intact(q)
    model.write_bytes(b"another model")
    with pytest.warns(WorkbenchWarning, match="sha256 differs"):
        assert not _model_intact(q)
    model.unlink()
    with pytest.warns(WorkbenchWarning, match="missing"):
        assert not _model_intact(q)
