"""The reference model: a small CNN every target can run, trained on daylight digits.

Conv, depthwise conv, max and average pooling, dense and ReLU only: ops that the
VX delegate, Vela and the Neutron converter all map.  Trained on the built-in
dataset's daylight training split with light augmentation (small shifts and
brightness jitter), then exported with a static batch of 1 (a ``None`` batch
exports SHAPE/PACK/STRIDED_SLICE ops that targets reject) as ``.keras``,
SavedModel, FP32 ``.tflite`` and ``.onnx`` (converted from the SavedModel).

Results are cached under a content key (dataset hash, this file's source, seed,
epochs), so later runs reuse the model instead of training again.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._io import atomic_path, atomic_write_json, cache_dir, read_json, sha256_file, stable_hash
from .._results import Result
from ..errors import ModelError

EPOCHS = 20
BATCH_SIZE = 32


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

    def summary(self) -> str:
        acc = ", ".join(f"{c} {a:.1%}" for c, a in self.accuracy.items())
        return f"reference CNN ({'cached' if self.cache_hit else 'trained'}): FP32 top-1 {acc}"

    def _repr_html_(self) -> str:
        from .. import display
        return (display.heading("Reference model") + display.paragraph(self.summary())
                + display.table(("condition", "FP32 top-1"),
                                [(c, f"{a:.2%}") for c, a in self.accuracy.items()]))


def build_model(input_shape: tuple[int, ...], n_classes: int, *, batch_size: int | None = None):
    """The reference architecture (Keras functional model).

    Each convolution is followed by batch normalization (folded into the convolution
    by the TFLite converter) and ReLU (fused into it), so the exported graph holds
    only CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D, AVERAGE_POOL_2D, RESHAPE and
    FULLY_CONNECTED.
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
    x = layers.AveragePooling2D(4, name="pool2")(x)
    x = layers.Flatten(name="flatten")(x)
    outputs = layers.Dense(n_classes, name="logits")(x)
    return keras.Model(inputs, outputs, name="reference_cnn")


def _augment(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Light augmentation: shifts of up to 2 pixels and an exposure gain of 0.45 to 1.1."""
    out = np.empty_like(x)
    for i in range(len(x)):
        dy, dx = rng.integers(-2, 3, size=2)
        out[i] = np.roll(np.roll(x[i], dy, axis=0), dx, axis=1)
    gain = rng.uniform(0.45, 1.1, size=(len(x), 1, 1, 1)).astype(np.float32)
    return np.clip(out * gain, 0.0, 1.0)


def train(dataset, *, seed: int = 0, epochs: int = EPOCHS, train_limit: int | None = None):
    """Train the reference architecture on the daylight training split; returns a batch-1 Keras model."""
    import keras
    keras.utils.set_random_seed(seed)
    train_set = dataset.select(split="train", condition="daylight")
    x, y = train_set.x, train_set.y
    if train_limit is not None:
        x, y = x[:train_limit], y[:train_limit]
    model = build_model(dataset.input_shape, len(dataset.classes))
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
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
        logits = free.predict(subset.x, batch_size=256, verbose=0)
        out[cond] = float(np.mean(np.argmax(logits, axis=1) == subset.y))
    return out


def export_all(model, folder: Path) -> dict[str, Path]:
    """Write ``model.keras``, ``saved_model/``, ``model_fp32.tflite`` and ``model.onnx`` into ``folder``."""
    import tensorflow as tf
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"keras": folder / "model.keras", "saved_model": folder / "saved_model",
             "tflite": folder / "model_fp32.tflite", "onnx": folder / "model.onnx"}
    model.save(paths["keras"])
    with contextlib.redirect_stdout(io.StringIO()):   # Keras prints an export summary
        spec = tf.TensorSpec((1, *model.inputs[0].shape[1:]), tf.float32, name="image")
        model.export(str(paths["saved_model"]), format="tf_saved_model", input_signature=[spec])
    converter = tf.lite.TFLiteConverter.from_saved_model(str(paths["saved_model"]))
    paths["tflite"].write_bytes(converter.convert())
    export_onnx(paths["saved_model"], paths["onnx"])
    return paths


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
                    cache: bool = True, cache_root: str | os.PathLike | None = None) -> ReferenceModel:
    """Train (or load from the cache) the reference model and export it four ways."""
    from ..data.loaders import load_dataset
    data = load_dataset(dataset)
    key = stable_hash({"dataset": data.hash, "code": sha256_file(__file__), "seed": seed, "epochs": epochs})[:16]
    root = Path(cache_root) if cache_root else cache_dir("reference")
    folder = root / key
    record = folder / "reference.json"
    if cache and record.is_file():
        info = read_json(record)
        return ReferenceModel.from_dict({**info, **_paths(folder), "cache_hit": True})

    start = time.perf_counter()
    model = train(data, seed=seed, epochs=epochs)
    seconds = time.perf_counter() - start
    with atomic_path(folder, replace_folder=True) as tmp:
        export_all(model, tmp)
        accuracy = accuracy_by_condition(model, data)
        info = {"accuracy": accuracy, "key": key, "dataset": data.name, "dataset_hash": data.hash,
                "seed": seed, "epochs": epochs, "train_seconds": round(seconds, 2)}
        atomic_write_json(tmp / "reference.json", info)
    return ReferenceModel.from_dict({**info, **_paths(folder), "cache_hit": False})


def _paths(folder: Path) -> dict[str, str]:
    return {"keras": str(folder / "model.keras"), "saved_model": str(folder / "saved_model"),
            "tflite": str(folder / "model_fp32.tflite"), "onnx": str(folder / "model.onnx")}
