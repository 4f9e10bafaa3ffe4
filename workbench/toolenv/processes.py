"""A tool's processes live and die with the workbench: :func:`run_in_group` and the clean-up of the work
folders a killed workbench left (:func:`remove_stale_work_folders`)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .._io.temporaries import _alive

# -- the tool's processes live and die with the workbench ---------------------------------------------
# A tool runs in its own process group (its children too), started through a tiny wrapper that asks the
# kernel to SIGKILL it when the workbench dies (PR_SET_PDEATHSIG: also after kill -9 of the workbench).  A
# time-out or an interrupt kills the whole group.  The tool's work folder (``cwd``) gets a marker naming the
# workbench's pid, the group and a random token; the next tool run removes marked work folders in the temp
# folder whose workbench is gone, after killing any process of their group still running there.
RUN_MARKER = ".npu-workbench-tool-run"
_WRAPPER = """\
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
except Exception:
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(137)                                                # the workbench is already gone
os.execvp(sys.argv[2], sys.argv[2:])
"""


def run_in_group(argv: Sequence[str], *, cwd: str | os.PathLike | None = None, env: Mapping[str, str] | None = None,
                 timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True)`` in a new process group that dies with us."""
    import secrets
    remove_stale_work_folders()
    wrapped = [sys.executable, "-c", _WRAPPER, str(os.getpid()), *argv]
    proc = subprocess.Popen(wrapped, cwd=cwd, env=dict(env) if env is not None else None, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    marker = None
    if cwd is not None:
        marker = Path(cwd) / RUN_MARKER
        with contextlib.suppress(OSError):
            marker.write_text(json.dumps({"made_by": "npu-workbench", "pid": os.getpid(), "pgid": proc.pid,
                                          "token": secrets.token_hex(16),
                                          "folder": os.path.realpath(cwd)}), encoding="utf-8")
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:        # a time-out, Ctrl-C, an error: the tool and its children go with it
        _kill_group(proc.pid)
        proc.communicate()
        raise
    finally:
        if marker is not None:
            with contextlib.suppress(OSError):
                marker.unlink()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _kill_group(pgid: int) -> None:
    import signal
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def remove_stale_work_folders(parent: str | os.PathLike | None = None) -> list[Path]:
    """Remove tool work folders (``wb-*`` in the temp folder) left by a workbench that was killed.

    Only folders holding this module's marker for that very folder, whose workbench process is gone, are
    touched; processes of the marker's group still running inside the folder are killed first."""
    import tempfile
    root = Path(parent or tempfile.gettempdir())
    removed = []
    try:
        candidates = [p for p in root.iterdir() if p.name.startswith("wb-") and p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
    for folder in candidates:
        marker = folder / RUN_MARKER
        try:
            if not marker.is_file() or marker.is_symlink() or marker.stat().st_size > 4096:
                continue
            info = json.loads(marker.read_text(encoding="utf-8"))
            pid, pgid = int(info["pid"]), int(info["pgid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if info.get("made_by") != "npu-workbench" or info.get("folder") != os.path.realpath(folder):
            continue
        if pid == os.getpid() or _alive(pid):
            continue
        for member in _group_members(pgid):
            with contextlib.suppress(OSError):
                where = os.path.realpath(f"/proc/{member}/cwd")
                if where == info["folder"] or where.startswith(info["folder"] + os.sep):
                    _kill_group(pgid)
                    break
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _group_members(pgid: int) -> list[int]:
    out = []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    if int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
                        out.append(int(entry))
    return out
