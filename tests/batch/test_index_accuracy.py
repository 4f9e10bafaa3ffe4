"""index.html of the session batch: accuracy per condition and target with CIs, and who placed the ops."""

from __future__ import annotations

import html as _html
import re

from workbench.batch.summary import accuracy_table_html, write_index
from workbench.runs import RunFolder, summarize_run

from .conftest import TARGETS


def _text(page: str) -> str:
    page = re.sub(r"<style>.*?</style>", "", page, flags=re.DOTALL)
    return _html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_index_shows_accuracy_with_cis_and_each_targets_compiler_and_bsp(batch, batch_out, tmp_path):
    # the index is rebuilt beside the session's run folder (another test reuses batch_out for a failing run)
    (tmp_path / "runs").symlink_to(batch_out / "runs", target_is_directory=True)
    run_dir = batch_out / batch.run_dir
    summary = summarize_run(run_dir, targets=list(TARGETS))
    write_index(tmp_path, batch, summary, None)
    page = (tmp_path / "index.html").read_text()
    text = " ".join(_text(page).split())
    assert "Accuracy per condition and target, with 95% bootstrap CIs" in text
    assert "placement by (compiler, BSP)" in text
    for target in TARGETS:
        folder = RunFolder(run_dir, target=target)
        placement, report = folder.load("placement"), folder.load("accuracy")
        assert placement.bsp and placement.compiler_version
        assert f"{target} ok {placement.produced_by}" in text          # the Targets row names both
        model = report.candidates[0]
        for condition in report.conditions:
            ref, row = report.row(condition, report.reference), report.row(condition, model)
            fp32 = f"{ref.accuracy:.2%} [{ref.ci_low:.2%}, {ref.ci_high:.2%}]"
            int8 = f"{row.accuracy:.2%} [{row.ci_low:.2%}, {row.ci_high:.2%}]"
            drop = f"{row.drop_pp:+.2f} [{row.drop_ci_low:+.2f}, {row.drop_ci_high:+.2f}]"
            assert f"{target} {condition} {row.n} {fp32} {int8}" in text, (target, condition)
            assert drop in text
    assert "vela 3.10.0, BSP lf-6.6.3_1.0.0" in text                # imx93: the BSP's Vela compiled it


def test_accuracy_table_is_empty_without_accuracy_results(tmp_path):
    (tmp_path / "imx8mp").mkdir()
    summary = summarize_run(tmp_path, targets=["imx8mp"])
    assert accuracy_table_html(tmp_path, summary) == ""
