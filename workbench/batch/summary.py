"""What a batch leaves besides the reports: ``summary.json``, ``summary.csv`` and ``index.html``."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING

from .._io import atomic_write_json, atomic_write_text
from ..errors import WorkbenchError
from ..findings import Findings
from ..runs import RunSummary
from .execute import StageRun
from .export import Scrubber, make_self_contained

if TYPE_CHECKING:
    from .pipeline import BatchResult


def run_findings_of(out_dir: Path, result: BatchResult, summary: RunSummary) -> Findings:
    """Every target's findings: carried by the summary, else read from the run folder."""
    from ..findings import collect, run_findings
    carried = [getattr(t, "findings", None) for t in summary.targets]
    if all(c is not None for c in carried):
        return collect(*[c for c in carried if c is not None])
    try:
        return run_findings(out_dir / result.run_dir, targets=[t.target for t in summary.targets])
    except WorkbenchError:   # no target folder at all: nothing ran, nothing to find
        return Findings()


def write_summary(out_dir: Path, result: BatchResult, summary: RunSummary) -> None:
    runs = {t.target: t for t in result.targets}
    found = run_findings_of(out_dir, result, summary)
    data = {"run_id": result.run_id, "run_dir": result.run_dir, "ok": result.ok, "exit_code": result.exit_code,
            "seconds": result.seconds,
            "targets": {t.target: {**t.to_dict(), "reports": {s.stage: {"html": s.html, "shared_html": s.shared_html,
                                                                         "notebook": s.notebook}
                                                              for s in runs[t.target].stages},
                                   "batch_status": runs[t.target].status,
                                   "findings": [f.to_dict() for f in found if f.target == t.target]}
                        for t in summary.targets},
            "findings": {"max_severity": found.max_severity, "counts": found.counts()},
            "gate": result.gate.to_dict() if result.gate is not None else None, "notes": list(result.notes),
            "sweep": None if result.sweep is None else {**result.sweep.to_dict(), **sweep_files(out_dir, result)}}
    atomic_write_json(out_dir / result.summary_json, data)
    rows = summary.csv_rows()
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["target"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(out_dir / result.summary_csv, buf.getvalue())


def sweep_files(out_dir: Path, result: BatchResult) -> dict[str, str]:
    """The sweep's ``pareto.png`` and ``sweep.json`` (relative to ``out_dir``) that exist."""
    folder = Path("sweep")
    return {name: (folder / f"{name}.{ext}").as_posix() for name, ext in (("pareto", "png"), ("sweep", "json"))
            if (out_dir / folder / f"{name}.{ext}").is_file()}


def sweep_recommendations(out_dir: Path, files: dict[str, str]) -> list[str]:
    """One line per target from the sweep's ``sweep.json`` (none when it is missing or unreadable)."""
    from .._io import read_json
    from ..sweep.result import Recommendation
    if "sweep" not in files:
        return []
    try:
        return [Recommendation.from_dict(r).summary() for r in read_json(out_dir / files["sweep"])["recommendations"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"(the sweep's recommendations could not be read: {type(exc).__name__}: {exc})"]


def write_index(out_dir: Path, result: BatchResult, summary: RunSummary, summary_stage: StageRun | None) -> None:
    from .. import display
    rows, styles = [], []
    for t in result.targets:
        links = " ".join(
            f"{display.esc(s.stage)}{' (FAILED)' if s.status != 'ok' else ''}: "
            f"{display.link(s.shared_html, 'report')} · {display.link(s.html, 'with code')} · "
            f"{display.link(s.notebook, 'notebook')}<br/>" for s in t.stages)
        status = "ok" if t.status == "ok" else f"FAILED at {display.esc(t.failed_stage)}"
        rows.append((display.esc(t.target), status, display.esc(t.error or ""), links))
        styles.append(display.BAD_STYLE if t.status != "ok" else display.GOOD_STYLE)
    from ..findings import findings_html
    body = [display.heading(f"npu-workbench batch {result.run_id}", 2),
            display.paragraph(result.summary()),
            findings_html(run_findings_of(out_dir, result, summary), title="Findings (all targets)"),
            display.raw_table(("target", "status", "why", "reports"), rows, row_styles=styles, caption="Targets")]
    if result.sweep is not None:
        s = result.sweep
        files = sweep_files(out_dir, result)
        state = f" (FAILED: {s.error})" if s.status != "ok" else ""
        body.append(display.paragraph(f"Sweep across targets{state}:") + display.link(s.shared_html, "sweep report")
                    + " · " + display.link(s.html, "with code") + " · " + display.link(s.notebook, "notebook")
                    + "".join(" · " + display.link(rel, Path(rel).name) for rel in files.values()))
        body += [display.paragraph(line) for line in sweep_recommendations(out_dir, files)]
    if summary_stage is not None:
        body.append(display.paragraph("Across targets:") + display.link(summary_stage.shared_html, "summary report")
                    + " · " + display.link(summary_stage.html, "with code"))
    body.append(display.link(result.summary_json, "summary.json") + " · "
                + display.link(result.summary_csv, "summary.csv"))
    if result.gate is not None:
        body.append(result.gate._repr_html_())
    body.append(summary._repr_html_())
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        ax = summary.plot()
        body.append(display.figure_html(ax.figure, alt="accuracy per condition and target"))
        plt.close(ax.figure)
    except Exception as exc:  # a plot must not cost the index
        body.append(display.paragraph(f"(no plot: {exc})"))
    scrub = Scrubber(out_dir)
    html = display.page(f"npu-workbench batch {result.run_id}", scrub.text("\n".join(body)))
    atomic_write_text(out_dir / result.index, make_self_contained(html))
