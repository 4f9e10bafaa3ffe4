"""The model manifest: what a field update ships with a deployed model.

``model_manifest.json`` sits beside the model file and records ``model_version``,
the model file's ``sha256`` and size, ``min_runtime``, the recipe, the
calibration set reference and hash, the source model's hash and the tool
versions.  ``verify_manifest`` recomputes the file's hash and compares.

One folder per model: the manifest is always named ``model_manifest.json``; a
folder whose manifest describes another model file is refused rather than
overwritten (see :func:`workbench.quantize.engine.quantize`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .._io import atomic_write_json, read_json, sha256_file
from ..errors import QuantizationError

MANIFEST_NAME = "model_manifest.json"
SCHEMA = "npu-workbench/model-manifest/1"


def manifest_path_for(model_path: str | os.PathLike) -> Path:
    return Path(model_path).parent / MANIFEST_NAME


def build_manifest(*, file: str, sha256: str, size_bytes: int, fmt: str, recipe: dict[str, Any],
                   min_runtime: str, calibration: dict[str, Any], source: dict[str, Any],
                   toolchain: dict[str, str], inspection: Any, cache_key: str, created_utc: str,
                   conversion: dict[str, Any] | None = None) -> dict[str, Any]:
    """The manifest as a plain dict (JSON-ready).

    ``conversion`` records how a non-native source reached the backend (onnx2tf / tf2onnx
    versions, the tool environment's lock hash, which inputs went NCHW->NHWC, the
    ONNX-vs-TFLite agreement); None for a source the backend reads directly."""
    stem = Path(source.get("path", "model")).stem or "model"
    return {
        "schema": SCHEMA,
        "model_version": f"{stem}-{recipe['name']}-{sha256[:12]}",
        "file": file,
        "sha256": sha256,
        "size_bytes": size_bytes,
        "format": fmt,
        "backend": recipe["backend"],
        "min_runtime": min_runtime,
        "recipe": recipe,
        "calibration": calibration,
        "source": source,
        "toolchain": toolchain,
        "input_quantization": [_params(p) for p in inspection.inputs],
        "output_quantization": [_params(p) for p in inspection.outputs],
        "op_summary": inspection.op_summary,
        "float_ops": list(inspection.float_ops),
        "full_integer": inspection.full_integer,
        "weight_granularity": inspection.weight_granularity,
        "cache_key": cache_key,
        "created_utc": created_utc,
        "conversion": conversion,
    }


def _params(p: Any) -> dict[str, Any]:
    return {"name": p.name, "dtype": p.dtype, "shape": list(p.shape), "scale": p.scale, "zero_point": p.zero_point}


def write_manifest(path: str | os.PathLike, manifest: dict[str, Any]) -> Path:
    return atomic_write_json(path, manifest)


def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    path = Path(path)
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise QuantizationError(f"{path}: cannot read the model manifest ({type(exc).__name__}: {exc}).") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise QuantizationError(f"{path}: not a workbench model manifest (schema {SCHEMA!r} expected).")
    return data


def verify_manifest(model_path: str | os.PathLike, manifest_path: str | os.PathLike | None = None) -> bool:
    """True when the manifest beside ``model_path`` names this file and its hash matches the bytes."""
    model_path = Path(model_path)
    manifest_path = Path(manifest_path) if manifest_path else manifest_path_for(model_path)
    if not model_path.is_file() or not manifest_path.is_file():
        return False
    try:
        manifest = read_manifest(manifest_path)
    except QuantizationError:
        return False
    return manifest.get("file") == model_path.name and manifest.get("sha256") == sha256_file(model_path)
