"""How findings are drawn: the Findings section of a report (grouped rows, evidence rounded, op lists grouped
per op type and reason).  Plain functions over findings (any objects with the Finding fields), so this module
needs nothing of :mod:`workbench.findings`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SEVERITY_STYLE = {"error": "background:#fde2e2", "warning": "background:#fff3cd", "info": ""}


def _round(value: Any) -> Any:
    """Evidence numbers as a reader wants them: 3 significant digits (integers and text unchanged)."""
    if isinstance(value, float):
        return float(f"{value:.3g}")
    if isinstance(value, list):
        return [_round(v) for v in value]
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    return value


def _is_op_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(i, dict) and "op" in i for i in value)


def op_groups(items: Iterable[dict[str, Any]]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """Ops of an evidence list grouped per op type and reason: ``(op, reason, items)``, largest first."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for item in items:
        reasons = item.get("reasons") or item.get("reason") or ""
        reason = "; ".join(map(str, reasons)) if isinstance(reasons, list) else str(reasons)
        groups.setdefault((str(item.get("op", "?")), reason), []).append(item)
    return sorted(((op, reason, group) for (op, reason), group in groups.items()), key=lambda g: -len(g[2]))


def _ops_html(items: list[dict[str, Any]]) -> str:
    """``9 ops CONV_2D: <reason>`` per group; op indices and tensor names behind a ``<details>``."""
    from . import display
    lines = []
    for op, reason, group in op_groups(items):
        head = f"{len(group)}x {op}" if len(group) > 1 else f"{op} #{group[0].get('index', '?')}"
        names = "".join(f"<li>#{display.esc(i.get('index', '?'))} {display.esc(i.get('name', ''))}</li>"
                        for i in group)
        lines.append(f"{display.esc(head)}{': ' + display.esc(reason) if reason else ''}"
                     f'<details><summary style="cursor:pointer">op indices and tensor names</summary>'
                     f'<ul style="margin:0;padding-left:16px;overflow-wrap:anywhere">{names}</ul></details>')
    return "".join(f"<div>{line}</div>" for line in lines)


def _evidence_html(evidence: dict[str, Any], limit: int = 300) -> str:
    """Evidence of one finding: scalars rounded, op lists grouped per op type and reason."""
    from . import display
    scalars, parts = [], []
    for key, value in evidence.items():
        if _is_op_list(value):
            parts.append(_ops_html(value))
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            shown = "; ".join(", ".join(f"{k}={_round(v)}" for k, v in item.items()) for item in value[:4])
            scalars.append(f"{key}: {shown}" + (f" (+{len(value) - 4} more)" if len(value) > 4 else ""))
        else:
            scalars.append(f"{key}={_round(value)}")
    text = "; ".join(scalars)
    text = text if len(text) <= limit else text[:limit - 3] + "..."
    return display.esc(text) + "".join(parts)


def _evidence_text(evidence: dict[str, Any], limit: int = 400) -> str:
    parts = []
    for key, value in evidence.items():
        if _is_op_list(value):
            parts.append(f"{key}: " + "; ".join(f"{len(g)}x {op}" + (f" ({reason})" if reason else "")
                                                for op, reason, g in op_groups(value)))
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            shown = "; ".join(", ".join(f"{k}={_round(v)}" for k, v in item.items()) for item in value[:6])
            more = f" (+{len(value) - 6} more)" if len(value) > 6 else ""
            parts.append(f"{key}: {shown}{more}")
        else:
            parts.append(f"{key}={_round(value)}")
    text = "; ".join(parts)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def grouped(findings: Iterable[Any]) -> list[list[Any]]:
    """Any of one severity, target and code together (e.g. one group for 33 CPU islands)."""
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for f in findings:
        groups.setdefault((f.severity, f.target, f.code), []).append(f)
    return list(groups.values())


def _group_row(group: list[Any]) -> tuple[str, ...]:
    from . import display
    f = group[0]
    if len(group) == 1:
        return (display.esc(f.severity), display.esc(f.target or "-"), display.esc(f.code), display.esc(f.message),
                _evidence_html(f.evidence), display.esc(f.next_step))
    ops = [i for g in group for v in g.evidence.values() if _is_op_list(v) for i in v]
    message = f"{len(group)}x {f.title}"
    if ops:
        message += ": " + "; ".join(f"{len(g)} op(s) {op}" + (f" ({reason})" if reason else "")
                                   for op, reason, g in op_groups(ops)[:4])
    each = "".join(f"<li>{display.esc(g.message)}</li>" for g in group)
    detail = (f'<details><summary style="cursor:pointer">each of the {len(group)}</summary>'
              f'<ul style="margin:0;padding-left:16px;overflow-wrap:anywhere">{each}</ul></details>')
    return (display.esc(f.severity), display.esc(f.target or "-"), display.esc(f.code),
            display.esc(message) + detail, _ops_html(ops) if ops else "", display.esc(f.next_step))


def findings_html(findings: Any, *, title: str = "Any") -> str:
    """The Any section of a report: one row per severity, target and code (repeats grouped, with
    each instance behind a ``<details>``), most severe first."""
    from . import display
    head = display.heading(title) + display.paragraph(findings.summary())
    if not findings:
        return head + display.paragraph("Nothing the workbench checks went wrong for this model on this target.")
    groups = grouped(findings)
    rows = [_group_row(g) for g in groups]
    styles = [SEVERITY_STYLE[g[0].severity] for g in groups]
    return head + display.raw_table(("severity", "target", "code", "finding", "evidence", "next step"), rows,
                                    row_styles=styles)
