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
applied) raises :class:`~workbench.errors.BenchmarkParseError` naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from .._results import Result
from ..errors import BenchmarkParseError

# --- line prefixes ------------------------------------------------------------------------
_LOGCAT = re.compile(r"^\d\d-\d\d \d\d:\d\d:\d\d\.\d+\s+\d+\s+\d+\s+[VDIWEF]\s+[^:]*?\s*:\s?")
_LEVEL = re.compile(r"^(INFO|WARNING|ERROR|VERBOSE|DEBUG): ")

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf"

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
    (re.compile(r"Unconsumed cmdline flags: ?(?P<what>.*)"), "benchmark_model rejected flags",
     "this benchmark_model build does not know these flags; drop them or use a newer build"),
    (re.compile(r"Disallowed CPU fallback detected"), "part of the graph fell back to the CPU",
     "--require_full_delegation=true was set; remove it to time a partially delegated graph"),
)

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
    first: Optional[float] = None
    curr: Optional[float] = None
    min: Optional[float] = None
    max: Optional[float] = None
    avg: Optional[float] = None
    std: Optional[float] = None
    p5: Optional[float] = None
    median: Optional[float] = None
    p95: Optional[float] = None
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
    kernels: Optional[int] = None
    nodes_delegated: Optional[int] = None
    nodes_total: Optional[int] = None
    line: str = ""


@dataclass(frozen=True)
class OpRow:
    """A row of an op-profiling "Run Order" table (times in ms)."""

    node_type: str
    first_ms: Optional[float]
    avg_ms: Optional[float]
    percent: Optional[float]
    times_called: Optional[int]
    name: str
    start_ms: Optional[float] = None


@dataclass(frozen=True)
class OpTypeSummary:
    """A row of a "Summary by node type" table."""

    node_type: str
    count: int
    avg_ms: Optional[float]
    avg_percent: Optional[float] = None
    times_called: Optional[int] = None


@dataclass(frozen=True)
class BenchmarkLog(Result):
    """The numbers a ``benchmark_model`` log states (``None`` where it states nothing).

    Times are microseconds except op-profiling rows (milliseconds, as printed).
    ``op_summary`` and ``op_profile`` come from the *regular runs* section, never
    from the initialization section (kept apart in ``init_op_summary``).
    """

    init_us: Optional[float] = None
    first_inference_us: Optional[float] = None
    warmup_avg_us: Optional[float] = None
    inference_avg_us: Optional[float] = None
    warmup: Optional[RunStats] = None
    inference: Optional[RunStats] = None
    initialized_session_ms: Optional[float] = None
    model_size_mb: Optional[float] = None
    memory_init_mb: Optional[float] = None
    memory_overall_mb: Optional[float] = None
    memory_kind: Optional[str] = None        # "peak" (older builds) or "delta" (newer)
    peak_memory_mb: Optional[float] = None
    graph: Optional[str] = None
    external_delegate_path: Optional[str] = None
    delegates: tuple[DelegateInfo, ...] = ()
    op_summary: tuple[OpTypeSummary, ...] = ()
    op_profile: tuple[OpRow, ...] = ()
    init_op_summary: tuple[OpTypeSummary, ...] = ()
    nodes_executed: Optional[int] = None
    messages: tuple[str, ...] = ()            # WARNING:/ERROR: lines that did not end the run

    # --- derived ------------------------------------------------------------------------
    @property
    def npu_share(self) -> Optional[float]:
        """Share of ops an NPU delegate took, only where a line states node counts.

        XNNPACK (a CPU delegate) never counts as NPU.
        """
        for d in self.delegates:
            if d.nodes_total and not is_cpu_delegate(d.name):
                return d.nodes_delegated / d.nodes_total
        return None

    @property
    def cpu_op_rows(self) -> Optional[tuple[OpRow, ...]]:
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
    return "delegate" in low or low in ("ethos-u", "neutrongraph", "neutronop", "vsi-npu")


def clean_line(raw: str) -> tuple[str, Optional[str]]:
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


def _num(text: str) -> float:
    return float(text)


def _parse_stat(text: str) -> RunStats:
    values = dict(re.findall(rf"(\w+)=({_NUM})", text))
    kwargs: dict = {}
    for key in ("first", "curr", "min", "max", "avg", "std", "p5", "median", "p95"):
        if key in values:
            kwargs[key] = _num(values[key])
    count = int(values["count"]) if "count" in values else 0
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


def _opt_float(cells: dict[str, str], key: str) -> Optional[float]:
    value = cells.get(key)
    if value is None:
        return None
    value = value.rstrip("%")
    try:
        return float(value)
    except ValueError:
        return None


def _opt_int(cells: dict[str, str], key: str) -> Optional[int]:
    value = _opt_float(cells, key)
    return None if value is None else int(value)


def parse_benchmark_output(text: str, *, source: str = "benchmark_model output") -> BenchmarkLog:
    """Parse the stdout+stderr of ``benchmark_model`` into a :class:`BenchmarkLog`.

    ``source`` names the log in error messages (a file name or a board).
    Raises :class:`BenchmarkParseError` when the log reports a failure or holds
    nothing a benchmark run prints.
    """
    if not isinstance(text, str):
        raise BenchmarkParseError(f"`text` must be a str. Got {type(text).__name__} instead.")
    fields: dict = {}
    delegates: list[DelegateInfo] = []
    messages: list[str] = []
    op_summary: list[OpTypeSummary] = []
    init_summary: list[OpTypeSummary] = []
    op_profile: list[OpRow] = []
    phase = 0               # 1 = warm-up, 2 = regular runs (from "Running benchmark for ...")
    section = None          # None | "init" | "regular" (op profiling)
    table = None            # "Run Order" | "Summary by node type" | other
    header: list[str] | None = None
    recognised = False

    for number, raw in enumerate(text.splitlines(), start=1):
        line, level = clean_line(raw)
        if not line:
            table, header = None, None
            continue
        for pattern, what, todo in _FAILURES:
            m = pattern.search(line)
            if m:
                detail = m.groupdict().get("what")
                raise BenchmarkParseError(
                    f"{source} reports a failure at line {number}: {what}"
                    + (f" ({detail.strip()})" if detail else "") + f": {line!r}. Next: {todo}.")
        # delegate lines (may appear anywhere, also with foreign text before them)
        m = _DELEGATE_APPLIED.search(line)
        if m:
            recognised = True
            if m.group("complete"):
                delegates.append(DelegateInfo(m.group("name"), "complete", 1, line=line))
            else:
                delegates.append(DelegateInfo(m.group("name"), "partial", int(m.group("kernels")),
                                              line=line))
            continue
        m = _DELEGATE_NOT_USED.search(line)
        if m:
            recognised = True
            delegates.append(DelegateInfo(m.group("name"), "none", 0, line=line))
            continue
        m = _NODES_DELEGATED.search(line) or _REPLACING.search(line)
        if m:
            recognised = True
            n, total = int(m.group("n")), int(m.group("m"))
            k = int(m.group("k")) if m.group("k") is not None else None
            coverage = "none" if n == 0 else ("complete" if n == total else "partial")
            delegates.append(DelegateInfo(m.group("name"), coverage, k, n, total, line=line))
            continue
        m = _TIMINGS.match(line)
        if m:
            recognised = True
            fields.update(_parse_timings(m.group("rest")))
            continue
        m = _RUNNING.match(line)
        if m:
            recognised = True
            phase += 1
            continue
        if _STAT.match(line) and section is None:
            recognised = True
            stats = _parse_stat(line)
            # benchmark_model prints the warm-up stat line before the regular one
            if phase == 1 or (phase == 0 and "warmup" not in fields):
                fields["warmup"] = stats
            else:
                fields["inference"] = stats
            continue
        m = _SESSION.match(line)
        if m:
            recognised = True
            fields["initialized_session_ms"] = _num(m.group("ms"))
            continue
        m = _MODEL_SIZE.match(line)
        if m:
            fields["model_size_mb"] = _num(m.group("mb"))
            continue
        m = _MEM.match(line)
        if m:
            fields["memory_init_mb"] = _num(m.group("init"))
            fields["memory_overall_mb"] = _num(m.group("overall"))
            fields["memory_kind"] = "peak" if line.startswith("Peak") else "delta"
            continue
        m = _PEAK.match(line)
        if m:
            fields["peak_memory_mb"] = _num(m.group("mb"))
            continue
        m = _ECHO.match(line)
        if m:
            key = "graph" if m.group("key") == "Graph" else "external_delegate_path"
            fields[key] = m.group("value")
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
        if level in ("WARNING", "ERROR"):
            messages.append(f"{level}: {line}")

    if not recognised and not fields:
        raise BenchmarkParseError(
            f"{source} holds no benchmark_model output (no timings, stat lines or delegate lines "
            "were found). Next: check that the file is the tool's stdout+stderr, captured with 2>&1.")
    return BenchmarkLog(delegates=tuple(delegates), op_summary=tuple(op_summary),
                        init_op_summary=tuple(init_summary), op_profile=tuple(op_profile),
                        messages=tuple(messages), **fields)


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
