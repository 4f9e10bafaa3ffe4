"""Any task in the batch: a model without a task metric gets worst SQNR per target as its headline, and a
batch that crashes still rewrites index.html for its own run (never leaves the previous run's)."""

from __future__ import annotations

import pytest


def test_a_crashed_batch_rewrites_index_html_for_its_own_run(tmp_path, monkeypatch, reference):
    # `reference`: the session's model (run_batch would build it again: 16 s of CPU), and `slow` by the hook
    from workbench.batch import execute, pipeline
    out = tmp_path / "out"
    out.mkdir()
    (out / "index.html").write_text("<html>the previous run: batch 20200101-000000</html>")

    def crash(self, *args, **kwargs):
        raise RuntimeError("kernel died while running 30_accuracy_by_condition")
    monkeypatch.setattr(execute.Runner, "run_target", crash)
    with pytest.raises(RuntimeError, match="kernel died"):
        pipeline.run_batch(["imx8mp"], out=out, run_id="crashrun", progress=False)
    page = (out / "index.html").read_text()
    assert "previous run" not in page
    assert "crashrun" in page and "crashed" in page and "kernel died" in page


def test_without_a_task_metric_the_summary_shows_worst_sqnr_per_target():
    from workbench.batch.commands import accuracy_lines
    from workbench.runs import ConditionAccuracy, RunSummary, TargetSummary
    targets = tuple(TargetSummary(target=t, status="ok", recipe="a8w8_pc", accuracy=(
        ConditionAccuracy(condition="daylight", n=8, sqnr_db=31.5 - k, sqnr_output="heatmaps"),
        ConditionAccuracy(condition="low-light", n=8, sqnr_db=18.25 - k, sqnr_output="logits")))
        for k, t in enumerate(("imx8mp", "imx93")))
    summary = RunSummary(run_id="r", targets=targets)
    text = "\n".join(accuracy_lines(summary))
    assert "worst output SQNR against FP32 (dB)" in text
    assert "31.5" in text and "17.2" in text and "imx93 'logits' (low-light)" in text
    assert "worst SQNR 17.2 dB (logits, low-light)" in targets[1].summary()
    assert "no task metric; worst SQNR 18.2 dB" in summary._repr_html_()
    assert summary.csv_rows()[1]["worst_sqnr_db"] == 18.25
