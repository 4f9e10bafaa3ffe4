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
    assert "Warnings and errors (all targets)" in html and "calibration.hash-mismatch" in html
    assert html.index("Warnings and errors (all targets)") < html.index("summary.json")


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


def _batch_out_with_quantize(zoo_root, tmp_path, monkeypatch, run_id="20260101-000000"):
    """A batch --out folder as the kernels write it (working folder = --out, run_dir relative): a per-tensor
    quantize record of the 1000x spread model, the notebooks' <target>/ folder, summary.json."""
    from workbench.quantize.engine import quantize

    from .zoo import _nchw_calibration, _onnx_model, _shared
    model = _shared(zoo_root, "spread.onnx", lambda p: _onnx_model(p, depthwise_spread=1000.0))
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)
    folder = RunFolder(f"runs/{run_id}", target="imx8mp", model=str(model), dataset="trap-data")
    q = quantize(model, "a8w8_pt", _nchw_calibration(), backend="onnx", output=folder.path / "model")
    folder.save("quantize", q)
    (out / "imx8mp").mkdir()
    (out / "imx8mp" / "20_quantize.ipynb").write_text("{}")
    (out / "summary.json").write_text(json.dumps({"run_id": run_id, "run_dir": f"runs/{run_id}", "targets": {}}))
    return out


def test_findings_of_a_batch_out_folder_from_any_working_folder(zoo_root, tmp_path, monkeypatch, capsys):
    out = _batch_out_with_quantize(zoo_root, tmp_path, monkeypatch)
    record = json.loads((out / "runs/20260101-000000/imx8mp/quantize.json").read_text())
    assert record["result"]["path"] == "model/model.onnx"           # relative to the record's own folder
    here = run_findings(out)
    assert "quantize.per-tensor-collapse" in here.codes
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert run_findings(out) == here == run_findings(out / "runs" / "20260101-000000")
    assert run_findings("../out") == here
    assert _cli(["findings", "../out", "--fail-above", "info"]) == 1
    text = capsys.readouterr().out
    assert "run 20260101-000000 (batch output ../out: the run its summary.json names" in text
    assert "quantize.per-tensor-collapse" in text


def test_the_latest_run_of_a_batch_out_folder_is_named(tmp_path):
    import os

    from workbench.findings import resolve_run
    for i, run_id in enumerate(("run-old", "run-new")):
        folder = RunFolder(tmp_path / "out" / "runs" / run_id, target="imx93", dataset="trap-data")
        path = folder.save("timing", _timing(_steady(20)))
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    where = resolve_run(tmp_path / "out")
    assert where.run_id == "run-new" and "the newest run, runs/run-new (of 2 runs)" in where.note


def test_an_unreadable_record_is_an_error_finding_in_every_view(run_dir, capsys):
    from workbench.evaluate.gate import Gate, check_quality_gate
    from workbench.runs import summarize_run
    folder = RunFolder(run_dir, target="imx93", dataset="trap-data")
    text = folder.file("timing").read_text()
    folder.file("timing").write_text(text[: len(text) // 2])       # truncated: the timing findings are unknown
    found = run_findings(run_dir)
    (f,) = found.with_code("run.unreadable-record")
    assert f.severity == "error" and f.evidence["stage"] == "timing" and "timing.json" in f.message
    summary = summarize_run(run_dir)
    assert "run.unreadable-record" in {x.code for x in summary.targets[0].findings}
    gate = check_quality_gate(summary, Gate(findings_max_severity="warning"))
    assert not gate.passed and any("run.unreadable-record" in v.reason for v in gate.violations)
    # `workbench findings` lists it with the others, then refuses the damaged folder (exit 2, issue 24)
    from workbench.cli import main
    capsys.readouterr()
    assert main(["findings", str(run_dir), "--fail-above", "warning"]) == 2
    out, err = capsys.readouterr()
    assert "ERROR [imx93] run.unreadable-record" in out and "calibration.hash-mismatch" in out
    assert "timing.json: not a stage record (invalid JSON" in err and "calibration" not in err
