"""Cache entries trusted only when their content hash matches: sealed JSON entries and sealed folders."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from .atomic import atomic_write_json, read_json, to_json
from .hashing import sha256_file, stable_hash

SEAL_FILE = "SEAL.json"


def damaged_cache_entry(path: str | os.PathLike, reason: str) -> None:
    """Warn that a cache entry is damaged and remove it (the workbench made it; it is redone)."""
    import warnings

    from ..errors import WorkbenchWarning
    path = Path(path)
    warnings.warn(f"cache entry {path.name} in {path.parent} is damaged ({reason}); it was removed and is "
                  "computed again.", WorkbenchWarning, stacklevel=3)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def write_sealed_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write a cache entry as JSON with the sha256 of its content (see :func:`read_sealed_json`)."""
    data = json.loads(to_json(obj))
    return atomic_write_json(path, {"sha256": stable_hash(data), "data": data})


def read_sealed_json(path: str | os.PathLike) -> Any | None:
    """The content of a sealed cache entry, or None when it is missing or damaged.

    A truncated, unreadable or edited entry (its content no longer matches its
    sha256) gives a :class:`WorkbenchWarning`, is removed, and None is returned so
    the caller computes it again: never a traceback, never a false result.
    """
    path = Path(path)
    if not path.is_file():
        return None
    try:
        entry = read_json(path)
        ok = isinstance(entry, dict) and "data" in entry and entry.get("sha256") == stable_hash(entry["data"])
    except (OSError, ValueError) as exc:
        damaged_cache_entry(path, f"{type(exc).__name__}: {exc}")
        return None
    if not ok:
        damaged_cache_entry(path, "its content does not match its sha256")
        return None
    return entry["data"]


def seal_folder(folder: str | os.PathLike) -> Path:
    """Record the sha256 of every file of a cache folder in ``SEAL.json`` (write it last)."""
    folder = Path(folder)
    files = {p.relative_to(folder).as_posix(): sha256_file(p)
             for p in sorted(folder.rglob("*")) if p.is_file() and p.name != SEAL_FILE}
    return atomic_write_json(folder / SEAL_FILE, {"files": files})


def check_folder_seal(folder: str | os.PathLike) -> str | None:
    """None when every file of ``folder`` matches its seal; else the reason it is damaged."""
    folder = Path(folder)
    try:
        files = read_json(folder / SEAL_FILE)["files"]
        for name, digest in files.items():
            if sha256_file(folder / name) != digest:
                return f"{name} does not match its sha256"
    except FileNotFoundError as exc:
        return f"{Path(exc.filename or SEAL_FILE).name} is missing"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
