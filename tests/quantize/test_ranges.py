"""The percentile calibrator on the TFLite routes, and the calibrated-range findings (issue 28, deliverable 5).

One calibration sample carries a spike (a single pixel at 300): min/max calibration spends the conv's
INT8 range on it; the percentile calibrator sets the range to the data's 0.1..99.9th percentiles."""

from __future__ import annotations

import warnings

import numpy as np
import pytest


def _spiked(n=400):
    x = np.random.default_rng(0).random((n, 8, 8, 1), dtype=np.float32)
    x[7, 4, 4, 0] = 300.0
    return x


def _conv_scale(path):
    from workbench.models.tflite_graph import read_tflite
    g = read_tflite(path)
    conv = next(op for op in g.ops if op.type == "CONV_2D")
    return g.tensor(conv.outputs[0]).scales[0]


@pytest.mark.slow
def test_converter_route_takes_the_percentile_calibrator(models):
    from workbench.quantize.engine import quantize
    from workbench.quantize.recipe import get_recipe
    x = _spiked()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        minmax = quantize(models["keras"], "a8w8_pc", x, cache=False)
        pct = quantize(models["keras"], get_recipe("a8w8_pc", calibrator="percentile", percentile=99.9), x,
                       cache=False)
    assert pct.manifest()["ranges"]["changed"] > 0 and pct.full_integer
    assert _conv_scale(pct.path) < _conv_scale(minmax.path) / 10       # the spike no longer sets the range
    assert "percentile p99.9" in pct.recipe.summary()


@pytest.mark.slow
def test_tflite_source_percentile_and_the_outlier_finding(tmp_path):
    """A float .tflite (AI Edge Quantizer route, whose min/max is a moving average over the samples): a spike in
    every sample leaves a quantize.range-outliers finding naming the tensor; percentile changes the ranges and
    the finding is gone."""
    import contextlib
    import io

    import keras
    import tensorflow as tf

    from workbench.quantize.engine import quantize
    from workbench.quantize.findings import quantized_findings
    from workbench.quantize.recipe import get_recipe
    inp = keras.Input((64, 64, 1), batch_size=1, name="image")
    h = keras.layers.Conv2D(4, 1, name="conv")(inp)
    model = keras.Model(inp, keras.layers.Dense(3)(keras.layers.GlobalAveragePooling2D()(h)))
    with contextlib.redirect_stdout(io.StringIO()):
        data = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    path = tmp_path / "float.tflite"
    path.write_bytes(data)
    x = np.random.default_rng(0).random((100, 64, 64, 1), dtype=np.float32)
    x[:, 5, 7, 0] = 300.0        # one pixel of every sample: 4 of the conv's 16384 values (0.02%)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        minmax = quantize(path, "a8w8_pc", x, cache=False)
        pct = quantize(path, get_recipe("a8w8_pc", calibrator="percentile", percentile=99.9), x, cache=False)
    found = [f for f in quantized_findings(minmax) if f.code == "quantize.range-outliers"]
    assert len(found) == 1 and found[0].evidence["tensors"][0]["ratio"] >= 10
    assert pct.manifest()["ranges"]["changed"] > 0
    assert not [f for f in quantized_findings(pct) if f.code == "quantize.range-outliers"]
