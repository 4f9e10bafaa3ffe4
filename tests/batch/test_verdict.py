"""The verdict block (workbench.batch.verdict) and the grouped findings table, from real result types.

Fast: no batch; the session batch's pages are checked in test_reports_in_browser.py and test_batch.py."""

from __future__ import annotations

import re

from workbench.batch.verdict import END, START, reconcile, replace_block, verdict_html, without_block
from workbench.findings import Findings, findings_html, make
from workbench.runs import ConditionAccuracy, RunSummary, TargetSummary
from workbench.sweep.cell import CellResult
from workbench.sweep.plan import SweepCell
from workbench.sweep.result import Recommendation


def _island(i: int, op: str = "CONV_2D", reason: str = "imx95.int16: INT16 activations; Neutron-S runs INT8 only"):
    return make("placement.cpu-island", f"m.tflite on imx95: {op} #{i} run(s) on the CPU between NPU segments "
                f"(ops {i}-{i})", target="imx95",
                evidence={"authority": "rule table", "first": i, "last": i,
                          "ops": [{"index": i, "op": op, "name": f"model/very/long/scope/{op.lower()}_{i}/BiasAdd;x",
                                   "reasons": [reason]}]})


def test_identical_islands_collapse_into_one_row_with_names_behind_details():
    found = Findings(tuple(_island(i) for i in range(9)) + (_island(20, "MEAN", "imx95.mean: axis"),))
    html = findings_html(found)
    rows = re.findall(r"<tr style=", html)
    assert len(rows) == 1, "ten islands of one code and target: one row"
    assert "10x" in html and "9 op(s) CONV_2D (imx95.int16: INT16 activations; Neutron-S runs INT8 only)" in html
    assert "1 op(s) MEAN" in html
    # tensor names only inside a <details>
    outside = re.sub(r"<details>.*?</details>", "", html, flags=re.DOTALL)
    assert "very/long/scope" not in outside and "very/long/scope" in html


def test_evidence_numbers_are_rounded():
    f = make("calibration.clipping", "clips", target="imx8mp", evidence={"rate": 0.123456789, "layers": 3})
    html = findings_html(Findings((f,)))
    assert "rate=0.123" in html and "0.1234" not in html and "layers=3" in html


def _cell(target: str, recipe: str, drop: float, ms: float) -> CellResult:
    return CellResult(cell=SweepCell(target=target, recipe=recipe, strategy="stratified", size=200), ok=True,
                      worst_condition="noise", worst_drop_pp=drop, npu_ops=9, total_ops=9, npu_share=1.0,
                      latency_ms=ms, latency_kind="host CPU")


def test_the_sweep_pick_and_the_batch_recipe_are_reconciled_in_one_sentence():
    summary = RunSummary(run_id="r", targets=(TargetSummary(target="imx8mp", status="ok", recipe="a8w8_pt"),
                                              TargetSummary(target="imx95", status="ok", recipe="a8w8_pc")))
    recs = [Recommendation(target="imx8mp", cell=_cell("imx8mp", "a8w8_pt", 0.5, 1.0), passed_gate=True, reason="x"),
            Recommendation(target="imx95", cell=_cell("imx95", "a8w8_pt", 0.7, 0.9), passed_gate=True, reason="y")]
    text = reconcile(summary, recs)
    assert text.count(".") >= 1 and "\n" not in text
    assert "agree on imx8mp a8w8_pt" in text
    assert "for imx95 the sweep picks a8w8_pt" in text and "the batch ran the target's recipe a8w8_pc" in text
    assert "-p imx95:recipe=a8w8_pt" in text
    assert reconcile(summary, []) == ""


def test_verdict_block_is_replaceable_and_ignored_by_the_reuse_digest():
    from workbench.batch.verdict import TargetVerdict
    v = TargetVerdict(target="imx8mp", status="ok", recipe="a8w8_pt: why", gate="PASS",
                      accuracy="worst drop +0.10 [-0.2, +0.4] pp under noise", placement="NPU 100%",
                      latency="p50 1.0 ms (host CPU)", problems=(("warning", "calibration.clipping: x"),))
    block = verdict_html([v])
    assert block.startswith(START) and block.endswith(END) and "WARNING" in block and "PASS" in block
    page = "<html><body>" + verdict_html([]) + "<p>rest</p></body></html>"
    new = replace_block(page, block)
    assert "imx8mp" in new and new.count(START) == 1 and new.endswith("<p>rest</p></body></html>")
    assert without_block(new) == without_block(page)
    assert replace_block("<html><body><p>x</p></body></html>", block).startswith("<html><body>" + START)


def test_target_summary_accuracy_text_shows_ci_and_condition():
    from workbench.batch.verdict import _accuracy_text
    t = TargetSummary(target="imx93", status="ok", recipe="a8w8_pc", stages=("accuracy",), accuracy=(
        ConditionAccuracy(condition="clean", drop_pp=0.1, drop_ci_low=-0.2, drop_ci_high=0.4),
        ConditionAccuracy(condition="blur", drop_pp=1.5, drop_ci_low=0.5, drop_ci_high=2.5)))
    assert _accuracy_text(t) == "worst drop +1.50 pp [+0.50, +2.50] under blur"


def test_a_model_without_a_task_metric_shows_its_worst_sqnr():
    from workbench.batch.verdict import _accuracy_text
    t = TargetSummary(target="imx93", status="ok", recipe="a8w8_pc", stages=("accuracy",), accuracy=(
        ConditionAccuracy(condition="clean", sqnr_db=31.2, sqnr_output="boxes"),
        ConditionAccuracy(condition="blur", sqnr_db=18.4, sqnr_output="scores")))
    assert _accuracy_text(t) == "no task metric; worst SQNR 18.4 dB (scores, under blur)"


def test_a_report_exported_without_a_run_folder_keeps_a_place_for_the_verdict(tmp_path):
    """The sweep notebook has no run_dir: its export carries an empty verdict block, so the batch's refresh
    fills it without changing what the reuse record hashed (a warm batch reuses the sweep)."""
    import nbformat

    from workbench.batch.export import export_html
    from workbench.batch.reuse import report_digest
    from workbench.batch.verdict import refresh_reports
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# sweep")]
    (tmp_path / "sweep").mkdir()
    path = tmp_path / "sweep" / "60_sweep.ipynb"
    nbformat.write(nb, path)
    page = tmp_path / "sweep" / "60_sweep.html"
    page.write_text(export_html(path))
    assert START + END in page.read_text()
    before = report_digest(page)
    assert refresh_reports(tmp_path, ["sweep/60_sweep.html"], {None: verdict_html([])}) == 1
    assert "Verdict" in page.read_text() and report_digest(page) == before
