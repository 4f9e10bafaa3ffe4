"""The pictures render from a real report."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from workbench.errors import EvaluationError  # noqa: E402


def test_grouped_bars_have_one_bar_per_model_and_condition_with_whiskers(report):
    ax = report.plot()
    bars = [p for p in ax.patches]
    assert len(bars) == len(report.models) * len(report.conditions)
    heights = sorted(round(b.get_height(), 6) for b in bars)
    assert heights == sorted(round(r.accuracy * 100, 6) for r in report.rows)
    whiskers = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    assert len(whiskers) == len(report.models)
    tops = sorted(round(max(seg[:, 1]), 6) for c in whiskers for seg in c.lines[2][0].get_segments())
    assert tops == sorted(round(r.ci_high * 100, 6) for r in report.rows)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(report.models)
    plt.close(ax.figure)


def test_drop_heatmap_shows_every_candidate_drop(report):
    ax = report.plot_drop_heatmap()
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == len(report.conditions) * len(report.candidates)
    assert f"{report.drop('overexposed', 'pt'):+.2f}" in texts
    plt.close(ax.figure)


def test_confusion_matrix(report):
    fig, ax = plt.subplots()
    assert report.plot_confusion("pc", "low-light", ax=ax) is ax
    assert "pc, low-light" in ax.get_title()
    assert [t.get_text() for t in ax.get_yticklabels()] == list(report.classes)
    report.plot_confusion("fp32", "daylight", ax=ax, normalize=False)
    plt.close(fig)


def test_heatmap_needs_a_candidate(reference, digits):
    from workbench.evaluate.accuracy import compare_accuracy
    alone = compare_accuracy(reference.tflite, [], digits, conditions=["daylight"])
    assert alone.candidates == () and "fp32 only" in alone.summary()
    with pytest.raises(EvaluationError, match="a drop heatmap needs a candidate"):
        alone.plot_drop_heatmap()


def test_heatmap_cells_write_their_values_readably():
    """The heatmap every plot here uses: one text per finite cell (NaN stays blank), white on dark cells,
    dark on light ones, the labels on the axes."""
    from workbench.evaluate.plots import _heatmap
    fig, ax = plt.subplots()
    _heatmap(ax, [[0.0, 1.0], [float("nan"), 0.25]], fmt=".2f", cmap="Blues", vmin=0, vmax=1,
             xticklabels=["a", "b"], yticklabels=["x", "y"], cbar_label="share")
    texts = {t.get_text(): t.get_color() for t in ax.texts}
    assert texts == {"0.00": ".15", "1.00": "w", "0.25": ".15"}
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"] and len(fig.axes) == 2   # and a colour bar
    plt.close(fig)
