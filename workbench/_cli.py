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
