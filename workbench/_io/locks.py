"""Locks that die with their process: one cache entry (:func:`entry_lock`), one run folder (:func:`folder_lock`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

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

    from ..errors import WorkbenchWarning
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
