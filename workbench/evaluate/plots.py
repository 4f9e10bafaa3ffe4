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
                 f"({report.confidence:.0%} bootstrap CI)", fontsize=9)
    ax.legend(fontsize=7, ncol=min(len(models), 4))
    return ax


def plot_drop_heatmap(report: Any, ax: Any = None) -> Any:
    """Heatmap of the drop against FP32 (pp), conditions as rows, candidates as columns."""
    import seaborn as sns
    models = report.candidates
    if not models:
        raise EvaluationError("the report holds only the FP32 model; a drop heatmap needs a candidate.")
    conds = report.conditions
    ax = _axes(ax, (1.3 * len(models) + 2.5, 0.45 * len(conds) + 1.5))
    values = np.array([[report.drop(c, m) for m in models] for c in conds])
    bound = max(1.0, float(np.abs(values).max()))
    sns.heatmap(values, ax=ax, annot=True, fmt="+.2f", cmap="RdBu_r", center=0.0, vmin=-bound, vmax=bound,
                xticklabels=models, yticklabels=conds, cbar_kws={"label": "drop vs FP32 (pp)"})
    ax.set_title("accuracy drop against FP32 (pp, positive = worse)", fontsize=9)
    return ax


def plot_confusion(report: Any, model: str, condition: str, ax: Any = None, *, normalize: bool = True) -> Any:
    """Confusion matrix of ``model`` under ``condition`` (rows: true class, columns: predicted)."""
    import seaborn as sns
    row = report.row(condition, model)
    matrix = np.array(row.confusion, dtype=float)
    labels = list(report.classes) + [f"#{i}" for i in range(len(report.classes), matrix.shape[0])]
    if normalize:
        totals = matrix.sum(axis=1, keepdims=True)
        matrix = np.divide(matrix, totals, out=np.zeros_like(matrix), where=totals > 0)
    ax = _axes(ax, (0.42 * len(labels) + 2, 0.38 * len(labels) + 1.2))
    sns.heatmap(matrix, ax=ax, annot=len(labels) <= 12, fmt=".2f" if normalize else ".0f", cmap="Blues",
                vmin=0, vmax=1 if normalize else None, xticklabels=labels, yticklabels=labels, cbar=False,
                annot_kws={"fontsize": 6})
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(f"{model}, {condition}: top-1 {row.accuracy:.1%}", fontsize=9)
    return ax
