"""Files: atomic writes, content hashes, the cache folder.

Nothing the user made is lost: every file the workbench writes goes to a
temporary name in the same folder first and is renamed into place, so an
interrupted run never leaves a half-written file that a later run trusts.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import shutil
import stat
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
    from .errors import OutputPathError
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
    from .errors import OutputPathError
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


# -- the workbench's own temporaries --------------------------------------------------------------
# A temporary folder the workbench makes is named ``<prefix><pid>.<token>.tmp`` and holds a marker file
# naming the same pid and random token.  Only folders with both (name and marker agreeing), whose
# process is gone, are ever removed: a user's folder that merely looks like one is never touched.
TEMP_MARKER = ".npu-workbench-temporary"
_TOKEN_RE = "[0-9a-f]{32}"


def make_own_temporary(parent: str | os.PathLike, prefix: str) -> Path:
    """Create ``parent/<prefix><pid>.<token>.tmp`` (mode 0700) with the workbench's marker in it."""
    import secrets
    token = secrets.token_hex(16)
    tmp = Path(parent) / f"{prefix}{os.getpid()}.{token}.tmp"
    os.mkdir(tmp, 0o700)
    marker = {"made_by": "npu-workbench", "pid": os.getpid(), "token": token}
    with open(tmp / TEMP_MARKER, "x", encoding="utf-8") as handle:
        json.dump(marker, handle)
    return tmp


def is_own_temporary(folder: Path, prefix: str) -> int | None:
    """The pid that made ``folder`` if it is a workbench temporary (name and marker agree), else None."""
    import re
    match = re.fullmatch(re.escape(prefix) + rf"(\d+)\.({_TOKEN_RE})\.tmp", folder.name)
    if match is None:
        return None
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return None
        marker = folder / TEMP_MARKER
        if not stat.S_ISREG(os.lstat(marker).st_mode) or os.lstat(marker).st_size > 4096:
            return None
        info = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if (not isinstance(info, dict) or info.get("made_by") != "npu-workbench" or info.get("token") != match[2]
            or str(info.get("pid")) != match[1]):
        return None
    return int(match[1])


def remove_own_temporaries(parent: str | os.PathLike, prefix: str) -> list[Path]:
    """Remove the workbench temporaries ``parent/<prefix>*`` whose process no longer runs; returns them."""
    try:
        siblings = [p for p in Path(parent).iterdir() if p.name.startswith(prefix) and p.name.endswith(".tmp")]
    except OSError:
        return []
    removed = []
    for tmp in siblings:
        pid = is_own_temporary(tmp, prefix)
        if pid is not None and pid != os.getpid() and not _alive(pid):
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
    return removed


def _remove_stale_temporaries(path: Path) -> None:
    """Remove the temporaries a killed workbench process left beside ``path`` (only its own, marked ones)."""
    remove_own_temporaries(path.parent, f".{path.name}.")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


# --- cache entries: trusted only when their content hash matches ------------------------------

SEAL_FILE = "SEAL.json"


def damaged_cache_entry(path: str | os.PathLike, reason: str) -> None:
    """Warn that a cache entry is damaged and remove it (the workbench made it; it is redone)."""
    import warnings

    from .errors import WorkbenchWarning
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


LOCK_FILE = ".workbench.lock"


@contextlib.contextmanager
def entry_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<path>.lock`` while a cache entry is looked up and computed.

    Two processes that need the same entry at once (two kernels of a batch, two test workers) compute
    it once: the second waits, then finds the entry.  The lock dies with its process.
    """
    import fcntl
    lock = Path(f"{os.fspath(path)}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike, *, what: str = "run") -> Iterator[Path]:
    """Hold an exclusive lock on ``folder`` (``flock`` on ``folder/.workbench.lock``).

    A second process that wants the same folder waits, with a WorkbenchWarning naming
    the holder, until the first is done; the lock dies with its process, so a kill
    never leaves a stale lock.  Two batches into one folder therefore never mix.
    """
    import fcntl
    import warnings

    from .errors import WorkbenchWarning
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the whole block
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            warnings.warn(f"{folder} is in use by another {what} ({holder}); waiting for it to finish.",
                          WorkbenchWarning, stacklevel=3)
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        yield path
    finally:
        handle.close()  # releases the lock


# --- shareable paths ---------------------------------------------------------------------------

CACHE_TOKEN = "$NPU_WORKBENCH_CACHE"


def _roots() -> list[tuple[str, str]]:
    cache = os.path.realpath(cache_dir())
    return [(cache, CACHE_TOKEN), (os.path.realpath(os.getcwd()), "."),
            (os.path.realpath(os.path.expanduser("~")), "~")]


def _looks_like_relative_path(text: str) -> bool:
    return (0 < len(text) < 1024 and "\n" not in text and not text.startswith(("/", "$", "~"))
            and ("/" in text or text.startswith(".")))


def _exists(path: str | os.PathLike) -> bool:
    """``os.path.exists`` that is False for names the OS refuses (too long, bad bytes)."""
    try:
        return os.path.exists(path)
    except (OSError, ValueError):
        return False


def portable_paths(obj: Any, *, base: str | os.PathLike | None = None) -> Any:
    """``obj`` with local absolute paths made shareable (cache token, relative, ``~``); other strings as they are.

    Without ``base``, paths under the working folder become relative to it.  With ``base`` (the folder
    the record is written to), paths under the working folder or under ``base``'s run root (three levels
    up: ``<out>/runs/<run-id>/<target>``) become relative to ``base`` itself, and relative paths that
    exist from the working folder are rewritten relative to ``base``: the record then reads the same
    from any working folder (:func:`local_paths` with the same ``base``)."""
    roots = _roots()
    anchor = os.path.realpath(base) if base is not None else None
    tops = []
    if anchor is not None:
        tops = [os.path.realpath(os.getcwd()), str(Path(anchor).parents[min(2, len(Path(anchor).parents) - 1)])]

    def one(text: str) -> str:
        if anchor is not None and _looks_like_relative_path(text) and _exists(text):
            text = os.path.abspath(text)
        if not text.startswith("/"):
            return text
        real = os.path.realpath(text)
        cache_root, cache_token = roots[0]
        for candidate in (text, real):
            if candidate == cache_root or candidate.startswith(cache_root + os.sep):
                rest = candidate[len(cache_root):].lstrip(os.sep)
                return f"{cache_token}/{rest}" if rest else cache_token
        if anchor is not None:
            for top in tops:
                if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
                    return os.path.relpath(real, anchor)
        for root, token in roots[1:]:
            if anchor is not None and token == ".":
                continue
            for candidate in (text, real):
                if candidate == root or candidate.startswith(root + os.sep):
                    rest = candidate[len(root):].lstrip(os.sep)
                    return (f"{token}/{rest}" if rest else token) if token != "." else (rest or ".")
        return text
    return _walk(obj, one)


def local_paths(obj: Any, *, base: str | os.PathLike | None = None) -> Any:
    """The inverse of :func:`portable_paths` for the cache token and ``~``.

    With ``base`` (the record's folder), a relative path is resolved against ``base`` when it exists
    there; a record written before paths were relative to their record (relative to the batch's
    ``--out``, up to three levels above ``base``) is resolved against the first ancestor holding it;
    otherwise it stays as written (relative to the working folder)."""
    cache = str(cache_dir())
    anchors = [] if base is None else [Path(base), *list(Path(base).parents)[:3]]

    def one(text: str) -> str:
        if text == CACHE_TOKEN or text.startswith(CACHE_TOKEN + "/"):
            return cache + text[len(CACHE_TOKEN):]
        if text.startswith("~/"):
            return os.path.expanduser(text)
        if anchors and _looks_like_relative_path(text):
            for anchor in anchors:
                candidate = anchor / text
                if _exists(candidate):
                    return os.path.normpath(os.path.abspath(candidate))
        return text
    return _walk(obj, one)


def _walk(obj: Any, fn: Any) -> Any:
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _walk(v, fn) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_walk(v, fn) for v in obj]
    return obj
