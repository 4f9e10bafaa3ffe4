"""A run folder with planted traps: `run_findings` and `workbench findings` collect every stage's findings."""

from __future__ import annotations

import argparse
import json

import pytest

from workbench.findings import run_findings
from workbench.runs import RunFolder

from .zoo import _calibration_set, _steady, _timing, small_dataset


@pytest.fixture
def run_dir(tmp_path):
    data = small_dataset(pool_conditions={"day": 200, "night": 200})
    folder = RunFolder(tmp_path / "run-1", target="imx93", dataset="trap-data")
    cal = _calibration_set(data, [f"cal-day-{i}" for i in range(100)] + [f"cal-night-{i}" for i in range(100)])
    path = folder.save("calibration", cal)
    record = json.loads(path.read_text())
    record["result"]["sample_ids"][0] = "test-night-3"        # edited after curation: a test id, hash stale
    path.write_text(json.dumps(record))
    folder.save("timing", _timing(_steady(20)))
    return tmp_path / "run-1"


def test_run_findings_collects_every_stage(run_dir):
    found = run_findings(run_dir)
    assert {"calibration.hash-mismatch", "timing.too-few-runs"} <= set(found.codes)
    assert found.max_severity == "error" and all(f.target == "imx93" for f in found)
    (mismatch,) = found.with_code("calibration.hash-mismatch")
    assert mismatch.evidence["file"].endswith("calibration.json")


def test_run_findings_errors_name_the_folder(tmp_path):
    from workbench.errors import WorkbenchError
    with pytest.raises(WorkbenchError, match="no such run folder"):
        run_findings(tmp_path / "nope")
    with pytest.raises(WorkbenchError, match="no target folders"):
        run_findings(tmp_path)


def _cli(argv):
    from workbench import findings_commands
    parser = argparse.ArgumentParser(prog="workbench")
    findings_commands.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_findings_command_lists_and_fails_above(run_dir, capsys):
    assert _cli(["findings", str(run_dir), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["max_severity"] == "error" and data["counts"]["error"] >= 1
    assert any(f["code"] == "calibration.hash-mismatch" for f in data["findings"])
    assert _cli(["findings", str(run_dir), "--fail-above", "warning"]) == 1
    text = capsys.readouterr().out
    assert "ERROR [imx93] calibration.hash-mismatch" in text and "next:" in text
    assert _cli(["findings", str(run_dir), "--min-severity", "error", "--json"]) == 0
    assert {f["severity"] for f in json.loads(capsys.readouterr().out)["findings"]} == {"error"}


def test_findings_command_writes_the_catalogue(tmp_path, capsys):
    from workbench.findings import catalogue_markdown
    out = tmp_path / "findings.md"
    assert _cli(["findings", "--docs", str(out)]) == 0
    assert out.read_text() == catalogue_markdown()


def test_index_opens_with_findings_and_summary_json_carries_them(run_dir):
    from workbench.batch.execute import TargetRun
    from workbench.batch.pipeline import BatchResult
    from workbench.batch.summary import write_index, write_summary
    from workbench.runs import summarize_run
    out = run_dir.parents[0]
    result = BatchResult(out_dir=str(out), run_id="run-1", run_dir="run-1",
                         targets=(TargetRun(target="imx93", status="ok", stages=()),),
                         index="index.html", summary_json="summary.json", summary_csv="summary.csv")
    summary = summarize_run(run_dir)
    write_summary(out, result, summary)
    write_index(out, result, summary, None)
    data = json.loads((out / "summary.json").read_text())
    codes = {f["code"] for f in data["targets"]["imx93"]["findings"]}
    assert {"calibration.hash-mismatch", "timing.too-few-runs"} <= codes
    assert data["findings"]["max_severity"] == "error"
    html = (out / "index.html").read_text()
    assert "Findings (all targets)" in html and "calibration.hash-mismatch" in html
    assert html.index("Findings (all targets)") < html.index("Targets")


def test_run_summary_carries_findings_and_the_gate_reads_them(run_dir):
    from workbench.evaluate.gate import Gate, check_quality_gate
    from workbench.runs import RunSummary, summarize_run
    summary = summarize_run(run_dir)
    (t,) = summary.targets
    assert {"calibration.hash-mismatch", "timing.too-few-runs"} <= {f.code for f in t.findings}
    assert RunSummary.from_dict(summary.to_dict()) == summary          # old JSON without findings loads too
    assert "Findings (all targets)" in summary._repr_html_()
    result = check_quality_gate(summary, Gate.from_mapping({"findings": {"max_severity": "warning"}}))
    assert not result.passed
    assert any(v.reason.startswith("imx93: error calibration.hash-mismatch: calibration.json: stored hash")
               for v in result.violations)


def test_every_target_report_opens_with_its_findings(tmp_path):
    import nbformat

    from workbench.batch.export import Scrubber, export_html
    out = tmp_path / "reports"
    folder = RunFolder(out / "runs" / "r1", target="imx95", dataset="trap-data")
    folder.save("timing", _timing(_steady(20)))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 50 · Board timing"), nbformat.v4.new_code_cell("1 + 1")]
    nb.metadata["papermill"] = {"parameters": {"run_dir": "runs/r1", "target": "imx95"}}
    path = out / "imx95" / "50_board_timing.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, str(path))
    html = export_html(path, hide_code=True, header="<p>manifest</p>", scrubber=Scrubber(out))
    assert "Findings for imx95" in html and "timing.too-few-runs" in html
    assert html.index("Findings for imx95") < html.index("manifest") < html.index("50 · Board timing")
    assert str(tmp_path) not in html
    # a notebook not run by the batch (no run_dir parameter) exports without a findings section
    nb.metadata["papermill"] = {"parameters": {}}
    nbformat.write(nb, str(path))
    assert "Findings" not in export_html(path)
