"""One line of ``benchmark_model`` output: its prefixes stripped (logcat, indent, ``INFO:``), the patterns
of the lines the tool prints (failures, delegates, timings, stat lines, memory, flag echoes), their
numbers read as finite floats, and the rows of its op-profiling tables."""

from __future__ import annotations

import math
import re

from .benchmark_log import DelegateInfo, OpRow, OpTypeSummary, RunStats, is_cpu_delegate

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
