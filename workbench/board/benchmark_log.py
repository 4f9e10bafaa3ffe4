"""What a ``benchmark_model`` log states, as types: :class:`BenchmarkLog` with its stat lines
(:class:`RunStats`), delegate lines (:class:`DelegateInfo`) and op-profiling rows (:class:`OpRow`,
:class:`OpTypeSummary`); and which delegates and kernels are the NPU's.  Parsing is
:mod:`workbench.board.parse`."""

from __future__ import annotations

from dataclasses import dataclass

from .._results import Result
from ..vocab import ALL_NPU_CUSTOM_OPS


@dataclass(frozen=True)
class RunStats:
    """One ``count=... first=... curr=... min=... max=... avg=... std=...`` line, as stated."""

    count: int
    first: float | None = None
    curr: float | None = None
    min: float | None = None
    max: float | None = None
    avg: float | None = None
    std: float | None = None
    p5: float | None = None
    median: float | None = None
    p95: float | None = None
    all_same: bool = False


@dataclass(frozen=True)
class DelegateInfo:
    """What the log says about one delegate.

    ``coverage`` is ``"complete"``, ``"partial"`` or ``"none"``; ``kernels`` is the
    number of delegate kernels (partitions), **not** of ops.  ``nodes_delegated`` and
    ``nodes_total`` are filled only from lines that state node counts
    (``N nodes delegated out of M``, ``Replacing N out of M node(s)``).
    """

    name: str
    coverage: str
    kernels: int | None = None
    nodes_delegated: int | None = None
    nodes_total: int | None = None
    line: str = ""


@dataclass(frozen=True)
class OpRow:
    """A row of an op-profiling "Run Order" table (times in ms)."""

    node_type: str
    first_ms: float | None
    avg_ms: float | None
    percent: float | None
    times_called: int | None
    name: str
    start_ms: float | None = None


@dataclass(frozen=True)
class OpTypeSummary:
    """A row of a "Summary by node type" table."""

    node_type: str
    count: int
    avg_ms: float | None
    avg_percent: float | None = None
    times_called: int | None = None


@dataclass(frozen=True)
class BenchmarkLog(Result):
    """The numbers a ``benchmark_model`` log states (``None`` where it states nothing).

    Times are microseconds except op-profiling rows (milliseconds, as printed).
    ``op_summary`` and ``op_profile`` come from the *regular runs* section, never
    from the initialization section (kept apart in ``init_op_summary``).
    """

    init_us: float | None = None
    first_inference_us: float | None = None
    warmup_avg_us: float | None = None
    inference_avg_us: float | None = None
    warmup: RunStats | None = None
    inference: RunStats | None = None
    initialized_session_ms: float | None = None
    model_size_mb: float | None = None
    memory_init_mb: float | None = None
    memory_overall_mb: float | None = None
    memory_kind: str | None = None        # "peak" (older builds) or "delta" (newer)
    peak_memory_mb: float | None = None
    graph: str | None = None
    external_delegate_path: str | None = None
    delegates: tuple[DelegateInfo, ...] = ()
    op_summary: tuple[OpTypeSummary, ...] = ()
    op_profile: tuple[OpRow, ...] = ()
    init_op_summary: tuple[OpTypeSummary, ...] = ()
    nodes_executed: int | None = None
    messages: tuple[str, ...] = ()            # WARNING:/ERROR: lines that did not end the run
    unconsumed_flags: tuple[str, ...] = ()    # flags this benchmark_model build did not know
    ignored_delegate: str | None = None    # delegate path among them, no delegate line after it
    log_warnings: tuple[str, ...] = ()        # what the parser wants a reader to know
    starts_mid_run: bool = False              # a tail: the log's beginning is not in the text

    # --- derived ------------------------------------------------------------------------
    @property
    def npu_share(self) -> float | None:
        """Share of ops an NPU delegate took, only where a line states node counts.

        XNNPACK (a CPU delegate) never counts as NPU.
        """
        for d in self.delegates:
            if d.nodes_total and d.nodes_delegated is not None and not is_cpu_delegate(d.name):
                return d.nodes_delegated / d.nodes_total
        return None

    @property
    def cpu_op_rows(self) -> tuple[OpRow, ...] | None:
        """Op-profiling rows that are not an NPU delegate kernel (ops the CPU ran), if profiled."""
        if not self.op_profile:
            return None
        return tuple(r for r in self.op_profile if not is_npu_kernel(r.node_type))

    def summary(self) -> str:
        parts = []
        if self.inference_avg_us is not None:
            parts.append(f"inference avg {self.inference_avg_us:.6g} us")
        if self.inference is not None:
            parts.append(f"over {self.inference.count} runs")
        if self.first_inference_us is not None:
            parts.append(f"first inference {self.first_inference_us:.6g} us")
        if self.init_us is not None:
            parts.append(f"init {self.init_us:.6g} us")
        for d in self.delegates:
            detail = d.coverage
            if d.nodes_total is not None:
                detail += f", {d.nodes_delegated}/{d.nodes_total} nodes"
            elif d.kernels is not None:
                detail += f", {d.kernels} kernel(s)"
            parts.append(f"{d.name} delegate {detail}")
        if self.starts_mid_run:
            parts.append("log starts mid-run")
        if self.unconsumed_flags:
            parts.append("unconsumed flags " + " ".join(self.unconsumed_flags))
        if self.ignored_delegate:
            parts.append(f"delegate {self.ignored_delegate} NOT applied (CPU only)")
        return "benchmark_model log: " + ("; ".join(parts) if parts else "no timings stated")

    def _repr_html_(self) -> str:
        from .. import display
        rows = [(k, getattr(self, k)) for k in (
            "init_us", "first_inference_us", "warmup_avg_us", "inference_avg_us",
            "model_size_mb", "memory_init_mb", "memory_overall_mb", "peak_memory_mb")
            if getattr(self, k) is not None]
        out = [display.heading("BenchmarkLog"), display.paragraph(self.summary()),
               display.table(("field", "as stated"), rows)]
        if self.delegates:
            out.append(display.table(
                ("delegate", "coverage", "kernels", "nodes delegated", "nodes total"),
                [(d.name, d.coverage, _dash(d.kernels), _dash(d.nodes_delegated),
                  _dash(d.nodes_total)) for d in self.delegates], caption="delegates"))
        if self.op_summary:
            out.append(display.table(("node type", "count", "avg ms"),
                                     [(o.node_type, o.count, _dash(o.avg_ms)) for o in self.op_summary],
                                     caption="summary by node type (regular runs)"))
        for text in self.log_warnings:
            out.append(display.paragraph("warning: " + text))
        return "".join(out)


def _dash(value: object) -> object:
    return "-" if value is None else value


def is_cpu_delegate(name: str) -> bool:
    """XNNPACK runs on the CPU: applying it says nothing about the NPU."""
    return "xnnpack" in name.lower()


def is_npu_kernel(node_type: str) -> bool:
    """An op-profiling row that is an NPU delegate's kernel (``Vx Delegate``, ``ethos-u``...)."""
    low = node_type.lower()
    if is_cpu_delegate(low):
        return False
    return "delegate" in low or low in {op.lower() for op in ALL_NPU_CUSTOM_OPS}
