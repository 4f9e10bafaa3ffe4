"""The verdict block every report opens with: one row per target, the answer before the evidence.

A row says which recipe ran and why, whether the gate passed, the worst accuracy drop (with its CI
and condition; the worst SQNR per output for a model without a task metric), the NPU share and the
ops left on the CPU by name, and the latency with its kind; the target's warnings and errors sit in
the same row.  One sentence reconciles the sweep's pick with the recipe the batch ran.  Info
findings, manifests and links go below, collapsed (:func:`collapsed`).

The block is written between two markers (:data:`START`, :data:`END`) so that a batch can replace it
in every report once all targets are done (:func:`refresh_reports`): a report exported after its own
stage knows only what ran so far.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import WorkbenchError

START, END = "<!-- verdict -->", "<!-- /verdict -->"
_BLOCK = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)


@dataclass(frozen=True)
class TargetVerdict:
    """What one row of the verdict says, as text (built by :func:`target_verdicts`)."""

    target: str
    status: str
    recipe: str
    gate: str                # "PASS" | "FAIL" | "not checked" | "-"
    gate_reasons: tuple[str, ...] = ()
    accuracy: str = "-"
    placement: str = "-"
    latency: str = "-"
    problems: tuple[tuple[str, str], ...] = ()      # (severity, text), errors first

    @property
    def bad(self) -> bool:
        return self.status == "failed" or self.gate == "FAIL"


def _recipe_text(t: Any) -> str:
    if not t.recipe:
        return "-"
    from ..runs import default_recipe
    try:
        default = default_recipe(t.target)
    except WorkbenchError:
        default = None
    scheme = "per-tensor" if t.recipe.endswith("_pt") or "_pt+" in t.recipe else "per-channel"
    bits = "16-bit activations" if t.recipe.startswith("a16") else "INT8"
    why = (f"the {t.target} default (recipe auto): {bits}, {scheme} weights" if t.recipe == default
           else f"chosen for this run (the {t.target} default is {default})")
    return f"{t.recipe}: {why}"


def _accuracy_text(t: Any) -> str:
    worst = max((a for a in t.accuracy if a.drop_pp is not None), key=lambda a: a.drop_pp, default=None)
    if worst is not None:
        ci = ("" if worst.drop_ci_low is None or worst.drop_ci_high is None
              else f" [{worst.drop_ci_low:+.2f}, {worst.drop_ci_high:+.2f}]")
        noise = (" (within noise)" if ci and worst.drop_ci_low is not None and worst.drop_ci_high is not None
                 and worst.drop_ci_low <= 0 <= worst.drop_ci_high else "")
        return f"worst drop {worst.drop_pp:+.2f} pp{ci} under {worst.condition}{noise}"
    low = getattr(t, "worst_sqnr", None)      # a model without a task metric: its worst output against FP32
    if low is not None and getattr(low, "sqnr_db", None) is not None:
        return (f"no task metric; worst SQNR {low.sqnr_db:.1f} dB ({low.sqnr_output or 'output'}, "
                f"under {low.condition})")
    return "not measured" if "accuracy" not in t.stages else "-"


def cpu_ops_text(placement: Any, limit: int = 6) -> str:
    """``2x SOFTMAX, 1x MEAN (#7)``: the ops left on the CPU, counted per op type."""
    cpu = [o for o in placement.ops if o.placement == "CPU"]
    if not cpu:
        return "none"
    counts = Counter(o.type for o in cpu)
    shown = [f"{n}x {op}" if n > 1 else f"{op} #{next(o.index for o in cpu if o.type == op)}"
             for op, n in counts.most_common(limit)]
    return ", ".join(shown) + (f" (+{len(counts) - limit} more types)" if len(counts) > limit else "")


def _placement_text(t: Any, placement: Any) -> str:
    if t.npu_share is None:
        return "-"
    text = f"NPU {t.npu_share:.0%} ({t.npu_ops}/{(t.npu_ops or 0) + (t.cpu_ops or 0)} ops)"
    if placement is not None:
        text += f"; CPU: {cpu_ops_text(placement)}"
    if t.cpu_islands:
        text += f"; {t.cpu_islands} CPU island(s)"
    return text


def _latency_text(t: Any) -> str:
    parts = []
    if t.latency_ms is not None:
        parts.append(f"p50 {t.latency_ms:.3f} ms ({t.latency_kind or t.latency_source or '?'})")
    if t.vela_estimate_ms is not None:
        parts.append(f"{t.vela_estimate_ms:.3f} ms ({t.vela_label or 'estimate'})")
    return "; ".join(parts) or "-"


def _problems(findings: Iterable[Any], target: str) -> tuple[tuple[str, str], ...]:
    """The target's warnings and errors, one line per code (a repeated code counted, not repeated)."""
    by_code: dict[tuple[str, str], list[Any]] = {}
    for f in findings:
        if f.severity in ("error", "warning") and f.target in (target, ""):
            by_code.setdefault((f.severity, f.code), []).append(f)
    out = []
    for (severity, code), group in sorted(by_code.items(), key=lambda kv: kv[0][0] != "error"):
        text = f"{code}: {group[0].message}" if len(group) == 1 else f"{code}: {len(group)}x {group[0].title}"
        out.append((severity, text))
    return tuple(out)


def target_verdicts(run_dir: str | os.PathLike, summary: Any, *, gate: Any = None,
                    findings: Any = None) -> list[TargetVerdict]:
    """One :class:`TargetVerdict` per target of ``summary`` (a :class:`~workbench.runs.RunSummary`)."""
    from .readers import _stage_results
    out = []
    for t in summary.targets:
        _, placement = _stage_results(Path(run_dir), t.target)
        if gate is None:
            gate_text, reasons = "no gate given (--gate)", ()
        else:
            reasons = tuple(v.reason for v in gate.violations if v.target in (t.target, None))
            gate_text = "FAIL" if reasons else "PASS"
        found = findings if findings is not None else t.findings
        problems = _problems(found, t.target)
        if t.status == "failed":
            problems = (("error", f"FAILED at {t.failed_stage or '?'}: {t.error}"), *problems)
        out.append(TargetVerdict(target=t.target, status=t.status, recipe=_recipe_text(t), gate=gate_text,
                                 gate_reasons=reasons, accuracy=_accuracy_text(t),
                                 placement=_placement_text(t, placement), latency=_latency_text(t),
                                 problems=problems))
    return out


def reconcile(summary: Any, recommendations: Sequence[Any]) -> str:
    """One sentence: where the sweep's pick and the recipe the batch ran agree, and where not and why."""
    ran = {t.target: t.recipe for t in summary.targets}
    agree, differ, none = [], [], []
    for r in recommendations:
        if r.target not in ran:
            continue
        if r.cell is None:
            none.append(f"{r.target} ({r.reason})")
        elif r.cell.cell.recipe == ran[r.target] and not r.cell.cell.exclude:
            agree.append(f"{r.target} {ran[r.target]}")
        else:
            pick = r.cell.cell.recipe + (f" with {len(r.cell.cell.exclude)} op(s) kept in float"
                                         if r.cell.cell.exclude else "")
            why = (f"worst drop {r.cell.worst_drop_pp:+.2f} pp, "
                   + (f"{r.cell.latency_ms:.3f} ms {r.cell.latency_kind}" if r.cell.latency_ms is not None
                      else "no latency"))
            differ.append(f"for {r.target} the sweep picks {pick} ({why}) where the batch ran the target's "
                          f"recipe {ran[r.target] or '-'}; to adopt it: `workbench batch --targets {r.target} "
                          f"-p {r.target}:recipe={r.cell.cell.recipe}`")
    if not (agree or differ or none):
        return ""
    parts = []
    if agree:
        parts.append("the sweep and the batch agree on " + ", ".join(agree))
    parts += differ
    if none:
        parts.append("no sweep pick for " + ", ".join(none))
    text = "; ".join(parts)
    return "Sweep vs batch: " + text + "."


_SEVERITY_STYLE = {"error": "color:#a00;font-weight:bold", "warning": "color:#8a5a00"}


#: the verdict's columns and their share of the page width (a fixed layout: words wrap, nothing scrolls)
COLUMNS = (("target", 7), ("recipe (why)", 17), ("gate", 8), ("accuracy", 18), ("placement: NPU share, CPU ops", 19),
           ("latency (kind)", 14), ("warnings and errors", 17))
_CELL = "border:1px solid #ccc;padding:3px 6px;vertical-align:top;text-align:left;overflow-wrap:break-word"


def verdict_html(verdicts: Sequence[TargetVerdict], *, sentence: str = "", title: str = "Verdict",
                 note: str = "") -> str:
    """The block between :data:`START` and :data:`END`: a table with one row per target."""
    from .. import display
    head = "".join(f'<th style="{_CELL};background:#f0f0f0">{display.esc(h)}</th>' for h, _ in COLUMNS)
    cols = "".join(f'<col style="width:{w}%"/>' for _, w in COLUMNS)
    rows = []
    for v in verdicts:
        gate = (f"<b>{display.esc(v.gate)}</b>"
                + "".join(f"<br/><small>{display.esc(r)}</small>" for r in v.gate_reasons[:3]))
        problems = "<br/>".join(f'<span style="{_SEVERITY_STYLE.get(s, "")}">{display.esc(s.upper())}</span> '
                                f"{display.esc(text)}" for s, text in v.problems) or "none"
        style = display.BAD_STYLE if v.bad else (display.WARN_STYLE if v.problems else display.GOOD_STYLE)
        cells = (f"<b>{display.esc(v.target)}</b>", display.esc(v.recipe), gate, display.esc(v.accuracy),
                 display.esc(v.placement), display.esc(v.latency), problems)
        rows.append(f'<tr style="{style}">' + "".join(f'<td style="{_CELL}">{c}</td>' for c in cells) + "</tr>")
    table = (f'<table style="border-collapse:collapse;table-layout:fixed;width:100%;font-size:13px;'
             f'font-family:sans-serif;margin:4px 0"><colgroup>{cols}</colgroup><tr>{head}</tr>{"".join(rows)}</table>')
    extra = "".join(display.paragraph(x) for x in (sentence, note) if x)
    return (f'{START}<section id="verdict" style="margin:0 0 8px 0">'
            f"{display.heading(title, 3)}{table}{extra}</section>{END}")


def collapsed(summary_text: str, inner: str, *, open_: bool = False) -> str:
    """A ``<details>`` block (no script needed) holding what a reader opens on demand."""
    from .. import display
    return (f'<details{" open" if open_ else ""} style="margin:6px 0"><summary style="cursor:pointer;'
            f'font-family:sans-serif;font-size:13px">{display.esc(summary_text)}</summary>{inner}</details>')


def without_block(html: str) -> str:
    """``html`` with its verdict block emptied (what stays the same when a batch refreshes the block)."""
    return _BLOCK.sub(START + END, html)


def replace_block(html: str, block: str) -> str:
    """``html`` with its verdict block replaced by ``block`` (put first in ``<body>`` when it has none)."""
    if START in html:
        return _BLOCK.sub(lambda _: block, html, count=1)
    return html.replace("<body>", "<body>" + block, 1) if "<body>" in html else block + html


def batch_verdict(out_dir: Path, run_dir: Path, summary: Any, *, gate: Any = None, sweep_files: dict | None = None,
                  findings: Any = None) -> str:
    """The verdict block of a whole batch (every target), with the sweep reconciled when it ran."""
    from .readers import sweep_recommendation_objects
    recs = sweep_recommendation_objects(out_dir, sweep_files or {})
    verdicts = target_verdicts(run_dir, summary, gate=gate, findings=findings)
    return verdict_html(verdicts, sentence=reconcile(summary, recs))


def refresh_reports(out_dir: Path, pages: Iterable[str], blocks: dict[str | None, str]) -> int:
    """Write the final verdict into every exported report of the batch (``blocks``: target -> block,
    ``None`` -> the all-target block); returns how many pages changed. Written to a temp file, then renamed."""
    from .._io import atomic_write_text
    changed = 0
    for rel in pages:
        path = out_dir / rel
        if not path.is_file():
            continue
        html = path.read_text(encoding="utf-8")
        target = rel.split("/")[0] if "/" in rel else None
        block = blocks.get(target, blocks.get(None, ""))
        new = replace_block(html, block)
        if new != html:
            atomic_write_text(path, new)
            changed += 1
    return changed
