"""The explorer's panels as HTML and pictures: accuracy, clipping, placement, history, settings."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..placement.analyze import PlacementReport
from .constants import HEATMAP_VMAX, SPLIT


def accuracy_html(result: Any) -> str:
    from .. import display
    rows = result.accuracy_table()
    conf = result.accuracy.confidence
    styles = [display.BAD_STYLE if r.worse_beyond_noise else "" for r in rows]
    label = display.quantized_label(result.settings.effective_recipe)
    return display.table(("condition", "n", "FP32", label, f"drop pp [{conf:.0%} CI]"),
                         [(r.condition, r.n, f"{r.fp32:.2%}", f"{r.int8:.2%}",
                           display.drop_text(r.drop_pp, r.drop_ci_low, r.drop_ci_high)) for r in rows],
                         row_styles=styles, caption=f"Top-1 accuracy ({SPLIT} split; {display.DROP_CONVENTION}; "
                                                    "red: the drop's CI lies above 0)")


def audit_note(result: Any) -> str:
    """What the heatmap's ranges are when the calibrator is not min/max (the audit measures min/max ranges)."""
    from .. import display
    s = result.settings
    if s.calibrator in ("minmax", "minmax-global"):
        return ""
    return display.paragraph(f"The heatmap measures clipping against the calibration set's min/max ranges; the "
                             f"{s.calibrator} calibrator of ONNX Runtime may choose narrower ranges, so the "
                             "quantized model clips at least this much.")


def settings_html(result: Any) -> str:
    from .. import display
    s, q = result.settings, result.quantized
    rows = [("target", s.target), ("recipe", q.recipe.summary()), ("calibration", result.calibration.summary()),
            ("conditions", ", ".join(s.conditions) + (f" at severity {s.severity}" if s.severity is not None else "")
             + f"; CI bootstrap seed {s.bootstrap_seed}"),
            ("model", Path(result.model).name), (f"{display.quantized_label(q.recipe.name)} sha256", q.sha256),
            ("quantization", ("cache hit" if q.cache_hit else "quantized now")
             + (f"; the same model as {result.same_model_as}" if result.same_model_as else "")),
            ("placement", result.placement.summary() if result.placement is not None else result.placement_error),
            ("seconds", ", ".join(f"{k} {v:.2f}" for k, v in result.seconds.items()))]
    return display.table(("", ""), rows, caption="Settings")


def error_html(exc: BaseException) -> str:
    from .. import display
    return display.alert(f"{type(exc).__name__}: {exc}")


# --------------------------------------------------------------------------- history, strip, capture

STYLE = ("<style>.wb-stale{opacity:.35;pointer-events:none;transition:opacity .2s}"
         ".wb-explorer img{max-width:100%;height:auto}"
         ".wb-explorer td{overflow-wrap:anywhere}</style>")   # long ids break instead of squeezing other columns



def history_html(history: Sequence[Any], baseline: Any) -> str:
    """One short line per setting tried, newest last: what differs from the pinned baseline (marked),
    its worst drop and the change against the baseline; the full setting and sha256 on hover."""
    from .. import display
    if not history:
        return ""
    base = baseline.worst if baseline is not None else None
    against = baseline.settings if baseline is not None else None
    rows, styles = [], []
    for i, h in enumerate(history, 1):
        worst = h.worst
        delta = (f"{worst.drop_pp - base.drop_pp:+.2f}" if worst is not None and base is not None
                 and worst.drop_pp is not None and base.drop_pp is not None and h is not baseline else "")
        same = next((f" = #{j}" for j, e in enumerate(history[:i - 1], 1) if e.sha256 == h.sha256), "")
        pinned = h is baseline
        name = h.settings.short_label(None if pinned else against)
        hover = display.esc(f"{h.settings.label()}; sha256 {h.sha256}")
        rows.append((f"#{i}" + (" &#9733; pinned" if pinned else ""),
                     f'<span title="{hover}">{display.esc(name)}{same}</span>',
                     (f"{worst.drop_pp:+.2f} ({display.esc(worst.condition)})" if worst and worst.drop_pp is not None
                      else "-"), delta or ("0 (pinned)" if pinned else "-"), f"{h.at_risk}", display.esc(h.placement)))
        styles.append(display.GOOD_STYLE if pinned else "")
    return display.raw_table(("", "setting (vs pinned)", "worst drop pp", "vs baseline pp", "at risk", "placement"),
                             rows, row_styles=styles,
                             caption="Settings tried: one line each, knobs that differ from the pinned one "
                                     "(marked pinned); hover for the full setting and sha256; '= #k': the same model")


def plot_strip(report: PlacementReport, ax: Any) -> Any:
    """The placement strip with a legend and each CPU op's index and type under its cell."""
    from matplotlib.patches import Patch

    from ..placement.analyze import PLACEMENT_COLORS
    report.plot(ax)
    cpu = [o for o in report.ops if o.placement != "NPU"]
    marked = list(report.ops) if len(report.ops) <= 30 else cpu
    ax.set_xticks([o.index for o in marked], [f"{o.index} {o.type}" for o in marked], rotation=90, fontsize=10)
    ax.set_xlabel("")
    ax.legend(handles=[Patch(color=c, label=f"{k} ({sum(o.placement == k for o in report.ops)})")
                       for k, c in PLACEMENT_COLORS.items()],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=10, frameon=False)
    return ax


def placement_html(result: Any) -> str:
    """Every op that falls back to the CPU, with the constraints it violates (the strip's why)."""
    from .. import display
    p = result.placement
    if p is None:
        return ""
    cpu = [o for o in p.ops if o.placement != "NPU"]
    if not cpu:
        return display.paragraph(f"every op of the model runs on the NPU of {p.target}.")
    groups: dict[tuple[str, str], list[Any]] = {}      # one row per op type and reason ("9x CONV_2D: INT16 ...")
    for o in cpu:
        why = "; ".join(f"{r.constraint}: {r.detail}" for r in o.reasons) or "; ".join(o.notes) or "(no rule named)"
        groups.setdefault((o.type, why), []).append(o)
    rows = []
    for (op, why), ops in sorted(groups.items(), key=lambda g: -len(g[1])):
        names = "".join(f"<li>#{o.index} {display.esc(o.name)}</li>" for o in ops)
        rows.append((f"{len(ops)}x" if len(ops) > 1 else f"#{ops[0].index}", display.esc(op), display.esc(why),
                     f'<details><summary>op indices and tensor names</summary><ul style="margin:0;padding-left:16px">'
                     f"{names}</ul></details>"))
    return display.raw_table(("ops", "op", "why it runs on the CPU", "which"), rows,
                             caption=f"CPU fallback on {p.target} ({len(cpu)} of {len(p.ops)} ops, grouped per op "
                                     "type and reason)")



#: inches at 100 dpi: the width a panel is shown at in JupyterLab at a 1200 px window with the file browser
#: open (~760 px), so the picture is not scaled down and 10-pt text stays >= 10 px on screen
DISPLAY_WIDTH = 7.5


def render_panels(result: Any, baseline: Any = None, *,
                  fp32_tflite: str | None = None, samples: Any = None) -> tuple[str, str, str, str]:
    """The findings, accuracy, clipping and placement panels of ``result`` as HTML (figures inline).

    Figures are drawn at the width they are shown at with a constrained layout and saved once (no tight
    bounding box: that draws twice); the pinned ``baseline``'s quantized accuracy is drawn on the bars."""
    import matplotlib.pyplot as plt

    from .. import display
    from ..findings_html import findings_html
    findings = findings_html(result.findings(), title=f"Findings on {result.settings.target}")
    fig, ax = plt.subplots(figsize=(DISPLAY_WIDTH, 3.6), layout="constrained")
    result.plot_accuracy(ax)
    if baseline is not None and baseline.settings != result.settings:
        draw_baseline(ax, result, baseline)
    accuracy = display.figure_html(fig, alt="accuracy per condition", tight=False) + accuracy_html(result)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(DISPLAY_WIDTH, 0.4 * len(result.audit.layers) + 2.0), layout="constrained")
    result.audit.plot(ax, vmax=HEATMAP_VMAX)
    pinned = baseline if baseline is not None and baseline.settings != result.settings else None
    if pinned is not None:
        note_baseline(ax, f"pinned baseline ({pinned.settings.short_label()}): {pinned.at_risk} layer(s) at "
                          f"risk, this setting {len(result.audit.at_risk())}")
    audit = display.figure_html(fig, alt="clipping heatmap", tight=False) + audit_note(result)
    plt.close(fig)
    if result.placement is not None:
        fig, ax = plt.subplots(figsize=(DISPLAY_WIDTH, 2.6), layout="constrained")
        plot_strip(result.placement, ax)
        if pinned is not None:
            p = result.placement
            note_baseline(ax, f"pinned baseline ({pinned.settings.short_label()}): {pinned.placement}, "
                              f"this setting {p.npu_ops}/{len(p.ops)} NPU")
        placement = (display.figure_html(fig, alt="placement strip", tight=False) + placement_html(result)
                     + graph_html(result, fp32_tflite, samples))
        plt.close(fig)
    else:
        placement = display.alert(result.placement_error)
    return findings, accuracy, audit, placement


def draw_baseline(ax: Any, result: Any, baseline: Any) -> None:
    """The baseline's quantized accuracy per condition as black diamonds on the quantized bars."""
    conditions = list(result.accuracy.conditions)
    by = {r.condition: r for r in baseline.drops}
    models = len(result.accuracy.models)
    offset = (models - 1 - (models - 1) / 2) * 0.8 / models        # the last (quantized) bar of each group
    points = [(i + offset, 100 * value) for i, c in enumerate(conditions)
              if c in by and (value := by[c].int8) is not None]
    xs, ys = [x for x, _ in points], [y for _, y in points]
    if xs:
        ax.scatter(xs, ys, marker="D", s=30, color="black", zorder=4, label="pinned baseline (quantized)")
        ax.legend(fontsize=10, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False)


def note_baseline(ax: Any, text: str) -> None:
    """The pinned baseline's number for this chart, written on it under its title (black, 10 pt)."""
    title = ax.get_title()
    ax.set_title((title + "\n" if title else "") + text, fontsize=10, loc="left")


def cli_html(text: str, sha256: str) -> str:
    """The CLI commands of a setting with the sha256 they reproduce and a copy button (no kernel needed)."""
    from .. import display
    data = display.esc(text)
    return (f'<div style="font-size:12px"><b>Same from a shell</b> (writes the same file: sha256 '
            f'<code>{display.esc(sha256[:16])}</code>...) '
            f'<button onclick="navigator.clipboard.writeText(this.parentElement.querySelector(\'pre\').innerText)">'
            f'copy</button><pre style="white-space:pre-wrap;overflow-wrap:anywhere;margin:2px 0">{data}</pre></div>')


def graph_html(result: Any, fp32_tflite: str | None, samples: Any = None) -> str:
    """The INT8 graph of this setting: each op coloured by placement, with its SQNR against the FP32
    ``.tflite`` when there is one (the reference model's), collapsed under the strip."""
    from ..errors import WorkbenchError
    from ..placement.graph import activation_sqnr, model_graph
    p = result.placement
    if p is None:
        return ""
    try:
        sqnr = (activation_sqnr(fp32_tflite, result.quantized.path, samples)
                if fp32_tflite and samples is not None else {})
        graph = model_graph(result.quantized.path, {p.target: p}, sqnr={p.target: sqnr})
    except (WorkbenchError, OSError, ValueError) as exc:
        from .. import display
        return display.paragraph(f"(no model graph: {exc})")
    return (f'<details open><summary style="cursor:pointer">Model graph: {len(graph.ops)} ops, '
            f"placement and SQNR per op</summary>{graph.to_svg(max_width=740)}</details>")
