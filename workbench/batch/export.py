"""HTML export of executed notebooks: self-contained (figures inline, no scripts, no external
links) with local absolute paths scrubbed, so a report can be shared as a file."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from .._io import cache_dir
from ..errors import BatchError, WorkbenchError

#: the checkout (``<npu-workbench>`` in scrubbed text)
REPO_DIR = Path(__file__).resolve().parents[2]


class Scrubber:
    """Replaces local absolute paths (output folder, cache, checkout, venv, home, temp) in text."""

    def __init__(self, out_dir: Path) -> None:
        repo = REPO_DIR
        pairs = [(out_dir, "."), (Path(cache_dir()).resolve(), "$NPU_WORKBENCH_CACHE"),
                 (Path(sys.prefix).resolve(), "<venv>"), (Path(sys.base_prefix).resolve(), "<python>"),
                 (repo, "<npu-workbench>"), (Path.home().resolve(), "~"),
                 (Path(tempfile.gettempdir()).resolve(), "<tmp>")]
        raw = [(str(p), r) for p, r in pairs] + [(os.path.realpath(str(p)), r) for p, r in pairs]
        raw += [(str(p).replace(str(Path.home()), "~", 1), r) for p, r in pairs if str(p).startswith(str(Path.home()))]
        self.pairs = sorted({p: r for p, r in raw if len(p) > 1}.items(), key=lambda pr: -len(pr[0]))

    def text(self, text: str) -> str:
        for prefix, replacement in self.pairs:
            text = text.replace(prefix + "/", replacement + "/").replace(prefix, replacement)
        return text

    def notebook(self, nb: Any) -> Any:
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            for out in cell.get("outputs", []):
                if "text" in out:
                    out["text"] = self.text(out["text"])
                if "traceback" in out:
                    out["traceback"] = [self.text(line) for line in out["traceback"]]
                if "evalue" in out:
                    out["evalue"] = self.text(out["evalue"])
                for mime in ("text/plain", "text/html", "text/markdown"):
                    if mime in out.get("data", {}):
                        value = out["data"][mime]
                        out["data"][mime] = ([self.text(v) for v in value] if isinstance(value, list)
                                             else self.text(value))
        return nb


_EXTERNAL_TAG = re.compile(r"<(script|link|iframe)\b[^>]*\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//[^>]*>"
                           r"(?:\s*</\1>)?", re.IGNORECASE)
_EXTERNAL_ANCHOR = re.compile(r"<a\b[^>]*\bhref\s*=\s*[\"']?(?:https?:)?//[^>]*>(.*?)</a>",
                              re.IGNORECASE | re.DOTALL)
_SCRIPT = re.compile(r"<script\b.*?</script>", re.IGNORECASE | re.DOTALL)


def make_self_contained(html: str) -> str:
    """Drop scripts and external references (``src``/``href`` to http(s)); keep link texts."""
    html = _EXTERNAL_TAG.sub("", html)
    html = _EXTERNAL_ANCHOR.sub(r"\1", html)
    return _SCRIPT.sub("", html)


def external_references(html: str) -> list[str]:
    """``src``/``href`` values that point outside the report (should be empty)."""
    return re.findall(r"\b(?:src|href)\s*=\s*[\"']?((?:https?:)?//[^\"' >]+)", html, re.IGNORECASE)


def report_findings_html(notebook: Path, nb: Any) -> str:
    """The Findings section a report opens with: its target's findings (every target's for the summary).

    Read from the run folder the executed notebook names in its papermill parameters (``run_dir``,
    relative to the batch output folder the notebook sits one level below; ``target`` or ``targets``).
    Empty when the notebook was not run by the batch or the run folder holds nothing yet."""
    from ..findings import findings_html, run_findings
    params = (nb.metadata.get("papermill") or {}).get("parameters") or {}
    run_dir, target = params.get("run_dir"), params.get("target")
    if not isinstance(run_dir, str) or not run_dir:
        return ""
    folder = notebook.resolve().parent.parent / run_dir
    try:
        found = run_findings(folder, targets=[target] if isinstance(target, str) and target else None)
    except WorkbenchError:      # no target folder yet: a report without findings, not a failed export
        return ""
    title = f"Findings for {target}" if isinstance(target, str) and target else "Findings (all targets)"
    return findings_html(found, title=title)


def export_html(notebook: str | os.PathLike, *, hide_code: bool = False, header: str = "",
                title: str | None = None, scrubber: Scrubber | None = None) -> str:
    """An executed notebook as one self-contained HTML page (``hide_code``: outputs only)."""
    import nbformat
    from nbconvert import HTMLExporter
    from pygments.formatters import HtmlFormatter

    from .. import display
    nb = nbformat.read(str(notebook), as_version=4)
    header = report_findings_html(Path(notebook), nb) + header
    if scrubber is not None:
        nb = scrubber.notebook(nb)
        header = scrubber.text(header)
    exporter = HTMLExporter(template_name="basic", embed_images=True, exclude_input=hide_code,
                            exclude_input_prompt=hide_code, exclude_output_prompt=hide_code)
    body, _ = exporter.from_notebook_node(nb)
    css = HtmlFormatter(style="default").get_style_defs(".highlight")
    page = display.page(title or Path(notebook).stem, header + make_self_contained(body), extra_css=css)
    left = external_references(page)
    if left:
        raise BatchError(f"{notebook}: the HTML export still references {left[:3]}; report this as a bug.")
    return page

