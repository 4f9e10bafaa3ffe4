"""The ``workbench`` command.

Each pipeline stage owns the sub-commands of its stage in ``<stage>/commands.py``
(a ``register(subparsers)`` function that imports nothing heavy), so this module
only assembles them.  ``workbench --help`` never imports TensorFlow.

Exit codes: 0 success, 1 a quality gate failed (or a batch target failed),
2 bad input or a workbench error (including a file the system refused), 3 an
internal error (a bug: the message says so; ``WORKBENCH_DEBUG=1`` prints the
traceback), 130 interrupted, 141 stdout closed by its reader (``| head``), quietly.
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
    "workbench.sweep.commands",
    "workbench.diff",
    "workbench.toolenv_commands",
    "workbench.findings_commands",
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
    """Run the command ``argv`` (default: this process's own command line) and return its exit code.

    Called with no ``argv`` (the ``workbench`` script, ``python -m workbench``), the process is the command:
    once it is done, the process ends without the interpreter's teardown of what the command loaded
    (TensorFlow's teardown alone takes 1-2 CPU seconds, 3-6 s of wall time at load 7-9 on 2 cores: a fifth of
    quantizing a small ONNX model, benchmarks/bench_zoo.py).  Output is flushed and the exit handlers run
    first; another thread still running gets the ordinary exit."""
    code = _main(argv)
    if argv is None:
        _end_process(code)
    return code


def _end_process(code: int) -> None:
    import atexit
    import os
    import threading
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return                                 # the interpreter joins them at exit: let it
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):          # a closed pipe or stream: nothing left to write
            pass
    os._exit(code)


def _main(argv: Sequence[str] | None) -> int:
    from .errors import WorkbenchError
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_ERROR
    try:
        from ._cli import quiet_libraries
        with quiet_libraries(args.command):
            code = int(args.func(args) or 0)
        sys.stdout.flush()                     # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:                    # `workbench ... --json | head`: the reader left; end quietly
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except WorkbenchError as exc:
        try:
            if getattr(args, "json", False):
                print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        except BrokenPipeError:
            _silence_stdout()
        print(f"workbench {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:                     # a file the system refused (permissions, disk): bad input
        if exc.filename is None:
            return _internal_error(args, exc)
        print(f"workbench {args.command}: error: {exc.filename}: {exc.strerror or exc}. Check the path and its "
              "permissions, and free space on its disk.", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - a bug: say so, exit 3, traceback with WORKBENCH_DEBUG=1
        return _internal_error(args, exc)


EXIT_INTERNAL = 3
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a program whose reader left


def _internal_error(args: argparse.Namespace, exc: BaseException) -> int:
    import os
    if os.environ.get("WORKBENCH_DEBUG"):
        import traceback
        traceback.print_exception(exc)
    print(f"workbench {args.command}: internal error: {type(exc).__name__}: {exc}\n"
          "This is a bug in the workbench, not a problem with your input. Rerun with WORKBENCH_DEBUG=1 to see "
          "the traceback, and report it.", file=sys.stderr)
    return EXIT_INTERNAL


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not complain."""
    import os
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
