"""One training loop for the built-in models, and the shipped weight files they load.

The reference, trade-off and keypoint models train the same way: Keras with a fixed seed,
Adam with a cosine learning-rate decay per epoch, a fresh numpy-seeded augmentation of the
daylight training split each epoch, then the weights copied into a batch-1 twin for export
(a ``None`` batch exports SHAPE/PACK/STRIDED_SLICE ops that targets reject).  :func:`train` is
that loop; each model passes its architecture, loss and augmentation.

Trained weights differ from one CPU to another (same code and seed), so each built-in model
ships its weights: ``weights/<name>.npz`` (the arrays, in ``get_weights()`` order) and
``weights/<name>.json`` (the ``.npz``'s sha256, the training recipe, the library versions and
the accuracy measured when it was trained).  :func:`shipped_record` checks the sha256 before
anything is loaded: a damaged file is an error, never other numbers given silently.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._io import atomic_path, atomic_write_json, read_json, sha256_bytes, sha256_file
from ..errors import ModelError, WorkbenchWarning

SHIPPED_DIR = Path(__file__).resolve().parent / "weights"
LEARNING_RATE = 3e-3
BATCH_SIZE = 32

#: ``build(batch_size)`` -> a Keras model; ``None`` for training, ``1`` for the exported twin
Build = Callable[[int | None], Any]
#: ``augment(x, rng)`` -> a new augmented copy of ``x`` (one call per epoch)
Augment = Callable[[np.ndarray, np.random.Generator], np.ndarray]


def train(*, build: Build, x: np.ndarray, y: np.ndarray, loss: Any, augment: Augment, seed: int, epochs: int,
          batch_size: int = BATCH_SIZE, learning_rate: float = LEARNING_RATE,
          metrics: list[str] | None = None):
    """Train ``build(None)`` on ``(augment(x), y)``; return ``build(1)`` holding the trained weights.

    Keras is seeded with ``seed`` before the model is built (weight initialisation, shuffling), the
    augmentation draws from ``numpy.random.default_rng(seed)``; the learning rate follows a cosine
    from ``learning_rate`` down to near 0, set at the start of each epoch.
    """
    import keras
    keras.utils.set_random_seed(seed)
    model = build(None)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=loss, metrics=metrics)
    rng = np.random.default_rng(seed)
    for epoch in range(epochs):
        model.optimizer.learning_rate.assign(learning_rate * 0.5 * (1 + np.cos(np.pi * epoch / epochs)))
        model.fit(augment(x, rng), y, batch_size=batch_size, epochs=1, shuffle=True, verbose=0)
    deploy = build(1)
    deploy.set_weights(model.get_weights())
    return deploy


def recipe(*, augment: str, loss: str, batch_size: int = BATCH_SIZE, learning_rate: float = LEARNING_RATE,
           split: str = "train", condition: str = "daylight") -> dict[str, Any]:
    """The training recipe as recorded beside shipped weights (what :func:`train` did, in words)."""
    return {"split": split, "condition": condition, "augment": augment, "loss": loss,
            "optimizer": f"Adam {learning_rate:g}, cosine decay per epoch", "batch_size": batch_size}


def weights_sha256(model) -> str:
    """sha256 of a Keras model's weights (names, shapes and float32 bytes, in order)."""
    digest = []
    for w in model.weights:
        arr = np.asarray(w.numpy(), dtype=np.float32)
        digest.append(f"{w.path}:{arr.shape}:".encode() + arr.tobytes())
    return sha256_bytes(b"\0".join(digest))


def _files(name: str, directory: Path | None) -> tuple[Path, Path]:
    folder = Path(directory) if directory is not None else SHIPPED_DIR
    return folder / f"{name}.json", folder / f"{name}.npz"


def shipped_record(name: str, *, directory: Path | None = None, strict: bool = True) -> dict | None:
    """The record of the shipped weights ``<name>.json``, checked against ``<name>.npz``.

    None when the package ships none.  A ``.npz`` whose sha256 differs from the record (or an
    unreadable record) raises :class:`ModelError` (``strict``) or warns and gives None (``strict=False``,
    for a retrain that only compares with the shipped accuracy).
    """
    record, npz = _files(name, directory)
    if not record.is_file() or not npz.is_file():
        return None
    try:
        info = read_json(record)
        expected = str(info["sha256"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        problem = f"{record}: unreadable record of the shipped weights ({type(exc).__name__}: {exc})"
    else:
        actual = sha256_file(npz)
        if actual == expected:
            return info
        problem = f"{npz}: sha256 {actual[:12]} differs from {expected[:12]} recorded in {record.name}"
    advice = ("the shipped weights are damaged: restore them with `git checkout -- workbench/models/weights` "
              f"(or reinstall the package), or run `workbench model {name} --retrain`")
    if strict:
        raise ModelError(f"{problem}; {advice}")
    warnings.warn(f"{problem}; not comparing with the shipped accuracy ({advice})", WorkbenchWarning, stacklevel=2)
    return None


def load_shipped(name: str, model, *, directory: Path | None = None):
    """Set ``model``'s weights from ``<name>.npz`` (call :func:`shipped_record` first: it checks the file)."""
    _, npz = _files(name, directory)
    with np.load(npz) as arrays:
        weights = [arrays[f"w{i:03d}"] for i in range(len(arrays.files))]
    expected = len(model.get_weights())
    if len(weights) != expected:
        raise ModelError(f"{npz}: {len(weights)} weight arrays, the {model.name} architecture has {expected}; "
                         f"the shipped weights belong to another version: run `workbench model {name} --retrain`")
    model.set_weights(weights)
    return model


def write_shipped(name: str, model, info: dict[str, Any], *, directory: Path | None = None) -> dict[str, Any]:
    """Write ``<name>.npz`` (compressed) and ``<name>.json`` = ``info`` + sha256s + versions."""
    import keras
    import tensorflow as tf
    record, npz = _files(name, directory)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **{f"w{i:03d}": w for i, w in enumerate(model.get_weights())})
    npz.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(npz) as tmp:
        tmp.write_bytes(buffer.getvalue())
    full = {"sha256": sha256_file(npz), "weights_sha256": weights_sha256(model), **info,
            "trained_with": {"tensorflow": tf.__version__, "keras": keras.__version__, "numpy": np.__version__}}
    atomic_write_json(record, full)
    return full


@dataclass(frozen=True)
class WeightsPlan:
    """Where a built-in model's weights come from: the shipped file, or training (see :func:`plan_weights`)."""

    shipped: dict | None        # the checked record of the shipped weights (None: none, or not comparable)
    use_shipped: bool
    origin: str                 # shipped | retrained | trained (another dataset, seed or epoch count)
    source: dict                # what identifies the weights in a cache key
    metric: str = "accuracy"    # the record's key of the per-condition metric measured when shipped

    @property
    def shipped_metric(self) -> dict[str, float] | None:
        return self.shipped[self.metric] if self.shipped else None


def plan_weights(name: str, *, directory: Path | None, dataset_name: str, shipped_dataset: str, seed: int,
                 epochs: int, retrain: bool, metric: str = "accuracy") -> WeightsPlan:
    """Use the shipped weights when the request is the shipped recipe on its dataset and not a retrain.

    The shipped file is checked strictly (a damaged one raises) only when it is about to be used; a
    retrain only compares with it (a damaged one warns and is not compared with).
    """
    own_data = dataset_name == shipped_dataset
    shipped = shipped_record(name, directory=directory, strict=not retrain and own_data)
    use = (not retrain and shipped is not None and own_data
           and seed == shipped["seed"] and epochs == shipped["epochs"])
    origin = "shipped" if use else ("retrained" if retrain and own_data else "trained")
    source: dict = ({"weights": shipped["sha256"]} if use and shipped
                    else {"seed": seed, "epochs": epochs, "retrain": retrain})
    return WeightsPlan(shipped=shipped, use_shipped=use, origin=origin, source=source, metric=metric)


def distance(accuracy: dict[str, float], shipped: dict[str, float] | None) -> str:
    """Per condition, ``accuracy`` minus ``shipped`` in percentage points (``"daylight +0.2 pp, ..."``)."""
    shipped = shipped or {}
    return ", ".join(f"{c} {100 * (a - shipped[c]):+.1f} pp" for c, a in accuracy.items() if c in shipped)
