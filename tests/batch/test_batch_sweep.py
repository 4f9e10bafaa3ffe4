"""``run_batch(sweep=True)`` / ``workbench batch --sweep``: 60_sweep executed once across the targets,
exported and linked from index.html like the stages, and reused by a warm batch.

A tiny sweep keeps it short: one target, one recipe, one strategy, one size (one cell, serial), on
the reference model with the batch's calibration (so the quantization is the calibration stage's).
"""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from workbench.batch import run_batch

from .conftest import SMALL

TINY = {"recipes": "a8w8_pc", "strategies": "stratified", "sizes": str(SMALL["calibration_size"]),
        "serial": True}


def _run(out, **changes):
    return run_batch(("imx8mp",), out=out, run_id="sweep", stages=["calibration"], sweep=True, progress=False,
                     parameters={**TINY, **changes}, **SMALL)


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return tmp_path_factory.mktemp("batch-sweep")


@pytest.mark.slow
def test_batch_runs_the_sweep_links_it_and_reuses_it_warm(reference, out):
    first = _run(out)
    assert first.exit_code == 0, first.summary()
    s = first.sweep
    assert s is not None and s.status == "ok" and not s.reused
    assert (s.notebook, s.html, s.shared_html) == ("sweep/60_sweep.ipynb", "sweep/60_sweep.html",
                                                  "sweep/60_sweep.shared.html")
    nb = nbformat.read(out / s.notebook, as_version=4)
    injected = nb.metadata.papermill.parameters
    assert injected["targets"] == "imx8mp" and injected["model"] == "reference" and injected["serial"] is True
    # the result: one cell, a recommendation for the batch's target, the Pareto plot, in the run folder
    result = json.loads((out / "sweep" / "sweep.json").read_text())
    assert len(result["cells"]) == 1 and result["cells"][0]["ok"], result["cells"][0].get("error")
    assert [r["target"] for r in result["recommendations"]] == ["imx8mp"]
    assert (out / "sweep" / "pareto.png").stat().st_size > 1000
    shared = (out / s.shared_html).read_text()
    assert "Recommendation" in shared or "recommended" in shared
    assert "data:image/png" in shared and str(out) not in shared and "a8w8_pc" in shared
    # linked from the index, listed in summary.json
    index = (out / "index.html").read_text()
    for href in (s.shared_html, s.html, s.notebook, "sweep/pareto.png", "sweep/sweep.json"):
        assert f'href="{href}"' in index, href
    assert "imx8mp: a8w8_pc, stratified calibration of 60" in index
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sweep"]["status"] == "ok" and summary["sweep"]["sweep"] == "sweep/sweep.json"

    # warm: nothing changed, the sweep is reused with its report (no kernel starts)
    before = (out / s.notebook).read_bytes()
    warm = _run(out)
    assert warm.exit_code == 0 and warm.sweep is not None and warm.sweep.reused
    assert (out / s.notebook).read_bytes() == before
    # a damaged output of the sweep is never vouched for: it runs again
    (out / "sweep" / "sweep.json").write_text("{")
    again = _run(out)
    assert again.sweep is not None and not again.sweep.reused and again.sweep.status == "ok"
    assert json.loads((out / "sweep" / "sweep.json").read_text())["recommendations"]


@pytest.mark.slow
def test_the_sweep_report_fits_1200px_and_shows_tables_not_reprs(reference, out, tmp_path):
    """The sweep report in headless Chromium at 1200 px: nothing scrolls sideways, the verdict comes first,
    the recommendation is a table (no `Recommendation(` repr), no standard-error block."""
    from tests._browser import chromium

    from .test_reports_in_browser import SIDEWAYS
    page = out / "sweep" / "60_sweep.shared.html"
    if not page.is_file():
        pytest.skip("the sweep batch of the test above did not run")
    html = page.read_text()
    assert "Recommendation(" not in html and not re.search(r'class="[^"]*output_stderr', html)
    assert "Recommendation per target" in html and "workbench sweep --model reference" in html
    driver = chromium(tmp_path / "profile")
    try:
        driver.get(page.resolve().as_uri())
        assert driver.execute_script(SIDEWAYS) == []
        assert driver.execute_script("return document.getElementById('verdict').getBoundingClientRect().top") < 200
    finally:
        driver.quit()


@pytest.mark.slow
def test_a_failing_sweep_fails_the_batch_and_keeps_its_report(reference, out):
    result = _run(out, recipes="a8w8_nope")
    assert result.exit_code == 1 and result.sweep is not None and result.sweep.status == "failed"
    assert "SweepError" in result.sweep.error and "a8w8_nope" in result.sweep.error
    assert "sweep FAILED" in result.summary()
    assert "An Exception was encountered" in (out / result.sweep.html).read_text()
    assert "Sweep across targets (FAILED" in (out / "index.html").read_text()


def test_cli_sweep_axes_reach_the_notebook_as_text():
    """`workbench batch --sweep -p sizes=64,256 -p recipes=a8w8_pc`: the notebook's axes are comma-separated
    strings (a Python tuple would be refused as a parameter)."""
    from workbench.batch.commands import parse_params, sweep_axes
    common, _ = parse_params(["sizes=64,256", "recipes=a8w8_pc,a8w8_pt", "strategies=random", "serial=True",
                              "exclusions=none,worst-1"])
    assert sweep_axes(common) == {"sizes": "64,256", "recipes": "a8w8_pc,a8w8_pt", "strategies": "random",
                                  "serial": True, "exclusions": "none,worst-1"}
    assert sweep_axes(parse_params(["sizes=64"])[0]) == {"sizes": "64"}
