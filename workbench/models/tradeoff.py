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
augmentation, cached under a content key and exported with batch 1 as ``.keras``,
SavedModel, FP32 ``.tflite`` and ``.onnx`` exactly like the reference model.  The
measured properties are in docs/sweep.md.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._io import (
    atomic_path,
    atomic_write_json,
    cache_dir,
    check_folder_seal,
    damaged_cache_entry,
    read_json,
    seal_folder,
    sha256_file,
    stable_hash,
)
from .._results import Result

EPOCHS = 20
BATCH_SIZE = 32
RESIZE_TO = 12


@dataclass(frozen=True)
class TradeoffModel(Result):
    """Paths of the four exports and the FP32 top-1 accuracy per condition on ``test``."""

    keras: str
    saved_model: str
    tflite: str
    onnx: str
    accuracy: dict[str, float]
    key: str
    dataset: str
    dataset_hash: str
    seed: int
    epochs: int
    train_seconds: float
    cache_hit: bool = False

    def summary(self) -> str:
        acc = ", ".join(f"{c} {a:.1%}" for c, a in self.accuracy.items())
        return f"trade-off model ({'cached' if self.cache_hit else 'trained'}): FP32 top-1 {acc}"

    def _repr_html_(self) -> str:
        from .. import display
        return (display.heading("Trade-off model") + display.paragraph(self.summary())
                + display.table(("condition", "FP32 top-1"),
                                [(c, f"{a:.2%}") for c, a in self.accuracy.items()]))


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


def train(dataset, *, seed: int = 0, epochs: int = EPOCHS, train_limit: int | None = None):
    """Train on the daylight training split; returns a batch-1 Keras model."""
    import keras

    from .reference import _augment
    keras.utils.set_random_seed(seed)
    train_set = dataset.select(split="train", condition="daylight")
    x, y = train_set.x, train_set.y
    if train_limit is not None:
        x, y = x[:train_limit], y[:train_limit]
    model = build_model(dataset.input_shape, len(dataset.classes))
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(), metrics=["accuracy"])
    rng = np.random.default_rng(seed)
    for epoch in range(epochs):
        model.optimizer.learning_rate.assign(3e-3 * 0.5 * (1 + np.cos(np.pi * epoch / epochs)))
        model.fit(_augment(x, rng), y, batch_size=BATCH_SIZE, epochs=1, shuffle=True, verbose=0)
    deploy = build_model(dataset.input_shape, len(dataset.classes), batch_size=1)
    deploy.set_weights(model.get_weights())
    return deploy


def accuracy_by_condition(model, dataset, split: str = "test") -> dict[str, float]:
    """FP32 top-1 of a Keras model per condition (batched through a batch-free twin)."""
    free = build_model(dataset.input_shape, len(dataset.classes))
    free.set_weights(model.get_weights())
    out = {}
    for cond in dataset.select(split=split).conditions:
        subset = dataset.select(split=split, condition=cond)
        probs = free.predict(subset.x, batch_size=256, verbose=0)
        out[cond] = float(np.mean(np.argmax(probs, axis=1) == subset.y))
    return out


def tradeoff_model(*, dataset="digits-conditions", seed: int = 0, epochs: int = EPOCHS,
                   cache: bool = True, cache_root: str | os.PathLike | None = None) -> TradeoffModel:
    """Train (or load from the cache) the trade-off model and export it four ways."""
    from ..data.loaders import load_dataset
    from .reference import _paths, export_all
    data = load_dataset(dataset)
    key = stable_hash({"dataset": data.hash, "code": sha256_file(__file__), "seed": seed, "epochs": epochs})[:16]
    root = Path(cache_root) if cache_root else cache_dir("tradeoff")
    folder = root / key
    record = folder / "tradeoff.json"
    if cache and record.is_file():
        damage = check_folder_seal(folder)      # every export as written, or the entry is redone
        if damage is None:
            info = read_json(record)
            return TradeoffModel.from_dict({**info, **_paths(folder), "cache_hit": True})
        damaged_cache_entry(folder, damage)

    start = time.perf_counter()
    model = train(data, seed=seed, epochs=epochs)
    seconds = time.perf_counter() - start
    with atomic_path(folder, replace_folder=True) as tmp:
        export_all(model, tmp)
        accuracy = accuracy_by_condition(model, data)
        info = {"accuracy": accuracy, "key": key, "dataset": data.name, "dataset_hash": data.hash,
                "seed": seed, "epochs": epochs, "train_seconds": round(seconds, 2)}
        atomic_write_json(tmp / "tradeoff.json", info)
        seal_folder(tmp)
    return TradeoffModel.from_dict({**info, **_paths(folder), "cache_hit": False})
