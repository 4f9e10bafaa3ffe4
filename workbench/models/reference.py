"""The reference model: a small CNN every target can run, trained on daylight digits.

Conv, depthwise conv, max and average pooling (stride 2) and ReLU only: ops that the
VX delegate, Vela (3.10.0, what the i.MX 93 BSP ships, and newer) and the Neutron
converter all map.  Trained on the built-in
dataset's daylight training split with light augmentation (small shifts and
brightness jitter), then exported with a static batch of 1 (a ``None`` batch
exports SHAPE/PACK/STRIDED_SLICE ops that targets reject) as ``.keras``,
SavedModel, FP32 ``.tflite`` and ``.onnx`` (converted from the SavedModel).

The trained weights are SHIPPED with the package (``weights/reference.npz`` with its sha256,
training recipe and the accuracy measured when it was trained, in ``weights/reference.json``), so
every machine evaluates the same model: training on another CPU gives other weights (seen: FP32
sensor-noise 62.8% on one machine, 54.6% on another, same code and seed).  ``retrain=True``
(``workbench model reference --retrain``) trains again from the recipe and reports how far the
retrained accuracy is from the shipped one.

It is the ``reference`` entry of :mod:`workbench.models.builtin`, which builds, trains, exports and
caches every built-in model the same way; this module holds what is its own (the architecture and the
augmentation) and :func:`reference_model`, the entry built.
"""

from __future__ import annotations

import os
from typing import Any, cast

import numpy as np

from .builtin import ReferenceModel
from .export import export_onnx, export_saved_model

__all__ = ["ReferenceModel", "augment", "build_model", "export_onnx", "export_saved_model", "reference_model"]

NAME = "reference"


def build_model(input_shape: tuple[int, ...], n_classes: int, *, batch_size: int | None = None,
                head: str = "conv"):
    """The reference architecture (Keras functional model).

    Each convolution is followed by batch normalization (folded into the convolution
    by the TFLite converter) and ReLU (fused into it), so the exported graph holds
    only CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D, AVERAGE_POOL_2D and RESHAPE.

    Chosen so that every target's toolchain puts every op on the NPU, the Vela that BSP
    lf-6.6.3_1.0.0 ships (3.10.0) included: pools have stride 2 (Vela 3.10.0 keeps a
    stride-4 AVERAGE_POOL_2D on the CPU) and the classifier is a 4x4 convolution over the
    last 4x4 feature map, not a FULLY_CONNECTED layer (Vela 3.10.0 keeps FULLY_CONNECTED
    with per-channel weights, which the per-channel recipes write, on the CPU).
    ``head="dense"`` builds the first release's head (stride-4 average pool, flatten, dense), which
    the built-in keypoint model keeps.
    """
    import keras
    from keras import layers

    def conv_bn_relu(x, conv, name):
        x = conv(x)
        x = layers.BatchNormalization(momentum=0.9, name=f"{name}_bn")(x)
        return layers.ReLU(name=f"{name}_relu")(x)

    inputs = keras.Input(shape=input_shape, batch_size=batch_size, name="image")
    x = conv_bn_relu(inputs, layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False, name="conv1"), "conv1")
    x = conv_bn_relu(x, layers.DepthwiseConv2D(3, padding="same", use_bias=False, name="dw1"), "dw1")
    x = conv_bn_relu(x, layers.Conv2D(32, 1, use_bias=False, name="pw1"), "pw1")
    x = layers.MaxPooling2D(2, name="pool1")(x)
    x = conv_bn_relu(x, layers.DepthwiseConv2D(3, padding="same", use_bias=False, name="dw2"), "dw2")
    x = conv_bn_relu(x, layers.Conv2D(64, 1, use_bias=False, name="pw2"), "pw2")
    if head == "dense":   # the first release's head (a regression head learns faster with it)
        x = layers.AveragePooling2D(4, name="pool2")(x)
        x = layers.Flatten(name="flatten")(x)
        outputs = layers.Dense(n_classes, name="logits")(x)
        return keras.Model(inputs, outputs, name="reference_cnn")
    x = layers.AveragePooling2D(2, name="pool2")(x)                          # 4x4x64
    x = layers.Conv2D(n_classes, 4, padding="valid", name="classifier")(x)   # 1x1xclasses
    outputs = layers.Reshape((n_classes,), name="logits")(x)
    return keras.Model(inputs, outputs, name="reference_cnn")


def augment(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Light augmentation: shifts of up to 2 pixels and an exposure gain of 0.45 to 1.1."""
    out = np.empty_like(x)
    for i in range(len(x)):
        dy, dx = rng.integers(-2, 3, size=2)
        out[i] = np.roll(np.roll(x[i], dy, axis=0), dx, axis=1)
    gain = rng.uniform(0.45, 1.1, size=(len(x), 1, 1, 1)).astype(np.float32)
    return np.clip(out * gain, 0.0, 1.0)


def reference_model(*, dataset: Any = "digits-conditions", seed: int = 0, epochs: int | None = None, cache: bool = True,
                    cache_root: str | os.PathLike | None = None, retrain: bool = False) -> ReferenceModel:
    """The reference model exported four ways: the shipped weights, or trained.

    On the built-in dataset with the shipped recipe (seed 0, 20 epochs) the weights shipped
    with the package are used, so every machine gets the same model and the same numbers.
    ``retrain=True``, another dataset, seed or epoch count trains from scratch (about 2 minutes on
    2 cores); a retrain compares its accuracy with the shipped one (``distance_from_shipped``).
    """
    from .builtin import builtin_model
    return cast(ReferenceModel, builtin_model(NAME, dataset, seed=seed, epochs=epochs, cache=cache,
                                              cache_root=cache_root, retrain=retrain))
