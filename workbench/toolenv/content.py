"""An environment is trusted on its content: the size and sha256 of every file, recorded at install in
``content.json`` (:func:`content_record`) and checked on each use (sizes) or by ``verify`` (every sha256)."""

from __future__ import annotations

import os
from pathlib import Path

from .._io import atomic_write_json, read_json, sha256_bytes
from ..errors import ToolError

CONTENT = "content.json"
_OWN_FILES = {".complete", "toolenv.json", CONTENT}
_checked: dict[str, float] = {}


def _files(root: Path) -> dict[str, int]:
    """Relative path -> size of every file of the environment (not Python's byte-code caches).

    Strings and ``os.scandir``, no ``Path`` per file: the onnx2tf environment has 33k files, and this runs once
    per process that uses it (0.65 -> 0.19 CPU seconds, 2.4 -> 0.7 s at load ~9).  As ``os.walk`` lists them:
    a link to a folder is neither followed nor listed (``lib64 -> lib``); a link to a file is listed."""
    out: dict[str, int] = {}

    def walk(folder: str, prefix: str) -> None:
        with os.scandir(folder) as entries:
            for entry in entries:
                rel = prefix + entry.name
                if entry.is_dir():
                    if entry.name != "__pycache__" and not entry.is_symlink():
                        walk(entry.path, rel + "/")
                elif not entry.name.endswith(".pyc") and rel not in _OWN_FILES:
                    out[rel] = entry.stat(follow_symlinks=False).st_size
    walk(str(root), "")
    return dict(sorted(out.items()))


def content_record(root: Path) -> dict[str, object]:
    """``{"content_sha256": ..., "files": {rel: [size, sha256]}}`` of the environment at ``root``."""
    from .._io import sha256_file
    files = {}
    for rel, size in sorted(_files(root).items()):
        path = root / rel
        files[rel] = [size, "link:" + os.readlink(path) if path.is_symlink() else sha256_file(path)]
    digest = sha256_bytes("".join(f"{rel}\0{h}\n" for rel, (_, h) in files.items()).encode())
    return {"content_sha256": digest, "files": files}


def _check_content(name: str, root: Path, *, full: bool = False) -> None:
    """Refuse an environment whose files differ from ``content.json`` (sizes and names; ``full``: every sha256)."""
    import warnings

    from ..errors import WorkbenchWarning
    record_path = root / CONTENT
    fix = f"Next: reinstall it with `workbench tools install {name} --force`"
    if not record_path.is_file():   # installed before content hashes were recorded: record them now, once
        atomic_write_json(record_path, content_record(root))
        warnings.warn(f"{name}: its content hash was recorded now ({root.name}/{CONTENT}), not at install; "
                      f"reinstall with `workbench tools install {name} --force` to record it from a clean install",
                      WorkbenchWarning, stacklevel=4)
    key = str(root)
    stamp = record_path.stat().st_mtime
    if not full and _checked.get(key) == stamp:
        return
    try:
        recorded = read_json(record_path)
        files = {rel: (int(v[0]), str(v[1])) for rel, v in recorded["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise ToolError(f"{name}: {root / CONTENT} cannot be read ({type(exc).__name__}: {exc}). {fix}.") from None
    found = _files(root)
    for rel in sorted(set(files) | set(found)):
        if rel not in found:
            raise ToolError(f"{name}: {rel} is missing from the tool environment {root}. {fix}.")
        if rel not in files:
            raise ToolError(f"{name}: {rel} was added to the tool environment {root} after install. {fix}.")
        if found[rel] != files[rel][0]:
            raise ToolError(f"{name}: {rel} in the tool environment {root} changed after install ({found[rel]} "
                            f"bytes, {files[rel][0]} recorded). {fix}.")
    if full:
        now = content_record(root)["files"]
        assert isinstance(now, dict)
        for rel, (_, digest) in files.items():
            if now[rel][1] != digest:
                raise ToolError(f"{name}: {rel} in the tool environment {root} changed after install (sha256 "
                                f"differs from {CONTENT}). {fix}.")
    _checked[key] = stamp
