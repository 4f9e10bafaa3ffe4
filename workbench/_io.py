"""Files: atomic writes, content hashes, the cache folder.

Nothing the user made is lost: every file the workbench writes goes to a
temporary name in the same folder first and is renamed into place, so an
interrupted run never leaves a half-written file that a later run trusts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CACHE_ENV = "NPU_WORKBENCH_CACHE"


def cache_dir(*parts: str) -> Path:
    """The workbench cache folder (``$NPU_WORKBENCH_CACHE`` or ``~/.cache/npu-workbench``).

    ``parts`` name a sub-folder, which is created.
    """
    root = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "npu-workbench")
    path = Path(root, *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


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


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    Works for files and folders (a SavedModel).  On error the temporary is removed
    and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    target = tmp / path.name
    try:
        yield target
        if not target.exists():
            raise FileNotFoundError(f"nothing was written to the temporary {target}")
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        os.replace(target, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, Path):
        return str(obj)
    try:  # numpy scalars and arrays without importing numpy here
        return obj.tolist()
    except AttributeError:
        raise TypeError(f"{type(obj).__name__} is not JSON serialisable") from None


def to_json(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that knows result objects, paths and numpy values."""
    return json.dumps(obj, default=_json_default, **kwargs)
