"""HTML export of executed notebooks: self-contained (figures inline, no scripts, no external
links) with local absolute paths scrubbed, so a report can be shared as a file."""

from __future__ import annotations

import ast
import contextlib
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
    """What a report opens with: the verdict (its target's row; every target's for the summary and the
    sweep), its warnings and errors grouped, then its info findings collapsed.

    Read from the run folder the executed notebook names in its papermill parameters (``run_dir``,
    relative to the batch output folder the notebook sits one level below; ``target`` or ``targets``).
    Empty when the notebook was not run by the batch or the run folder holds nothing yet.  The batch
    replaces the verdict once every target is done (:func:`~workbench.batch.verdict.refresh_reports`)."""
    from ..findings import Findings
    from ..findings_html import findings_html
    from ..run_findings import run_findings
    from ..run_summary import summarize_run
    from .verdict import END, START, collapsed, target_verdicts, verdict_html
    empty = START + END         # the place the batch writes the verdict into at its end (the sweep has no run_dir)
    params = (nb.metadata.get("papermill") or {}).get("parameters") or {}
    run_dir, target = params.get("run_dir"), params.get("target")
    if not isinstance(run_dir, str) or not run_dir:
        return empty
    folder = notebook.resolve().parent.parent / run_dir
    targets = [target] if isinstance(target, str) and target else None
    try:
        found = run_findings(folder, targets=targets)
        summary = summarize_run(folder, targets=targets)
    except WorkbenchError:      # no target folder yet: a report without findings, not a failed export
        return empty
    block = verdict_html(target_verdicts(folder, summary, findings=found),
                         note="As of this report's export: the batch rewrites this block when every stage is done.")
    title = f"Findings for {target}" if targets else "Findings (all targets)"
    serious, infos = found.at_least("warning"), Findings(tuple(f for f in found if f.severity == "info"))
    out = block + (findings_html(serious, title=f"{title}: warnings and errors") if serious else "")
    if infos:
        out += collapsed(f"{len(infos)} info finding(s)", findings_html(infos, title=f"{title}: info"))
    return out


_REPR = re.compile(r"^\s*[\[(]*\s*(?:<[\w.]+ (?:object )?at 0x[0-9a-f]+>|[A-Z]\w*\()")
_WARNING_LINE = re.compile(r"^(\w*Warning): (.+)$", re.MULTILINE)


def run_log(notebook: Path, nb: Any) -> Path | None:
    """The run's ``batch.log`` of a notebook the batch executed (None when it names no run folder)."""
    params = (nb.metadata.get("papermill") or {}).get("parameters") or {}
    run_dir = params.get("run_dir")
    if not isinstance(run_dir, str) or not run_dir:
        return None
    return notebook.resolve().parent.parent / run_dir / "batch.log"


def move_library_output(nb: Any, log: Path | None, *, name: str = "") -> int:
    """Take standard error and bare Python reprs out of ``nb``'s outputs (in place), appending them to ``log``
    (or dropping them when there is none); returns how many outputs moved.  What a report shows is results
    (tables, figures, text a cell prints on purpose), not what TensorFlow or absl wrote on the way."""
    import nbformat
    moved: list[str] = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        kept, warned = [], []
        for out in cell.get("outputs", []):
            text = None
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                text = out.get("text", "")
                text = "".join(text) if isinstance(text, list) else text
                warned += [f"{kind}: {message}" for kind, message in _WARNING_LINE.findall(text)
                           if kind.startswith("Workbench")]
            elif out.get("output_type") == "execute_result" and set(out.get("data", {})) == {"text/plain"}:
                plain = out["data"]["text/plain"]
                plain = "".join(plain) if isinstance(plain, list) else plain
                if _REPR.match(plain):
                    text = plain
                elif plain[:1] in ("'", '"'):        # a string a cell ended with: its text, not its repr
                    with contextlib.suppress(ValueError, SyntaxError):
                        value = ast.literal_eval(plain)
                        if isinstance(value, str):
                            out["data"]["text/plain"] = value
            if text is None:
                kept.append(out)
            else:
                moved.append(f"--- {name} cell {i} ---\n{text.rstrip()}\n")
        if warned:     # the workbench's own warnings stay, once each, as text (not as a standard-error block)
            kept.append(nbformat.v4.new_output("stream", name="stdout",
                                               text="".join(f"{w}\n" for w in dict.fromkeys(warned))))
        cell["outputs"] = kept
    if moved and log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as handle:
            handle.write("".join(moved))
    return len(moved)


def export_html(notebook: str | os.PathLike, *, hide_code: bool = False, header: str = "",
                title: str | None = None, scrubber: Scrubber | None = None) -> str:
    """An executed notebook as one self-contained HTML page (``hide_code``: outputs only)."""
    import nbformat
    from nbconvert import HTMLExporter
    from pygments.formatters import HtmlFormatter

    from .. import display
    nb = nbformat.read(str(notebook), as_version=4)
    moved = move_library_output(nb, None if hide_code else run_log(Path(notebook), nb), name=Path(notebook).name)
    header = report_findings_html(Path(notebook), nb) + header
    if scrubber is not None:
        nb = scrubber.notebook(nb)
        header = scrubber.text(header)
    exporter = HTMLExporter(template_name="basic", embed_images=True, exclude_input=hide_code,
                            exclude_input_prompt=hide_code, exclude_output_prompt=hide_code)
    body, _ = exporter.from_notebook_node(nb)
    css = HtmlFormatter(style="default").get_style_defs(".highlight")
    footer = (display.paragraph(f"{moved} block(s) of library output (standard error, plain reprs) are in the run's "
                                "batch.log, not here.") if moved else "")
    page = display.page(title or Path(notebook).stem, header + make_self_contained(body) + footer, extra_css=css)
    left = external_references(page)
    if left:
        raise BatchError(f"{notebook}: the HTML export still references {left[:3]}; report this as a bug.")
    return page

