"""Runners: how a model is timed once it is on a board.

* :func:`run_python` runs ``remote_runner.py`` (per-invocation latencies);
* :func:`run_benchmark_model` runs TFLite's ``benchmark_model`` and parses its log.

Both take a transport with ``run(argv, ...)`` (:class:`~workbench.board.ssh.SSHTransport`
or :class:`~workbench.board.ssh.LocalTransport`) and return :class:`RawRun`.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any, Optional

from ..errors import BenchmarkParseError, BoardError
from .parse import BenchmarkLog, parse_benchmark_output
from .ssh import tail

RUNNERS = ("python", "benchmark_model")
#: where NXP BSP images install the tool
BENCHMARK_MODEL_GLOB = "/usr/bin/tensorflow-lite-*/examples/benchmark_model"


@dataclass(frozen=True)
class RawRun:
    """What a runner measured, before statistics."""

    runner: str
    runtime: Optional[str] = None
    cold_start_us: Optional[float] = None
    first_inference_us: Optional[float] = None
    warmup_us: tuple[float, ...] = ()
    runs_us: tuple[float, ...] = ()
    n_ops: Optional[int] = None
    log: Optional[BenchmarkLog] = None
    extra: dict[str, Any] = field(default_factory=dict)


def run_python(transport, *, python: str, runner_path: str, model_path: str,
               runs: int, warmup: int, delegate: str | None = None, threads: int | None = None,
               delegate_options: dict[str, str] | None = None, seed: int = 0,
               timeout: float | None = None) -> RawRun:
    """Time ``model_path`` with the pushed Python runner."""
    argv = [python, runner_path, "--model", model_path, "--runs", str(runs),
            "--warmup", str(warmup), "--seed", str(seed)]
    if delegate:
        argv += ["--delegate", delegate]
    for key, value in (delegate_options or {}).items():
        argv += ["--delegate-option", f"{key}={value}"]
    if threads:
        argv += ["--threads", str(threads)]
    result = transport.run(argv, check=False, timeout=timeout)
    payload = _last_json(result.stdout)
    if payload is None:
        hint = ""
        if result.returncode == 127 or "not found" in result.stderr:
            hint = (f" Next: `python` ({python!r}) may not exist there; set `python:` in "
                    "boards.yaml or pass --python.")
        raise BoardError(f"{transport.label}: the Python runner failed with exit code "
                         f"{result.returncode} and printed no result.{hint}\nstderr (tail):\n"
                         f"{tail(result.stderr) or '(empty)'}")
    if not payload.get("ok"):
        stage = payload.get("stage", "?")
        todo = {"delegate": "check the delegate path and that it matches the board's TFLite runtime",
                "import": "install tflite_runtime or ai_edge_litert and numpy for that Python",
                "load": "check the model file (is it a .tflite flatbuffer?)",
                "invoke": "the model could not run; check the delegate's messages in stderr"}
        raise BoardError(f"{transport.label}: Python runner failed at stage {stage!r}: "
                         f"{payload.get('error')}. Next: {todo.get(stage, 'see stderr')}.\n"
                         f"stderr (tail):\n{tail(result.stderr, 600) or '(empty)'}")
    return RawRun(runner="python", runtime=payload.get("runtime"),
                  cold_start_us=float(payload["cold_start_us"]),
                  first_inference_us=float(payload["first_inference_us"]),
                  warmup_us=tuple(float(v) for v in payload["warmup_us"]),
                  runs_us=tuple(float(v) for v in payload["runs_us"]),
                  n_ops=payload.get("n_ops"),
                  extra={"delegate_load_us": payload.get("delegate_load_us"),
                         "interpreter_init_us": payload.get("interpreter_init_us"),
                         "python_version": payload.get("python")})


def _last_json(stdout: str) -> Optional[dict]:
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def find_benchmark_model(transport) -> str:
    """The newest ``benchmark_model`` under ``/usr/bin/tensorflow-lite-*/examples/``."""
    result = transport.run_shell(f"ls -1d {BENCHMARK_MODEL_GLOB} 2>/dev/null | sort -V | tail -n1",
                                 check=False)
    found = result.stdout.strip()
    if not found:
        raise BoardError(f"{transport.label}: no benchmark_model found under "
                         f"{BENCHMARK_MODEL_GLOB}. Next: set `benchmark_model:` in boards.yaml, "
                         "or use the python runner.")
    return found


def benchmark_model_argv(binary: str, model_path: str, *, runs: int, warmup: int,
                         delegate: str | None = None, threads: int | None = None,
                         op_profiling: bool = True) -> list[str]:
    """The benchmark_model command line (``--use_xnnpack=false`` whenever a delegate is used)."""
    argv = [binary, f"--graph={model_path}", f"--num_runs={runs}", f"--warmup_runs={warmup}"]
    if threads:
        argv.append(f"--num_threads={threads}")
    if delegate:
        argv += [f"--external_delegate_path={delegate}", "--use_xnnpack=false"]
    if op_profiling:
        argv.append("--enable_op_profiling=true")
    return argv


def run_benchmark_model(transport, *, binary: str, model_path: str, runs: int, warmup: int,
                        delegate: str | None = None, threads: int | None = None,
                        op_profiling: bool = True, timeout: float | None = None) -> RawRun:
    """Run ``benchmark_model`` on the board and parse its output (stdout and stderr)."""
    argv = benchmark_model_argv(binary, model_path, runs=runs, warmup=warmup, delegate=delegate,
                                threads=threads, op_profiling=op_profiling)
    command = " ".join(shlex.quote(a) for a in argv) + " 2>&1"
    result = transport.run_shell(command, check=False, timeout=timeout)
    text = result.stdout
    try:
        log = parse_benchmark_output(text, source=f"benchmark_model on {transport.label}")
    except BenchmarkParseError as exc:
        raise BoardError(f"{exc} (exit code {result.returncode})") from None
    if result.returncode != 0:
        raise BoardError(f"{transport.label}: benchmark_model exited with code "
                         f"{result.returncode}.\noutput (tail):\n{tail(text) or '(empty)'}")
    if log.inference_avg_us is None and log.inference is None:
        raise BoardError(f"{transport.label}: benchmark_model finished but printed no inference "
                         f"timings.\noutput (tail):\n{tail(text)}")
    return RawRun(runner="benchmark_model", runtime=None,
                  cold_start_us=log.init_us, first_inference_us=log.first_inference_us,
                  log=log, extra={"argv": argv})
