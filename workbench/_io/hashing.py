"""Content hashes: of bytes, of a file or folder, of a JSON-serialisable object."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, or of a folder (its files' relative names and bytes, sorted)."""
    path = Path(path)
    digest = hashlib.sha256()
    if path.is_dir():
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(child.relative_to(path).as_posix().encode())
            digest.update(b"\0")
            digest.update(sha256_file(child).encode())
        return digest.hexdigest()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def stable_hash(obj: Any) -> str:
    """sha256 of a JSON-serialisable object, independent of dict order."""
    return sha256_bytes(json.dumps(obj, sort_keys=True, default=str).encode())
