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

# the helpers every <stage>/commands.py uses live in _cli (commands never import this module)
from ._cli import EXIT_ERROR, EXIT_GATE_FAILED, EXIT_INTERRUPTED, EXIT_OK, add_json_flag, emit  # noqa: F401

COMMAND_MODULES = (
    "workbench.data.commands",
    "workbench.models.commands",
    "workbench.calibration.commands",
    "workbench.quantize.commands",
    "workbench.evaluate.commands",
    "workbench.targets.commands",
    "workbench.placement.commands",
    "workbench.board.commands",
    "workbench.batch.commands",
    "workbench.toolenv_commands",
)


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
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
