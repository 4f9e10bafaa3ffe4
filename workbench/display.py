"""The only module that builds HTML.

Everything is escaped, styled inline and self-contained (no external links), so
an HTML report can be mailed as one file.  Figures are embedded as base64 PNG.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

TABLE_STYLE = "border-collapse:collapse;font-family:monospace;font-size:12px;margin:4px 0"
CELL_STYLE = "border:1px solid #ccc;padding:2px 6px;text-align:right"
TEXT_CELL_STYLE = "border:1px solid #ccc;padding:2px 6px;text-align:left;max-width:40em;overflow-wrap:anywhere"
HEAD_STYLE = "border:1px solid #ccc;padding:2px 6px;background:#f0f0f0;text-align:left"
BAD_STYLE = "background:#fde2e2"
GOOD_STYLE = "background:#e2f5e2"
WARN_STYLE = "background:#fff3cd"


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def fmt(value: Any, digits: int = 4) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], row_styles: Sequence[str] | None,
           caption: str | None) -> str:
    """Rows of ready-made ``<td>`` strings inside one styled table."""
    out = [f'<table style="{TABLE_STYLE}">']
    if caption:
        out.append(f'<caption style="text-align:left;font-weight:bold">{esc(caption)}</caption>')
    out.append("<tr>" + "".join(f'<th style="{HEAD_STYLE}">{esc(h)}</th>' for h in headers) + "</tr>")
    for i, cells in enumerate(rows):
        style = row_styles[i] if row_styles and i < len(row_styles) else ""
        out.append(f'<tr style="{style}">' + "".join(cells) + "</tr>")
    out.append("</table>")
    return "".join(out)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *,
          row_styles: Sequence[str] | None = None, caption: str | None = None) -> str:
    """An escaped HTML table (numbers right-aligned, text left).  ``row_styles``: a style per row."""
    cells = ([f'<td style="{CELL_STYLE if _is_number(c) else TEXT_CELL_STYLE}">{esc(fmt(c))}</td>'
              for c in row] for row in rows)
    return _table(headers, cells, row_styles, caption)


def _is_number(value: Any) -> bool:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return True
    text = str(value).strip().replace("%", "").replace("pp", "").replace("+", "").strip()
    try:
        float(text)
    except ValueError:
        return False
    return True


def short_name(name: str, limit: int = 60) -> str:
    """A long fused tensor/op name shortened for a table: its first ``;`` part, tail kept."""
    first = str(name).split(";")[0]
    more = " (+fused)" if ";" in str(name) else ""
    if len(first) > limit:
        first = "..." + first[-(limit - 3):]
    return first + more


def heading(text: str, level: int = 4) -> str:
    return f'<h{level} style="font-family:sans-serif;margin:6px 0">{esc(text)}</h{level}>'


def paragraph(text: str) -> str:
    return f'<p style="font-family:sans-serif;font-size:12px;margin:2px 0">{esc(text)}</p>'


def figure_png(fig: Any, *, dpi: int = 100, tight: bool = True) -> bytes:
    """PNG bytes of ``fig``; ``tight=False`` keeps the figure's own size (one draw instead of two: for a
    figure laid out already, e.g. with ``layout="constrained"``, drawn at the width it is shown at)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, **({"bbox_inches": "tight"} if tight else {}))
    return buf.getvalue()


def figure_html(fig: Any, *, alt: str = "figure", dpi: int = 100, tight: bool = True) -> str:
    """A matplotlib figure as an inline ``<img>`` (base64 PNG, no external file)."""
    data = base64.b64encode(figure_png(fig, dpi=dpi, tight=tight)).decode("ascii")
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}"/>'


def result_html(result: Any) -> str:
    """Default rendering of a result: its summary, then its scalar fields as a table."""
    rows = []
    for f in dataclasses.fields(result):
        value = getattr(result, f.name)
        if isinstance(value, (str, int, float, bool)) or value is None:
            rows.append((f.name, value))
        elif isinstance(value, (list, tuple, dict)):
            rows.append((f.name, f"{type(value).__name__} of {len(value)}"))
    return (heading(type(result).__name__) + paragraph(result.summary())
            + table(("field", "value"), rows))


def alert(text: str) -> str:
    """A red box holding one escaped message (an error shown in a widget's status line)."""
    return (f'<div style="{BAD_STYLE};border:1px solid #d62728;padding:2px 6px;margin:2px 0">'
            f"{paragraph(text)}</div>")


PAGE_CSS = """
body{font-family:sans-serif;font-size:13px;margin:16px auto;max-width:1100px;color:#222;overflow-wrap:break-word}
pre{background:#f7f7f7;padding:6px;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}
table{max-width:100%}
td{overflow-wrap:anywhere}
summary{cursor:pointer}
.input_prompt,.output_prompt,.prompt{color:#888;font-size:11px}
.output_area pre,.output_subarea pre{background:none}
.output_stderr pre{background:#fff5e5}
.output_error pre{background:#fde2e2}
.anchor-link{display:none}
img{max-width:100%}
.cell{margin:6px 0}
.ansi-red-fg{color:#c00}.ansi-green-fg{color:#070}.ansi-yellow-fg{color:#a60}.ansi-blue-fg{color:#04a}
.ansi-cyan-fg{color:#077}.ansi-bold{font-weight:bold}
"""


def link(href: str, text: str) -> str:
    """A link to a file of the same report folder (relative ``href`` only)."""
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def raw_table(headers: Sequence[str], rows: Iterable[Sequence[str]], *,
              row_styles: Sequence[str] | None = None, caption: str | None = None) -> str:
    """Like :func:`table`, but cells are HTML built by this module (links), not escaped."""
    cells = ([f'<td style="{TEXT_CELL_STYLE}">{c}</td>' for c in row] for row in rows)
    return _table(headers, cells, row_styles, caption)


def page(title: str, body: str, *, extra_css: str = "") -> str:
    """A complete, self-contained HTML page (inline CSS, no scripts, no external links)."""
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{PAGE_CSS}{extra_css}</style></head>"
            f"<body>{body}</body></html>\n")


# -- warnings in a notebook --------------------------------------------------------------------

def compact_warning_format(message: Any, category: type[Warning], filename: str, lineno: int,
                           line: str | None = None) -> str:
    """One clean line for a :class:`~workbench.errors.WorkbenchWarning` (no temporary file name of the
    cell, no echoed source line); any other warning keeps Python's own format."""
    from .errors import WorkbenchWarning
    if isinstance(category, type) and issubclass(category, WorkbenchWarning):
        return f"{category.__name__}: {' '.join(str(message).split())}\n"
    return _PYTHON_FORMATWARNING(message, category, filename, lineno, line)


def compact_warnings() -> None:
    """Install :func:`compact_warning_format` as ``warnings.formatwarning`` (``import workbench`` does
    this in an IPython kernel, so a notebook's warnings print as one line each)."""
    warnings.formatwarning = compact_warning_format


_PYTHON_FORMATWARNING = warnings.formatwarning


# -- one vocabulary for accuracy tables --------------------------------------------------------

#: The sign convention every accuracy table states (the caption or a line under the table).
DROP_CONVENTION = "drop = FP32 - quantized, in percentage points; positive = quantized worse"


def quantized_label(recipe: str | None) -> str:
    """What to call a quantized model in a table: ``A16W8`` when its activations are 16-bit, else ``INT8``."""
    return "A16W8" if recipe and str(recipe).lower().startswith("a16") else "INT8"


def drop_text(drop_pp: float | None, ci_low: float | None = None, ci_high: float | None = None) -> str:
    """``+1.23 [-0.40, +2.90] (within noise)``: the drop with its CI, saying so when the CI includes 0."""
    if drop_pp is None:
        return "-"
    if ci_low is None or ci_high is None:
        return f"{drop_pp:+.2f}"
    noise = " (within noise)" if ci_low <= 0 <= ci_high else ""
    return f"{drop_pp:+.2f} [{ci_low:+.2f}, {ci_high:+.2f}]{noise}"
