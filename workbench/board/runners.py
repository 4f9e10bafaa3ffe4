"""Runners: how a model is timed once it is on a board.

* :func:`run_python` runs ``remote_runner.py`` (per-invocation latencies);
* :func:`run_benchmark_model` runs TFLite's ``benchmark_model`` and parses its log.

Both take a transport with ``run(argv, ...)`` (:class:`~workbench.board.ssh.SSHTransport`
or :class:`~workbench.board.ssh.LocalTransport`) and return :class:`RawRun`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shlex
from dataclasses import dataclass, field
from typing import Any

from ..errors import BenchmarkParseError, BoardError
from ..vocab import BOARD_RUNNERS
from .parse import BenchmarkLog, parse_benchmark_output
from .ssh import tail

RUNNERS = BOARD_RUNNERS                     # vocab.Runner: python, benchmark_model
#: where NXP BSP images install the tool
BENCHMARK_MODEL_GLOB = "/usr/bin/tensorflow-lite-*/examples/benchmark_model"


@dataclass(frozen=True)
class RawRun:
    """What a runner measured, before statistics."""

    runner: str
    runtime: str | None = None
    cold_start_us: float | None = None
    first_inference_us: float | None = None
    warmup_us: tuple[float, ...] = ()
    runs_us: tuple[float, ...] = ()
    n_ops: int | None = None
    log: BenchmarkLog | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    stdout: str = ""            # the runner's raw output (what a recording keeps)
    stderr: str = ""
    returncode: int = 0


def python_argv(*, python: str, runner_path: str, model_path: str, runs: int, warmup: int,
                delegate: str | None = None, threads: int | None = None,
                delegate_options: dict[str, str] | None = None, seed: int = 0,
                inputs_path: str | None = None, kernels: str = "default") -> list[str]:
    """The Python runner's command line (every value a plain string); ``kernels``: the runtime's CPU kernels
    (``default``, ``optimized``, ``reference``; see ``remote_runner.KERNELS``)."""
    argv = [python, runner_path, "--model", model_path, "--runs", str(runs),
            "--warmup", str(warmup), "--seed", str(seed)]
    if delegate:
        argv += ["--delegate", delegate]
    for key, value in (delegate_options or {}).items():
        argv += ["--delegate-option", f"{key}={value}"]
    if threads:
        argv += ["--threads", str(threads)]
    if inputs_path:
        argv += ["--inputs", inputs_path]
    if kernels != "default":
        argv += ["--kernels", kernels]
    return argv


def run_python(transport, *, python: str, runner_path: str, model_path: str,
               runs: int, warmup: int, delegate: str | None = None, threads: int | None = None,
               delegate_options: dict[str, str] | None = None, seed: int = 0,
               timeout: float | None = None, kernels: str = "default") -> RawRun:
    """Time ``model_path`` with the pushed Python runner."""
    argv = python_argv(python=python, runner_path=runner_path, model_path=model_path, runs=runs,
                       warmup=warmup, delegate=delegate, threads=threads,
                       delegate_options=delegate_options, seed=seed, kernels=kernels)
    result = transport.run(argv, check=False, timeout=timeout)
    raw = raw_from_python_output(result.stdout, stderr=result.stderr, returncode=result.returncode,
                                 label=transport.label, python=python)
    return dataclasses.replace(raw, stdout=result.stdout, stderr=result.stderr,
                               returncode=result.returncode)


def _python_payload(stdout: str, *, stderr: str, returncode: int, label: str,
                    python: str | None) -> dict:
    payload = _last_json(stdout)
    if payload is None:
        hint = ""
        if returncode == 127 or "not found" in stderr:
            hint = (f" Next: `python` ({python!r}) may not exist there; set `python:` in "
                    "boards.yaml or pass --python.")
        raise BoardError(f"{label}: the Python runner failed with exit code "
                         f"{returncode} and printed no result.{hint}\nstderr (tail):\n"
                         f"{tail(stderr) or '(empty)'}")
    if not payload.get("ok"):
        stage = payload.get("stage", "?")
        todo = {"delegate": "check the delegate path and that it matches the board's TFLite runtime",
                "import": "install tflite_runtime or ai_edge_litert and numpy for that Python",
                "load": "check the model file (is it a .tflite flatbuffer?)",
                "inputs": "check the inputs file the workbench uploaded (numpy .npz)",
                "invoke": "the model could not run; check the delegate's messages in stderr"}
        raise BoardError(f"{label}: Python runner failed at stage {stage!r}: "
                         f"{payload.get('error')}. Next: {todo.get(stage, 'see stderr')}.\n"
                         f"stderr (tail):\n{tail(stderr, 600) or '(empty)'}")
    return payload


def raw_from_python_output(stdout: str, *, stderr: str = "", returncode: int = 0,
                           label: str = "board", python: str | None = None) -> RawRun:
    """A :class:`RawRun` from the Python runner's stdout (live, or read from a recording)."""
    payload = _python_payload(stdout, stderr=stderr, returncode=returncode, label=label,
                              python=python)
    try:
        values = {k: _duration(payload[k], k) for k in ("cold_start_us", "first_inference_us")}
        warm = tuple(_duration(v, "warmup_us") for v in _list(payload["warmup_us"], "warmup_us"))
        runs = tuple(_duration(v, "runs_us") for v in _list(payload["runs_us"], "runs_us"))
    except (KeyError, TypeError, ValueError) as exc:
        raise BoardError(f"{label}: the Python runner's result lacks or garbles {exc}. Next: "
                         "re-run; the runner's output may be cut.") from None
    bad = [(k, v) for k, v in (*values.items(), *(("warmup_us", v) for v in warm), *(("runs_us", v) for v in runs))
           if not math.isfinite(v) or v < 0]
    if bad:
        key, value = bad[0]
        raise BoardError(f"{label}: the Python runner reported a timing that is not a finite number >= 0 "
                         f"({key} = {value!r}); nothing of this run is a measurement. Next: re-run.")
    return RawRun(runner="python", runtime=payload.get("runtime"),
                  cold_start_us=values["cold_start_us"],
                  first_inference_us=values["first_inference_us"],
                  warmup_us=warm, runs_us=runs, n_ops=payload.get("n_ops"),
                  extra={"delegate_load_us": payload.get("delegate_load_us"),
                         "interpreter_init_us": payload.get("interpreter_init_us"),
                         "python_version": payload.get("python")},
                  stdout=stdout)


def _duration(value: Any, key: str) -> float:
    """A recorded time: a JSON number (not a bool, not text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{key} ({value!r} is not a number)")
    return float(value)


def _list(value: Any, key: str) -> list:
    if not isinstance(value, list):
        raise TypeError(f"{key} ({type(value).__name__}, not a list of numbers)")
    return value


def run_accuracy(transport, *, python: str, runner_path: str, model_path: str, inputs_path: str,
                 delegate: str | None = None, threads: int | None = None,
                 delegate_options: dict[str, str] | None = None,
                 timeout: float | None = None, kernels: str = "default") -> tuple[dict[str, Any], str]:
    """Run the held-out sample through the model on the board: ``(payload, raw stdout)``.

    ``payload["outputs"]`` maps each condition to a list of per-sample output vectors
    (dequantized floats), in the order of the uploaded ``inputs`` file.
    """
    argv = python_argv(python=python, runner_path=runner_path, model_path=model_path, runs=0,
                       warmup=0, delegate=delegate, threads=threads,
                       delegate_options=delegate_options, inputs_path=inputs_path, kernels=kernels)
    result = transport.run(argv, check=False, timeout=timeout)
    return accuracy_from_output(result.stdout, stderr=result.stderr, returncode=result.returncode,
                                label=transport.label, python=python), result.stdout


def accuracy_from_output(stdout: str, *, stderr: str = "", returncode: int = 0,
                         label: str = "board", python: str | None = None) -> dict[str, Any]:
    """The accuracy runner's payload (live or recorded); outputs must be present."""
    payload = _python_payload(stdout, stderr=stderr, returncode=returncode, label=label,
                              python=python)
    if not isinstance(payload.get("outputs"), dict):
        raise BoardError(f"{label}: the runner printed no outputs for the accuracy sample. "
                         "Next: re-run; the runner may be an old copy.")
    return payload


def _last_json(stdout: str) -> dict | None:
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
    raw = raw_from_benchmark_output(result.stdout, returncode=result.returncode,
                                    label=transport.label)
    return dataclasses.replace(raw, extra={"argv": argv})


def raw_from_benchmark_output(text: str, *, returncode: int = 0, label: str = "board") -> RawRun:
    """A :class:`RawRun` from benchmark_model's output (live, or read from a recording)."""
    try:
        log = parse_benchmark_output(text, source=f"benchmark_model on {label}")
    except BenchmarkParseError as exc:
        raise BoardError(f"{exc} (exit code {returncode})") from None
    if returncode != 0:
        raise BoardError(f"{label}: benchmark_model exited with code "
                         f"{returncode}.\noutput (tail):\n{tail(text) or '(empty)'}")
    if log.inference_avg_us is None and log.inference is None:
        raise BoardError(f"{label}: benchmark_model finished but printed no inference "
                         f"timings.\noutput (tail):\n{tail(text)}")
    return RawRun(runner="benchmark_model", runtime=None,
                  cold_start_us=log.init_us, first_inference_us=log.first_inference_us,
                  log=log, stdout=text, returncode=returncode)
