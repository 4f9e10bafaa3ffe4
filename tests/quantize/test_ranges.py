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


def _one_conv_tflite(tmp_path, channels=1, weights=((1.0, -0.5),)):
    """A float ``.tflite``: one 1x1 ``conv`` (2 filters; ``weights`` per input channel, None: Keras's own) on an
    ``image`` input of 8x8x``channels``."""
    import contextlib
    import io

    import keras
    import tensorflow as tf
    inp = keras.Input((8, 8, channels), batch_size=1, name="image")
    model = keras.Model(inp, keras.layers.Conv2D(2, 1, name="conv")(inp))
    if weights is not None:
        model.get_layer("conv").set_weights([np.array([[list(weights)]], np.float32), np.zeros(2, np.float32)])
    with contextlib.redirect_stdout(io.StringIO()):
        data = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    path = tmp_path / "float.tflite"
    path.write_bytes(data)
    return path


def _one_bright_sample():
    """100 samples in [0, 1); sample 37 reaches 40 on a 4x4 patch (0.25% of the values)."""
    x = np.random.default_rng(0).random((100, 8, 8, 1), dtype=np.float32)
    x[37, 2:6, 2:6, 0] = 40.0
    return x


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


@pytest.mark.slow
def test_tflite_source_minmax_global_keeps_what_one_sample_reaches(tmp_path):
    """AI Edge Quantizer's min/max is a moving average of each sample's min/max: a value only one sample of 100
    reaches (the one face among a face detector's crops) is clipped.  minmax-global sets the range to the
    min/max over every sample, so that sample's output survives quantization (BlazeFace: docs/quantize.md)."""
    from workbench.quantize.engine import quantize
    from workbench.quantize.recipe import get_recipe
    path = _one_conv_tflite(tmp_path)
    x = _one_bright_sample()         # one sample of 100 reaches 40 (every other value is in [0, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        moving = quantize(path, "a8w8_pc", x, cache=False)
        full = quantize(path, get_recipe("a8w8_pc", calibrator="minmax-global"), x, cache=False)
    assert full.manifest()["ranges"]["calibrator"] == "minmax-global" and full.manifest()["ranges"]["changed"] > 0
    assert "minmax-global" in full.recipe.summary()

    def peak(result):                 # the quantized model's output at the rare sample's bright pixels
        from ai_edge_litert.interpreter import Interpreter
        it = Interpreter(model_path=str(result.path))
        it.allocate_tensors()
        i, o = it.get_input_details()[0], it.get_output_details()[0]
        s, z = i["quantization"]
        it.set_tensor(i["index"], np.clip(np.round(x[37:38] / s + z), -128, 127).astype(np.int8))
        it.invoke()
        s, z = o["quantization"]
        return float(((it.get_tensor(o["index"]).astype(np.float32) - z) * s)[0, 4, 4, 0])
    assert peak(full) == pytest.approx(40.0, rel=0.05)
    assert peak(moving) < 20.0        # clipped by the moving average (the old calibrator, still the default)


@pytest.mark.slow
def test_tflite_source_input_range_is_the_contracts(tmp_path):
    """AI Edge Quantizer calibrates the graph input like any activation (a moving average of each sample's
    min/max), so a [0, 1] input whose samples seldom reach white was clipped (MediaPipe selfie segmentation:
    [0, 0.914], every pixel above 233/255 one code). The input's range is now the contract's: pixels 0..255
    land on 256 INT8 codes (scale 1/255), a [-1, 1] input gets scale 2/255; without a contract, the samples'
    global min/max. The manifest records each (``ranges.inputs``)."""
    from ai_edge_litert.interpreter import Interpreter

    from workbench.quantize.engine import quantize
    path = _one_conv_tflite(tmp_path, channels=3, weights=None)
    x = np.random.default_rng(0).integers(0, 150, (40, 8, 8, 3)).astype(np.float32) / 255.0
    x[5, 0, 0, :] = 1.0                    # one white pixel in one sample of 40
    card = {"layout": "NHWC", "color": "rgb", "size": [8, 8], "task": "other"}

    def input_quantization(result):
        it = Interpreter(model_path=str(result.path))
        s, z = it.get_input_details()[0]["quantization"]
        return s, z

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        unit = quantize(path, "a8w8_pc", x, input_spec={**card, "range": [0, 1]}, cache=False)
        signed = quantize(path, "a8w8_pc", x, input_spec={**card, "range": [-1, 1]}, cache=False)
        bare = quantize(path, "a8w8_pc", x * 0.5, cache=False)
    s, z = input_quantization(unit)
    assert s == pytest.approx(1 / 255, rel=1e-6) and z == -128       # the old moving average: ~0.59/255
    codes = np.round(np.arange(256) / 255.0 / s) + z
    assert len(np.unique(codes)) == 256 and codes.max() == 127
    assert input_quantization(signed)[0] == pytest.approx(2 / 255, rel=1e-6)
    assert unit.manifest()["ranges"]["inputs"][0]["from"] == "input contract"
    row = bare.manifest()["ranges"]["inputs"][0]                   # no contract: the samples' min/max (0.5)
    assert row["from"] == "calibration samples" and row["set"][1] == pytest.approx(0.5)
    assert row["calibrated"][1] < 0.4


@pytest.mark.slow
def test_tflite_source_ranges_that_clip_the_data_are_named(tmp_path):
    """AI Edge Quantizer's moving average clips a tensor whose per-sample extremes vary: 1% of the samples reach
    40 on a quarter of their pixels (0.25% of the values, past the 99.9th percentile) while the rest stay in
    [0, 1). ``quantize.range-clipped`` names the tensor with both ranges; with ``--calibrator percentile`` the
    range is the data's and the finding is gone. ``accuracy.output-collapsed`` repeats it for the quantized file."""
    from workbench.evaluate.findings import collapsed_outputs
    from workbench.quantize.engine import quantize
    from workbench.quantize.findings import quantized_findings
    from workbench.quantize.recipe import get_recipe
    path = _one_conv_tflite(tmp_path)
    x = _one_bright_sample()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        moving = quantize(path, "a8w8_pc", x, cache=False)
        pct = quantize(path, get_recipe("a8w8_pc", calibrator="percentile"), x, cache=False)
    found = [f for f in quantized_findings(moving) if f.code == "quantize.range-clipped"]
    assert len(found) == 1, [f.code for f in quantized_findings(moving)]
    row = found[0].evidence["tensors"][0]
    assert row["calibrated"][1] < 20.0 <= row["p99.9"] and row["held"] < 0.75
    assert row["tensor"] in found[0].message and "--calibrator percentile" in found[0].message
    assert not [f for f in quantized_findings(pct) if f.code == "quantize.range-clipped"]

    class Row:                       # one fidelity row of an accuracy report, as compare_accuracy writes them
        model, output, condition, sqnr_db, cosine, n = "int8", "out", "daylight", 3.0, 0.5, 8

    class Report:
        fidelity = (Row(),)
    message = collapsed_outputs(Report(), quantized=moving)[0].message
    assert row["tensor"] in message and "try --calibrator percentile" in message
    assert "try --calibrator" not in collapsed_outputs(Report(), quantized=pct)[0].message
