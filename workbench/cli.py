"""The ``workbench`` command.

Each pipeline stage owns the sub-commands of its stage in ``<stage>/commands.py``
(a ``register(subparsers)`` function that imports nothing heavy), so this module
only assembles them.  ``workbench --help`` never imports TensorFlow.

Exit codes: 0 success, 1 a quality gate failed (or a batch target failed),
2 bad input or a workbench error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any

COMMAND_MODULES = (
    "workbench.data.commands",
    "workbench.models.commands",
    "workbench.calibration.commands",
    "workbench.quantize.commands",
    "workbench.evaluate.commands",
    "workbench.targets.commands",
    "workbench.placement.commands",
    "workbench.board.commands",
    "workbench.batch_commands",
)

EXIT_OK, EXIT_GATE_FAILED, EXIT_ERROR = 0, 1, 2


def emit(obj: Any, *, as_json: bool, text: str | None = None) -> None:
    """Print one JSON object (``--json``) or a human-readable text on stdout."""
    if as_json:
        from ._io import to_json
        print(to_json(obj.to_dict() if hasattr(obj, "to_dict") else obj, indent=2))
    else:
        print(text if text is not None else (obj.summary() if hasattr(obj, "summary") else obj))


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Take an FP32 model to INT8 on i.MX NPUs (imx8mp, imx93, imx95) and "
                    "measure what happens on the way.")
    parser.add_argument("--version", action="version", version=f"npu-workbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a stage not built yet
            if exc.name == name:
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import WorkbenchError
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_ERROR
    try:
        return int(args.func(args) or 0)
    except WorkbenchError as exc:
        if getattr(args, "json", False):
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        print(f"workbench {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
