"""Per-layer activations of the FP32 Keras model."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.calibration.activations import (
    activation_ranges,
    embeddings,
    iter_activations,
    load_keras,
    quantized_layers,
)
from workbench.errors import ModelError


def test_quantized_layers_follow_folding_and_fusion(reference):
    # conv + BN + ReLU become one op whose output is the ReLU's; the final reshape shares the classifier's range
    assert quantized_layers(reference) == ("input", "conv1_relu", "dw1_relu", "pw1_relu", "pool1",
                                           "dw2_relu", "pw2_relu", "pool2", "classifier")


def test_activations_match_the_model(reference, digits):
    import keras
    x = digits.select(split="calibration").x[:20]
    model = keras.models.load_model(reference.keras, compile=False)
    logits = np.concatenate([np.asarray(model(x[i:i + 1])) for i in range(len(x))])
    batches = list(iter_activations(reference, x, layers=("input", "classifier"), batch_size=8))
    assert [len(b["classifier"]) for b in batches] == [8, 8, 4]
    scores = np.concatenate([b["classifier"] for b in batches]).reshape(len(x), -1)   # (n, 1, 1, classes)
    assert np.allclose(scores, logits, atol=1e-4)
    ranges = activation_ranges(reference, x, layers=("input", "classifier"))
    assert ranges["input"] == (float(x.min()), float(x.max()))
    assert ranges["classifier"] == pytest.approx((logits.min(), logits.max()), abs=1e-4)
    feats = embeddings(reference, x)
    width = int(np.prod(model.get_layer("pool2").output.shape[1:]))
    assert feats.shape == (20, width) and feats.min() >= 0   # the classifier's input: pooled ReLU features


def test_errors_name_the_file_and_layer(reference, tmp_path, digits):
    with pytest.raises(ModelError, match="not a Keras model"):
        load_keras(reference.tflite)
    with pytest.raises(ModelError, match="model file .* does not exist"):
        quantized_layers(tmp_path / "missing.keras")
    with pytest.raises(ModelError, match="has no layer"):
        next(iter_activations(reference, digits.x[:2], layers=("conv9",)))
