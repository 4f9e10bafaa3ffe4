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

import re

from ..errors import BenchmarkParseError
from .benchmark_log import BenchmarkLog, DelegateInfo, OpRow, OpTypeSummary, RunStats, is_cpu_delegate, is_npu_kernel
from .log_lines import (
    _BEGINNING,
    _DELEGATE_PATH_FLAG,
    _FAILURES,
    _NODES_EXECUTED,
    _TABLE,
    _UNCONSUMED,
    _add_row,
    _NotFinite,
    _parse_line,
    _split_row,
    clean_line,
)

#: the names of parse, wherever they are defined (the types in ``benchmark_log``, one line in ``log_lines``)
__all__ = ["BenchmarkLog", "DelegateInfo", "OpRow", "OpTypeSummary", "RunStats", "clean_line", "is_cpu_delegate",
           "is_npu_kernel", "parse_benchmark_output", "read_benchmark_log"]


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


def read_benchmark_log(path: str) -> BenchmarkLog:
    """Parse a saved log file (UTF-8, undecodable bytes replaced)."""
    import os
    if not os.path.isfile(path):
        raise BenchmarkParseError(f"benchmark log {path!r} does not exist. Next: pass the file "
                                  "you saved benchmark_model's output to (2>&1).")
    with open(path, encoding="utf-8", errors="replace") as handle:
        return parse_benchmark_output(handle.read(), source=os.fspath(path))
