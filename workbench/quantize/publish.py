"""Writing a quantized model out of the cache to the user's ``output``: one model and its manifest per folder,
manifest last, nothing of the user's overwritten that is not the same model's."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from .._io import atomic_path, check_output_path, portable_paths, read_json, to_json
from ..errors import QuantizationError
from .manifest import MANIFEST_NAME


def publish_target(output: Path, ext: str) -> tuple[Path, Path]:
    """The model and manifest paths ``output`` names; a device, link or non-folder parent is refused."""
    target = output if output.suffix.lower() in (".tflite", ".onnx") else output / f"model{ext}"
    if target.suffix.lower() != ext:
        raise QuantizationError(f"{output}: the {ext} model cannot be written to a {target.suffix} path; "
                                f"name it *{ext} or give a folder.")
    if output != target and (output.is_symlink() or (output.exists() and not output.is_dir())):
        raise QuantizationError(f"{output} is not a folder: give a folder (it gets model{ext} and "
                                f"{MANIFEST_NAME}) or a *{ext} file path.")
    target_manifest = target.parent / MANIFEST_NAME
    return check_output_path(target), check_output_path(target_manifest)


def publish(model_path: Path, manifest_path: Path, output: Path, ext: str,
            contract: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """Copy model and manifest to ``output`` (a folder, or a model file path) atomically."""
    target, target_manifest = publish_target(output, ext)
    if target_manifest.is_file():
        try:
            existing = read_json(target_manifest)
            existing = existing.get("file") if isinstance(existing, dict) else None
        except (OSError, ValueError):
            existing = None
        if existing not in (None, target.name):
            raise QuantizationError(
                f"{target.parent} already holds the manifest of {existing!r}; a folder holds one model and its "
                f"{MANIFEST_NAME}. Write {target.name} to another folder.")
    manifest = read_json(manifest_path)
    manifest["file"] = target.name
    if contract is not None and isinstance(manifest.get("calibration"), dict):
        manifest["calibration"]["input_contract"] = contract   # also for a cache entry made before it was recorded
    manifest = portable_paths(manifest)      # a shipped manifest names no folder of this machine
    # Manifest-last commit: the old manifest goes first, the manifest of the new model last, so an
    # interruption leaves at worst a model without a manifest (never trusted), never a mismatched pair.
    if target_manifest.is_file():
        target_manifest.unlink()
    with atomic_path(target) as tmp:
        shutil.copyfile(model_path, tmp)
    with atomic_path(target_manifest) as tmp:
        tmp.write_text(to_json(manifest, indent=2) + "\n", encoding="utf-8")
    return target, target_manifest
