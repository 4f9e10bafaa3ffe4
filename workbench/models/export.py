"""Export a Keras model with a static batch of 1: ``.keras``, SavedModel, FP32 ``.tflite``, ``.onnx``.

The one export path of the built-in models (:mod:`workbench.models.builtin`) and of the ONNX
conversion of a Keras file (:mod:`workbench.models.convert`).  A ``None`` batch exports
SHAPE/PACK/STRIDED_SLICE ops that targets reject, so the model given has batch 1.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from ..errors import ModelError

#: each export's file or folder name inside the export folder
FILES = {"keras": "model.keras", "saved_model": "saved_model", "tflite": "model_fp32.tflite", "onnx": "model.onnx"}
EXPORTS = tuple(FILES)


def export_paths(folder: str | os.PathLike, kinds: Iterable[str] = EXPORTS) -> dict[str, str]:
    """``{kind: path}`` of the exports ``kinds`` inside ``folder``."""
    return {kind: str(Path(folder) / FILES[kind]) for kind in kinds}


def export_model(model, folder: Path, kinds: Iterable[str] = EXPORTS) -> dict[str, Path]:
    """Write the exports ``kinds`` of ``model`` into ``folder`` (a SavedModel is written whenever the
    ``.tflite`` or ``.onnx`` is asked for: both are converted from it)."""
    import tensorflow as tf
    kinds = tuple(kinds)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {kind: folder / FILES[kind] for kind in kinds}
    if "keras" in kinds:
        model.save(paths["keras"])
    saved = folder / FILES["saved_model"]
    if {"saved_model", "tflite", "onnx"} & set(kinds):
        export_saved_model(model, saved)
    if "tflite" in kinds:
        paths["tflite"].write_bytes(tf.lite.TFLiteConverter.from_saved_model(str(saved)).convert())
    if "onnx" in kinds:
        export_onnx(saved, paths["onnx"])
    return paths


def add_sealed_exports(folder: Path, kinds: Iterable[str]) -> set[str]:
    """The exports in the sealed cache ``folder`` (see :func:`~workbench._io.seal_folder`) after adding those
    of ``kinds`` it lacks: converted from its SavedModel to a temporary name and renamed in, then added to
    the seal, under a lock (two processes asking at once convert once).  Only ``onnx`` is made this way."""
    from .._io import SEAL_FILE, atomic_path, atomic_write_json, entry_lock, read_json, sha256_file

    def sealed() -> dict[str, str]:
        return read_json(folder / SEAL_FILE)["files"]

    def present(files: dict[str, str]) -> set[str]:
        names = {name.split("/")[0] for name in files}
        return {kind for kind, name in FILES.items() if name in names}

    if not set(kinds) <= present(sealed()):
        with entry_lock(folder):
            files = sealed()                # another process may have added them meanwhile
            for kind in kinds:
                if kind in present(files):
                    continue
                if kind != "onnx":
                    raise ValueError(f"only the onnx export is added to a sealed folder, not {kind!r}")
                with atomic_path(folder / FILES[kind]) as tmp:
                    export_onnx(folder / FILES["saved_model"], tmp)
                files = {**files, FILES[kind]: sha256_file(folder / FILES[kind])}
                atomic_write_json(folder / SEAL_FILE, {"files": files})
    return present(sealed())


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
    import subprocess
    cmd = [sys.executable, "-m", "tf2onnx.convert", "--saved-model", str(saved_model),
           "--output", str(output), "--opset", str(opset)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0 or not output.is_file():
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise ModelError(f"{saved_model}: tf2onnx could not convert the SavedModel to ONNX "
                         f"(exit {proc.returncode}):\n{tail}")
    return output
