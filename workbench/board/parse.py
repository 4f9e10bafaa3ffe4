"""Read TFLite ``benchmark_model`` output into numbers, without guessing.

``parse_benchmark_output(text)`` accepts every log variant seen on real boards
(see ``docs/board.md`` and ``tests/board/fixtures/``): bare lines or lines with
``INFO:``/``WARNING:``/``ERROR:``/``VERBOSE:`` prefixes, Android logcat prefixes,
indented copies, numbers in C++ scientific notation, ``count=N curr=X`` stat
lines, ``p5/median/p95`` suffixes, op-profiling tables with and without the
``[start]`` column, both memory-line generations, delegate lines, and foreign
lines (driver counters, kernel ``dmesg``, TIM-VX warnings) interleaved.

A field the text does not state is ``None`` (absent), never zero.  A log that
reports a failure (model not found, delegate not loadable, delegate not
applied, ``Benchmarking failed.``) raises
:class:`~workbench.errors.BenchmarkParseError` naming the line, whatever else it
contains; so does a figure that is not a finite number (``Inference (avg): nan``).

Leniency where the board is right: ``Unconsumed cmdline flags: ...`` is a
warning (benchmark_model goes on and runs), kept in ``unconsumed_flags`` and
``log_warnings``; when the unconsumed flag was ``--external_delegate_path`` and no
delegate line follows, ``ignored_delegate`` names the path (the run was CPU only).
A log that starts mid-run (a tail cut from a console capture) is parsed for
what it states; its stat lines are assigned to warm-up/regular runs by the
summary line they agree with, else by position (``starts_mid_run`` is True).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .._results import Result
from ..errors import BenchmarkParseError
from ..vocab import ALL_NPU_CUSTOM_OPS

# --- line prefixes ------------------------------------------------------------------------
_LOGCAT = re.compile(r"^\d\d-\d\d \d\d:\d\d:\d\d\.\d+\s+\d+\s+\d+\s+[VDIWEF]\s+[^:]*?\s*:\s?")
_LEVEL = re.compile(r"^(INFO|WARNING|ERROR|VERBOSE|DEBUG): ")

_NUM = r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[nN][aA][nN]|[iI][nN][fF](?:inity)?)"

# --- failures (strings from benchmark_model / external_delegate sources) -------------------
_FAILURES = (
    (re.compile(r"Failed to mmap model (?P<what>.*)"), "the model file could not be read",
     "check the --graph path on the board (the workbench uploads models into its work folder)"),
    (re.compile(r"Could not open '(?P<what>.*)'"), "the model file could not be opened",
     "check the --graph path on the board"),
    (re.compile(r"Unable to load external delegate from : ?(?P<what>.*)"),
     "the external delegate library could not be loaded",
     "check `delegate:` in boards.yaml (e.g. /usr/lib/libvx_delegate.so) and that the library "
     "matches the board's TFLite version"),
    (re.compile(r"Failed to apply (?P<what>\S+) delegate"), "the delegate could not be applied",
     "look at the delegate's messages above this line; the model may use ops the delegate rejects"),
    (re.compile(r"Please specify the name of your TF Lite input file with --graph"),
     "no model was given", "pass --graph=MODEL"),
    (re.compile(r"Disallowed CPU fallback detected"), "part of the graph fell back to the CPU",
     "--require_full_delegation=true was set; remove it to time a partially delegated graph"),
    # benchmark_main.cc: printed when Run() returns an error, whatever was printed before it
    (re.compile(r"^Benchmarking failed\.?"), "benchmark_model reports that benchmarking failed",
     "look at the lines above it (delegate, model or input errors); no figure of this log is a "
     "measurement"),
)

#: benchmark_model's warning for flags this build does not know; the run goes on (real i.MX logs)
_UNCONSUMED = re.compile(r"Unconsumed cmdline flags: ?(?P<flags>.*)")
#: lines benchmark_model prints before the first run (flag echo, model load, delegate set-up)
_BEGINNING = re.compile(r"^(?:STARTING!|Log parameter values verbosely|Graph: \[|Loaded model |"
                        r"The input model file size|Initialized session in|Going to apply |"
                        r"EXTERNAL delegate created)|Explicitly applied |delegate is explicitly "
                        r"applied|nodes delegated out of|Replacing \d+ out of")
_DELEGATE_PATH_FLAG = re.compile(r"^--?external_delegate_path=(?P<path>.*)$")

_DELEGATE_APPLIED = re.compile(
    r"Explicitly applied (?P<name>\S+) delegate, and the model graph will be "
    r"(?:(?P<complete>completely executed by the delegate)|"
    r"partially executed by the delegate w/ (?P<kernels>\d+) delegate kernels)")
_DELEGATE_NOT_USED = re.compile(
    r"Though (?P<name>\S+) delegate is explicitly applied, the model graph will not be executed")
_NODES_DELEGATED = re.compile(
    r"(?P<name>[A-Za-z_][\w]*?)(?: delegate)?: (?P<n>\d+) nodes delegated out of (?P<m>\d+) nodes"
    r"(?: with (?P<k>\d+) partitions)?")
_REPLACING = re.compile(
    r"Replacing (?P<n>\d+) out of (?P<m>\d+) node\(s\) with delegate \((?P<name>[^)]*)\) node"
    r"(?:, yielding (?P<k>\d+) partitions)?")

_TIMINGS = re.compile(r"^(?P<avg>Average )?[Ii]nference timings in us: (?P<rest>.*)$")
_STAT = re.compile(r"^count=\d+")
_RUNNING = re.compile(r"^Running benchmark for at least (\d+) iterations")
_SESSION = re.compile(rf"^Initialized session in (?P<ms>{_NUM})\s*ms")
_MODEL_SIZE = re.compile(rf"^The input model file size \(MB\): (?P<mb>{_NUM})")
_MEM = re.compile(rf"^(?:Peak memory footprint|Memory footprint delta from the start of the tool) "
                  rf"\(MB\): init=(?P<init>{_NUM}) overall=(?P<overall>{_NUM})")
_PEAK = re.compile(rf"^Overall peak memory footprint \(MB\) via periodic monitoring: (?P<mb>{_NUM})")
_ECHO = re.compile(r"^(?P<key>Graph|External delegate path): \[(?P<value>.*)\]$")
_NODES_EXECUTED = re.compile(r"^Number of nodes executed: (\d+)")
_TABLE = re.compile(r"^=+ (?P<title>Run Order|Top by Computation Time|Summary by node type"
                    r"|Top by Memory Use) =+$")


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


def clean_line(raw: str) -> tuple[str, str | None]:
    """Strip logcat/indent/level prefixes; return (content, level or None)."""
    line = raw.rstrip("\r\n")
    stripped = line.strip()
    m = _LOGCAT.match(stripped)
    if m:
        stripped = stripped[m.end():].strip()
    level = None
    m = _LEVEL.match(stripped)
    if m:
        level = m.group(1)
        stripped = stripped[m.end():]
    return stripped.strip(), level


class _NotFinite(ValueError):
    """A figure of the log is nan or inf (caught and reported with the line)."""


def _num(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text)
    return value


def _parse_stat(text: str) -> RunStats:
    values = dict(re.findall(rf"(\w+)=({_NUM})", text))
    kwargs: dict = {}
    for key in ("first", "curr", "min", "max", "avg", "std", "p5", "median", "p95"):
        if key in values:
            kwargs[key] = _num(values[key])
    count = int(_num(values["count"])) if "count" in values else 0
    return RunStats(count=count, all_same="(all same)" in text, **kwargs)


def _parse_timings(rest: str) -> dict[str, float]:
    out: dict[str, float] = {}
    keys = {"init": "init_us", "first inference": "first_inference_us",
            "warmup (avg)": "warmup_avg_us", "warmup": "warmup_avg_us",
            "inference (avg)": "inference_avg_us", "inference": "inference_avg_us"}
    for part in rest.split(","):
        if ":" not in part:
            continue
        key, _, value = part.partition(":")
        key = key.strip().lower()
        value = value.strip()
        if key in keys and re.fullmatch(_NUM, value):
            out[keys[key]] = _num(value)
    return out


def _split_row(line: str) -> list[str]:
    cells = re.split(r"\t" if "\t" in line else r" {2,}", line)
    return [c.strip() for c in cells if c.strip() != ""]


def _opt_float(cells: dict[str, str], key: str) -> float | None:
    value = cells.get(key)
    if value is None:
        return None
    value = value.rstrip("%")
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None   # a profile cell, not a timing


def _opt_int(cells: dict[str, str], key: str) -> int | None:
    value = _opt_float(cells, key)
    return None if value is None else int(value)


def parse_benchmark_output(text: str, *, source: str = "benchmark_model output") -> BenchmarkLog:
    """Parse the stdout+stderr of ``benchmark_model`` into a :class:`BenchmarkLog`.

    ``source`` names the log in error messages (a file name or a board).
    Raises :class:`BenchmarkParseError` when the log reports a failure (anywhere in
    it), states a figure that is not a finite number, or holds nothing a benchmark
    run prints.
    """
    if not isinstance(text, str):
        raise BenchmarkParseError(f"`text` must be a str. Got {type(text).__name__} instead.")
    fields: dict = {}
    delegates: list[DelegateInfo] = []
    messages: list[str] = []
    op_summary: list[OpTypeSummary] = []
    init_summary: list[OpTypeSummary] = []
    op_profile: list[OpRow] = []
    stats: list[tuple[int, RunStats]] = []     # (phase markers seen before it, stat line)
    unconsumed: list[str] = []
    delegate_flag: str | None = None
    delegate_line_after_flag = False
    started = False        # the log's beginning is in the text (STARTING!, the flag echo)
    phase = 0               # "Running benchmark for ..." lines seen
    section = None          # None | "init" | "regular" (op profiling)
    table = None            # "Run Order" | "Summary by node type" | other
    header: list[str] | None = None
    recognised = False

    lines = text.splitlines()
    # a failure anywhere makes the whole log a failure, whatever else it states
    for number, raw in enumerate(lines, start=1):
        line, _ = clean_line(raw)
        for pattern, what, todo in _FAILURES:
            m = pattern.search(line)
            if m:
                detail = m.groupdict().get("what")
                raise BenchmarkParseError(
                    f"{source} reports a failure at line {number}: {what}"
                    + (f" ({detail.strip()})" if detail else "") + f": {line!r}. Next: {todo}.")

    for number, raw in enumerate(lines, start=1):
        line, level = clean_line(raw)
        if not line:
            table, header = None, None
            continue
        try:
            if _parse_line(line, level, fields, delegates, messages, stats, phase, section):
                recognised = True
        except _NotFinite as exc:
            raise BenchmarkParseError(
                f"{source} states a figure that is not a finite number ({exc}) at line {number}: "
                f"{line!r}. A NaN or infinite timing is not a measurement. Next: re-run the "
                "benchmark; check the board's clock and the tool's build.") from None
        if fields.pop("_delegate_seen", False) and delegate_flag is not None:
            delegate_line_after_flag = True
        if fields.pop("_phase", False):
            phase += 1
            continue
        if _BEGINNING.search(line):
            started = True       # printed before any run: the log covers the start of the runs
        if line.startswith("STARTING!"):
            continue
        m = _UNCONSUMED.search(line)
        if m:
            recognised = True
            # flags are joined with spaces; a value may hold spaces: split before each "-flag"
            flags = [f for f in re.split(r"\s+(?=--?[A-Za-z_])", m.group("flags").strip()) if f]
            unconsumed.extend(flags)
            for flag in flags:
                fm = _DELEGATE_PATH_FLAG.match(flag)
                if fm:
                    delegate_flag, delegate_line_after_flag = fm.group("path"), False
            continue
        if line.startswith("Profiling Info for Benchmark Initialization"):
            recognised, section, table, header = True, "init", None, None
            continue
        if line.startswith("Operator-wise Profiling Info for Regular Benchmark Runs"):
            recognised, section, table, header = True, "regular", None, None
            continue
        m = _TABLE.match(line)
        if m:
            table, header = m.group("title"), None
            continue
        m = _NODES_EXECUTED.match(line)
        if m:
            if section == "regular":
                fields["nodes_executed"] = int(m.group(1))
            table, header = None, None
            continue
        if section and table:
            if line.startswith("[") and "node type]" in line.lower():
                header = [c.strip("[]").lower() for c in _split_row(line)]
                continue
            if header:
                cells = _split_row(line)
                if len(cells) == len(header):
                    row = dict(zip(header, cells))
                    _add_row(section, table, row, op_summary, init_summary, op_profile)
                    continue
                table, header = None, None

    if not recognised and not fields:
        raise BenchmarkParseError(
            f"{source} holds no benchmark_model output (no timings, stat lines or delegate lines "
            "were found). Next: check that the file is the tool's stdout+stderr, captured with 2>&1.")
    _check_durations(fields, stats, source, rows=(*op_summary, *init_summary, *op_profile))
    notes: list[str] = []
    mid_run = not started
    _assign_stats(stats, fields, mid_run=mid_run, notes=notes)
    if mid_run and (stats or "inference_avg_us" in fields):
        notes.append("the log starts mid-run (no line printed before the first run): only what "
                     "the tail states is reported")
    ignored = None
    if unconsumed:
        notes.append("benchmark_model did not know these flags and ignored them: "
                     + " ".join(unconsumed))
        if delegate_flag is not None and not delegate_line_after_flag:
            ignored = delegate_flag
            notes.append(f"the delegate flag --external_delegate_path={delegate_flag} was not "
                         "consumed and no delegate line follows: the delegate was NOT applied and "
                         "this run is CPU only. Next: use a benchmark_model built with the external "
                         "delegate provider (NXP BSP: /usr/bin/tensorflow-lite-*/examples/)")
    return BenchmarkLog(delegates=tuple(delegates), op_summary=tuple(op_summary),
                        init_op_summary=tuple(init_summary), op_profile=tuple(op_profile),
                        messages=tuple(messages), unconsumed_flags=tuple(unconsumed),
                        ignored_delegate=ignored, log_warnings=tuple(notes),
                        starts_mid_run=mid_run, **fields)


def _parse_line(line: str, level: str | None, fields: dict, delegates: list, messages: list,
                stats: list, phase: int, section: str | None) -> bool:
    """One line outside the op-profiling tables; returns True when it is benchmark output.

    Sets ``fields['_phase']`` for a "Running benchmark" line and ``fields['_delegate_seen']``
    for a delegate line (popped by the caller).
    """
    m = _DELEGATE_APPLIED.search(line)
    if m:
        if m.group("complete"):
            delegates.append(DelegateInfo(m.group("name"), "complete", 1, line=line))
        else:
            delegates.append(DelegateInfo(m.group("name"), "partial", int(m.group("kernels")),
                                          line=line))
        fields["_delegate_seen"] = not is_cpu_delegate(m.group("name"))
        return True
    m = _DELEGATE_NOT_USED.search(line)
    if m:
        delegates.append(DelegateInfo(m.group("name"), "none", 0, line=line))
        fields["_delegate_seen"] = not is_cpu_delegate(m.group("name"))
        return True
    m = _NODES_DELEGATED.search(line) or _REPLACING.search(line)
    if m:
        n, total = int(m.group("n")), int(m.group("m"))
        k = int(m.group("k")) if m.group("k") is not None else None
        coverage = "none" if n == 0 else ("complete" if n == total else "partial")
        delegates.append(DelegateInfo(m.group("name"), coverage, k, n, total, line=line))
        fields["_delegate_seen"] = not is_cpu_delegate(m.group("name"))
        return True
    m = _TIMINGS.match(line)
    if m:
        fields.update(_parse_timings(m.group("rest")))
        return True
    if _RUNNING.match(line):
        fields["_phase"] = True
        return True
    if _STAT.match(line) and section is None:
        stats.append((phase, _parse_stat(line)))
        return True
    m = _SESSION.match(line)
    if m:
        fields["initialized_session_ms"] = _num(m.group("ms"))
        return True
    m = _MODEL_SIZE.match(line)
    if m:
        fields["model_size_mb"] = _num(m.group("mb"))
        return False
    m = _MEM.match(line)
    if m:
        fields["memory_init_mb"] = _num(m.group("init"))
        fields["memory_overall_mb"] = _num(m.group("overall"))
        fields["memory_kind"] = "peak" if line.startswith("Peak") else "delta"
        return False
    m = _PEAK.match(line)
    if m:
        fields["peak_memory_mb"] = _num(m.group("mb"))
        return False
    m = _ECHO.match(line)
    if m:
        key = "graph" if m.group("key") == "Graph" else "external_delegate_path"
        fields[key] = m.group("value")
        return False
    if level in ("WARNING", "ERROR") and not _UNCONSUMED.search(line):
        messages.append(f"{level}: {line}")
    return False


_DURATIONS = ("init_us", "first_inference_us", "warmup_avg_us", "inference_avg_us", "initialized_session_ms",
              "model_size_mb", "peak_memory_mb")


def _check_durations(fields: dict, stats: list[tuple[int, RunStats]], source: str, *, rows: tuple = ()) -> None:
    """A time (or a size) below zero is not a measurement: refused, naming the figure."""
    found = [(k, fields[k]) for k in _DURATIONS if fields.get(k) is not None and fields[k] < 0]
    for _, st in stats:
        if st.count < 0:
            found.append(("count", st.count))
        found += [(k, getattr(st, k)) for k in ("first", "curr", "min", "max", "avg", "std", "p5", "median", "p95")
                  if getattr(st, k) is not None and getattr(st, k) < 0]
    for row in rows:
        found += [(f"{row.node_type} {k}", getattr(row, k, None)) for k in ("first_ms", "avg_ms", "start_ms")
                  if (getattr(row, k, None) or 0) < 0]
    if found:
        key, value = found[0]
        raise BenchmarkParseError(
            f"{source} states a negative time or size ({key} = {value:g}); a duration below zero is not a "
            "measurement. Next: re-run the benchmark; check the board's clock and that the log was not edited.")


def _close(a: float | None, b: float | None) -> bool:
    """Equal as printed: the summary line rounds to 6 significant digits."""
    return a is not None and b is not None and abs(a - b) <= 1e-5 * max(abs(a), abs(b), 1.0)


def _assign_stats(stats: list[tuple[int, RunStats]], fields: dict, *, mid_run: bool,
                  notes: list[str]) -> None:
    """Which top-level stat line is the warm-up and which the regular runs.

    A complete log has two "Running benchmark" markers (warm-up, then regular runs).
    A tail may have lost the first marker, so the summary line decides when it states
    ``Inference (avg)``: the last stat line whose ``avg`` (or, all same, ``curr``) equals
    it is the regular runs, the one before it the warm-up.  Without a summary, a tail's
    last stat line is taken as the regular runs (said in ``log_warnings``).
    """
    if not stats:
        return
    target = fields.get("inference_avg_us")
    if target is not None:
        for i in range(len(stats) - 1, -1, -1):
            st = stats[i][1]
            stated = st.avg if st.avg is not None else st.curr
            if _close(stated, target):
                fields["inference"] = st
                if i > 0:
                    fields["warmup"] = stats[i - 1][1]
                return
    if not mid_run:
        for phase, st in stats:
            if phase <= 1 and "warmup" not in fields and "inference" not in fields:
                fields["warmup"] = st
            else:
                fields["inference"] = st
        return
    fields["inference"] = stats[-1][1]
    if len(stats) > 1:
        fields["warmup"] = stats[-2][1]
    notes.append("the tail states no summary line to match its stat lines against: the last "
                 "count= line is taken as the regular runs")


def _add_row(section: str, table: str, row: dict[str, str], op_summary: list,
             init_summary: list, op_profile: list) -> None:
    if table == "Summary by node type":
        entry = OpTypeSummary(node_type=row.get("node type", ""), count=_opt_int(row, "count") or 0,
                              avg_ms=_opt_float(row, "avg ms"),
                              avg_percent=_opt_float(row, "avg %"),
                              times_called=_opt_int(row, "times called"))
        (op_summary if section == "regular" else init_summary).append(entry)
    elif table == "Run Order" and section == "regular":
        op_profile.append(OpRow(node_type=row.get("node type", ""), first_ms=_opt_float(row, "first"),
                                avg_ms=_opt_float(row, "avg ms"), percent=_opt_float(row, "%"),
                                times_called=_opt_int(row, "times called"),
                                name=row.get("name", ""), start_ms=_opt_float(row, "start")))


def read_benchmark_log(path: str) -> BenchmarkLog:
    """Parse a saved log file (UTF-8, undecodable bytes replaced)."""
    import os
    if not os.path.isfile(path):
        raise BenchmarkParseError(f"benchmark log {path!r} does not exist. Next: pass the file "
                                  "you saved benchmark_model's output to (2>&1).")
    with open(path, encoding="utf-8", errors="replace") as handle:
        return parse_benchmark_output(handle.read(), source=os.fspath(path))
