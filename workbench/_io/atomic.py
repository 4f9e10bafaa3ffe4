"""Atomic writes: every file goes to a temporary name in the same folder first and is renamed into place;
only regular files (and the workbench's own cache folders) are ever replaced.  JSON that stays valid JSON."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .temporaries import _remove_stale_temporaries, make_own_temporary


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a regular file"


def check_output_path(path: str | os.PathLike, *, folder: bool = False) -> Path:
    """Return ``path`` if the workbench may write it, else raise :class:`OutputPathError`.

    The workbench writes only regular files (and, with ``folder=True``, folders
    of its own cache).  A new name, or an existing regular file (replaced
    atomically, as ``cp`` or ``gcc -o`` do), is accepted.  An existing folder,
    device, named pipe, socket or symbolic link is refused: nothing the
    workbench did not create is deleted or replaced.
    """
    from ..errors import OutputPathError
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    except OSError as exc:
        raise OutputPathError(f"{path}: cannot be written ({exc.strerror or exc}).") from exc
    if mode is not None and not stat.S_ISREG(mode) and not (folder and stat.S_ISDIR(mode)):
        kind = _kind(mode)
        hint = {"a folder": f"Give a file name inside it (e.g. {os.path.join(path, 'NAME')})",
                "a symbolic link": "Give the link's target or a new name"}.get(kind, "Give a regular file name")
        raise OutputPathError(f"{path} is {kind}; the workbench writes only regular files and never replaces "
                              f"{kind}. {hint}.")
    parent = path.parent
    for ancestor in (parent, *parent.parents):
        if ancestor.exists() or ancestor.is_symlink():
            if not ancestor.is_dir():
                raise OutputPathError(f"{path}: {ancestor} is not a folder, so nothing can be written under it.")
            break
    return path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, replace_folder: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    ``path`` must be a new name or a regular file (see :func:`check_output_path`).
    ``replace_folder=True`` is for folders the workbench itself owns (cache
    entries): an existing folder there is moved aside, the new one renamed in,
    and only then is the old one removed.  On error the temporary is removed and
    ``path`` is left as it was.  A full disk or a file-size limit becomes an
    :class:`OutputPathError` naming the path.
    """
    from ..errors import OutputPathError
    path = check_output_path(path, folder=replace_folder)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(path)
        tmp = make_own_temporary(path.parent, f".{path.name}.")
    except OSError as exc:
        raise OutputPathError(f"{path}: cannot create its folder ({exc.strerror or exc}).") from exc
    target = tmp / path.name
    try:
        try:
            yield target
        except OSError as exc:
            if exc.errno in _WRITE_ERRNOS:
                raise OutputPathError(f"{path}: cannot be written ({exc.strerror}). "
                                      "Free space or raise the limit, then run again; nothing was replaced.") from exc
            raise
        if not target.exists():
            raise FileNotFoundError(f"nothing was written to the temporary {target}")
        check_output_path(path, folder=replace_folder)  # may have changed while writing
        if replace_folder and path.is_dir() and not path.is_symlink() and target.is_dir():
            os.replace(path, tmp / ".old")
        os.replace(target, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_WRITE_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS}


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as JSON atomically; NaN and infinities become ``null`` (the file stays valid JSON)."""
    return atomic_write_text(path, to_json(obj, indent=2) + "\n")


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


def _plain(obj: Any) -> Any:
    """``obj`` as JSON-ready plain data with every non-finite float replaced by ``None``."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return _plain(_json_default(obj))


def to_json(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that knows result objects, paths and numpy values.

    NaN and infinities are written as ``null``: the text is always valid JSON
    (``NaN`` is not JSON, and other tools refuse it).
    """
    return json.dumps(_plain(obj), allow_nan=False, **kwargs)
