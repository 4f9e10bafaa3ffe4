"""TensorFlow formats -> ONNX for the ONNX Runtime backend: tf2onnx in the workbench's own environment (a Keras
file goes through a batch-1 SavedModel), cached by content."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..._io import atomic_path, cache_dir, sha256_file, stable_hash
from ...errors import ModelError
from .onnx2tf_run import CONVERTER_VERSION, TIMEOUT_S


def tf_to_onnx(path: str | os.PathLike, fmt: str, *, opset: int = 17, cache: bool = True
               ) -> tuple[Path, dict[str, Any]]:
    """An ``.onnx`` file converted from a Keras file, a SavedModel folder or an FP32 ``.tflite``.

    tf2onnx runs in the workbench's environment (``from_keras`` does not work with Keras 3:
    Keras goes through a batch-1 SavedModel).  Cached by content; returns the ONNX path and
    what the manifest records about the conversion."""
    from ...models.export import export_onnx
    source = Path(path)
    versions = tf2onnx_versions()
    key = stable_hash({"source": sha256_file(source), "format": fmt, "opset": opset, "tools": versions,
                       "converter": CONVERTER_VERSION})
    target = cache_dir("convert", "tf2onnx") / f"{key[:32]}.onnx"
    entry = {"tool": "tf2onnx", "versions": versions, "from_format": fmt, "opset": opset}
    if cache and target.is_file():
        return target, entry
    with tempfile.TemporaryDirectory(prefix="wb-tf2onnx-") as tmp:
        work = Path(tmp)
        out = work / "model.onnx"
        if fmt == "tflite":
            _run_tf2onnx(["--tflite", str(source)], out, opset, source)
        elif fmt == "saved_model":
            export_onnx(source, out, opset=opset)
        elif fmt == "keras":
            export_onnx(_keras_to_saved_model(source, work / "saved_model"), out, opset=opset)
        else:
            raise ModelError(f"{source}: tf2onnx converts Keras, SavedModel or .tflite models; got {fmt!r}.")
        with atomic_path(target) as tmp_target:
            shutil.copyfile(out, tmp_target)
    return target, entry


def tf2onnx_versions() -> dict[str, str]:
    from importlib import metadata
    out = {}
    for dist in ("tf2onnx", "tensorflow-cpu", "onnx"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def _run_tf2onnx(args: list[str], out: Path, opset: int, source: Path) -> None:
    import subprocess
    import sys
    cmd = [sys.executable, "-m", "tf2onnx.convert", *args, "--output", str(out), "--opset", str(opset)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
    if proc.returncode != 0 or not out.is_file():
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise ModelError(f"{source}: tf2onnx could not convert the model to ONNX (exit {proc.returncode}):\n{tail}")


def _keras_to_saved_model(source: Path, dst: Path) -> Path:
    import contextlib
    import io
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            model = keras.models.load_model(str(source), compile=False)
    except Exception as exc:  # noqa: BLE001 - Keras raises many types
        raise ModelError(f"{source}: Keras cannot load this model ({type(exc).__name__}: {exc}).") from exc
    if len(model.inputs) != 1:
        raise ModelError(f"{source}: the model has {len(model.inputs)} inputs; one image input is expected.")
    spec = tf.TensorSpec((1, *model.inputs[0].shape[1:]), tf.float32, name="image")
    with contextlib.redirect_stdout(io.StringIO()):
        model.export(str(dst), format="tf_saved_model", input_signature=[spec])
    return dst
