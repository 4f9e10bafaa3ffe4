"""Model file formats: detect them, and say clearly when a file is none of them."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ModelError

FORMATS = ("keras", "saved_model", "tflite", "onnx")


def model_format(path: str | os.PathLike) -> str:
    """``"keras"``, ``"saved_model"``, ``"tflite"`` or ``"onnx"`` for a model file or folder."""
    path = Path(path)
    if not path.exists():
        raise ModelError(f"{path}: no such model file or folder.")
    if path.is_dir():
        if (path / "saved_model.pb").is_file():
            return "saved_model"
        raise ModelError(f"{path}: a folder but not a SavedModel (no saved_model.pb inside).")
    suffix = path.suffix.lower()
    if suffix in (".keras", ".h5", ".hdf5"):
        return "keras"
    if suffix == ".onnx":
        return "onnx"
    with open(path, "rb") as handle:
        head = handle.read(8)
    if suffix == ".tflite" or head[4:8] == b"TFL3":
        if head[4:8] != b"TFL3":
            raise ModelError(f"{path}: named .tflite but not a TFLite flatbuffer (it may be truncated or "
                             "another format). Re-export it.")
        return "tflite"
    raise ModelError(f"{path}: unsupported model format {suffix or '(no suffix)'!r}; expected a Keras "
                     ".keras/.h5 file, a SavedModel folder, a .tflite file or an .onnx file.")
