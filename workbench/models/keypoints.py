"""The built-in keypoint model: a non-classification example trained in seconds.

On the built-in ``digits-keypoints`` dataset (the digits of ``digits-conditions``
labelled with three keypoints: the ink's centroid and the corners of its bounding
box, ``(y, x)`` in [0, 1]) the reference architecture (same ops, so every target can
run it) regresses the six coordinates with a mean-squared error.  It is exported
with a batch of 1 as ``.keras``, SavedModel and FP32 ``.tflite``, each with its model
card (``task: keypoints``, one ``keypoints`` output) beside it, and cached under a
content key like the reference model.  Its task metric is PCK
(:func:`workbench.evaluate.metrics.pck`).
"""

from __future__ import annotations

import contextlib
import io
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

EPOCHS = 40
#: the reference trunk with the first release's dense head: the 4x4-conv head the reference model now
#: has (for Vela 3.10.0) regresses keypoints far worse in few epochs (daylight PCK 0.09 vs > 0.2 after 6)
HEAD = "dense"
BATCH_SIZE = 32
DATASET = "digits-keypoints"
CARD = {"layout": "NHWC", "color": "grayscale", "size": [32, 32], "resize": "stretch", "range": [0.0, 1.0],
        "task": "keypoints",
        "outputs": [{"name": "keypoints", "kind": "keypoints",
                     "meaning": "(y, x) in [0, 1] of the ink centroid, bounding-box top-left and bottom-right"}]}


@dataclass(frozen=True)
class KeypointModel(Result):
    """Paths of the exports (each with a ``.card.yaml`` beside it) and FP32 PCK per condition on ``test``."""

    keras: str
    saved_model: str
    tflite: str
    pck: dict[str, float]
    key: str
    dataset_hash: str
    seed: int
    epochs: int
    train_seconds: float
    cache_hit: bool = False

    def summary(self) -> str:
        values = ", ".join(f"{c} {v:.1%}" for c, v in self.pck.items())
        return f"keypoint CNN ({'cached' if self.cache_hit else 'trained'}): FP32 PCK@0.05 {values}"

    def _repr_html_(self) -> str:
        from .. import display
        return (display.heading("Keypoint model") + display.paragraph(self.summary())
                + display.table(("condition", "FP32 PCK@0.05"), [(c, f"{v:.2%}") for c, v in self.pck.items()]))


def _augment(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exposure gain 0.45..1.1 and light Gaussian noise: neither moves a keypoint."""
    gain = rng.uniform(0.45, 1.1, size=(len(x), 1, 1, 1)).astype(np.float32)
    noise = rng.normal(0.0, 0.03, size=x.shape).astype(np.float32)
    return np.clip(x * gain + noise, 0.0, 1.0)


def train(dataset, *, seed: int = 0, epochs: int = EPOCHS):
    """Train on the daylight training split; returns a batch-1 Keras model with 6 outputs."""
    import keras

    from .reference import build_model
    keras.utils.set_random_seed(seed)
    train_set = dataset.select(split="train", condition="daylight")
    x, y = np.asarray(train_set.x), np.asarray(train_set.y, np.float32).reshape(len(train_set), -1)
    model = build_model(dataset.input_shape, y.shape[1], head=HEAD)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="mse")
    rng = np.random.default_rng(seed)
    for epoch in range(epochs):
        model.optimizer.learning_rate.assign(3e-3 * 0.5 * (1 + np.cos(np.pi * epoch / epochs)))
        model.fit(_augment(x, rng), y, batch_size=BATCH_SIZE, epochs=1, shuffle=True, verbose=0)
    deploy = build_model(dataset.input_shape, y.shape[1], batch_size=1, head=HEAD)
    deploy.set_weights(model.get_weights())
    return deploy


def pck_by_condition(model, dataset, split: str = "test") -> dict[str, float]:
    from ..evaluate.metrics import pck
    from .reference import build_model
    free = build_model(dataset.input_shape, int(np.prod(dataset.y.shape[1:])), head=HEAD)
    free.set_weights(model.get_weights())
    out = {}
    for cond in dataset.select(split=split).conditions:
        subset = dataset.select(split=split, condition=cond)
        pred = free.predict(np.asarray(subset.x), batch_size=256, verbose=0)
        out[cond] = float(np.mean(pck(pred, subset.y)))
    return out


def export(model, folder: Path) -> dict[str, Path]:
    """``model.keras``, ``saved_model/``, ``model_fp32.tflite`` and a card beside each."""
    import tensorflow as tf

    from .contract import CARD_SUFFIX, contract_from_mapping, write_card
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"keras": folder / "model.keras", "saved_model": folder / "saved_model",
             "tflite": folder / "model_fp32.tflite"}
    model.save(paths["keras"])
    with contextlib.redirect_stdout(io.StringIO()):
        spec = tf.TensorSpec((1, *model.inputs[0].shape[1:]), tf.float32, name="image")
        model.export(str(paths["saved_model"]), format="tf_saved_model", input_signature=[spec])
    converter = tf.lite.TFLiteConverter.from_saved_model(str(paths["saved_model"]))
    paths["tflite"].write_bytes(converter.convert())
    contract = contract_from_mapping(CARD, source="built-in keypoint card")
    write_card(contract, folder / ("model" + CARD_SUFFIX))
    write_card(contract, folder / ("model_fp32" + CARD_SUFFIX))
    write_card(contract, paths["saved_model"] / "card.yaml")
    return paths


def keypoint_model(*, seed: int = 0, epochs: int = EPOCHS, cache: bool = True,
                   cache_root: str | os.PathLike | None = None) -> KeypointModel:
    """Train (or load from the cache) the keypoint model on ``digits-keypoints``."""
    from ..data.loaders import load_dataset
    data = load_dataset(DATASET, seed=seed)
    key = stable_hash({"dataset": data.hash, "code": sha256_file(__file__), "seed": seed, "epochs": epochs,
                       "card": CARD})[:16]
    folder = (Path(cache_root) if cache_root else cache_dir("keypoints")) / key
    record = folder / "keypoints.json"
    if cache and record.is_file():
        damage = check_folder_seal(folder)      # every export as written, or the entry is redone
        if damage is None:
            return KeypointModel.from_dict({**read_json(record), **_paths(folder), "cache_hit": True})
        damaged_cache_entry(folder, damage)
    start = time.perf_counter()
    model = train(data, seed=seed, epochs=epochs)
    seconds = time.perf_counter() - start
    with atomic_path(folder, replace_folder=True) as tmp:
        export(model, tmp)
        info = {"pck": pck_by_condition(model, data), "key": key, "dataset_hash": data.hash, "seed": seed,
                "epochs": epochs, "train_seconds": round(seconds, 2)}
        atomic_write_json(tmp / "keypoints.json", info)
        seal_folder(tmp)
    return KeypointModel.from_dict({**info, **_paths(folder), "cache_hit": False})


def _paths(folder: Path) -> dict[str, str]:
    return {"keras": str(folder / "model.keras"), "saved_model": str(folder / "saved_model"),
            "tflite": str(folder / "model_fp32.tflite")}
