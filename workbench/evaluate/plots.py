"""Pictures of an :class:`~workbench.evaluate.accuracy.AccuracyReport`.

Grouped bars (accuracy per condition, one bar per model, bootstrap CI whiskers),
a drop heatmap (condition x candidate) and confusion matrices.  Each function
draws on ``ax`` (a new figure when ``None``) and returns the axes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import EvaluationError


def _axes(ax: Any, size: tuple[float, float]) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt
    _, ax = plt.subplots(figsize=size)
    return ax


def _heatmap(ax: Any, values: Any, *, fmt: str, cmap: str, vmin: float | None, vmax: float | None,
             xticklabels: list[str], yticklabels: list[str], annot: bool = True, cbar_label: str | None = None,
             fontsize: float | None = None) -> Any:
    """A matrix of coloured cells with its values written in (what seaborn's ``heatmap`` draws), without
    drawing the whole figure once per call as ``heatmap`` does to check its tick labels: five confusion
    matrices in one figure cost 8 CPU s that way, a notebook's slowest cell.  NaN cells stay blank."""
    from matplotlib.colors import to_rgba_array
    values = np.asarray(values, dtype=float)
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
                      interpolation="nearest")
    for spine in ax.spines.values():
        spine.set_visible(False)
    crowded = len(xticklabels) * max(map(len, xticklabels), default=0) > 24     # long names side by side: slanted
    ax.set_xticks(range(values.shape[1]), xticklabels, rotation=20 if crowded else 0,
                  ha="right" if crowded else "center")
    ax.set_yticks(range(values.shape[0]), yticklabels)
    ax.tick_params(length=0)
    if cbar_label is not None:
        bar = ax.figure.colorbar(image, ax=ax, label=cbar_label)
        bar.outline.set_linewidth(0)
    if annot:
        # dark text on light cells, white on dark ones (relative luminance, as seaborn picks it)
        rgb = to_rgba_array(image.cmap(image.norm(np.nan_to_num(values).ravel())))[:, :3]
        rgb = np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
        dark = (rgb @ np.array([0.2126, 0.7152, 0.0722])).reshape(values.shape) <= 0.408
        for (i, j), value in np.ndenumerate(values):
            if np.isfinite(value):
                ax.text(j, i, format(value, fmt), ha="center", va="center", fontsize=fontsize,
                        color="w" if dark[i, j] else ".15")
    return ax


def plot_accuracy_bars(report: Any, ax: Any = None) -> Any:
    """Grouped bars of top-1 accuracy (%) per condition per model, with CI whiskers."""
    conds, models = report.conditions, report.models
    ax = _axes(ax, (1.4 * len(conds) + 2.5, 3.2))
    width = 0.8 / len(models)
    pos = np.arange(len(conds))
    for j, model in enumerate(models):
        rows = [report.row(c, model) for c in conds]
        acc = np.array([r.accuracy for r in rows]) * 100
        err = np.array([[r.accuracy - r.ci_low for r in rows], [r.ci_high - r.accuracy for r in rows]]) * 100
        ax.bar(pos + (j - (len(models) - 1) / 2) * width, acc, width, yerr=np.clip(err, 0, None), capsize=2,
               label=model, color="0.55" if model == report.reference else None, error_kw={"lw": 0.8})
    ax.set_xticks(pos, conds, rotation=20)
    ax.set_ylabel("top-1 accuracy (%)")
    low = min(r.ci_low for r in report.rows) * 100
    ax.set_ylim(max(0.0, low - 10), 100)
    ax.set_title(f"{report.dataset}[{report.split}]: accuracy per condition "
                 f"({report.confidence:.0%} bootstrap CI)", fontsize=10)
    # the legend sits below the axes, outside the bars and their whiskers
    ax.legend(fontsize=10, ncol=min(len(models), 4), loc="upper center", bbox_to_anchor=(0.5, -0.22),
              frameon=False)
    return ax


def plot_drop_heatmap(report: Any, ax: Any = None) -> Any:
    """Heatmap of the drop against FP32 (pp), conditions as rows, candidates as columns."""
    models = report.candidates
    if not models:
        raise EvaluationError("the report holds only the FP32 model; a drop heatmap needs a candidate.")
    if not report.rows:
        return plot_sqnr_heatmap(report, ax)
    conds = report.conditions
    ax = _axes(ax, (1.3 * len(models) + 2.5, 0.45 * len(conds) + 1.5))
    values = np.array([[report.drop(c, m) for m in models] for c in conds])
    bound = max(1.0, float(np.abs(values).max()))
    _heatmap(ax, values, fmt="+.2f", cmap="RdBu_r", vmin=-bound, vmax=bound, xticklabels=list(models),
             yticklabels=list(conds), cbar_label="drop vs FP32 (pp)")
    ax.set_title("accuracy drop against FP32 (pp, positive = worse)", fontsize=10)
    return ax


def plot_sqnr_heatmap(report: Any, ax: Any = None) -> Any:
    """Heatmap of the worst output's SQNR (dB) against FP32, conditions as rows, candidates as columns:
    the headline of a model without a task metric (detection, segmentation, ``task: other``)."""
    models, conds = report.candidates, report.conditions
    if not report.fidelity:
        raise EvaluationError("the report has no task metric and no fidelity rows (fidelity=False); nothing to plot.")
    values = np.full((len(conds), len(models)), np.nan)
    worst: dict[tuple[str, str], str] = {}
    for r in report.fidelity:
        if r.sqnr_db is None or r.model not in models or r.condition not in conds:
            continue
        i, j = conds.index(r.condition), models.index(r.model)
        if np.isnan(values[i, j]) or r.sqnr_db < values[i, j]:
            values[i, j] = r.sqnr_db
            worst[(r.condition, r.model)] = r.output
    ax = _axes(ax, (1.3 * len(models) + 2.5, 0.45 * len(conds) + 1.5))
    _heatmap(ax, values, fmt=".1f", cmap="RdYlGn", vmin=0.0, vmax=40.0, xticklabels=list(models),
             yticklabels=list(conds), cbar_label="worst output SQNR (dB)")
    ax.set_title("no task metric: worst output SQNR against FP32 (dB, higher = closer)", fontsize=9)
    return ax


def plot_confusion(report: Any, model: str, condition: str, ax: Any = None, *, normalize: bool = True) -> Any:
    """Confusion matrix of ``model`` under ``condition`` (rows: true class, columns: predicted)."""
    row = report.row(condition, model)
    matrix = np.array(row.confusion, dtype=float)
    labels = list(report.classes) + [f"#{i}" for i in range(len(report.classes), matrix.shape[0])]
    if normalize:
        totals = matrix.sum(axis=1, keepdims=True)
        matrix = np.divide(matrix, totals, out=np.zeros_like(matrix), where=totals > 0)
    ax = _axes(ax, (0.42 * len(labels) + 2, 0.38 * len(labels) + 1.2))
    _heatmap(ax, matrix, annot=len(labels) <= 12, fmt=".2f" if normalize else ".0f", cmap="Blues",
             vmin=0, vmax=1 if normalize else None, xticklabels=labels, yticklabels=labels, fontsize=10)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(f"{model}, {condition}: top-1 {row.accuracy:.1%}", fontsize=10)
    return ax


def plot_confusions(report: Any, model: str | None = None, *, normalize: bool = True) -> Any:
    """A figure with one confusion matrix per condition of ``model`` (default: the first candidate,
    else the FP32 reference), three per row so that it fits a notebook column.  A metric without
    classes (PCK) gets a figure that says so."""
    import matplotlib.pyplot as plt
    model = model if model is not None else next(iter(report.candidates), report.reference)
    conds = [c for c in report.conditions if report.row(c, model).confusion] if report.rows else []
    if not conds:
        fig, ax = plt.subplots(figsize=(6, 1))
        ax.axis("off")
        ax.text(0.5, 0.5, f"no confusion matrix: metric {report.metric!r} has no classes", ha="center", va="center")
        return fig
    cols = min(3, len(conds))
    rows = -(-len(conds) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 3.1 * rows), squeeze=False)
    for ax, cond in zip(axes.flat, conds):
        plot_confusion(report, model, cond, ax=ax, normalize=normalize)
    for ax in list(axes.flat)[len(conds):]:
        ax.axis("off")
    fig.suptitle(f"confusion matrices of {model} per condition (rows: true class)", fontsize=10)
    fig.tight_layout()
    return fig
