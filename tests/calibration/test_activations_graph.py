"""Activations of non-Keras models (the stage-10 audit of an .onnx, FP32 .tflite or SavedModel)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.models.onnx_tiny import nhwc_images, tiny_nchw_onnx
from workbench.calibration.activations import (
    GraphTaps,
    activation_ranges,
    embeddings,
    iter_activations,
    load_activation_model,
    quantized_layers,
)
from workbench.errors import ModelError
from workbench.models.builtin import builtin_path


def test_onnx_taps_follow_folding_and_fusion(tmp_path):
    import onnxruntime as ort
    path = tiny_nchw_onnx(tmp_path / "tiny.onnx")
    # Conv+BN+Relu is one quantized tensor (the Relu's), Conv+Clip too; Flatten shares GAP's range
    assert quantized_layers(path) == ("input", "relu1", "relu6", "gap", "logits")
    x = nhwc_images(10)
    batches = list(iter_activations(path, x, batch_size=4))
    assert [len(b["logits"]) for b in batches] == [4, 4, 2]
    session = ort.InferenceSession(str(path))
    ref = np.concatenate([session.run(None, {"image": x[i:i + 1].transpose(0, 3, 1, 2)})[0] for i in range(10)])
    assert np.allclose(np.concatenate([b["logits"] for b in batches]), ref, atol=1e-5)
    ranges = activation_ranges(path, x)
    assert ranges["input"] == (float(x.min()), float(x.max()))
    assert 0.0 <= ranges["relu6"][0] and ranges["relu6"][1] <= 6.0
    assert embeddings(path, x).shape == (10, 8)       # the Gemm's input (after Flatten)
    with pytest.raises(ModelError, match="no tapped tensor"):
        next(iter_activations(path, x, layers=("conv9",)))


def test_tflite_and_saved_model_taps_match_keras(reference, digits):
    import keras
    x = digits.select(split="calibration").x[:6]
    model = keras.models.load_model(reference.keras, compile=False)
    logits = np.concatenate([np.asarray(model(x[i:i + 1])) for i in range(len(x))])
    features = embeddings(reference, x)          # the Keras head's input, flattened
    for source in (reference.tflite, reference.saved_model, builtin_path("reference", export="onnx")):
        taps = load_activation_model(source)
        assert isinstance(taps, GraphTaps) and taps.tapped
        layers = quantized_layers(taps)
        assert layers[0] == "input" and len(layers) >= 6, (source, layers)
        (batch,) = iter_activations(taps, x, layers=(layers[-1],))
        assert np.allclose(batch[layers[-1]].reshape(len(x), -1), logits, atol=1e-4), source
        # the same features; an ONNX graph may hold them channels-first, so compare each sample's values
        assert np.allclose(np.sort(embeddings(taps, x), 1), np.sort(features, 1), atol=1e-4), source


def test_audit_of_an_onnx_model(reference, digits):
    from workbench.calibration.audit import audit_coverage
    from workbench.calibration.curate import curate_calibration_set
    cal = curate_calibration_set(digits, 60, strategy="stratified", seed=0)
    audit = audit_coverage(builtin_path("reference", export="onnx"), cal, dataset=digits, cache=False)
    assert audit.layers[0] == "input" and len(audit.layers) >= 6
    assert {r.condition for r in audit.rows} == set(digits.select(split="test").conditions)


def test_onnx_taps_of_a_dynamic_hw_nchw_model(tmp_path):
    """Paddle2ONNX exports (PP-OCR: input [?, 3, ?, ?]): the NHWC batch is fed transposed; stage 10 of
    the batch died on the zoo's ppocr-det with ORT's 'index: 1 Got: 96 Expected: 3'."""
    import onnxruntime as ort
    path = tiny_nchw_onnx(tmp_path / "dyn.onnx", dynamic="spatial")
    x = nhwc_images(3)
    got = np.concatenate([b["logits"] for b in iter_activations(path, x)])
    session = ort.InferenceSession(str(path))
    ref = np.concatenate([session.run(None, {"image": x[i:i + 1].transpose(0, 3, 1, 2)})[0] for i in range(3)])
    assert np.allclose(got, ref, atol=1e-5)
