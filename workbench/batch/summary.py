"""What a batch leaves besides the reports: ``summary.json``, ``summary.csv`` and ``index.html``."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._io import atomic_write_json, atomic_write_text
from ..errors import WorkbenchError
from ..findings import Findings
from ..run_summary import RunSummary
from .execute import StageRun
from .export import Scrubber, make_self_contained
from .readers import _stage_results, sweep_recommendation_objects  # noqa: F401 - also read from here

if TYPE_CHECKING:
    from .result import BatchResult


def run_findings_of(out_dir: Path, result: BatchResult, summary: RunSummary) -> Findings:
    """Every target's findings: carried by the summary, else read from the run folder."""
    from ..findings import collect
    from ..run_findings import run_findings
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


def _ci(value: float | None, low: float | None, high: float | None, fmt: Any) -> str:
    if value is None:
        return "-"
    return fmt(value) + (f" [{fmt(low)}, {fmt(high)}]" if low is not None and high is not None else "")


def accuracy_table_html(run_dir: Path, summary: RunSummary) -> str:
    """Per target and condition: FP32 and the quantized model with their 95% CIs, the drop with its
    paired-bootstrap CI, the agreement (read from each target's saved accuracy report)."""
    from .. import display
    rows = []
    for t in summary.targets:
        report, _ = _stage_results(run_dir, t.target)
        if report is None or not report.candidates:
            continue
        model = report.candidates[0]
        if not report.rows:       # no task metric: the fidelity rows are the headline (see fidelity_table_html)
            continue
        pct = (lambda v: f"{v:.2%}") if report.metric in ("top1", "pck") else (lambda v: f"{v:.4g}")
        for c in report.conditions:
            ref, row = report.row(c, report.reference), report.row(c, model)
            rows.append((t.target, c, row.n, _ci(ref.accuracy, ref.ci_low, ref.ci_high, pct),
                         f"{_ci(row.accuracy, row.ci_low, row.ci_high, pct)} "
                         f"({display.quantized_label(t.recipe)} {t.recipe or ''})".rstrip(),
                         display.drop_text(row.drop_pp, row.drop_ci_low, row.drop_ci_high),
                         "-" if row.agreement is None else f"{row.agreement:.1%}"))
    if not rows:
        return ""
    return display.table(("target", "condition", "n", "FP32 [95% CI]", "quantized [95% CI]", "drop [95% CI]",
                          "agreement"), rows,
                         caption="Accuracy per condition and target, with 95% bootstrap CIs "
                                 f"({display.DROP_CONVENTION})")


def fidelity_table_html(run_dir: Path, summary: RunSummary) -> str:
    """Per target and condition, for models without a task metric: the worst output's SQNR against FP32
    (and the cosine of that output), read from each target's saved accuracy report."""
    from .. import display
    rows = []
    for t in summary.targets:
        report, _ = _stage_results(run_dir, t.target)
        if report is None or not report.candidates or report.rows or not report.fidelity:
            continue
        model = report.candidates[0]
        for c in report.conditions:
            fid = [f for f in report.fidelity if f.condition == c and f.model == model]
            scored = [f for f in fid if f.sqnr_db is not None]
            worst = min(scored, key=lambda f: f.sqnr_db or 0.0, default=None)
            if worst is None:
                continue
            rows.append((t.target, c, worst.n, f"{worst.sqnr_db:.1f}",
                         f"{worst.sqnr_ci_low:.1f}..{worst.sqnr_ci_high:.1f}" if worst.sqnr_ci_low is not None else "",
                         worst.output, "n/a" if worst.cosine is None else f"{worst.cosine:.4f}",
                         ", ".join(f"{f.output} {f.sqnr_db:.1f}" for f in scored)))
    if not rows:
        return ""
    return display.table(("target", "condition", "n", "worst SQNR dB", "95% CI", "worst output", "its cosine",
                          "every output (dB)"), rows,
                         caption="No task metric: each target's worst output SQNR against FP32 per condition "
                                 "(higher is closer; +6 dB is one more bit)")


def write_crash_index(out_dir: Path, run_id: str, run_dir: str, error: BaseException,
                      targets: Any = None) -> None:
    """``index.html`` for a batch that crashed before its summary: the run, the error, and the reports
    each target got to, so the folder never shows the previous run's index as if it were this one's."""
    from .. import display
    rows = []
    for t in targets or ():
        rows.append((display.esc(t.target), display.esc(t.status), " ".join(
            f"{display.esc(s.stage)}{' (FAILED)' if s.status != 'ok' else ''}: {display.link(s.html, 'report')}"
            for s in t.stages)))
    body = (display.heading(f"Batch {run_id}: crashed")
            + display.paragraph(f"The batch stopped before its summary: {type(error).__name__}: {error}. Run folder: "
                                f"{run_dir}. The reports below are what each target got to.")
            + (display.raw_table(("target", "status", "reports"), rows) if rows else ""))
    atomic_write_text(out_dir / "index.html", f"<!doctype html><html><head><meta charset='utf-8'><title>batch "
                                              f"{display.esc(run_id)}</title></head><body>{body}</body></html>\n")


def links_table_html(result: BatchResult, run_dir: Path) -> str:
    """Every report of every target: shared report, with code, notebook; and who placed the ops."""
    from .. import display
    rows, styles = [], []
    for t in result.targets:
        links = " ".join(
            f"{display.esc(s.stage)}{' (FAILED)' if s.status != 'ok' else ''}: "
            f"{display.link(s.shared_html, 'report')} · {display.link(s.html, 'with code')} · "
            f"{display.link(s.notebook, 'notebook')}<br/>" for s in t.stages)
        status = "ok" if t.status == "ok" else f"FAILED at {display.esc(t.failed_stage)}"
        _, placement = _stage_results(run_dir, t.target)
        placed_by = display.esc(placement.produced_by) if placement is not None else "-"
        rows.append((display.esc(t.target), status, placed_by, display.esc(t.error or ""), links))
        styles.append(display.BAD_STYLE if t.status != "ok" else "")
    return display.raw_table(("target", "status", "placement by (compiler, BSP)", "why", "reports"), rows,
                             row_styles=styles, caption="Reports per target")


def manifests_html(summary: RunSummary) -> str:
    from .. import display
    parts = [display.table(("", ""), t.manifest.rows(), caption=f"Run manifest: {t.target}")
             for t in summary.targets if t.manifest is not None]
    return "".join(parts) or display.paragraph("no manifest (no stage ran)")


def model_graph_html(run_dir: Path, summary: RunSummary) -> str:
    """The INT8 graph with every target's placement and SQNR per op (empty when no target was placed)."""
    from .. import display
    from ..placement.graph import activation_sqnr, model_graph
    placements: dict[str, Any] = {}
    sqnr: dict[str, dict[int, float]] = {}
    first = None
    for t in summary.targets:
        accuracy, placement = _stage_results(run_dir, t.target)
        if placement is None:
            continue
        path = Path(placement.model)
        path = path if path.is_absolute() else run_dir.parent.parent / path
        placements[t.target] = placement
        first = first or path
        try:
            from ..runs import RunFolder
            m = t.manifest
            folder = RunFolder(run_dir, target=t.target, model=m.model if m else "reference",
                               dataset=m.dataset if m else "digits-conditions")
            sqnr[t.target] = activation_sqnr(folder.fp32_baseline, path, folder.data.select(split="test").x,
                                             contract=getattr(accuracy, "contract", None))
        except (WorkbenchError, OSError, ValueError, KeyError):
            sqnr[t.target] = {}          # the graph still shows where each op runs
    if first is None:
        return ""
    try:
        graph = model_graph(first, placements, sqnr=sqnr)
    except (WorkbenchError, OSError, ValueError) as exc:
        return display.paragraph(f"(no model graph: {exc})")
    return graph._repr_html_() + display.paragraph(
        "SQNR: each op's output of the target's INT8 model against the FP32 model on up to 64 test images "
        "(error accumulated from the input; 'exact': identical values). Hover an op for its name and reasons.")


def write_index(out_dir: Path, result: BatchResult, summary: RunSummary, summary_stage: StageRun | None) -> None:
    """``index.html``: the verdict first, warnings and errors next to it, then accuracy; reports, links,
    manifests and info findings collapsed below."""
    from .. import display
    from ..findings import Findings
    from ..findings_html import findings_html
    from .verdict import batch_verdict, collapsed
    run_dir = out_dir / result.run_dir
    files = sweep_files(out_dir, result) if result.sweep is not None else {}
    found = run_findings_of(out_dir, result, summary)
    serious, infos = found.at_least("warning"), Findings(tuple(f for f in found if f.severity == "info"))
    body = [display.heading(f"npu-workbench batch {result.run_id}", 2), display.paragraph(result.summary()),
            batch_verdict(out_dir, run_dir, summary, gate=result.gate, sweep_files=files, findings=found)]
    if serious:
        body.append(findings_html(serious, title="Warnings and errors (all targets)"))
    links = [display.link(s.shared_html, "summary report") + " · " + display.link(s.html, "with code")
             for s in ([summary_stage] if summary_stage is not None else [])]
    if result.sweep is not None:
        s = result.sweep
        state = f" (FAILED: {s.error})" if s.status != "ok" else ""
        links.append(f"Sweep across targets{display.esc(state)}: " + display.link(s.shared_html, "sweep report") + " · "
                     + display.link(s.html, "with code") + " · " + display.link(s.notebook, "notebook")
                     + "".join(" · " + display.link(rel, Path(rel).name) for rel in files.values()))
    links.append(display.link(result.summary_json, "summary.json") + " · "
                 + display.link(result.summary_csv, "summary.csv"))
    body.append(f'<p style="font-family:sans-serif;font-size:12px;margin:2px 0">{" | ".join(links)}</p>')
    body.append(accuracy_table_html(run_dir, summary))
    body.append(fidelity_table_html(run_dir, summary))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        ax = summary.plot()
        body.append(display.figure_html(ax.figure, alt="accuracy per condition and target"))
        plt.close(ax.figure)
    except Exception as exc:  # a plot must not cost the index
        body.append(display.paragraph(f"(no plot: {exc})"))
    body.append(model_graph_html(run_dir, summary))
    if result.sweep is not None:
        body.append(collapsed("Sweep recommendations (full text)",
                              "".join(display.paragraph(line) for line in sweep_recommendations(out_dir, files))))
    body.append(collapsed(f"Reports of {len(result.targets)} target(s)", links_table_html(result, run_dir)))
    if infos:
        body.append(collapsed(f"{len(infos)} info finding(s)", findings_html(infos, title="Info findings")))
    if result.gate is not None:
        body.append(collapsed(f"Gate: {result.gate.summary()}", result.gate._repr_html_()))
    body.append(collapsed("Run manifests (hashes, versions)", manifests_html(summary)))
    scrub = Scrubber(out_dir)
    html = display.page(f"npu-workbench batch {result.run_id}", scrub.text("\n".join(body)))
    atomic_write_text(out_dir / result.index, make_self_contained(html))


def refresh_verdicts(out_dir: Path, result: BatchResult, summary: RunSummary) -> int:
    """The final verdict in every report of the batch (a stage report was exported before later stages ran)."""
    from .verdict import batch_verdict, refresh_reports, target_verdicts, verdict_html
    run_dir = out_dir / result.run_dir
    files = sweep_files(out_dir, result) if result.sweep is not None else {}
    found = run_findings_of(out_dir, result, summary)
    scrub = Scrubber(out_dir)
    everyone = scrub.text(batch_verdict(out_dir, run_dir, summary, gate=result.gate, sweep_files=files,
                                        findings=found))
    verdicts = target_verdicts(run_dir, summary, gate=result.gate, findings=found)
    blocks: dict[str | None, str] = {None: everyone}
    blocks.update({v.target: scrub.text(verdict_html([v])) for v in verdicts})
    pages = [p for t in result.targets for s in t.stages for p in (s.html, s.shared_html)]
    pages += [p for s in (result.sweep,) if s is not None for p in (s.html, s.shared_html)]
    if result.summary_report:            # the with-code page; its shared twin beside it
        stem = result.summary_report.removesuffix(".html").removesuffix(".shared")
        pages += [f"{stem}.html", f"{stem}.shared.html"]
    return refresh_reports(out_dir, dict.fromkeys(pages), blocks)
