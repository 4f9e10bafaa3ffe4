"""The workbench's own temporary folders: made with a marker, removed only when marked and their process is gone."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

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
