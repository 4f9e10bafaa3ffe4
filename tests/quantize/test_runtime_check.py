"""Loadable means loaded; a model that ignores its input is refused (issue 28, deliverables 6 and 7).

The model is the pattern onnx2tf makes of a ceil-mode max-pool (MTCNN's ONet/RNet): a PADV2 with
float32's lowest value before a VALID max-pool.  Calibration takes the pad value in (activation scale
1.33e36), XNNPACK refuses the file and every input gives the same INT8 output."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from workbench.errors import QuantizationError


def _lowest_pad_model(tmp_path, *, pad_value):
    import keras
    import tensorflow as tf
    inp = keras.Input((24, 24, 3), batch_size=1, name="image")
    h = keras.layers.Conv2D(8, 3, activation="relu", name="conv1")(inp)
    module = tf.Module()
    conv2 = keras.layers.Conv2D(8, 3, name="conv2")
    dense = keras.layers.Dense(4, name="scores")
    body = keras.Model(inp, h)

    def forward(image):
        x = body(image, training=False)
        x = tf.pad(x, [[0, 0], [0, 1], [0, 1], [0, 0]], constant_values=pad_value)
        x = tf.nn.max_pool2d(x, 3, 2, "VALID")
        x = tf.reshape(tf.nn.relu(conv2(x)), [-1, 8 * 9 * 9])
        return {"scores": dense(x)}
    forward(tf.zeros([1, 24, 24, 3]))
    module.layers = [body, conv2, dense]
    module.serve = tf.function(forward, input_signature=[tf.TensorSpec([None, 24, 24, 3], tf.float32,
                                                                       name="image")])
    path = tmp_path / f"pad_{'lowest' if pad_value < -1e30 else 'finite'}"
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path


@pytest.mark.slow
def test_a_model_that_ignores_its_input_is_refused_naming_the_tensor_and_op(tmp_path):
    from workbench.quantize.engine import quantize
    model = _lowest_pad_model(tmp_path, pad_value=float(np.finfo(np.float32).min))
    x = np.random.default_rng(0).random((16, 24, 24, 3), dtype=np.float32)
    with pytest.raises(QuantizationError, match=r"ignores its input: \d+ different calibration samples give the "
                                                r"same INT8 output.*PADV2 #\d+.*activation scale 1\.3\de\+36"):
        quantize(model, "a8w8_pc", x, cache=False)


@pytest.mark.slow
def test_a_finite_pad_quantizes_loads_in_xnnpack_and_follows_its_input(tmp_path):
    from workbench.quantize.engine import quantize
    model = _lowest_pad_model(tmp_path, pad_value=-1.0)
    x = np.random.default_rng(0).random((16, 24, 24, 3), dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = quantize(model, "a8w8_pc", x, cache=False)
    assert q.runtime["xnnpack"] is True and q.runtime["ignores_input"] is False
    assert q.runtime["constant_outputs"] == [] and q.manifest()["absurd_scales"] == []
    assert q.loaded().startswith("loaded and run in LiteRT default runtime (XNNPACK)")


@pytest.mark.slow
def test_xnnpack_refusal_is_said_and_the_builtin_kernels_run_it(tmp_path):
    """The same lowest-pad INT8 file (written by the converter directly): XNNPACK refuses it; load_tflite
    falls back to the builtin kernels and says why; the predictor runs it with a warning."""
    from workbench.errors import WorkbenchWarning
    from workbench.models.predict import load_predictor
    from workbench.quantize.recipe import get_recipe
    from workbench.quantize.runtime_check import absurd_scales, cause, load_tflite
    from workbench.quantize.tflite_backend import quantize_tflite
    model = _lowest_pad_model(tmp_path, pad_value=float(np.finfo(np.float32).min))
    x = np.random.default_rng(0).random((16, 24, 24, 3), dtype=np.float32)
    data = quantize_tflite(model, "saved_model", get_recipe("a8w8_pc"), x)
    it, refused = load_tflite(data)
    assert it is not None and "XNNPACK" in refused
    path = tmp_path / "int8.tflite"
    path.write_bytes(data)
    rows = absurd_scales(str(path))
    assert rows and cause(rows)["op"] == "PADV2" and cause(rows)["scale"] > 1e35
    with pytest.warns(WorkbenchWarning, match="XNNPACK.*builtin kernels"):
        pred = load_predictor(str(path))
    assert pred.predict(x[:4]).shape == (4, 4)
    from workbench.quantize.findings import inspection_findings, runtime_findings
    from workbench.quantize.inspect import inspect_model
    absurd = [f for f in inspection_findings(inspect_model(path)) if f.code == "quantize.absurd-scale"]
    assert len(absurd) == 1 and absurd[0].severity == "error" and absurd[0].evidence["op"] == "PADV2"
    refused = runtime_findings({"xnnpack": False, "xnnpack_error": refused, "loaded_by": "builtin"}, "int8.tflite")
    assert [f.code for f in refused] == ["quantize.xnnpack-refused"]
