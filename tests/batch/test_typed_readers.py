"""What the batch wrote is read back as typed results: summary.json as a RunSummary (the console's
accuracy table), error.json as a StageFailure (the run summary's failed stage). No kernel needed."""

from __future__ import annotations

import json

import pytest

from workbench.batch.commands import _accuracy_table, accuracy_lines
from workbench.errors import BatchError
from workbench.runs import ConditionAccuracy, RunSummary, StageFailure, TargetSummary, summarize_target


def _summary() -> RunSummary:
    rows = lambda int8: (ConditionAccuracy(condition="daylight", n=540, fp32=0.998, int8=int8[0]),  # noqa: E731
                         ConditionAccuracy(condition="low-light", n=540, fp32=0.867, int8=int8[1]))
    return RunSummary(run_id="r1", targets=(
        TargetSummary(target="imx8mp", status="ok", recipe="a8w8_pt", accuracy=rows((0.99, 0.80))),
        TargetSummary(target="imx93", status="ok", recipe="a8w8_pc", accuracy=rows((0.997, None))),
        TargetSummary(target="imx95", status="failed", error="boom", failed_stage="quantize")))


def test_the_console_table_comes_from_the_typed_summary_json(tmp_path):
    summary = _summary()
    path = tmp_path / "summary.json"
    # as the batch writes it: each target's TargetSummary plus the batch's own keys beside it
    path.write_text(json.dumps({"run_id": "r1", "ok": False, "targets": {
        t.target: {**t.to_dict(), "reports": {}, "batch_status": t.status} for t in summary.targets}}))
    assert RunSummary.read(path) == summary
    lines = _accuracy_table(path)
    assert lines == accuracy_lines(summary)
    assert lines[2].split() == ["condition", "FP32", "imx8mp", "INT8", "imx93", "INT8"]     # imx95: no accuracy
    assert lines[3].split() == ["daylight", "99.80%", "99.00%", "99.70%"]
    assert lines[4].split() == ["low-light", "86.70%", "80.00%", "-"]
    assert _accuracy_table(tmp_path / "missing.json") == []


def test_a_damaged_summary_json_is_a_message(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text('{"run_id": "r1", "targets": [1, 2]')
    with pytest.raises(BatchError, match="not a batch summary"):
        RunSummary.read(path)
    assert "not a batch summary" in " ".join(_accuracy_table(path))


def test_error_json_is_a_stage_failure(tmp_path):
    folder = tmp_path / "run" / "imx93"
    folder.mkdir(parents=True)
    assert StageFailure.read(folder) is None
    failure = StageFailure(stage="quantize", message="ConverterError: ...", cell=5, notebook="imx93/20_quantize.ipynb")
    (folder / StageFailure.FILE).write_text(json.dumps(failure.to_dict()))
    assert StageFailure.read(folder) == failure
    summary = summarize_target(tmp_path / "run", "imx93")
    assert (summary.status, summary.failed_stage, summary.error) == ("failed", "quantize", "ConverterError: ...")
    (folder / StageFailure.FILE).write_text("[1, 2]")
    assert "unreadable" in (StageFailure.read(folder).message or "")
