"""What a batch prints: one line per target and stage, nothing from the libraries underneath.

TensorFlow's start-up lines, absl, Jupyter's "Kernel is running over TCP without encryption",
nbconvert's "Alternative text is missing" and Python warnings all write to the process's standard
error, some of them from C++ straight to file descriptor 2.  While a batch runs, descriptors 1 and 2
point at the run's log file (``runs/<run id>/batch.log``), so all of that lands there, and the
batch's own progress lines go to the terminal through a copy of the original descriptor::

    [imx8mp] 10_calibration_set         ok        14.2 s
    [imx93 ] 10_calibration_set         reused    (inputs unchanged)
    [imx8mp] 20_quantize                FAILED    ValueError: ...
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


class Console:
    """Progress lines for a batch (thread-safe; silent when ``enabled`` is false)."""

    def __init__(self, stream: IO[str] | None, *, enabled: bool = True, width: int = 6) -> None:
        self.stream, self.enabled, self.width = stream, enabled and stream is not None, width
        self.lock = threading.Lock()

    def line(self, text: str) -> None:
        if not self.enabled or self.stream is None:
            return
        with self.lock:
            self.stream.write(text + "\n")
            self.stream.flush()

    def stage(self, run: Any) -> None:
        """One line for a finished (or reused, or failed) stage run."""
        if run.reused:
            status, detail = "reused", "(inputs unchanged)"
        elif run.status == "ok":
            status, detail = "ok", f"{run.seconds:.1f} s" + (
                f"  ({run.why})" if getattr(run, "why", None) not in (None, "no earlier execution") else "")
        else:
            status, detail = "FAILED", _one_line(run.error or "")
        self.line(f"[{run.target:<{self.width}}] {run.stage:<26} {status:<9} {detail}")


def _one_line(text: str, limit: int = 160) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


@contextlib.contextmanager
def quiet(log: Path | None, *, enabled: bool = True) -> Iterator[IO[str] | None]:
    """Send descriptors 1 and 2 (and ``sys.stdout``/``sys.stderr``) to ``log``; yield the terminal.

    The terminal stream yielded writes to a copy of the original standard error.  When not
    ``enabled`` (or ``log`` is None) nothing is redirected and ``sys.stderr`` is yielded.
    Everything is restored on exit, also after an exception.
    """
    if not enabled or log is None:
        yield sys.stderr
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    terminal = os.fdopen(os.dup(saved_err), "w", buffering=1, encoding="utf-8", errors="replace")
    with open(log, "a", encoding="utf-8", errors="replace") as handle:
        os.dup2(handle.fileno(), 1)
        os.dup2(handle.fileno(), 2)
        old_out, old_err = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = handle
        try:
            yield terminal
        finally:
            handle.flush()
            sys.stdout, sys.stderr = old_out, old_err
            os.dup2(saved_out, 1)
            os.dup2(saved_err, 2)
            os.close(saved_out)
            os.close(saved_err)
            terminal.close()
