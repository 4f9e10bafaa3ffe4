"""Side by side across targets, the strip plot, and the input-size sweep."""

from __future__ import annotations

import json

import pytest

from workbench.errors import ModelError
from workbench.models.tflite_graph import read_tflite
from workbench.placement.compare import PlacementComparison, compare_placement


def test_compare_three_targets(reject_tflite):
    import matplotlib
    matplotlib.use("Agg")
    c = compare_placement(reject_tflite)
    assert c.targets == ("imx8mp", "imx93", "imx95")
    assert [r.target for r in c.reports] == list(c.targets)
    assert c.report("imx95").npu_segments == 3
    ax = c.plot()
    assert len(ax.patches) == sum(len(r.ops) for r in c.reports)
    assert [t.get_text() for t in ax.get_yticklabels()][0].startswith("imx8mp")
    assert PlacementComparison.from_dict(json.loads(c.to_json())) == c
    assert "data:image/png;base64" in c._repr_html_()


def test_shape_sweep_reexports_and_reanalyses(clean_keras_file, tmp_path):
    c = compare_placement(clean_keras_file, ("imx8mp", "imx95"), input_sizes=[16, (24, 20)],
                          workdir=tmp_path)
    assert {(p.input_size, p.target) for p in c.sweep} == {
        ((16, 16), "imx8mp"), ((16, 16), "imx95"), ((24, 20), "imx8mp"), ((24, 20), "imx95")}
    for p in c.sweep:
        graph = read_tflite(p.model)
        assert graph.input_tensors()[0].shape == (1, *p.input_size, 3)
        assert graph.input_tensors()[0].dtype == "INT8"
        assert p.npu_share == 1.0
    assert "random" in c.sweep_note
    assert c.plot_sweep() is not None


def test_sweep_needs_keras_model(clean_tflite):
    with pytest.raises(ModelError, match="needs the Keras model"):
        compare_placement(clean_tflite, input_sizes=[32])


def test_keras_model_without_sweep_is_refused(clean_keras_file):
    with pytest.raises(ModelError, match="Quantize it first"):
        compare_placement(clean_keras_file)
