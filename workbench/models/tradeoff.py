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
Exported with batch 1 as ``.keras``, SavedModel, FP32 ``.tflite`` and ``.onnx`` exactly like
the reference model and cached under a content key.  The measured properties are in
docs/sweep.md.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

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
NAME = "tradeoff"
SHIPPED_DIR = Path(__file__).resolve().parent / "weights"
SHIPPED_DATASET = "digits-conditions"


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
    origin: str = "trained"                 # shipped | retrained | trained (another dataset or recipe)
    weights_sha256: str | None = None
    shipped_accuracy: dict[str, float] | None = None

    def summary(self) -> str:
        acc = ", ".join(f"{c} {a:.1%}" for c, a in self.accuracy.items())
        how = {"shipped": "shipped weights", "retrained": "retrained"}.get(self.origin, "trained")
        text = f"trade-off model ({how}{', cached' if self.cache_hit else ''}): FP32 top-1 {acc}"
        if self.origin == "retrained" and self.shipped_accuracy:
            text += f"; vs shipped: {self.distance_from_shipped()}"
        return text

    def distance_from_shipped(self) -> str:
        """Per condition, retrained minus shipped accuracy in percentage points."""
        from .training import distance
        return distance(self.accuracy, self.shipped_accuracy)

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


def _build(dataset):
    """``build(batch_size)`` for :func:`workbench.models.training.train` on ``dataset``."""
    return lambda batch_size: build_model(dataset.input_shape, len(dataset.classes), batch_size=batch_size)


def train(dataset, *, seed: int = 0, epochs: int = EPOCHS, train_limit: int | None = None):
    """Train on the daylight training split; returns a batch-1 Keras model."""
    import keras

    from . import training
    from .reference import _augment
    train_set = dataset.select(split="train", condition="daylight")
    x, y = train_set.x, train_set.y
    if train_limit is not None:
        x, y = x[:train_limit], y[:train_limit]
    return training.train(build=_build(dataset), x=x, y=y, augment=_augment, seed=seed, epochs=epochs,
                          loss=keras.losses.SparseCategoricalCrossentropy(), batch_size=BATCH_SIZE,
                          metrics=["accuracy"])


def accuracy_by_condition(model, dataset, split: str = "test") -> dict[str, float]:
    """FP32 top-1 of a Keras model per condition (batched through a batch-free twin)."""
    from .training import top1_by_condition
    return top1_by_condition(_build(dataset), model, dataset, split)


def shipped_weights(*, strict: bool = True) -> dict | None:
    """The record of the shipped weights (``weights/tradeoff.json``), checked against the ``.npz``.

    None when the package ships none; a ``.npz`` whose sha256 differs from the record is a
    :class:`~workbench.errors.ModelError` (``strict``) or a warning and None (``strict=False``).
    """
    from .training import shipped_record
    return shipped_record(NAME, directory=SHIPPED_DIR, strict=strict)


def load_shipped(dataset):
    """The trade-off architecture (batch 1) with the shipped weights."""
    from .training import load_shipped as load
    return load(NAME, build_model(dataset.input_shape, len(dataset.classes), batch_size=1), directory=SHIPPED_DIR)


def tradeoff_model(*, dataset="digits-conditions", seed: int = 0, epochs: int = EPOCHS,
                   cache: bool = True, cache_root: str | os.PathLike | None = None,
                   retrain: bool = False) -> TradeoffModel:
    """The trade-off model exported four ways: the shipped weights, or trained.

    On the built-in dataset with the shipped recipe (seed 0, ``EPOCHS``) the weights shipped with
    the package are used (every machine gets the same model and numbers).  ``retrain=True``, another
    dataset, seed or epoch count trains from scratch (about 3 minutes on 2 cores); a retrain
    compares its accuracy with the shipped one (``distance_from_shipped``).
    """
    from ..data.loaders import load_dataset
    from .reference import _paths, export_all
    from .training import plan_weights, weights_sha256
    data = load_dataset(dataset)
    plan = plan_weights(NAME, directory=SHIPPED_DIR, dataset_name=data.name, shipped_dataset=SHIPPED_DATASET,
                        seed=seed, epochs=epochs, retrain=retrain)
    key = stable_hash({"dataset": data.hash, "code": sha256_file(__file__), **plan.source})[:16]
    root = Path(cache_root) if cache_root else cache_dir("tradeoff")
    folder = root / key
    extra = {"origin": plan.origin, "shipped_accuracy": plan.shipped_metric}
    record = folder / "tradeoff.json"
    if cache and record.is_file():
        damage = check_folder_seal(folder)      # every export as written, or the entry is redone
        if damage is None:
            info = read_json(record)
            return TradeoffModel.from_dict({**info, **_paths(folder), **extra, "cache_hit": True})
        damaged_cache_entry(folder, damage)

    start = time.perf_counter()
    model = load_shipped(data) if plan.use_shipped else train(data, seed=seed, epochs=epochs)
    seconds = time.perf_counter() - start
    with atomic_path(folder, replace_folder=True) as tmp:
        export_all(model, tmp)
        accuracy = accuracy_by_condition(model, data)
        info = {"accuracy": accuracy, "key": key, "dataset": data.name, "dataset_hash": data.hash,
                "seed": seed, "epochs": epochs, "train_seconds": round(seconds, 2),
                "weights_sha256": weights_sha256(model)}
        atomic_write_json(tmp / "tradeoff.json", info)
        seal_folder(tmp)
    return TradeoffModel.from_dict({**info, **_paths(folder), **extra, "cache_hit": False})


def ship(*, seed: int = 0, epochs: int = EPOCHS) -> dict:
    """Train with the recipe and write ``weights/tradeoff.npz`` + ``.json`` (maintainers only).

    Run ``python -m workbench.models.tradeoff --ship`` and commit both files.
    """
    from ..data.loaders import load_dataset
    from .training import recipe, write_shipped
    data = load_dataset(SHIPPED_DATASET)
    start = time.perf_counter()
    model = train(data, seed=seed, epochs=epochs)
    seconds = time.perf_counter() - start
    info = {"dataset": data.name,
            "training": recipe(augment="shifts <= 2 px, gain 0.45-1.1 (the reference model's)",
                               loss="sparse categorical cross-entropy on the softmax", batch_size=BATCH_SIZE),
            "seed": seed, "epochs": epochs, "train_seconds": round(seconds, 1),
            "accuracy": accuracy_by_condition(model, data)}
    return write_shipped(NAME, model, info, directory=SHIPPED_DIR)


if __name__ == "__main__":  # pragma: no cover - maintainers: python -m workbench.models.tradeoff --ship
    import json
    import sys
    if sys.argv[1:] != ["--ship"]:
        sys.exit("usage: python -m workbench.models.tradeoff --ship")
    print(json.dumps(ship(), indent=2))
