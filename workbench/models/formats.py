"""Model file formats: detect them, and say clearly when a file is none of them."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ModelError, missing_file

FORMATS = ("keras", "saved_model", "tflite", "onnx")


def model_format(path: str | os.PathLike) -> str:
    """``"keras"``, ``"saved_model"``, ``"tflite"`` or ``"onnx"`` for a model file or folder."""
    path = Path(path)
    if not path.exists():
        raise missing_file("model file or folder", path,
                           "check the path (a .keras/.h5 file, SavedModel folder, .tflite or .onnx)", ModelError)
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


def require_int8_tflite_file(path: str | os.PathLike, *, stage: str = "placement") -> None:
    """Raise a :class:`ModelError` that says what to do when ``path`` is a model format the
    NPU stages (placement, board timing) do not read: they take the quantized ``.tflite``.

    An ``.onnx`` file (FP32, or the QDQ file ``--backend onnx`` writes) is not converted
    implicitly: a QDQ graph is ONNX Runtime's (CPU) deployment format, and converting it would
    place a model other than the one evaluated.  Quantize the FP32 ONNX model with a TFLite
    recipe instead (onnx2tf converts it; :mod:`workbench.models.convert`) and place that file."""
    path = Path(path)
    if not path.exists():
        return   # the reader says "no such file"
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        raise ModelError(
            f"{path}: an ONNX model; {stage} reads the INT8 .tflite the NPU delegates and Vela take. Quantize "
            "the FP32 .onnx with a TFLite recipe (`workbench quantize model.onnx --recipe a8w8_pc -o out/`: onnx2tf "
            "converts it, NCHW->NHWC) and give that model.tflite. An ONNX QDQ file (--backend onnx) runs on "
            "ONNX Runtime on the CPU only.")
    if path.is_dir() or suffix in (".keras", ".h5", ".hdf5"):
        raise ModelError(f"{path}: a float Keras/SavedModel model; {stage} reads the INT8 .tflite. Quantize it "
                         "first (`workbench quantize MODEL --recipe a8w8_pc -o out/`) and give that model.tflite.")
