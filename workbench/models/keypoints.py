"""The built-in keypoint model: a non-classification example (a regression head on the reference trunk).

On the built-in ``digits-keypoints`` dataset (the digits of ``digits-conditions``
labelled with three keypoints: the ink's centroid and the corners of its bounding
box, ``(y, x)`` in [0, 1]) the reference architecture (same ops, so every target can
run it) regresses the six coordinates with a mean-squared error.  It is exported
with a batch of 1 as ``.keras``, SavedModel and FP32 ``.tflite``, each with its model
card (``task: keypoints``, one ``keypoints`` output) beside it, and cached under a
content key like the reference model.  Its task metric is PCK
(:func:`workbench.evaluate.metrics.pck`).

Like the reference model its weights are shipped (``weights/keypoints.npz`` with its sha256,
recipe and the PCK measured when it was trained, in ``weights/keypoints.json``) and used by
default; ``retrain=True`` trains again and reports the distance from the shipped PCK.
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

EPOCHS = 40
#: the reference trunk with the first release's dense head: the 4x4-conv head the reference model now
#: has (for Vela 3.10.0) regresses keypoints far worse in few epochs (daylight PCK 0.09 vs > 0.2 after 6)
HEAD = "dense"
BATCH_SIZE = 32
DATASET = "digits-keypoints"
NAME = "keypoints"
SHIPPED_DIR = Path(__file__).resolve().parent / "weights"
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
    origin: str = "trained"                 # shipped | retrained | trained (another seed or epoch count)
    weights_sha256: str | None = None
    shipped_pck: dict[str, float] | None = None

    def summary(self) -> str:
        values = ", ".join(f"{c} {v:.1%}" for c, v in self.pck.items())
        how = {"shipped": "shipped weights", "retrained": "retrained"}.get(self.origin, "trained")
        text = f"keypoint CNN ({how}{', cached' if self.cache_hit else ''}): FP32 PCK@0.05 {values}"
        if self.origin == "retrained" and self.shipped_pck:
            text += f"; vs shipped: {self.distance_from_shipped()}"
        return text

    def distance_from_shipped(self) -> str:
        """Per condition, retrained minus shipped PCK in percentage points."""
        from .training import distance
        return distance(self.pck, self.shipped_pck)

    def _repr_html_(self) -> str:
        from .. import display
        return (display.heading("Keypoint model") + display.paragraph(self.summary())
                + display.table(("condition", "FP32 PCK@0.05"), [(c, f"{v:.2%}") for c, v in self.pck.items()]))


def _augment(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exposure gain 0.45..1.1 and light Gaussian noise: neither moves a keypoint."""
    gain = rng.uniform(0.45, 1.1, size=(len(x), 1, 1, 1)).astype(np.float32)
    noise = rng.normal(0.0, 0.03, size=x.shape).astype(np.float32)
    return np.clip(x * gain + noise, 0.0, 1.0)


def _build(dataset, n_outputs: int):
    """``build(batch_size)`` for :func:`workbench.models.training.train`: the reference trunk, ``HEAD``."""
    from .reference import build_model
    return lambda batch_size: build_model(dataset.input_shape, n_outputs, batch_size=batch_size, head=HEAD)


def train(dataset, *, seed: int = 0, epochs: int = EPOCHS):
    """Train on the daylight training split; returns a batch-1 Keras model with 6 outputs."""
    from . import training
    train_set = dataset.select(split="train", condition="daylight")
    x, y = np.asarray(train_set.x), np.asarray(train_set.y, np.float32).reshape(len(train_set), -1)
    return training.train(build=_build(dataset, y.shape[1]), x=x, y=y, loss="mse", augment=_augment, seed=seed,
                          epochs=epochs, batch_size=BATCH_SIZE)


def pck_by_condition(model, dataset, split: str = "test") -> dict[str, float]:
    from ..evaluate.metrics import pck
    free = _build(dataset, int(np.prod(dataset.y.shape[1:])))(None)
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
    from .reference import export_saved_model
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"keras": folder / "model.keras", "saved_model": folder / "saved_model",
             "tflite": folder / "model_fp32.tflite"}
    model.save(paths["keras"])
    export_saved_model(model, paths["saved_model"])
    converter = tf.lite.TFLiteConverter.from_saved_model(str(paths["saved_model"]))
    paths["tflite"].write_bytes(converter.convert())
    contract = contract_from_mapping(CARD, source="built-in keypoint card")
    write_card(contract, folder / ("model" + CARD_SUFFIX))
    write_card(contract, folder / ("model_fp32" + CARD_SUFFIX))
    write_card(contract, paths["saved_model"] / "card.yaml")
    return paths


def shipped_weights(*, strict: bool = True) -> dict | None:
    """The record of the shipped weights (``weights/keypoints.json``), checked against the ``.npz``."""
    from .training import shipped_record
    return shipped_record(NAME, directory=SHIPPED_DIR, strict=strict)


def load_shipped(dataset):
    """The keypoint architecture (batch 1) with the shipped weights."""
    from .training import load_shipped as load
    n_outputs = int(np.prod(dataset.y.shape[1:]))
    return load(NAME, _build(dataset, n_outputs)(1), directory=SHIPPED_DIR)


def keypoint_model(*, seed: int = 0, epochs: int = EPOCHS, cache: bool = True,
                   cache_root: str | os.PathLike | None = None, retrain: bool = False) -> KeypointModel:
    """The keypoint model on ``digits-keypoints``: the shipped weights, or trained.

    With the shipped recipe (seed 0, ``EPOCHS``) the weights shipped with the package are used;
    ``retrain=True`` or another seed or epoch count trains (about 2 minutes for ``EPOCHS`` on 2 cores).
    """
    from ..data.loaders import load_dataset
    from .training import plan_weights, weights_sha256
    data = load_dataset(DATASET, seed=seed)
    plan = plan_weights(NAME, directory=SHIPPED_DIR, dataset_name=data.name, shipped_dataset=DATASET, seed=seed,
                        epochs=epochs, retrain=retrain, metric="pck")
    key = stable_hash({"dataset": data.hash, "code": sha256_file(__file__), **plan.source, "card": CARD})[:16]
    folder = (Path(cache_root) if cache_root else cache_dir("keypoints")) / key
    extra = {"origin": plan.origin, "shipped_pck": plan.shipped_metric}
    record = folder / "keypoints.json"
    if cache and record.is_file():
        damage = check_folder_seal(folder)      # every export as written, or the entry is redone
        if damage is None:
            return KeypointModel.from_dict({**read_json(record), **_paths(folder), **extra, "cache_hit": True})
        damaged_cache_entry(folder, damage)
    start = time.perf_counter()
    model = load_shipped(data) if plan.use_shipped else train(data, seed=seed, epochs=epochs)
    seconds = time.perf_counter() - start
    with atomic_path(folder, replace_folder=True) as tmp:
        export(model, tmp)
        info = {"pck": pck_by_condition(model, data), "key": key, "dataset_hash": data.hash, "seed": seed,
                "epochs": epochs, "train_seconds": round(seconds, 2), "weights_sha256": weights_sha256(model)}
        atomic_write_json(tmp / "keypoints.json", info)
        seal_folder(tmp)
    return KeypointModel.from_dict({**info, **_paths(folder), **extra, "cache_hit": False})


def ship(*, seed: int = 0, epochs: int = EPOCHS) -> dict:
    """Train with the recipe and write ``weights/keypoints.npz`` + ``.json`` (maintainers only).

    Run ``python -m workbench.models.keypoints --ship`` and commit both files.
    """
    from ..data.loaders import load_dataset
    from .training import recipe, write_shipped
    data = load_dataset(DATASET, seed=seed)
    start = time.perf_counter()
    model = train(data, seed=seed, epochs=epochs)
    seconds = time.perf_counter() - start
    info = {"dataset": data.name,
            "training": recipe(augment="gain 0.45-1.1, Gaussian noise sigma 0.03", loss="mean squared error",
                               batch_size=BATCH_SIZE),
            "head": HEAD, "seed": seed, "epochs": epochs, "train_seconds": round(seconds, 1),
            "pck": pck_by_condition(model, data)}
    return write_shipped(NAME, model, info, directory=SHIPPED_DIR)


def _paths(folder: Path) -> dict[str, str]:
    return {"keras": str(folder / "model.keras"), "saved_model": str(folder / "saved_model"),
            "tflite": str(folder / "model_fp32.tflite")}


if __name__ == "__main__":  # pragma: no cover - maintainers: python -m workbench.models.keypoints --ship
    import json
    import sys
    if sys.argv[1:] != ["--ship"]:
        sys.exit("usage: python -m workbench.models.keypoints --ship")
    print(json.dumps(ship(), indent=2))
