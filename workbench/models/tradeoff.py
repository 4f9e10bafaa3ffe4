"""The trade-off demo model: a small MobileNet-style network that shows quantization trade-offs.

Where the reference CNN runs everywhere and loses nothing in INT8, this one is
built the way deployed vision models are and so shows what they suffer:

- a hard-swish stem (``HARD_SWISH``) and depthwise-separable blocks with batch
  norm and ReLU6 (batch norm folds into the convolutions with very different
  per-channel ranges: per-tensor weights lose accuracy where per-channel do not);
- a bilinear resize of the 8x8 feature map to 12x12 (a non-integer 1.5x scale, as
  a model adapted to another input size has): the VX delegate (imx8mp) and
  Neutron-S (imx95) list ``RESIZE_BILINEAR``; Vela (imx93) runs only 2x/4x/8x
  upscales on the Ethos-U, so on imx93 it is a CPU island between two NPU segments;
- a global-average-pool + dense + softmax head: ``SOFTMAX`` is not on the
  Neutron-S operator list, so imx95 finishes on the CPU.

Trained on the daylight training split with the reference model's light
augmentation (:func:`workbench.models.training.train`).  Like the reference model its
weights are SHIPPED (``weights/tradeoff.npz`` with its sha256, training recipe and the
accuracy measured when it was trained, in ``weights/tradeoff.json``) and used by default,
so every machine measures the same trade-offs; ``retrain=True`` (``workbench model tradeoff
--retrain``) trains again and reports how far the retrained accuracy is from the shipped one.
Exported with batch 1 as ``.keras``, SavedModel, FP32 ``.tflite`` and ``.onnx`` and cached like
every built-in model: it is the ``tradeoff`` entry of :mod:`workbench.models.builtin`; this module holds
its architecture and :func:`tradeoff_model`.  The measured properties are in
docs/sweep.md.
"""

from __future__ import annotations

import os
from typing import Any, cast

from .builtin import TradeoffModel

__all__ = ["TradeoffModel", "build_model", "tradeoff_model"]

NAME = "tradeoff"
RESIZE_TO = 12


def build_model(input_shape: tuple[int, ...], n_classes: int, *, batch_size: int | None = None):
    """The trade-off architecture (Keras functional model)."""
    import keras
    from keras import layers

    def bn_act(x, name, act):
        x = layers.BatchNormalization(momentum=0.9, name=f"{name}_bn")(x)
        if act == "relu6":
            return layers.ReLU(6.0, name=f"{name}_relu6")(x)
        return layers.Activation("hard_swish", name=f"{name}_hswish")(x)

    def dw_sep(x, filters, stride, name):
        x = layers.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False, name=f"{name}_dw")(x)
        x = bn_act(x, f"{name}_dw", "relu6")
        x = layers.Conv2D(filters, 1, use_bias=False, name=f"{name}_pw")(x)
        return bn_act(x, f"{name}_pw", "relu6")

    inputs = keras.Input(shape=input_shape, batch_size=batch_size, name="image")
    x = layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False, name="stem")(inputs)
    x = bn_act(x, "stem", "hswish")                       # 16x16x16
    x = dw_sep(x, 24, 1, "block1")                        # 16x16x24
    x = dw_sep(x, 48, 2, "block2")                        # 8x8x48
    x = layers.Resizing(RESIZE_TO, RESIZE_TO, interpolation="bilinear", name="resize")(x)  # 12x12x48
    x = dw_sep(x, 64, 2, "block3")                        # 6x6x64
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    x = layers.Dense(n_classes, name="logits")(x)
    outputs = layers.Softmax(name="probs")(x)
    return keras.Model(inputs, outputs, name="tradeoff_mobilenet")


def tradeoff_model(*, dataset: Any = "digits-conditions", seed: int = 0, epochs: int | None = None,
                   cache: bool = True, cache_root: str | os.PathLike | None = None,
                   retrain: bool = False) -> TradeoffModel:
    """The trade-off model exported four ways: the shipped weights, or trained.

    On the built-in dataset with the shipped recipe (seed 0, 20 epochs) the weights shipped with
    the package are used (every machine gets the same model and numbers).  ``retrain=True``, another
    dataset, seed or epoch count trains from scratch (about 3 minutes on 2 cores); a retrain
    compares its accuracy with the shipped one (``distance_from_shipped``).
    """
    from .builtin import builtin_model
    return cast(TradeoffModel, builtin_model(NAME, dataset, seed=seed, epochs=epochs, cache=cache,
                                             cache_root=cache_root, retrain=retrain))
