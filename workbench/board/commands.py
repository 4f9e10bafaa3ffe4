"""CLI of the board stage: ``workbench bench``, ``workbench bisect`` and ``workbench parse-benchmark``.

Only argparse at import time; the work is imported inside the handlers.
"""

from __future__ import annotations

import argparse
import math


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0 (``--timeout -5`` is refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds. Got {text!r} instead.") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0. Got {text!r} "
                                         "instead.")
    return value


def add_board_flags(parser: argparse.ArgumentParser, *, local: str, replay: str, record: str, timeout: str) -> None:
    """Where a command runs and how it reaches the board over SSH: exactly one of --board, --host, --local,
    --replay, then the inventory, the SSH files, the board's Python, delegate and work folder, the timeouts and
    --record (``bench`` and ``bisect`` take the same; the strings say what --local, --replay, --record and
    --timeout mean for the command)."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--board", metavar="NAME", help="a board from boards.yaml")
    where.add_argument("--host", metavar="DEST",
                       help="an SSH destination: an alias from your OpenSSH config or user@host[:port]")
    where.add_argument("--local", action="store_true", help=local)
    where.add_argument("--replay", metavar="DIR", default=None, help=replay)
    parser.add_argument("--boards-file", metavar="FILE", default=None, help="board inventory (default: ./boards.yaml)")
    parser.add_argument("--ssh-config", metavar="FILE", default=None,
                        help="OpenSSH config file to use instead of ~/.ssh/config (ssh -F)")
    parser.add_argument("--known-hosts", metavar="FILE", default=None,
                        help="known_hosts file to verify the host key against")
    parser.add_argument("--python", metavar="REMOTE_PYTHON", default=None,
                        help="Python on the board (default: boards.yaml's, else python3)")
    parser.add_argument("--delegate", metavar="PATH", default=None,
                        help="external delegate library on the board (default: boards.yaml's)")
    parser.add_argument("--workdir", metavar="DIR", default=None,
                        help="work folder on the board (default: /tmp/npu-workbench)")
    parser.add_argument("--connect-timeout", metavar="SECONDS", type=_seconds, default=10.0,
                        help="SSH connect and handshake timeout (default 10)")
    parser.add_argument("--timeout", metavar="SECONDS", type=_seconds, default=900.0, help=timeout)
    parser.add_argument("--record", metavar="DIR", default=None, help=record)


def register(subparsers: argparse._SubParsersAction) -> None:
    from .._cli import add_json_flag

    bench = subparsers.add_parser(
        "bench", help="time a .tflite model on a board over SSH (or on the host CPU with --local)",
        description="Time MODEL: cold start, first inference and steady-state percentiles. "
                    "Exactly one of --board, --host, --local, --replay.")
    bench.add_argument("model", metavar="MODEL", help=".tflite file to time")
    add_board_flags(bench, local="time on this machine's CPU (labelled 'host CPU (not an NPU)')",
                    replay="rebuild the result from a recording made with --record (no board needed; labelled "
                           "'replayed from <board> <date>'; refused when the recording's model sha256 differs "
                           "from MODEL)",
                    record="keep the board session in DIR: the runner's raw output, the board fingerprint and the "
                           "model's sha256 (replay it with --replay DIR)",
                    timeout="timeout of each remote command (default 900)")
    bench.add_argument("--runner", choices=("python", "benchmark_model"), default="python",
                       help="python: per-invocation latencies (default); benchmark_model: "
                            "TFLite's tool, parsed")
    bench.add_argument("--benchmark-model", metavar="PATH", default=None,
                       help="benchmark_model binary on the board (default: auto-detected under "
                            "/usr/bin/tensorflow-lite-*/examples/)")
    bench.add_argument("--runs", metavar="N", type=int, default=100,
                       help="steady-state invocations (default 100)")
    bench.add_argument("--warmup", metavar="W", type=int, default=10,
                       help="warm-up invocations after the first inference (default 10)")
    bench.add_argument("--threads", metavar="T", type=int, default=None, help="CPU threads")
    add_json_flag(bench)
    bench.set_defaults(func=_bench)

    _register_bisect(subparsers)

    parse = subparsers.add_parser(
        "parse-benchmark", help="read a saved benchmark_model log into numbers",
        description="Parse LOGFILE (benchmark_model stdout+stderr). A field the log does not "
                    "state is null, never zero. A log reporting a failure exits with code 2.")
    parse.add_argument("logfile", metavar="LOGFILE")
    add_json_flag(parse)
    parse.set_defaults(func=_parse)


def _bench(args: argparse.Namespace) -> int:
    from .._cli import emit
    from .timing import TimingOptions, time_on_board
    options = TimingOptions(runner=args.runner, runs=args.runs, warmup=args.warmup,
                            threads=args.threads, delegate=args.delegate, python=args.python,
                            benchmark_model=args.benchmark_model, workdir=args.workdir,
                            connect_timeout=args.connect_timeout, command_timeout=args.timeout)
    result = time_on_board(args.model, board=args.board, boards_file=args.boards_file,
                           host=args.host, ssh_config=args.ssh_config,
                           known_hosts=args.known_hosts, local=args.local, replay=args.replay,
                           record=args.record, options=options)
    lines = [result.summary()]
    lines += [f"note: {n}" for n in result.notes]
    emit(result, as_json=args.json, text="\n".join(lines))
    return 0


def _parse(args: argparse.Namespace) -> int:
    from .._cli import emit
    from .parse import read_benchmark_log
    log = read_benchmark_log(args.logfile)
    lines = [log.summary()]
    for o in log.op_summary:
        lines.append(f"  {o.node_type}: count {o.count}, avg {o.avg_ms} ms")
    emit(log, as_json=args.json, text="\n".join(lines))
    return 0


def _register_bisect(subparsers: argparse._SubParsersAction) -> None:
    from .._cli import add_json_flag
    kernels = ("default", "optimized", "reference")
    p = subparsers.add_parser(
        "bisect", help="find the first tensor where a board's INT8 run departs from the host's",
        description="Run MODEL on real samples on the board and on the host, compare the outputs code by "
                    "code, and when they depart halve the model's tensors (each board run exposes one "
                    "intermediate tensor as an output: an edit of the file, not a re-conversion) until the "
                    "first departing op is found: at most ceil(log2(tensors)) + 2 board runs. When the "
                    "outputs agree, one run compares every tensor op by op. Exactly one of --board, --host, "
                    "--local, --replay.")
    p.add_argument("model", metavar="MODEL.tflite", help="the INT8 .tflite deployed on the board")
    add_board_flags(p, local="this machine as the 'board' (use with --kernels reference to compare kernels)",
                    replay="replay a bisection recorded with --record",
                    record="keep each board run's raw output (with its sha256) in DIR, to --replay it later",
                    timeout="timeout of each board run (default 900)")
    p.add_argument("--data", metavar="D", required=True,
                   help="dataset the samples come from (a built-in name or a folder), test split")
    p.add_argument("--condition", metavar="C", default=None, help="deployment condition (default: the first)")
    p.add_argument("--samples", metavar="N", type=int, default=4, help="samples per run (default 4)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample choice (default 0)")
    p.add_argument("--tolerance", metavar="CODES", type=int, default=0,
                   help="largest code difference that still agrees (default 0: bit-exact)")
    p.add_argument("--kernels", choices=kernels, default=None,
                   help="CPU kernels of the board's runtime (default: boards.yaml's `kernels:`, else default; "
                        "reference = TFLite's reference kernels)")
    p.add_argument("--host-kernels", choices=kernels, default="default",
                   help="CPU kernels of the host's runtime (default: default, the workbench's own)")
    p.add_argument("--target", metavar="T", default=None,
                   help="target whose placement names where the departing op runs (default: the board's)")
    p.add_argument("--out", metavar="FILE.json", default=None,
                   help="write the result as JSON (read by `workbench findings` and the reports)")
    p.add_argument("--graph", metavar="FILE.html", default=None,
                   help="write the model's graph with the bisection drawn on it (first departing op marked, each "
                        "compared op's agreement; placement chips with --target) as one HTML file")
    add_json_flag(p)
    p.set_defaults(func=_bisect)


def _bisect(args: argparse.Namespace) -> int:
    from .._cli import emit
    from .divergence import run_bisect
    result = run_bisect(args.model, data=args.data, board=args.board, host=args.host, local=args.local,
                        replay=args.replay, condition=args.condition, samples=args.samples, seed=args.seed,
                        tolerance=args.tolerance, kernels=args.kernels, host_kernels=args.host_kernels,
                        target=args.target, boards_file=args.boards_file, ssh_config=args.ssh_config,
                        known_hosts=args.known_hosts, python=args.python, delegate=args.delegate,
                        workdir=args.workdir, connect_timeout=args.connect_timeout,
                        command_timeout=args.timeout, record=args.record, out=args.out, graph=args.graph)
    from ..findings import findings_for
    lines = [result.summary()]
    seen: dict[int, str] = {}
    for t in result.compared:                       # each tensor once, as last compared
        seen[t.tensor] = t.summary() + ("" if t.agrees else "  <- departs")
    lines.append(f"compared ({len(seen)} tensors, {len(result.probes)} board runs):")
    op_order = {t.tensor: (t.op_index if t.op_index is not None else 1 << 30) for t in result.compared}
    lines += [f"  {seen[t]}" for t in sorted(seen, key=lambda t: (op_order[t], t))][:15]
    if len(seen) > 15:
        lines.append(f"  ... {len(seen) - 15} more (--json lists them all)")
    if result.first_divergence is not None and result.op_inputs:
        lines.append("inputs of the departing op:")
        lines += [f"  {t.summary()}" for t in result.op_inputs]
    lines += [f"note: {n}" for n in result.notes]
    lines += [f"finding: {f.severity} {f.code}: {f.message}" for f in findings_for(result)]
    emit(result, as_json=args.json, text="\n".join(lines))
    return 0
