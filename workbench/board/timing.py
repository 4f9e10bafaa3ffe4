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
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._results import Result
from ..errors import BoardError, ModelError, WorkbenchWarning
from ..vocab import LatencySource, latency_label
from .accuracy import AccuracySettings, BoardAccuracy
from .coverage import CoverageCheck, DelegateCoverage, PlacementMismatch, coverage_from_log, placement_mismatches
from .deploy import BoardFingerprint
from .measure import _measure, _replay
from .parse import BenchmarkLog
from .session import HOST_CPU, TimingOptions, _open_session
from .stats import LatencyStats

#: the public names of timing, wherever they are defined (the result and the verb are here; the coverage types
#: in ``coverage``, the options and the session in ``session``, the measuring steps in ``measure``)
__all__ = ["HOST_CPU", "CoverageCheck", "DelegateCoverage", "PlacementMismatch", "TimingOptions", "TimingResult",
           "coverage_from_log", "cross_check", "placement_mismatches", "time_on_board"]


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
        result = TimingResult(**_replay(path, Path(replay), accuracy))
    else:
        session = _open_session(board=board, boards_file=boards_file, host=host, ssh_config=ssh_config,
                                known_hosts=known_hosts, local=local, options=options)
        result = TimingResult(**_measure(path, session, options, accuracy=accuracy, record=record))
    return _with_placement(result, placement)


def _with_placement(result: TimingResult, placement: Any) -> TimingResult:
    """Step 6: cross-check the board's coverage and op profile with the prediction."""
    if placement is None:
        return result
    check = cross_check(result, placement)
    mismatches = placement_mismatches(result.log, placement) if result.log is not None else ()
    return dataclasses.replace(result, notes=result.notes + (check.detail,),
                               placement_mismatches=mismatches)
