"""``time_on_board``: measured latency on a board (or, labelled as such, on the host CPU).

Cold start (delegate load + interpreter build), first inference (where an NPU
graph compile lands), warm-up and steady state are kept apart.  Steady-state
statistics keep the tail (p90, p99 with a bootstrap CI).  "The delegate was
applied" is not taken to mean "the ops ran on the NPU": the NPU share comes only
from lines that state node counts, or from an op profile against the model's op
count, and :func:`cross_check` compares it with the host's placement prediction.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .._io import sha256_file
from .._results import Result
from .._validation import check_choice, check_positive_int
from ..errors import BoardError, ModelError, WorkbenchWarning
from ..vocab import HOST_CPU_LABEL
from .deploy import BoardFingerprint
from .parse import BenchmarkLog
from .stats import LatencyStats

HOST_CPU = HOST_CPU_LABEL


@dataclass(frozen=True)
class DelegateCoverage(Result):
    """How much of the graph the delegate took, as far as the board's output says.

    ``source`` is ``"node counts"`` (a delegate line stating N of M nodes) or
    ``"op profile"`` (op-profiling rows other than the delegate kernel are CPU ops,
    compared with the model's op count).  ``npu_share`` is ``None`` when neither exists.
    """

    coverage: str                       # complete | partial | none | unknown
    source: str
    npu_ops: Optional[int] = None
    total_ops: Optional[int] = None
    npu_share: Optional[float] = None
    kernels: Optional[int] = None
    cpu_op_types: tuple[str, ...] = ()

    def summary(self) -> str:
        if self.npu_share is None:
            return f"delegate coverage {self.coverage} ({self.source}); NPU op share not stated"
        return (f"{self.npu_ops}/{self.total_ops} ops on the delegate ({self.npu_share:.0%}, "
                f"{self.coverage}, from {self.source})")


@dataclass(frozen=True)
class CoverageCheck(Result):
    """Measured NPU share against the host's placement prediction."""

    agree: Optional[bool]
    measured_share: Optional[float]
    predicted_share: Optional[float]
    measured_npu_ops: Optional[int]
    predicted_npu_ops: Optional[int]
    measured_total_ops: Optional[int]
    predicted_total_ops: Optional[int]
    detail: str

    def summary(self) -> str:
        return self.detail


@dataclass(frozen=True)
class TimingResult(Result):
    """Latency of one model measured by one runner at one place.

    ``where`` says where it ran; local runs say ``"host CPU (not an NPU)"``.
    Times are microseconds.  ``warmup_us`` and ``runs_us`` hold every invocation
    (python runner); the ``benchmark_model`` runner only has the log's aggregates.
    """

    model: str
    model_sha256: str
    runner: str                     # python | benchmark_model | local
    where: str
    on_board: bool
    n_warmup: int
    n_runs: int
    latency_us: LatencyStats
    cold_start_us: Optional[float] = None
    first_inference_us: Optional[float] = None
    warmup_us: tuple[float, ...] = ()
    runs_us: tuple[float, ...] = ()
    board: Optional[str] = None
    target: Optional[str] = None
    destination: Optional[str] = None
    delegate: Optional[str] = None
    runtime: Optional[str] = None
    still_falling: Optional[str] = None
    coverage: Optional[DelegateCoverage] = None
    fingerprint: Optional[BoardFingerprint] = None
    log: Optional[BenchmarkLog] = None
    notes: tuple[str, ...] = ()
    measured_at: str = ""

    @property
    def latency(self) -> LatencyStats:
        """Steady-state latency statistics (µs); same as ``latency_us``."""
        return self.latency_us

    @property
    def measured_on(self) -> str:
        """``"measured on board"`` or ``"host CPU"`` (the label the batch summary shows)."""
        return "measured on board" if self.on_board else "host CPU"

    def summary(self) -> str:
        lat = self.latency_us

        def ms(v: Optional[float]) -> str:
            return "n/a" if v is None else f"{v / 1000:.3f} ms"
        text = (f"{self.runner} runner on {self.where}: mean {ms(lat.mean)}, p50 {ms(lat.p50)}, "
                f"p99 {ms(lat.p99)} over {self.n_runs} runs; cold start {ms(self.cold_start_us)}, "
                f"first inference {ms(self.first_inference_us)}")
        if self.coverage is not None and self.coverage.npu_share is not None:
            text += f"; {self.coverage.npu_share:.0%} of ops on the delegate"
        if self.still_falling:
            text += "; WARNING: still warming up"
        return text

    def _repr_html_(self) -> str:
        from .. import display
        lat = self.latency_us
        out = [display.heading("TimingResult"),
               display.paragraph(f"{self.measured_on.upper()}: {self.where}"),
               display.paragraph(f"model {Path(self.model).name} (sha256 {self.model_sha256[:12]}), "
                                 f"{self.runner} runner, {self.runtime or 'runtime not stated'}"),
               display.paragraph(self.summary())]
        rows = [("cold start (load + delegate init)", _ms(self.cold_start_us)),
                ("first inference", _ms(self.first_inference_us))]
        for key in ("mean", "std", "p50", "p90", "p99", "min", "max"):
            rows.append((f"steady {key}", _ms(getattr(lat, key))))
        if lat.p99_ci is not None:
            rows.append((f"p99 {lat.ci_level:.0%} bootstrap CI",
                         f"{lat.p99_ci[0] / 1000:.3f} .. {lat.p99_ci[1] / 1000:.3f} ms"))
        out.append(display.table(("quantity", "value"), rows,
                                 caption=f"{self.n_runs} runs after {self.n_warmup} warm-up"))
        if self.coverage is not None:
            out.append(display.paragraph(self.coverage.summary()))
        if self.fingerprint is not None:
            fp = self.fingerprint
            out.append(display.table(("board state", "value"), [
                (f, getattr(fp, f)) for f in ("kernel", "os_release", "machine", "cpu_governor",
                                              "temperature_c", "tflite_runtime", "delegate_file",
                                              "delegate_package")
                if getattr(fp, f) is not None]))
        for note in ((self.still_falling,) if self.still_falling else ()) + self.notes:
            out.append(display.paragraph("note: " + note))
        if self.runs_us:
            import matplotlib
            matplotlib.use("Agg", force=False)
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(6, 2.6))
            self.plot(ax=ax)
            out.append(display.figure_html(fig, alt="per-run latency"))
            plt.close(fig)
        return "".join(out)

    def plot(self, ax: Any = None) -> Any:
        """Per-invocation latency (ms); warm-up runs shaded, p50 and p99 as lines."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 2.6))
        warm = [v / 1000 for v in self.warmup_us]
        runs = [v / 1000 for v in self.runs_us]
        if not warm and not runs:
            ax.text(0.5, 0.5, "no per-run latencies (the benchmark_model runner reports only "
                    "aggregates)", ha="center", va="center", transform=ax.transAxes, fontsize=8)
            ax.set_axis_off()
            return ax
        x_warm = list(range(1, len(warm) + 1))
        x_runs = list(range(len(warm) + 1, len(warm) + len(runs) + 1))
        if warm:
            ax.axvspan(0.5, len(warm) + 0.5, color="#f5d7a1", alpha=0.6, label="warm-up")
            ax.plot(x_warm, warm, ".", color="#b06000")
        ax.plot(x_runs, runs, ".", color="#1f5fa0", label="steady state")
        for key, style in (("p50", "--"), ("p99", ":")):
            value = getattr(self.latency_us, key)
            if value is not None:
                ax.axhline(value / 1000, linestyle=style, color="#444", linewidth=1,
                           label=f"{key} {value / 1000:.3f} ms")
        ax.set_xlabel("invocation (after the first)")
        ax.set_ylabel("latency (ms)")
        title = self.where
        if self.first_inference_us is not None:
            title += f" — first inference {self.first_inference_us / 1000:.2f} ms (not shown)"
        ax.set_title(title, fontsize=8)
        ax.legend(fontsize=7, loc="upper right")
        return ax


def _ms(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value / 1000:.3f} ms"


# --- coverage ---------------------------------------------------------------------------------
def coverage_from_log(log: BenchmarkLog, *, total_ops: int | None = None) -> Optional[DelegateCoverage]:
    """Delegate coverage from a parsed log; ``None`` when the log says nothing about delegates."""
    from .parse import is_cpu_delegate
    npu_delegates = [d for d in log.delegates if not is_cpu_delegate(d.name)]
    for d in npu_delegates:
        if d.nodes_total is not None:
            return DelegateCoverage(coverage=d.coverage, source="node counts",
                                    npu_ops=d.nodes_delegated, total_ops=d.nodes_total,
                                    npu_share=(d.nodes_delegated / d.nodes_total
                                               if d.nodes_total else None),
                                    kernels=d.kernels)
    applied = next(iter(npu_delegates), None)
    cpu_rows = log.cpu_op_rows
    if cpu_rows is not None and total_ops and applied is not None:
        cpu = len(cpu_rows)
        npu = max(0, total_ops - cpu)
        kernels = len(log.op_profile) - cpu
        coverage = "none" if npu == 0 else ("complete" if cpu == 0 else "partial")
        return DelegateCoverage(coverage=coverage, source="op profile", npu_ops=npu,
                                total_ops=total_ops, npu_share=npu / total_ops, kernels=kernels,
                                cpu_op_types=tuple(sorted({r.node_type for r in cpu_rows})))
    if applied is not None:
        return DelegateCoverage(coverage=applied.coverage, source="delegate line",
                                kernels=applied.kernels)
    return None


def cross_check(measured: Any, placement: Any, *, tolerance: float = 0.05) -> CoverageCheck:
    """Compare the measured NPU share with a placement prediction and flag disagreement.

    ``measured`` is a :class:`TimingResult`, a :class:`BenchmarkLog` or a
    :class:`DelegateCoverage`; ``placement`` is any object with ``npu_ops`` and
    ``cpu_ops`` counts (such as ``PlacementReport``).  A disagreement (shares apart by
    more than ``tolerance``, or different op counts over the same total) warns with
    :class:`WorkbenchWarning` and returns ``agree=False``; ``agree=None`` when the
    board's output states no counts.
    """
    try:
        npu_pred, cpu_pred = int(placement.npu_ops), int(placement.cpu_ops)
    except (AttributeError, TypeError, ValueError):
        raise BoardError("`placement` must have integer `npu_ops` and `cpu_ops` attributes "
                         f"(a PlacementReport). Got {type(placement).__name__} instead.") from None
    total_pred = npu_pred + cpu_pred
    share_pred = npu_pred / total_pred if total_pred else None
    if isinstance(measured, TimingResult):
        cov = measured.coverage
    elif isinstance(measured, BenchmarkLog):
        cov = coverage_from_log(measured)
    elif isinstance(measured, DelegateCoverage) or measured is None:
        cov = measured
    else:
        raise BoardError("`measured` must be a TimingResult, BenchmarkLog or DelegateCoverage. "
                         f"Got {type(measured).__name__} instead.")
    if cov is None or cov.npu_share is None:
        return CoverageCheck(None, None, share_pred, None, npu_pred, None, total_pred,
                             "the board's output states no op counts (e.g. the VX delegate without "
                             "--enable_op_profiling, or the python runner); nothing to cross-check. "
                             "Next: time with runner='benchmark_model'.")
    reasons = []
    if share_pred is not None and abs(cov.npu_share - share_pred) > tolerance:
        reasons.append(f"NPU share measured {cov.npu_share:.0%} vs predicted {share_pred:.0%}")
    if cov.total_ops == total_pred and cov.npu_ops != npu_pred:
        reasons.append(f"{cov.npu_ops} vs {npu_pred} of {total_pred} ops on the NPU")
    if reasons:
        detail = ("placement prediction disagrees with the board: " + "; ".join(reasons)
                  + ". The board is the truth; check the target rules or the delegate version.")
        warnings.warn(detail, WorkbenchWarning, stacklevel=2)
        agree = False
    else:
        detail = (f"placement prediction agrees with the board: {cov.npu_ops}/{cov.total_ops} "
                  f"measured vs {npu_pred}/{total_pred} predicted")
        agree = True
    return CoverageCheck(agree, cov.npu_share, share_pred, cov.npu_ops, npu_pred, cov.total_ops,
                         total_pred, detail)


# --- the verb ---------------------------------------------------------------------------------
def time_on_board(model: str | os.PathLike, *, board: str | None = None,
                  boards_file: str | os.PathLike | None = None, host: str | None = None,
                  ssh_config: str | os.PathLike | None = None,
                  known_hosts: str | os.PathLike | None = None, local: bool = False,
                  runner: str = "python", python: str | None = None, delegate: str | None = None,
                  delegate_options: dict[str, str] | None = None,
                  benchmark_model: str | None = None, workdir: str | None = None,
                  runs: int = 100, warmup: int = 10, threads: int | None = None,
                  connect_timeout: float = 10.0, command_timeout: float = 900.0, seed: int = 0,
                  fingerprint: bool = True, placement: Any = None) -> TimingResult:
    """Time ``model`` on a board from ``boards.yaml`` (``board=``), on an SSH destination
    (``host=``), or on this machine's CPU (``local=True``, labelled "host CPU (not an NPU)").

    ``runner`` is ``"python"`` (per-invocation latencies, real percentiles) or
    ``"benchmark_model"`` (TFLite's tool; aggregates as the log states them).
    ``runs`` steady-state invocations follow a first inference and ``warmup`` warm-up
    invocations.  With ``placement`` (an object with ``npu_ops``/``cpu_ops``) the measured
    delegate coverage is cross-checked and disagreement warned about.
    """
    from . import deploy as dep
    from . import runners as run_mod
    from .inventory import DEFAULT_PYTHON, DEFAULT_WORKDIR, TYPICAL_DELEGATE, get_board
    from .ssh import LocalTransport, SSHTransport
    from .stats import still_falling, summarize_latencies

    # one validation place
    chosen = [name for name, value in (("board", board), ("host", host), ("local", local)) if value]
    if len(chosen) != 1:
        raise BoardError("give exactly one of `board` (a name in boards.yaml), `host` (an SSH "
                         f"destination) or `local=True`. Got {chosen or 'none'} instead.")
    check_choice("runner", runner, run_mod.RUNNERS, error=BoardError)
    check_positive_int("runs", runs, error=BoardError)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise BoardError(f"`warmup` must be an integer >= 0. Got {warmup!r} instead.")
    if threads is not None:
        check_positive_int("threads", threads, error=BoardError)
    if local and runner == "benchmark_model":
        raise BoardError("the benchmark_model runner needs a board (`board` or `host`); "
                         "use runner='python' with local=True.")
    path = Path(model)
    if not path.is_file():
        raise ModelError(f"model file {str(path)!r} does not exist. Next: pass a .tflite file.")
    digest = sha256_file(path)
    notes: list[str] = []

    board_name = target = destination = None
    if local:
        import sys
        transport = LocalTransport(command_timeout=command_timeout)
        python = python or sys.executable
        where = HOST_CPU
        notes.append("measured on this machine's CPU, not on an NPU: use it to compare models, "
                     "never as a board latency")
    else:
        if board:
            b = get_board(board, boards_file)
            board_name, target, destination = b.name, b.target, b.destination
            delegate = delegate if delegate is not None else b.delegate
            python = python or b.python
            workdir = workdir or b.workdir
            benchmark_model = benchmark_model or b.benchmark_model
            ssh_config = ssh_config or b.ssh_config
            known_hosts = known_hosts or b.known_hosts
        else:
            destination = host
        python = python or DEFAULT_PYTHON
        workdir = workdir or DEFAULT_WORKDIR
        transport = SSHTransport(destination, ssh_config=ssh_config, known_hosts=known_hosts,
                                 connect_timeout=connect_timeout, command_timeout=command_timeout,
                                 label=f"board {board_name} ({destination})" if board_name
                                 else destination)
        where = (f"board {board_name} ({target})" if board_name else f"{destination} over SSH")
        where += f", delegate {os.path.basename(delegate)}" if delegate else ", CPU only (no delegate)"

    if delegate:
        hint = f"check `delegate:` in boards.yaml or --delegate"
        if target in TYPICAL_DELEGATE:
            hint += f" (usually {TYPICAL_DELEGATE[target]} on {target})"
        if local:
            if not os.path.isfile(delegate):
                raise BoardError(f"delegate library {delegate!r} does not exist on this machine. "
                                 f"Next: {hint}.")
        else:
            dep.check_remote_file(transport, delegate, what="delegate library", hint=hint)

    if local:
        model_path = str(path.resolve())
        runner_path = str(Path(dep.__file__).with_name("remote_runner.py"))
    else:
        model_path = dep.deploy_model(transport, path, workdir).remote_path
        runner_path = dep.deploy_runner(transport, workdir).remote_path if runner == "python" else ""

    if runner == "python":
        raw = run_mod.run_python(transport, python=python, runner_path=runner_path,
                                 model_path=model_path, runs=runs, warmup=warmup,
                                 delegate=delegate, threads=threads,
                                 delegate_options=delegate_options, seed=seed)
    else:
        binary = benchmark_model or run_mod.find_benchmark_model(transport)
        dep.check_remote_file(transport, binary, what="benchmark_model", executable=True,
                              hint="set `benchmark_model:` in boards.yaml, or use the python runner")
        raw = run_mod.run_benchmark_model(transport, binary=binary, model_path=model_path,
                                          runs=runs, warmup=warmup, delegate=delegate,
                                          threads=threads)

    fp = None
    if fingerprint and not local:
        fp = dep.board_fingerprint(transport, python=python if runner == "python" else None,
                                   delegate=delegate)
    elif fingerprint:
        fp = dep.board_fingerprint(_LocalShell(), python=None, delegate=delegate)
        fp = dataclasses.replace(fp, tflite_runtime=raw.runtime)

    falling = None
    coverage = None
    if raw.log is None:
        latency = summarize_latencies(raw.runs_us, seed=seed)
        falling = still_falling(raw.runs_us)
        if falling:
            warnings.warn(f"{where}: {falling}", WorkbenchWarning, stacklevel=2)
        if latency.n < 100:
            notes.append(f"p99 from {latency.n} runs is close to the maximum; its bootstrap CI "
                         "is wide. Use runs >= 1000 for a tail you can quote")
        if delegate:
            notes.append("the python runner cannot see which ops the delegate took; use "
                         "runner='benchmark_model' for the delegate's node counts")
        n_runs = latency.n
    else:
        latency = _latency_from_log(raw.log)
        n_runs = latency.n
        total_ops = _count_ops(path) if raw.log.op_profile else None
        coverage = coverage_from_log(raw.log, total_ops=total_ops)
        notes.append("benchmark_model reports aggregates only: p90/p99 are not stated by the log "
                     "and are left empty; use the python runner for percentiles")
        if n_runs != runs:
            notes.append(f"benchmark_model ran {n_runs} regular runs (asked {runs}; it also runs "
                         "for at least --min_secs)")
    if delegate and coverage is not None and coverage.coverage == "none":
        warnings.warn(f"{where}: the delegate was applied but runs none of the graph: this "
                      "latency is a CPU latency", WorkbenchWarning, stacklevel=2)

    result = TimingResult(
        model=str(path), model_sha256=digest, runner="local" if local else runner, where=where,
        on_board=not local, n_warmup=warmup, n_runs=n_runs, latency_us=latency,
        cold_start_us=raw.cold_start_us, first_inference_us=raw.first_inference_us,
        warmup_us=raw.warmup_us, runs_us=raw.runs_us, board=board_name, target=target,
        destination=destination, delegate=delegate, runtime=raw.runtime, still_falling=falling,
        coverage=coverage, fingerprint=fp, log=raw.log, notes=tuple(notes),
        measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    if placement is not None:
        check = cross_check(result, placement)
        result = dataclasses.replace(result, notes=result.notes + (check.detail,))
    return result


def _latency_from_log(log: BenchmarkLog) -> LatencyStats:
    """Steady-state statistics exactly as the log states them (no invented percentiles)."""
    stat = log.inference
    if stat is None:
        return LatencyStats(n=0, mean=log.inference_avg_us)
    same = stat.all_same or stat.count == 1
    mean = stat.avg if stat.avg is not None else (log.inference_avg_us if not same else stat.curr)
    return LatencyStats(n=stat.count, mean=mean, std=stat.std if not same else 0.0,
                        p50=stat.median if stat.median is not None else (stat.curr if same else None),
                        min=stat.min if not same else stat.curr,
                        max=stat.max if not same else stat.curr)


def _count_ops(path: Path) -> Optional[int]:
    try:
        from ..models.tflite_graph import read_tflite
        return len(read_tflite(path).ops)
    except (ImportError, ModelError):
        return None


class _LocalShell:
    """Runs the fingerprint shell script on this machine (for local runs)."""

    label = HOST_CPU

    def run_shell(self, command: str, *, check: bool = True, **_: Any):
        import subprocess
        from .ssh import RemoteResult
        proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)
        return RemoteResult((command,), proc.returncode, proc.stdout, proc.stderr)
