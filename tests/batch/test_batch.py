"""The batch on two real targets: notebooks executed, index, summary, HTML reports, failures."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from workbench.batch import (
    check_quality_gate,
    export_html,
    external_references,
    load_gate,
    make_self_contained,
    run_batch,
)
from workbench.errors import BatchError, GateError
from workbench.runs import RunFolder, summarize_run

from .conftest import SMALL, TARGETS

DATA_URI = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+")


def _visible(html: str) -> str:
    return DATA_URI.sub("data:image/png;base64,", html)


def test_every_stage_notebook_executes(batch, batch_out):
    assert batch.exit_code == 0, batch.summary()
    for t in batch.targets:
        assert t.status == "ok"
        names = [s.stage for s in t.stages]
        assert names[0] == "10_calibration_set" and names[-1] == "50_board_timing"
        for s in t.stages:
            nb = nbformat.read(batch_out / s.notebook, as_version=4)
            assert nb.metadata.papermill.exception is False or nb.metadata.papermill.exception is None
            assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert (batch_out / "summary" / "90_summary.ipynb").is_file()


def test_every_report_opens_with_the_final_verdict(batch, batch_out):
    """index.html and every stage and summary report: the verdict block first in <body>, one row per target
    it covers, with the final results (a report exported before later stages ran was rewritten at the end)."""
    from workbench.batch.verdict import END, START
    summary = batch.summary_report.removesuffix(".html")
    pages = [batch.index, *(n for t in batch.targets for st in t.stages for n in (st.html, st.shared_html)),
             f"{summary}.html", f"{summary}.shared.html"]
    for name in pages:
        html = (batch_out / name).read_text()
        body = html[html.index("<body>") + len("<body>"):]
        assert body.index(START) <= body.index("<table"), name        # before any other table
        block = _visible(html[html.index(START):html.index(END)])
        covered = [name.split("/")[0]] if name.split("/")[0] in TARGETS else list(TARGETS)
        for t in covered:
            assert t in block, (name, t)
        for needed in ("worst drop", "pp [", "NPU 100%", "p50", "ms (host CPU", "recipe auto"):
            assert needed in block, (name, needed, block[:400])
        assert "As of this report" not in block, name
    # the first screen of index.html: the verdict before any link, findings list or manifest
    index = (batch_out / batch.index).read_text()
    assert index.index(START) < index.index("href=") and index.index(START) < index.index("Run manifest")
    assert index.count("Accuracy per condition and target") == 1


def test_results_land_in_the_run_folder(batch, batch_out):
    for target in TARGETS:
        run = RunFolder(batch_out / "runs" / "session", target=target)
        for stage in ("calibration", "quantize", "placement", "timing"):
            assert run.has(stage), (target, stage)
        q = run.load("quantize")
        assert q.recipe.name == {"imx8mp": "a8w8_pt", "imx93": "a8w8_pc"}[target]
        assert Path(batch_out, q.path).is_file()          # relative to the output folder
        assert run.load("calibration").n == SMALL["calibration_size"]
        assert run.load("timing").where == "host CPU (not an NPU)"
        manifest = json.loads((run.path / "manifest.json").read_text())
        assert manifest["quantized_sha256"] == q.sha256 and manifest["recipe"] == q.recipe.name
        assert manifest["calibration_hash"] == q.calibration_hash


def test_summary_json_and_csv(batch, batch_out):
    data = json.loads((batch_out / "summary.json").read_text())
    assert set(data["targets"]) == set(TARGETS) and data["exit_code"] == 0
    imx93 = data["targets"]["imx93"]
    assert 0 < imx93["npu_share"] <= 1 and imx93["cpu_islands"] is not None
    assert imx93["vela_estimate_ms"] > 0 and imx93["vela_label"] == "Vela 3.10.0 estimate"  # the BSP's Vela
    assert imx93["latency_kind"] == "host CPU (not an NPU)" and imx93["latency_ms"] > 0
    assert data["targets"]["imx8mp"]["vela_estimate_ms"] is None
    rows = list(csv.DictReader((batch_out / "summary.csv").open()))
    assert {r["target"] for r in rows} == set(TARGETS)
    assert all(r["latency_kind"] == "host CPU (not an NPU)" for r in rows)
    conds = {r["condition"] for r in rows if r["target"] == "imx93"}
    assert {"daylight", "low-light", "overexposed", "motion-blur", "sensor-noise"} <= conds
    assert all(r["fp32_accuracy"] and r["int8_accuracy"] for r in rows)


def test_parallel_targets_write_only_into_the_output_folder(batch, batch_out, launch_dir):
    """--jobs runs targets in threads: every kernel works in `out`, none in the launching folder."""
    assert list(launch_dir.iterdir()) == []
    for target in TARGETS:
        saved = {p.stem for p in (batch_out / "runs" / "session" / target).glob("*.json")}
        assert {"calibration", "quantize", "accuracy", "placement", "timing"} <= saved, (target, saved)


def test_accuracy_stage_reports_every_condition(batch, batch_out):
    summary = summarize_run(batch_out / "runs" / "session")
    for t in summary.targets:
        assert len(t.accuracy) == 5
        assert all(a.fp32 is not None and a.int8 is not None and a.drop_pp is not None for a in t.accuracy)


def test_reports_are_self_contained_with_figures_and_manifest(batch, batch_out):
    html_files = sorted(batch_out.rglob("*.html"))
    assert len(html_files) == 2 * (len(TARGETS) * len(batch.targets[0].stages) + 1) + 1
    images = 0
    for path in html_files:
        html = path.read_text()
        assert external_references(html) == [], path
        assert "<script" not in html.lower(), path
        visible = _visible(html)
        for local in ("/root/", "/tmp/", "/home/", str(batch_out), str(Path(sys.prefix))):
            assert local not in visible, (path, local)
        images += html.count("data:image/png;base64,")
        if path.parent.name in TARGETS:        # the manifest table sits above the notebook (after the findings)
            head = html[html.index("Run manifest"):]
            head = head[: head.index("</table>")]
            assert "recipe" in head and "model sha256" in head
    assert images >= 2 * len(TARGETS) * 3      # calibration, placement, timing plots at least
    shared = (batch_out / "imx93" / "40_op_placement.shared.html").read_text()
    full = (batch_out / "imx93" / "40_op_placement.html").read_text()
    for code in ("from_parameters", "activation_sqnr"):      # calls only the notebook's code cells make
        assert code in full and code not in shared, code


def test_index_links_every_report(batch, batch_out):
    index = (batch_out / "index.html").read_text()
    links = re.findall(r'href="([^"]+)"', index)
    for t in batch.targets:
        for s in t.stages:
            assert s.html in links and s.shared_html in links and s.notebook in links
    for link in links:
        assert (batch_out / link).is_file(), link
    assert "summary.json" in links and "summary.csv" in links
    assert "data:image/png;base64," in index


def test_quality_gate_passes_and_fails_with_a_reason_per_violation(batch, batch_out, tmp_path):
    summary = summarize_run(batch_out / "runs" / "session")
    loose = tmp_path / "loose.yaml"
    loose.write_text("placement:\n  min_npu_share: 0.5\n  max_cpu_islands: 3\nlatency:\n  max_ms: 10000\n")
    assert check_quality_gate(summary, load_gate(loose)).passed
    strict = tmp_path / "strict.yaml"
    strict.write_text("placement:\n  min_npu_share: {imx93: 1.0, imx8mp: 1.0}\n  max_cpu_islands: 0\n"
                      "latency:\n  max_ms: 0.000001\n  statistic: p99\n")
    report = check_quality_gate(summary, load_gate(strict))
    assert not report.passed
    latency = [v for v in report.violations if v.check == "latency.max_ms"]
    assert len(latency) == 2 and all("p99 latency is" in v.reason and "host CPU" in v.reason for v in latency)
    shares = [v for v in report.violations if v.check == "placement.min_npu_share"]
    assert all("below the minimum of 100.0%" in v.reason for v in shares)
    assert len(shares) == sum(t.npu_share < 1.0 for t in summary.targets)
    vela = tmp_path / "vela.yaml"
    vela.write_text("latency:\n  max_ms: 0.000001\n  source: vela\n")
    report = check_quality_gate(summary, load_gate(vela))
    assert [v.target for v in report.violations] == ["imx93"]
    assert "Vela-estimated latency" in report.violations[0].reason
    assert any("imx8mp: latency not checked" in n for n in report.notes)
    board = tmp_path / "board.yaml"
    board.write_text("latency:\n  max_ms: 0.000001\n  source: board\n")
    report = check_quality_gate(summary, load_gate(board))     # host timings are no board measurement
    assert not report.passed and len(report.violations) == 2
    assert all("no board measurement" in v.reason and "host CPU" in v.reason for v in report.violations)
    board.write_text("latency:\n  max_ms: 0.000001\n  source: board\n  allow_missing: true\n")
    report = check_quality_gate(summary, load_gate(board))
    assert report.passed and len(report.notes) == 2 and all("allow_missing" in n for n in report.notes)


def test_quality_gate_accuracy_drop(batch, batch_out, tmp_path):
    summary = summarize_run(batch_out / "runs" / "session")
    gate = tmp_path / "acc.yaml"
    gate.write_text("accuracy:\n  max_drop_pp: -0.0\n  per_condition:\n    daylight: 100\n")
    report = check_quality_gate(summary, load_gate(gate))
    reasons = [v.reason for v in report.violations]
    assert not any("daylight" in r for r in reasons)
    worst = [a for t in summary.targets for a in t.accuracy if a.condition != "daylight" and a.drop_pp > 0]
    assert len(reasons) == len(worst) and all("pp (FP32" in r for r in reasons)


@pytest.mark.parametrize("text, phrase", [
    ("placement:\n  min_npu_share: 1.5\n", "`placement.min_npu_share.*` must be in [0.0, 1.0]"),
    ("latency:\n  max_ms: 1\n  source: host\n", "`latency.source` must be one of 'measured', 'board', 'vela'"),
    ("placement:\n  max_cpu_islands: -1\n", "must be an integer >= 0"),
    ("speed: {}\n", "unknown section 'speed'"),
    ("accuracy:\n  max_drop: 1\n", "unknown key accuracy.max_drop"),
    ("accuracy:\n  max_drop_pp: lots\n", "`accuracy.max_drop_pp` must be a finite number"),
    ("latency:\n  max_ms: .nan\n", "`latency.max_ms` must be a finite number"),
    ("- 1\n", "a gate file is a mapping"),
])
def test_gate_file_errors(tmp_path, text, phrase):
    path = tmp_path / "gate.yaml"
    path.write_text(text)
    with pytest.raises(GateError) as info:
        load_gate(path)
    assert phrase in str(info.value) and "gate.yaml" in str(info.value)


def test_example_gate_file_loads():
    gate = load_gate(Path(__file__).resolve().parents[2] / "gate.yaml")
    assert gate.max_drop_pp is not None and gate.min_npu_share["*"] > 0 and gate.max_cpu_islands == 0
    assert gate.latency_source == "measured"


def test_failing_target_keeps_the_others_and_exits_non_zero(batch, batch_out):
    """imx95 gets an unknown board: its timing notebook fails; imx8mp's results stay."""
    result = run_batch(["imx8mp", "imx95"], out=batch_out, run_id="fail", jobs=2, stages=["timing"],
                       target_parameters={"imx95": {"board": "no-such-board"}}, progress=False, **SMALL)
    assert result.exit_code == 1
    ok, bad = result.targets
    assert ok.status == "ok" and bad.status == "failed" and bad.failed_stage == "50_board_timing"
    assert "boards.yaml" in bad.error and "does not exist" in bad.error
    run = RunFolder(batch_out / "runs" / "fail", target="imx8mp")   # ran alone: computed what was missing
    assert run.has("timing") and run.has("quantize") and run.has("placement")
    nb = nbformat.read(batch_out / bad.stages[0].notebook, as_version=4)
    assert nb.metadata.papermill.exception is True
    assert any("papermill-error-cell-tag" in c.metadata.get("tags", []) for c in nb.cells)
    html = (batch_out / bad.stages[0].html).read_text()
    assert "BoardError" in html and "An Exception was encountered" in html
    index = (batch_out / "index.html").read_text()
    assert "FAILED at 50_board_timing" in index and "boards.yaml" in index
    data = json.loads((batch_out / "summary.json").read_text())
    assert data["targets"]["imx95"]["status"] == "failed" and data["targets"]["imx8mp"]["batch_status"] == "ok"
    assert data["exit_code"] == 1


def test_cli_gate_failure_exit_code_and_reasons(batch, batch_out, tmp_path):
    gate = tmp_path / "gate.yaml"
    gate.write_text("placement:\n  max_cpu_islands: 0\nlatency:\n  max_ms: 0.000001\n")
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "batch", "--targets", "imx93", "--stages", "placement",
         "--out", str(batch_out), "--run-id", "session", "--calibration-size", "60", "--timing-runs", "5",
         "--timing-warmup", "2", "--gate", str(gate), "--no-progress"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "gate: imx93: p50 latency is" in proc.stdout and "above the limit of 1e-06 ms" in proc.stdout
    # the accuracy saved by the session batch is printed per condition, FP32 beside INT8
    assert "top-1 accuracy on the test split" in proc.stdout and "imx93 INT8" in proc.stdout
    assert proc.stdout.strip().endswith("index.html")


@pytest.mark.parametrize("kwargs, phrase", [
    ({"targets": "imx8m"}, "`target` must be one of 'imx8mp', 'imx93', 'imx95'. Got 'imx8m' instead."),
    ({"jobs": 0}, "`jobs` must be a positive integer"),
    ({"stages": ["quantise"]}, "`stage` must be one of"),
    ({"parameters": {"calibraton_size": 3}}, "`parameter` must be one of"),
    ({"run_id": "../x"}, "`run_id` must use letters"),
    ({"target_parameters": {"imx95": {"board": "x"}}}, "`target` must be one of 'imx8mp'. Got 'imx95'"),
])
def test_bad_input_fails_before_any_kernel(tmp_path, kwargs, phrase):
    kwargs = {"targets": ["imx8mp"], **kwargs}
    with pytest.raises(BatchError) as info:
        run_batch(kwargs.pop("targets"), out=tmp_path / "o", progress=False, **kwargs)
    assert phrase in str(info.value)
    assert not (tmp_path / "o").exists()


def _custom_op_tflite(path):
    """A float .tflite whose one op is MediaPipe's custom Convolution2DTransposeBias (written without TensorFlow)."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu
    code = fb.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = fb.BuiltinOperator.CUSTOM
    code.customCode = "Convolution2DTransposeBias"
    code.version = 1
    tensors = []
    for name, shape in (("image", [1, 16, 16, 3]), ("segment", [1, 32, 32, 1])):
        t = fb.TensorT()
        t.name, t.shape, t.type, t.buffer = name, np.array(shape, np.int32), fb.TensorType.FLOAT32, 0
        tensors.append(t)
    op = fb.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, [0], [1]
    sg = fb.SubGraphT()
    sg.tensors, sg.inputs, sg.outputs, sg.operators = tensors, [0], [1], [op]
    model = fb.ModelT()
    model.version, model.operatorCodes, model.buffers, model.subgraphs = 3, [code], [fb.BufferT()], [sg]
    path.write_bytes(bytes(fu.convert_object_to_bytearray(model)))
    return path


def test_a_custom_op_is_named_before_any_kernel(tmp_path):
    """MediaPipe's selfie segmentation: the batch used to run three calibration notebooks (184 s) before each
    target's quantize stage refused the custom op."""
    from workbench.errors import ModelError
    model = _custom_op_tflite(tmp_path / "selfie.tflite")
    with pytest.raises(ModelError, match=r"1 custom op\(s\) \('Convolution2DTransposeBias'\): #0 .*'segment'"):
        run_batch(["imx8mp", "imx93"], model=str(model), out=tmp_path / "o", progress=False)
    assert not (tmp_path / "o").exists()


def test_make_self_contained_strips_external_references():
    html = ('<script src="https://cdn.example/require.js"></script><link rel="stylesheet" href="http://x/y.css">'
            '<a href="https://example.com/doc">the doc</a><img src="data:image/png;base64,AAAA"/>'
            '<script>alert(1)</script>')
    clean = make_self_contained(html)
    assert external_references(clean) == [] and "the doc" in clean and "data:image/png" in clean
    assert "<script" not in clean


def test_export_html_of_a_small_notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("[the doc](https://example.com)"), nbformat.v4.new_code_cell("1 + 1")]
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    html = export_html(path, hide_code=True, header="<p>manifest</p>")
    assert html.index("manifest") < html.index("the doc") and "1 + 1" not in html
    assert external_references(html) == []


def test_a_warm_batch_reuses_unchanged_notebooks_and_reruns_what_changed(batch, batch_out, tmp_path):
    """Same inputs: no notebook executes again and the reports stay byte-identical; a changed
    parameter re-executes only the stages it reaches; a damaged output is never vouched for."""
    import shutil
    out = tmp_path / "out"
    shutil.copytree(batch_out, out)
    # other tests of the session rerun single stages into batch_out with other parameters (another run
    # id): this first run executes those stages again, the second must execute nothing
    first = run_batch(TARGETS, out=out, run_id="session", jobs=2, progress=False, **SMALL)
    assert first.exit_code == 0, first.summary()
    before = {p: p.read_bytes() for p in out.rglob("*.ipynb")}
    warm = run_batch(TARGETS, out=out, run_id="session", jobs=2, progress=False, **SMALL)
    assert warm.exit_code == 0, warm.summary()
    executed = [(t.target, s.stage, s.why) for t in warm.targets for s in t.stages if not s.reused]
    assert not executed, executed
    assert {p: p.read_bytes() for p in out.rglob("*.ipynb")} == before
    assert json.loads((out / "summary.json").read_text())["targets"].keys() == set(TARGETS)

    # only the timing notebook declares timing_runs: the stages before it are reused
    changed = run_batch(("imx8mp",), out=out, run_id="session", progress=False,
                        **{**SMALL, "timing_runs": 6})
    reused = {s.stage: s.reused for s in changed.targets[0].stages}
    assert reused == {"10_calibration_set": True, "20_quantize": True, "30_accuracy_by_condition": True,
                      "40_op_placement": True, "50_board_timing": False}

    # a damaged stage output: that stage runs again (and the record is not trusted)
    accuracy = out / "runs" / "session" / "imx8mp" / "accuracy.json"
    accuracy.write_text("{")
    again = run_batch(("imx8mp",), out=out, run_id="session", progress=False, **{**SMALL, "timing_runs": 6})
    reused = {s.stage: s.reused for s in again.targets[0].stages}
    assert reused["30_accuracy_by_condition"] is False and reused["20_quantize"] is True
    assert isinstance(json.loads(accuracy.read_text()), dict)      # rewritten whole


def test_rerun_executes_every_notebook(batch, batch_out, tmp_path):
    import shutil
    out = tmp_path / "out"
    shutil.copytree(batch_out, out)
    fresh = run_batch(("imx93",), out=out, run_id="session", progress=False, stages=["placement"], reuse=False,
                      **SMALL)
    assert [s.reused for s in fresh.targets[0].stages] == [False]


def test_export_moves_stderr_and_reprs_to_the_run_log_and_keeps_workbench_warnings(tmp_path):
    """Library output (standard error) and bare reprs leave the report for the run's batch.log; a workbench
    warning stays once as text; a string a cell ends with shows without its quotes."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"parameters": {"run_dir": "runs/r"}}
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stderr", text="fully_quantize: 0, inference_type: 6\n"
                               "WorkbenchWarning: host CPU (not an NPU): still warming up\n"),
        nbformat.v4.new_output("execute_result", data={"text/plain": "RunFolder('runs/r', target='imx8mp')"},
                               execution_count=1)]
    text = nbformat.v4.new_code_cell("y")
    text.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "'calibration set x: 60 samples'"},
                                           execution_count=2)]
    nb.cells = [cell, text]
    folder = tmp_path / "imx8mp"
    folder.mkdir()
    path = folder / "n.ipynb"
    nbformat.write(nb, path)
    html = export_html(path)
    assert "fully_quantize" not in html and "RunFolder(" not in html
    assert html.count("host CPU (not an NPU): still warming up") == 1
    assert "calibration set x: 60 samples" in html and "&#x27;calibration set" not in html
    assert "'calibration set" not in html
    assert "block(s) of library output" in html
    log = (tmp_path / "runs" / "r" / "batch.log").read_text()
    assert "fully_quantize" in log and "RunFolder(" in log and "n.ipynb cell 0" in log


def test_no_absolute_path_of_this_machine_in_any_shared_output(batch, batch_out):
    """Issue 24: records, summaries, executed notebooks and reports are shared; none names the checkout, the venv,
    the home, the temp or the cache folder of this machine (the Vela command's vela.ini included)."""
    import os
    import tempfile

    import workbench
    from workbench._io import cache_dir
    roots = {"checkout": Path(workbench.__file__).resolve().parents[1], "venv": Path(sys.prefix),
             "home": Path.home(), "temp": Path(tempfile.gettempdir()), "cache": cache_dir(),
             "output": batch_out}
    needles = {name: {str(p), os.path.realpath(p)} for name, p in roots.items()}
    found = []
    for path in sorted(batch_out.rglob("*")):
        if not path.is_file() or path.suffix not in (".json", ".ipynb", ".csv", ".html", ".txt", ".md", ".yaml"):
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".html":
            text = _visible(text)
        for name, variants in needles.items():
            for needle in variants:
                if needle + os.sep in text or f'"{needle}"' in text:
                    i = text.index(needle)
                    found.append(f"{path.relative_to(batch_out)}: {name} {text[max(0, i - 60):i + 80]!r}")
    assert not found, "\n".join(found[:20])
    placement = json.loads((batch_out / "runs" / "session" / "imx93" / "placement.json").read_text())
    command = json.dumps(placement)
    assert "vela.ini" in command and "ethosu/config_files/" in command
