"""What every ``<stage>/commands.py`` needs from the command line, without importing :mod:`workbench.cli`.

``cli`` assembles the commands; the commands import only this module, so the dependency
points one way (``cli`` -> ``<stage>.commands`` -> ``_cli``).
"""

from __future__ import annotations

import argparse
from typing import Any

#: exit codes of every command: success, a gate (or a batch target) failed, bad input or a workbench error
EXIT_OK, EXIT_GATE_FAILED, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130


def emit(obj: Any, *, as_json: bool, text: str | None = None) -> None:
    """Print one JSON object (``--json``) or a human-readable text on stdout."""
    if as_json:
        from ._io import to_json
        print(to_json(obj.to_dict() if hasattr(obj, "to_dict") else obj, indent=2))
    else:
        print(text if text is not None else (obj.summary() if hasattr(obj, "summary") else obj))


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """``--json``: print one JSON object on stdout instead of text."""
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


#: commands that keep the terminal as it is: the batch sends library output to its own run log; the rest print
#: nothing from TensorFlow; ``WORKBENCH_VERBOSE=1`` keeps everything on the terminal
LOUD_COMMANDS = frozenset({"batch", "tools"})


class _Once:
    """``warnings.showwarning`` for a quiet command: a workbench warning once on the terminal (``warning: ...``),
    any other warning to the log."""

    def __init__(self, terminal: Any, log: Any) -> None:
        self.terminal, self.log = terminal, log
        self.seen: set[str] = set()

    def __call__(self, message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
                 line: str | None = None) -> None:
        from .errors import WorkbenchWarning
        text = " ".join(str(message).split())
        if issubclass(category, WorkbenchWarning):
            if text not in self.seen:
                self.seen.add(text)
                self.terminal.write(f"warning: {text}\n")
                self.terminal.flush()
            return
        self.log.write(f"{filename}:{lineno}: {category.__name__}: {text}\n")


def quiet_libraries(command: str) -> Any:
    """A context in which what the libraries print (TensorFlow's and absl's C++ and Python lines, the
    converter's ``fully_quantize: 0, inference_type: 6 ...``, other packages' warnings) goes to
    ``<cache>/logs/<command>.log`` instead of the terminal; standard output (the command's result) stays.
    Each :class:`~workbench.errors.WorkbenchWarning` is shown once.  Yields the log path."""
    import contextlib
    import os
    import sys
    import warnings

    @contextlib.contextmanager
    def _quiet() -> Any:
        if command in LOUD_COMMANDS or os.environ.get("WORKBENCH_VERBOSE") == "1":
            yield None
            return
        from ._io import cache_dir
        log_path = cache_dir("logs") / f"{command}.log"
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        saved = os.dup(2)
        real = sys.stderr is sys.__stderr__       # else a test's capture object: keep writing to it
        terminal = (os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8", errors="replace") if real
                    else sys.stderr)
        with open(log_path, "w", encoding="utf-8", errors="replace") as log:
            os.dup2(log.fileno(), 2)
            old_err, old_show = sys.stderr, warnings.showwarning
            sys.stderr = log
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("default")
                    warnings.showwarning = _Once(terminal, log)
                    yield log_path
            finally:
                log.flush()
                sys.stderr, warnings.showwarning = old_err, old_show
                os.dup2(saved, 2)
                os.close(saved)
                if real:
                    terminal.close()
    return _quiet()
