"""The content-addressed cache of quantized models.

Key = sha256 of the source model's bytes (a SavedModel folder: all its files),
the recipe, the calibration sample ids / hash and the toolchain versions.  An
entry is a folder ``<cache>/quantize/<key[:2]>/<key>/`` holding ``model.<ext>``
and ``model_manifest.json``; it is written to a temporary folder and renamed
into place, and it is trusted only when the manifest's hash matches the model
bytes, so an interrupted run never leaves an entry a later run believes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._io import atomic_path, cache_dir, damaged_cache_entry, stable_hash, to_json
from .manifest import MANIFEST_NAME, verify_manifest


def cache_key(*, source_sha256: str, recipe: dict[str, Any], calibration: dict[str, Any],
              toolchain: dict[str, str]) -> str:
    return stable_hash({"source": source_sha256, "recipe": recipe, "calibration": calibration,
                        "toolchain": toolchain})


def entry_dir(key: str) -> Path:
    return cache_dir("quantize") / key[:2] / key


def lookup(key: str, ext: str) -> tuple[Path, Path] | None:
    """``(model, manifest)`` of a sound cache entry, or None (a broken entry is removed)."""
    folder = entry_dir(key)
    model, manifest = folder / f"model{ext}", folder / MANIFEST_NAME
    if not folder.exists():
        return None
    if verify_manifest(model, manifest):
        return model, manifest
    damaged_cache_entry(folder, "the model file is missing or does not match the sha256 in its manifest")
    return None


def store(key: str, ext: str, model_bytes: bytes, manifest: dict[str, Any]) -> tuple[Path, Path]:
    """Write an entry atomically (model and manifest land together) and return its paths."""
    folder = entry_dir(key)
    with atomic_path(folder, replace_folder=True) as tmp:
        tmp.mkdir(parents=True)
        (tmp / f"model{ext}").write_bytes(model_bytes)
        (tmp / MANIFEST_NAME).write_text(to_json(manifest, indent=2) + "\n", encoding="utf-8")
    return folder / f"model{ext}", folder / MANIFEST_NAME
