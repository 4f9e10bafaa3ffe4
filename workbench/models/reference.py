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

Exports are cached under a content key (weights or training recipe, dataset, this file's
source), so later runs reuse them.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._io import atomic_path, atomic_write_json, cache_dir, read_json, sha256_file, stable_hash
from .._results import Result
from ..errors import ModelError, WorkbenchWarning

EPOCHS = 20
BATCH_SIZE = 32
SHIPPED_DIR = Path(__file__).resolve().parent / "weights"
NAME = "reference"
SHIPPED_DATASET = "digits-conditions"


@dataclass(frozen=True)
class ReferenceModel(Result):
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
        text = f"reference CNN ({how}{', cached' if self.cache_hit else ''}): FP32 top-1 {acc}"
        if self.origin == "retrained" and self.shipped_accuracy:
            text += f"; vs shipped: {self.distance_from_shipped()}"
        return text

    def distance_from_shipped(self) -> str:
        """Per condition, retrained minus shipped accuracy in percentage points."""
        from .training import distance
        return distance(self.accuracy, self.shipped_accuracy)

    def _repr_html_(self) -> str:
        from .. import display
        return (display.heading("Reference model") + display.paragraph(self.summary())
                + display.table(("condition", "FP32 top-1"),
                                [(c, f"{a:.2%}") for c, a in self.accuracy.items()]))


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


def _augment(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Light augmentation: shifts of up to 2 pixels and an exposure gain of 0.45 to 1.1."""
    out = np.empty_like(x)
    for i in range(len(x)):
        dy, dx = rng.integers(-2, 3, size=2)
        out[i] = np.roll(np.roll(x[i], dy, axis=0), dx, axis=1)
    gain = rng.uniform(0.45, 1.1, size=(len(x), 1, 1, 1)).astype(np.float32)
    return np.clip(out * gain, 0.0, 1.0)


def _build(dataset, *, head: str = "conv"):
    """``build(batch_size)`` for :func:`workbench.models.training.train` on ``dataset``."""
    return lambda batch_size: build_model(dataset.input_shape, len(dataset.classes), batch_size=batch_size, head=head)


def train(dataset, *, seed: int = 0, epochs: int = EPOCHS, train_limit: int | None = None):
    """Train the reference architecture on the daylight training split; returns a batch-1 Keras model."""
    import keras

    from . import training
    train_set = dataset.select(split="train", condition="daylight")
    x, y = train_set.x, train_set.y
    if train_limit is not None:
        x, y = x[:train_limit], y[:train_limit]
    return training.train(build=_build(dataset), x=x, y=y, augment=_augment, seed=seed, epochs=epochs,
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          batch_size=BATCH_SIZE, metrics=["accuracy"])


def accuracy_by_condition(model, dataset, split: str = "test") -> dict[str, float]:
    """FP32 top-1 of a Keras model per condition (batched through a batch-free twin)."""
    from .training import top1_by_condition
    return top1_by_condition(_build(dataset), model, dataset, split)


def export_all(model, folder: Path) -> dict[str, Path]:
    """Write ``model.keras``, ``saved_model/``, ``model_fp32.tflite`` and ``model.onnx`` into ``folder``."""
    import tensorflow as tf
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"keras": folder / "model.keras", "saved_model": folder / "saved_model",
             "tflite": folder / "model_fp32.tflite", "onnx": folder / "model.onnx"}
    model.save(paths["keras"])
    export_saved_model(model, paths["saved_model"])
    converter = tf.lite.TFLiteConverter.from_saved_model(str(paths["saved_model"]))
    paths["tflite"].write_bytes(converter.convert())
    export_onnx(paths["saved_model"], paths["onnx"])
    return paths


def export_saved_model(model, folder: Path) -> Path:
    """``model(image, training=False)`` with a static batch-1 input ``image`` as a SavedModel.

    ``training=False`` is explicit: ``model.export`` traces ``model(x)``, and in Keras 3.15 the layers
    after a ``Resizing`` layer then run in training mode (batch norm with the batch's statistics:
    the trade-off model's FP32 ``.tflite`` and ``.onnx`` scored 10% where the Keras model scores 97.6%).
    """
    import keras
    import tensorflow as tf
    spec = tf.TensorSpec((1, *model.inputs[0].shape[1:]), tf.float32, name="image")

    def serve(image):
        return model(image, training=False)

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(name="serve", fn=serve, input_signature=[spec])
    with contextlib.redirect_stdout(io.StringIO()):   # Keras prints an export summary
        archive.write_out(str(folder), verbose=False)
    return folder


def export_onnx(saved_model: Path, output: Path, *, opset: int = 17) -> Path:
    """SavedModel -> ONNX with tf2onnx (``from_keras`` does not work with Keras 3)."""
    cmd = [sys.executable, "-m", "tf2onnx.convert", "--saved-model", str(saved_model),
           "--output", str(output), "--opset", str(opset)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0 or not output.is_file():
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise ModelError(f"{saved_model}: tf2onnx could not convert the SavedModel to ONNX "
                         f"(exit {proc.returncode}):\n{tail}")
    return output


def reference_model(*, dataset="digits-conditions", seed: int = 0, epochs: int = EPOCHS,
                    cache: bool = True, cache_root: str | os.PathLike | None = None,
                    retrain: bool = False) -> ReferenceModel:
    """The reference model exported four ways: the shipped weights, or trained.

    On the built-in dataset with the shipped recipe (seed 0, ``EPOCHS``) the weights shipped
    with the package are used, so every machine gets the same model and the same numbers.
    ``retrain=True``, another dataset, seed or epoch count trains from scratch (about 2 minutes on
    2 cores); a retrain compares its accuracy with the shipped one (``distance_from_shipped``).
    """
    from ..data.loaders import load_dataset
    from .training import plan_weights
    data = load_dataset(dataset)
    plan = plan_weights(NAME, directory=SHIPPED_DIR, dataset_name=data.name, shipped_dataset=SHIPPED_DATASET,
                        seed=seed, epochs=epochs, retrain=retrain)
    key = stable_hash({"dataset": data.hash, "code": sha256_file(__file__), **plan.source})[:16]
    root = Path(cache_root) if cache_root else cache_dir("reference")
    folder = root / key
    extra = {"origin": plan.origin, "shipped_accuracy": plan.shipped_metric}
    record = folder / "reference.json"
    if cache and record.is_file():
        try:
            info = read_json(record)
            if _exports_intact(folder, info):
                return ReferenceModel.from_dict({**info, **_paths(folder), **extra, "cache_hit": True})
        except (OSError, ValueError, TypeError, KeyError):
            pass  # a damaged entry is redone below
        warnings.warn(f"reference model cache entry {folder.name} is damaged or incomplete; rebuilding it",
                      WorkbenchWarning, stacklevel=2)

    start = time.perf_counter()
    if plan.use_shipped:
        model = load_shipped(data)
    else:
        model = train(data, seed=seed, epochs=epochs)
    seconds = time.perf_counter() - start
    with atomic_path(folder, replace_folder=True) as tmp:
        export_all(model, tmp)
        accuracy = accuracy_by_condition(model, data)
        info = {"accuracy": accuracy, "key": key, "dataset": data.name, "dataset_hash": data.hash,
                "seed": seed, "epochs": epochs, "train_seconds": round(seconds, 2),
                "weights_sha256": weights_sha256(model),
                "files": {name: sha256_file(tmp / Path(path).name) for name, path in _paths(tmp).items()}}
        atomic_write_json(tmp / "reference.json", info)
    info.pop("files")
    return ReferenceModel.from_dict({**info, **_paths(folder), **extra, "cache_hit": False})


def _exports_intact(folder: Path, info: dict) -> bool:
    """Every export is on disk with the sha256 recorded when it was written."""
    files = info.get("files") or {}
    paths = _paths(folder)
    info.pop("files", None)
    return set(files) == set(paths) and all(Path(p).exists() and sha256_file(p) == files[n] for n, p in paths.items())


def weights_sha256(model) -> str:
    """sha256 of a Keras model's weights (names, shapes and float32 bytes, in order)."""
    from .training import weights_sha256 as digest
    return digest(model)


def shipped_weights(*, strict: bool = True) -> dict | None:
    """The record of the shipped weights (``weights/reference.json``), checked against the ``.npz``.

    None when the package ships none; a ``.npz`` whose sha256 differs from the record is an error
    (a damaged checkout must not give other numbers silently), or a warning and None with
    ``strict=False`` (a retrain, which only compares with the shipped accuracy).
    """
    from .training import shipped_record
    return shipped_record(NAME, directory=SHIPPED_DIR, strict=strict)


def load_shipped(dataset):
    """The reference architecture (batch 1) with the shipped weights."""
    from .training import load_shipped as load
    return load(NAME, build_model(dataset.input_shape, len(dataset.classes), batch_size=1), directory=SHIPPED_DIR)


def ship(*, seed: int = 0, epochs: int = EPOCHS) -> dict:
    """Train with the recipe and write ``weights/reference.npz`` + ``.json`` (maintainers only).

    Run ``python -m workbench.models.reference --ship`` and commit both files.
    """
    from ..data.loaders import load_dataset
    from .training import recipe, write_shipped
    data = load_dataset(SHIPPED_DATASET)
    start = time.perf_counter()
    model = train(data, seed=seed, epochs=epochs)
    seconds = time.perf_counter() - start
    info = {"dataset": data.name,
            "training": recipe(augment="shifts <= 2 px, gain 0.45-1.1", loss="sparse categorical cross-entropy",
                               batch_size=BATCH_SIZE),
            "seed": seed, "epochs": epochs, "train_seconds": round(seconds, 1),
            "accuracy": accuracy_by_condition(model, data)}
    return write_shipped(NAME, model, info, directory=SHIPPED_DIR)


def _paths(folder: Path) -> dict[str, str]:
    return {"keras": str(folder / "model.keras"), "saved_model": str(folder / "saved_model"),
            "tflite": str(folder / "model_fp32.tflite"), "onnx": str(folder / "model.onnx")}


if __name__ == "__main__":  # pragma: no cover - maintainers: python -m workbench.models.reference --ship
    import json
    if sys.argv[1:] != ["--ship"]:
        sys.exit("usage: python -m workbench.models.reference --ship")
    print(json.dumps(ship(), indent=2))
