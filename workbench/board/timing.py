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
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._io import sha256_file
from .._results import Result
from .._validation import check_choice, check_positive_int
from ..errors import BoardError, ModelError, WorkbenchWarning
from ..vocab import HOST_CPU_LABEL, LatencySource, latency_label
from .accuracy import AccuracySettings, BoardAccuracy
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

    coverage: str                       # a vocab.Coverage: complete | partial | none | unknown
    source: str
    npu_ops: int | None = None
    total_ops: int | None = None
    npu_share: float | None = None
    kernels: int | None = None
    cpu_op_types: tuple[str, ...] = ()

    def summary(self) -> str:
        if self.npu_share is None:
            return f"delegate coverage {self.coverage} ({self.source}); NPU op share not stated"
        return (f"{self.npu_ops}/{self.total_ops} ops on the delegate ({self.npu_share:.0%}, "
                f"{self.coverage}, from {self.source})")


@dataclass(frozen=True)
class CoverageCheck(Result):
    """Measured NPU share against the host's placement prediction."""

    agree: bool | None
    measured_share: float | None
    predicted_share: float | None
    measured_npu_ops: int | None
    predicted_npu_ops: int | None
    measured_total_ops: int | None
    predicted_total_ops: int | None
    detail: str

    def summary(self) -> str:
        return self.detail


@dataclass(frozen=True)
class PlacementMismatch(Result):
    """An op the board ran elsewhere than the placement prediction said.

    ``predicted``/``measured`` are ``"NPU"`` or ``"CPU"``; ``evidence`` names the
    board output that shows it (an op-profiling row, or a delegate line's counts).
    """

    op: str                       # op type as the board names it (``TFLite_Detection_PostProcess``)
    predicted: str
    measured: str
    evidence: str
    count: int = 1

    def summary(self) -> str:
        return (f"{self.count}x {self.op}: predicted on the {self.predicted}, ran on the "
                f"{self.measured} ({self.evidence})")


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
    cold_start_us: float | None = None
    first_inference_us: float | None = None
    warmup_us: tuple[float, ...] = ()
    runs_us: tuple[float, ...] = ()
    board: str | None = None
    target: str | None = None
    destination: str | None = None
    delegate: str | None = None
    runtime: str | None = None
    still_falling: str | None = None
    coverage: DelegateCoverage | None = None
    fingerprint: BoardFingerprint | None = None
    log: BenchmarkLog | None = None
    notes: tuple[str, ...] = ()
    measured_at: str = ""
    latency_kind: str = ""              # a vocab.LatencySource value (derived when empty)
    latency_label: str = ""             # the text shown beside the number (derived when empty)
    replayed_from: str | None = None     # the recording's folder name, for a replay
    replayed_at: str = ""                   # when it was replayed (measured_at is the board's time)
    placement_mismatches: tuple[PlacementMismatch, ...] = ()
    accuracy: BoardAccuracy | None = None

    def __post_init__(self) -> None:
        if not self.latency_kind:
            object.__setattr__(self, "latency_kind", str(_kind_of(self)))
        if not self.latency_label:
            object.__setattr__(self, "latency_label", _label_of(self))

    @property
    def latency(self) -> LatencyStats:
        """Steady-state latency statistics (µs); same as ``latency_us``."""
        return self.latency_us

    @property
    def measured_on(self) -> str:
        """Where the number comes from, as the reports say it (``latency_label``)."""
        return self.latency_label

    @property
    def delegate_applied(self) -> bool:
        """A delegate was asked for and the board's output does not say it was ignored."""
        return bool(self.delegate) and not (self.log is not None and self.log.ignored_delegate)

    def summary(self) -> str:
        lat = self.latency_us

        def ms(v: float | None) -> str:
            return "n/a" if v is None else f"{v / 1000:.3f} ms"
        text = (f"[{self.latency_label}] {self.runner} runner on {self.where}: mean {ms(lat.mean)}, p50 {ms(lat.p50)}, "
                f"p99 {ms(lat.p99)} over {self.n_runs} runs; cold start {ms(self.cold_start_us)}, "
                f"first inference {ms(self.first_inference_us)}")
        if self.coverage is not None and self.coverage.npu_share is not None:
            text += f"; {self.coverage.npu_share:.0%} of ops on the delegate"
        if self.still_falling:
            text += "; WARNING: still warming up"
        if self.placement_mismatches:
            text += f"; {len(self.placement_mismatches)} op type(s) placed otherwise than predicted"
        return text

    def _repr_html_(self) -> str:
        from .. import display
        lat = self.latency_us
        out = [display.heading("TimingResult"),
               display.paragraph(f"LATENCY: {self.latency_label.upper()} ({self.where})"),
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
                (f, getattr(fp, f)) for f in ("bsp_release", "os_release", "os_version_id",
                                              "buildinfo", "kernel", "machine", "cpu_governor",
                                              "temperature_c", "tflite_runtime", "delegate_file",
                                              "delegate_package", "delegate_version",
                                              "delegate_sha256", "benchmark_model_version",
                                              "vela_version")
                if getattr(fp, f) is not None]))
        if self.placement_mismatches:
            out.append(display.table(
                ("op", "count", "predicted", "ran on", "evidence"),
                [(m.op, m.count, m.predicted, m.measured, m.evidence)
                 for m in self.placement_mismatches],
                caption="ops the board placed otherwise than the prediction (the board is the truth)"))
        if self.accuracy is not None:
            out.append(self.accuracy._repr_html_())
        if self.log is not None:
            for text in self.log.log_warnings:
                out.append(display.paragraph("benchmark log: " + text))
        for note in ((self.still_falling,) if self.still_falling else ()) + self.notes:
            out.append(display.paragraph("note: " + note))
        if self.runs_us:
            from matplotlib.figure import Figure  # not pyplot: a repr never switches the user's backend
            fig = Figure(figsize=(6, 2.6))
            self.plot(ax=fig.add_subplot())
            out.append(display.figure_html(fig, alt="per-run latency"))
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
                    "aggregates)", ha="center", va="center", transform=ax.transAxes, fontsize=10)
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
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=10, loc="upper right")
        return ax


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value / 1000:.3f} ms"


def _board_name(r: TimingResult) -> str:
    return r.board or r.destination or "?"


def _kind_of(r: TimingResult) -> LatencySource:
    if r.replayed_from:
        return LatencySource.REPLAYED
    if not r.on_board:
        return LatencySource.HOST_CPU
    return LatencySource.BOARD if r.delegate_applied else LatencySource.BOARD_CPU


def _label_of(r: TimingResult) -> str:
    kind = LatencySource(r.latency_kind)
    if kind is LatencySource.REPLAYED:
        inner = (latency_label(LatencySource.BOARD, board=_board_name(r),
                               delegate=os.path.basename(r.delegate or "")) if r.delegate_applied
                 else latency_label(LatencySource.BOARD_CPU, board=_board_name(r)))
        return (latency_label(kind, board=_board_name(r), date=r.measured_at[:10] or None)
                + f" ({inner})")
    return latency_label(kind, board=_board_name(r),
                         delegate=os.path.basename(r.delegate) if r.delegate else None)


# --- coverage ---------------------------------------------------------------------------------
def coverage_from_log(log: BenchmarkLog, *, total_ops: int | None = None) -> DelegateCoverage | None:
    """Delegate coverage from a parsed log; ``None`` when the log says nothing about delegates."""
    from .parse import is_cpu_delegate
    npu_delegates = [d for d in log.delegates if not is_cpu_delegate(d.name)]
    for d in npu_delegates:
        if d.nodes_total is not None:
            return DelegateCoverage(coverage=d.coverage, source="node counts",
                                    npu_ops=d.nodes_delegated, total_ops=d.nodes_total,
                                    npu_share=(d.nodes_delegated / d.nodes_total
                                               if d.nodes_total and d.nodes_delegated is not None
                                               else None),
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


# --- options ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TimingOptions:
    """How to time (not where): runner, counts, delegate, board-side paths, timeouts.

    Validated at construction (the one place): counts are positive integers, timeouts
    finite and > 0 (``--timeout -5`` is refused, never turned into 5 s).
    """

    runner: str = "python"
    runs: int = 100
    warmup: int = 10
    threads: int | None = None
    delegate: str | None = None
    delegate_options: tuple[tuple[str, str], ...] = ()
    python: str | None = None
    benchmark_model: str | None = None
    workdir: str | None = None
    connect_timeout: float = 10.0
    command_timeout: float = 900.0
    seed: int = 0
    fingerprint: bool = True

    def __post_init__(self) -> None:
        from .runners import RUNNERS
        check_choice("runner", self.runner, RUNNERS, error=BoardError)
        check_positive_int("runs", self.runs, error=BoardError)
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise BoardError(f"`warmup` must be an integer >= 0. Got {self.warmup!r} instead.")
        if self.threads is not None:
            check_positive_int("threads", self.threads, error=BoardError)
        for name in ("connect_timeout", "command_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise BoardError(f"`{name}` must be a finite number of seconds > 0. Got {value!r} "
                                 "instead.")
        if isinstance(self.delegate_options, dict):
            object.__setattr__(self, "delegate_options",
                               tuple((str(k), str(v)) for k, v in self.delegate_options.items()))


@dataclass
class _Session:
    """Where a timing runs, resolved from the inventory or the arguments."""

    transport: Any
    where: str
    local: bool
    python: str
    workdir: str
    delegate: str | None
    benchmark_model: str | None
    board: str | None = None
    target: str | None = None
    destination: str | None = None


# --- the verb ---------------------------------------------------------------------------------
def time_on_board(model: str | os.PathLike, *, board: str | None = None,
                  boards_file: str | os.PathLike | None = None, host: str | None = None,
                  ssh_config: str | os.PathLike | None = None,
                  known_hosts: str | os.PathLike | None = None, local: bool = False,
                  options: TimingOptions | None = None, placement: Any = None,
                  record: str | os.PathLike | None = None, replay: str | os.PathLike | None = None,
                  accuracy: AccuracySettings | dict | None = None, **option_kwargs: Any
                  ) -> TimingResult:
    """Time ``model`` on a board from ``boards.yaml`` (``board=``), on an SSH destination
    (``host=``), on this machine's CPU (``local=True``, labelled "host CPU (not an NPU)"),
    or from a recording (``replay=DIR``, labelled "replayed from <board> <date>").

    ``options`` is a :class:`TimingOptions`; its fields may also be given as keywords
    (``runner="benchmark_model"``, ``runs=``, ``warmup=``, ``delegate=``, ``python=``,
    ``benchmark_model=``, ``workdir=``, ``threads=``, ``delegate_options=``,
    ``connect_timeout=``, ``command_timeout=``, ``seed=``, ``fingerprint=``), as before.
    ``record=DIR`` keeps the runner's raw output, the board fingerprint and the model's
    sha256 there; ``replay=DIR`` rebuilds the result from such a folder (or, in a folder
    of recordings, the one made with this model) and refuses one made with another model.
    ``accuracy`` (an :class:`AccuracySettings` or a dict of its
    fields: ``dataset``, ``fp32_model``, ``int8_model``, ``samples``, ``min_agreement``)
    adds FP32-host / INT8-host / INT8-board accuracy per condition.  With ``placement``
    (a ``PlacementReport``, or anything with ``npu_ops``/``cpu_ops``) the board's
    delegate coverage and op profile are cross-checked against the prediction.
    """
    if options is None:
        options = TimingOptions(**option_kwargs)
    elif option_kwargs:
        raise BoardError("give timing options either as `options=TimingOptions(...)` or as "
                         f"keywords, not both. Got both (keywords {sorted(option_kwargs)}).")
    chosen = [name for name, value in (("board", board), ("host", host), ("local", local),
                                       ("replay", replay)) if value]
    if len(chosen) != 1:
        raise BoardError("give exactly one of `board` (a name in boards.yaml), `host` (an SSH "
                         "destination), `local=True` or `replay` (a recording folder). "
                         f"Got {chosen or 'none'} instead.")
    if local and options.runner == "benchmark_model":
        raise BoardError("the benchmark_model runner needs a board (`board` or `host`); "
                         "use runner='python' with local=True.")
    if record is not None and (local or replay):
        raise BoardError("`record` keeps a board session: use it with `board` or `host` (not with "
                         f"{'local=True' if local else 'replay'}).")
    if isinstance(accuracy, dict):
        accuracy = AccuracySettings(**accuracy)
    path = Path(model)
    if not path.is_file():
        raise ModelError(f"model file {str(path)!r} does not exist. Next: pass a .tflite file.")
    if replay is not None:
        result = _replay(path, Path(replay), accuracy)
    else:
        result = _measure(path, _open_session(board=board, boards_file=boards_file, host=host,
                                              ssh_config=ssh_config, known_hosts=known_hosts,
                                              local=local, options=options),
                          options, accuracy=accuracy, record=record)
    return _with_placement(result, placement)


def _open_session(*, board: str | None, boards_file: Any, host: str | None, ssh_config: Any,
                  known_hosts: Any, local: bool, options: TimingOptions) -> _Session:
    """Step 1: resolve where to time (inventory, destination or this machine) and check the
    delegate exists there."""
    from . import deploy as dep
    from .inventory import DEFAULT_PYTHON, DEFAULT_WORKDIR, TYPICAL_DELEGATE, get_board
    from .ssh import LocalTransport, SSHTransport

    delegate, python = options.delegate, options.python
    if local:
        import sys
        session = _Session(LocalTransport(command_timeout=options.command_timeout), HOST_CPU,
                           local=True, python=python or sys.executable, workdir="",
                           delegate=delegate, benchmark_model=None)
    else:
        board_name = target = None
        workdir, binary = options.workdir, options.benchmark_model
        if board:
            b = get_board(board, boards_file)
            board_name, target, destination = b.name, b.target, b.destination
            delegate = delegate if delegate is not None else b.delegate
            python = python or b.python
            workdir = workdir or b.workdir
            binary = binary or b.benchmark_model
            ssh_config = ssh_config or b.ssh_config
            known_hosts = known_hosts or b.known_hosts
        else:
            destination = str(host)
        transport = SSHTransport(destination, ssh_config=ssh_config, known_hosts=known_hosts,
                                 connect_timeout=options.connect_timeout,
                                 command_timeout=options.command_timeout,
                                 label=f"board {board_name} ({destination})" if board_name
                                 else destination)
        where = (f"board {board_name} ({target})" if board_name else f"{destination} over SSH")
        where += (f", delegate {os.path.basename(delegate)}" if delegate
                  else ", CPU only (no delegate)")
        session = _Session(transport, where, local=False, python=python or DEFAULT_PYTHON,
                           workdir=workdir or DEFAULT_WORKDIR, delegate=delegate,
                           benchmark_model=binary, board=board_name, target=target,
                           destination=destination)
    if session.delegate:
        hint = "check `delegate:` in boards.yaml or --delegate"
        if session.target in TYPICAL_DELEGATE:
            hint += f" (usually {TYPICAL_DELEGATE[session.target]} on {session.target})"
        if session.local:
            if not os.path.isfile(session.delegate):
                raise BoardError(f"delegate library {session.delegate!r} does not exist on this "
                                 f"machine. Next: {hint}.")
        else:
            dep.check_remote_file(session.transport, session.delegate, what="delegate library",
                                  hint=hint)
    return session


def _measure(path: Path, session: _Session, options: TimingOptions, *,
             accuracy: AccuracySettings | None, record: Any) -> TimingResult:
    """Steps 2-5: deploy, run, fingerprint, (accuracy), summarise; record when asked."""
    from . import deploy as dep
    from . import runners as run_mod
    from .accuracy import compare, prepare_inputs

    digest = sha256_file(path)
    transport = session.transport
    if session.local:
        model_path = str(path.resolve())
        runner_path = str(Path(dep.__file__).with_name("remote_runner.py"))
    else:
        model_path = dep.deploy_model(transport, path, session.workdir).remote_path
        needs_runner = options.runner == "python" or accuracy is not None
        runner_path = dep.deploy_runner(transport, session.workdir).remote_path if needs_runner else ""

    delegate_options = dict(options.delegate_options)
    binary = None
    if options.runner == "python":
        raw = run_mod.run_python(transport, python=session.python, runner_path=runner_path,
                                 model_path=model_path, runs=options.runs, warmup=options.warmup,
                                 delegate=session.delegate, threads=options.threads,
                                 delegate_options=delegate_options, seed=options.seed)
    else:
        binary = session.benchmark_model or run_mod.find_benchmark_model(transport)
        dep.check_remote_file(transport, binary, what="benchmark_model", executable=True,
                              hint="set `benchmark_model:` in boards.yaml, or use the python runner")
        raw = run_mod.run_benchmark_model(transport, binary=binary, model_path=model_path,
                                          runs=options.runs, warmup=options.warmup,
                                          delegate=session.delegate, threads=options.threads)

    fp = None
    if options.fingerprint and not session.local:
        fp = dep.board_fingerprint(transport,
                                   python=session.python if options.runner == "python" else None,
                                   delegate=session.delegate, benchmark_model=binary)
    elif options.fingerprint:
        fp = dep.board_fingerprint(_LocalShell(), python=None, delegate=session.delegate)
        fp = dataclasses.replace(fp, tflite_runtime=raw.runtime)

    board_acc, acc_stdout, acc_params = None, None, {}
    if accuracy is not None:
        int8 = accuracy.int8_model or str(path)
        npz, host_data = prepare_inputs(accuracy, int8)
        if session.local:
            import tempfile
            with tempfile.NamedTemporaryFile(suffix=".npz", delete=False) as handle:
                handle.write(npz)
            inputs = handle.name
        else:
            inputs = dep.push_bytes(transport, npz, session.workdir, "inputs.npz",
                                    kind="inputs").remote_path
        try:
            payload, acc_stdout = run_mod.run_accuracy(
                transport, python=session.python, runner_path=runner_path, model_path=model_path,
                inputs_path=inputs, delegate=session.delegate, threads=options.threads,
                delegate_options=delegate_options)
        finally:
            if session.local:
                os.unlink(inputs)
        label = _session_label(session, raw)
        board_acc = compare(host_data, payload, where=label, settings=accuracy)
        acc_params = _accuracy_params(accuracy, npz, host_data)

    result = _build(path, digest, raw, runner="local" if session.local else options.runner,
                    where=session.where, on_board=not session.local, warmup=options.warmup,
                    asked_runs=options.runs, board=session.board, target=session.target,
                    destination=session.destination, delegate=session.delegate, fingerprint=fp,
                    seed=options.seed,
                    measured_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                    accuracy=board_acc)
    if record is not None:
        from .record import Recording, save_recording
        save_recording(record, Recording(
            model_name=path.name, model_sha256=digest, runner=options.runner,
            recorded_at=result.measured_at, board=session.board or session.destination,
            target=session.target, delegate=session.delegate, runs=options.runs,
            warmup=options.warmup, returncode=raw.returncode, fingerprint=fp,
            accuracy_params=acc_params),
            stdout=raw.stdout, stderr=raw.stderr, accuracy_stdout=acc_stdout)
        result = dataclasses.replace(result, notes=result.notes + (
            f"recorded to {Path(record).name}/ (runner output, fingerprint, model sha256)",))
    return result


def _session_label(session: _Session, raw: Any) -> str:
    if session.local:
        return HOST_CPU
    name = session.board or session.destination or "?"
    ignored = raw.log is not None and raw.log.ignored_delegate
    if session.delegate and not ignored:
        return latency_label(LatencySource.BOARD, board=name,
                             delegate=os.path.basename(session.delegate))
    return latency_label(LatencySource.BOARD_CPU, board=name)


def _accuracy_params(settings: AccuracySettings, npz: bytes, host_data: dict) -> dict[str, Any]:
    from .._io import sha256_bytes
    return {"dataset": str(host_data.get("dataset", "")), "samples": settings.samples,
            "seed": settings.seed, "split": settings.split, "inputs_sha256": sha256_bytes(npz)}


def _build(path: Path, digest: str, raw: Any, *, runner: str, where: str, on_board: bool,
           warmup: int, asked_runs: int | None, board: str | None, target: str | None,
           destination: str | None, delegate: str | None, fingerprint: Any, seed: int,
           measured_at: str, accuracy: BoardAccuracy | None = None,
           replayed_from: str | None = None, replayed_at: str = "") -> TimingResult:
    """Step 5: statistics, coverage and notes from what the runner measured."""
    from .stats import still_falling, summarize_latencies

    notes: list[str] = []
    if not on_board:
        notes.append("measured on this machine's CPU, not on an NPU: use it to compare models, "
                     "never as a board latency")
    falling = coverage = None
    if raw.log is None:
        latency = summarize_latencies(raw.runs_us, seed=seed)
        falling = still_falling(raw.runs_us)
        if falling:
            warnings.warn(f"{where}: {falling}", WorkbenchWarning, stacklevel=3)
        if latency.n < 100:
            notes.append(f"p99 from {latency.n} runs is close to the maximum; its bootstrap CI "
                         "is wide. Use runs >= 1000 for a tail you can quote")
        if delegate:
            notes.append("the python runner cannot see which ops the delegate took; use "
                         "runner='benchmark_model' for the delegate's node counts")
    else:
        latency = _latency_from_log(raw.log)
        total_ops = _count_ops(path) if raw.log.op_profile else None
        coverage = coverage_from_log(raw.log, total_ops=total_ops)
        notes.append("benchmark_model reports aggregates only: p90/p99 are not stated by the log "
                     "and are left empty; use the python runner for percentiles")
        if asked_runs is not None and latency.n != asked_runs:
            notes.append(f"benchmark_model ran {latency.n} regular runs (asked {asked_runs}; it "
                         "also runs for at least --min_secs)")
        notes.extend(f"benchmark log: {w}" for w in raw.log.log_warnings)
        if raw.log.ignored_delegate:
            warnings.warn(f"{where}: benchmark_model did not consume --external_delegate_path="
                          f"{raw.log.ignored_delegate} and no delegate line follows: this is a CPU "
                          "latency, labelled CPU only", WorkbenchWarning, stacklevel=3)
    if delegate and coverage is not None and coverage.coverage == "none":
        warnings.warn(f"{where}: the delegate was applied but runs none of the graph: this "
                      "latency is a CPU latency", WorkbenchWarning, stacklevel=3)
    if replayed_from:
        notes.append(f"replayed from the recording {replayed_from}/ made on {measured_at}: "
                     "no board was used now")
    return TimingResult(
        model=str(path), model_sha256=digest, runner=runner, where=where, on_board=on_board,
        n_warmup=warmup, n_runs=latency.n, latency_us=latency,
        cold_start_us=raw.cold_start_us, first_inference_us=raw.first_inference_us,
        warmup_us=raw.warmup_us, runs_us=raw.runs_us, board=board, target=target,
        destination=destination, delegate=delegate, runtime=raw.runtime or (
            fingerprint.tflite_runtime if fingerprint is not None else None),
        still_falling=falling, coverage=coverage, fingerprint=fingerprint, log=raw.log,
        notes=tuple(notes), measured_at=measured_at, replayed_from=replayed_from,
        replayed_at=replayed_at, accuracy=accuracy)


def _replay(path: Path, folder: Path, accuracy: AccuracySettings | None) -> TimingResult:
    """Rebuild a TimingResult from a recording folder (same parsing as a live run)."""
    from . import runners as run_mod
    from .accuracy import compare, prepare_inputs
    from .record import check_same_model, find_recording, load_recording

    folder = find_recording(folder, model_sha256=sha256_file(path))
    rec, stdout, acc_stdout = load_recording(folder)
    digest = check_same_model(rec, path, folder)
    label = f"recording {folder.name} of {rec.board or 'a board'}"
    if rec.runner == "python":
        raw = run_mod.raw_from_python_output(stdout, returncode=rec.returncode, label=label)
    else:
        raw = run_mod.raw_from_benchmark_output(stdout, returncode=rec.returncode, label=label)
    where = f"board {rec.board}" + (f" ({rec.target})" if rec.target else "")
    where += (f", delegate {os.path.basename(rec.delegate)}" if rec.delegate
              else ", CPU only (no delegate)")
    board_acc = None
    if accuracy is not None:
        if acc_stdout is None:
            raise BoardError(f"the recording in {folder} holds no accuracy outputs. Next: record "
                             "it again with accuracy, or replay without it.")
        npz, host_data = prepare_inputs(accuracy, accuracy.int8_model or str(path))
        params = _accuracy_params(accuracy, npz, host_data)
        if params["inputs_sha256"] != rec.accuracy_params.get("inputs_sha256"):
            raise BoardError(f"the recording in {folder} ran a different accuracy sample "
                             f"({rec.accuracy_params}) than asked now ({params}). Next: use the "
                             "recorded dataset, samples and seed.")
        payload = run_mod.accuracy_from_output(acc_stdout, label=label)
        board_acc = compare(host_data, payload, where=f"replayed {where}", settings=accuracy)
    return _build(path, digest, raw, runner=rec.runner, where=where, on_board=True,
                  warmup=rec.warmup or 0, asked_runs=rec.runs, board=rec.board, target=rec.target,
                  destination=None, delegate=rec.delegate, fingerprint=rec.fingerprint, seed=0,
                  measured_at=rec.recorded_at, accuracy=board_acc, replayed_from=folder.name,
                  replayed_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))


def _with_placement(result: TimingResult, placement: Any) -> TimingResult:
    """Step 6: cross-check the board's coverage and op profile with the prediction."""
    if placement is None:
        return result
    check = cross_check(result, placement)
    mismatches = placement_mismatches(result.log, placement) if result.log is not None else ()
    return dataclasses.replace(result, notes=result.notes + (check.detail,),
                               placement_mismatches=mismatches)


def placement_mismatches(log: BenchmarkLog, placement: Any) -> tuple[PlacementMismatch, ...]:
    """Op types the board ran elsewhere than ``placement`` predicted, from the op profile.

    Rows of the regular-runs op profile that are not an NPU delegate kernel are ops the
    CPU ran; per op type, more CPU rows than the prediction's CPU ops means ops predicted
    on the NPU ran on the CPU, fewer means ops predicted on the CPU ran inside a delegate
    kernel.  Without an op profile (no ``--enable_op_profiling``) nothing can be named:
    returns ``()``.  ``placement`` needs ``ops`` with ``type`` and ``placement``.
    """
    cpu_rows = log.cpu_op_rows
    ops = getattr(placement, "ops", None)
    if cpu_rows is None or not ops:
        return ()
    from collections import Counter

    from ..vocab import ALL_NPU_CUSTOM_OPS
    from .parse import is_npu_kernel
    measured_cpu = Counter(r.node_type for r in cpu_rows)
    predicted_cpu = Counter(o.type for o in ops if o.placement == "CPU")
    predicted_npu = Counter(o.type for o in ops if o.placement == "NPU")
    has_kernel = any(is_npu_kernel(r.node_type) for r in log.op_profile)
    out = []
    for op_type in sorted(set(measured_cpu) | set(predicted_cpu)):
        if op_type in ALL_NPU_CUSTOM_OPS:
            continue
        diff = measured_cpu[op_type] - predicted_cpu[op_type]
        if diff > 0 and predicted_npu[op_type]:
            out.append(PlacementMismatch(op_type, "NPU", "CPU", count=min(diff, predicted_npu[op_type]),
                                         evidence=f"{measured_cpu[op_type]} {op_type} row(s) in the "
                                                  "op profile outside the delegate kernel"))
        elif diff < 0 and has_kernel:
            out.append(PlacementMismatch(op_type, "CPU", "NPU", count=-diff,
                                         evidence=f"{measured_cpu[op_type]} of {predicted_cpu[op_type]} "
                                                  f"predicted-CPU {op_type} op(s) in the op profile; "
                                                  "the rest ran inside the delegate kernel"))
    if out:
        warnings.warn("the board placed ops otherwise than the prediction: "
                      + "; ".join(m.summary() for m in out), WorkbenchWarning, stacklevel=3)
    return tuple(out)


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


def _count_ops(path: Path) -> int | None:
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
