"""Every HTML report of the session batch, opened in headless Chromium as a person would see it.

Each page is loaded from disk, screenshotted, and checked: no error text on the page (a
traceback, an exception name, a papermill failure banner), every image decoded (naturalWidth
> 0), and no warning printed with the cell's temporary file name and echoed source line.
Chromium comes from `make browser` (apt: chromium, chromium-driver); without it the tests skip
and say so.  Reuses the session batch of tests/batch/conftest.py.
"""

from __future__ import annotations

import re

import pytest

ERROR_TEXT = re.compile(r"Traceback \(most recent call last\)|An Exception was encountered|"
                        r"\b(?:[A-Z][a-zA-Z]*Error|Exception): |ipykernel_\d+/|PapermillExecutionError")
ECHOED_WARNING = re.compile(r"\.py:\d+: \w*Warning")
#: reports that must show pictures: the audit; accuracy bars, drop heatmap and confusion matrices; the summary
MIN_IMAGES = {"10_calibration_set": 1, "30_accuracy_by_condition": 3, "90_summary": 1}


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from tests._browser import chromium
    driver = chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


def test_every_report_renders_in_chromium(batch, batch_out, browser, tmp_path):
    # the session batch's own reports (other tests write failing runs into the same folder on purpose)
    own = [batch.index, *(name for t in batch.targets for st in t.stages for name in (st.html, st.shared_html))]
    if batch.summary_report:
        own.append(batch.summary_report)
    pages = sorted(batch_out / name for name in own)
    assert all(p.is_file() for p in pages) and len(pages) > 3
    problems = []
    for page in pages:
        browser.get(page.resolve().as_uri())
        text = browser.find_element("tag name", "body").text
        images = browser.execute_script(
            "return Array.from(document.images).map(i => [i.alt, i.complete && i.naturalWidth > 0]);")
        shot = tmp_path / (page.relative_to(batch_out).as_posix().replace("/", "__") + ".png")
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 5_000, shot
        name = page.relative_to(batch_out).as_posix()
        if not text.strip():
            problems.append(f"{name}: empty page")
        if m := ERROR_TEXT.search(text):
            problems.append(f"{name}: error text {text[max(0, m.start() - 80):m.end() + 80]!r}")
        if m := ECHOED_WARNING.search(text):
            problems.append(f"{name}: warning with a file name and source line: "
                            f"{text[max(0, m.start() - 80):m.end() + 120]!r}")
        broken = [alt for alt, ok in images if not ok]
        if broken:
            problems.append(f"{name}: {len(broken)} image(s) did not load: {broken}")
        least = MIN_IMAGES.get(page.name.removesuffix(".html"), 0)
        if len(images) < least:
            problems.append(f"{name}: {len(images)} image(s), expected at least {least}")
    assert not problems, "\n".join(problems)


def test_the_summary_report_reads_at_a_glance(batch, batch_out, browser):
    """The run summary: the sign convention stated, CIs in the accuracy table, the legend outside."""
    summary = batch_out / batch.summary_report if batch.summary_report else None
    if summary is None or not summary.exists():
        pytest.skip("this batch wrote no summary report")
    browser.get(summary.resolve().as_uri())
    text = browser.find_element("tag name", "body").text
    assert "drop = FP32 - quantized" in text and "positive = quantized worse" in text
    assert re.search(r"\[[+-]\d+\.\d+, [+-]\d+\.\d+\]", text), "the accuracy table shows the drop's CI"


#: what a page that scrolls sideways somewhere looks like: the page itself, or an element with a scroll bar
SIDEWAYS = """
const out = [];
if (document.documentElement.scrollWidth > window.innerWidth) out.push(['page', document.documentElement.scrollWidth]);
for (const el of document.querySelectorAll('body *')) {
  const cs = getComputedStyle(el);
  if ((cs.overflowX === 'auto' || cs.overflowX === 'scroll') && el.scrollWidth > el.clientWidth + 2)
    out.push([el.tagName, el.scrollWidth, (el.innerText || '').slice(0, 60)]);
}
return out;"""


def _own_pages(batch, batch_out):
    own = [batch.index, *(name for t in batch.targets for st in t.stages for name in (st.html, st.shared_html))]
    if batch.summary_report:
        stem = batch.summary_report.removesuffix(".html").removesuffix(".shared")
        own += [f"{stem}.html", f"{stem}.shared.html"]
    return sorted(batch_out / name for name in own)


def test_no_report_scrolls_sideways_at_1200px_and_figures_are_not_shrunk(batch, batch_out, browser, tmp_path):
    """At a 1200 px window: no page and no element scrolls sideways; no picture is shown at less than 75% of
    its size (plot text is >= 10 pt, so >= 10 px on screen at 72-100 dpi only when not scaled down much)."""
    from workbench import display
    problems = []
    pages = _own_pages(batch, batch_out)
    # a diff of the session run with itself, as `workbench diff` shows it in a notebook (its HTML, on a page)
    from workbench.diff import diff_runs
    run = batch_out / batch.run_dir
    diff_page = tmp_path / "diff.html"
    diff_page.write_text(display.page("diff", diff_runs(run, run)._repr_html_()))
    for page in [*pages, diff_page]:
        browser.get(page.resolve().as_uri())
        wide = browser.execute_script(SIDEWAYS)
        if wide:
            problems.append(f"{page.name}: scrolls sideways: {wide[:3]}")
        shrunk = browser.execute_script(
            "return Array.from(document.images).filter(i => i.naturalWidth > 0 && "
            "i.getBoundingClientRect().width < 0.75 * i.naturalWidth).map(i => [i.alt, i.naturalWidth, "
            "Math.round(i.getBoundingClientRect().width)]);")
        if shrunk:
            problems.append(f"{page.name}: picture(s) shown at < 75% of their size: {shrunk}")
    assert not problems, "\n".join(problems)


def test_every_report_opens_with_the_verdict(batch, batch_out, browser):
    """The verdict is the first thing on every page, within the first screen at 1200 x 900 (its content is
    checked in test_batch.py, before other tests write more batches into the same folder)."""
    problems = []
    for page in _own_pages(batch, batch_out):
        browser.get(page.resolve().as_uri())
        top = browser.execute_script("const v = document.getElementById('verdict'); "
                                     "return v ? v.getBoundingClientRect().top : null;")
        if top is None or top > 200:
            problems.append(f"{page.relative_to(batch_out).as_posix()}: verdict at {top}")
        elif "recipe (why)" not in browser.find_element("id", "verdict").text:
            problems.append(f"{page.relative_to(batch_out).as_posix()}: the verdict has no table")
    assert not problems, "\n".join(problems)
