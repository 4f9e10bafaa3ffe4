"""Run Arm Vela for the i.MX 93 and read back what it decided.

``run_vela(model)`` compiles a .tflite with the imx93 configuration
(:data:`workbench.targets.imx93.VELA_CONFIG`) in a subprocess, caches the whole
output folder (stdout, per-layer CSV, summary CSV, ``<name>_vela.tflite``) under
``cache_dir("vela")`` keyed by the model's sha256, the Vela version and the
configuration, and parses it into a :class:`VelaRun`.  Parsers key on CSV header
names, not column positions, because Vela's columns change between versions.
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .._io import (atomic_path, atomic_write_text, cache_dir, check_folder_seal, damaged_cache_entry, seal_folder,
                   sha256_file, stable_hash)
from .._results import Result
from ..errors import PlacementError

STDOUT_FILE = "vela_stdout.txt"

_WARNING = re.compile(r"^Warning \(([^)]*)\) operator: (\S+), ofm: '(.*)'\s*$")
_OPLIST = re.compile(r"^\s+(CPU|NPU): (\S+) = (.*) \((?:inputs \[.*?\], )?outputs \[[^\]]*\]\)\s*$")
_COUNT = re.compile(r"^\s*(CPU|NPU) operators = (\d+) \(([\d.]+)%\)")
_MEM = re.compile(r"^Total (.+?) used\s+([\d.]+) KiB")
_TIME = re.compile(r"^Batch Inference time\s+([\d.]+) ms")


@dataclass(frozen=True)
class VelaWarning:
    """One op Vela refused for the NPU, with its reason lines."""

    op_type: str
    name: str
    kind: str          # "supported operators", "semantic", ...
    reason: str


@dataclass(frozen=True)
class VelaLayer:
    """One row of Vela's per-layer performance table."""

    original_operator: str
    nng_operator: str
    target: str
    name: str
    op_cycles: int
    mac_count: int
    staging_usage: int


@dataclass(frozen=True)
class VelaRun(Result):
    """What one Vela compilation produced (all paths inside the cache folder)."""

    vela_version: str
    command: tuple[str, ...]
    output_dir: str
    vela_model: str                      # <name>_vela.tflite, the file the board loads
    cpu_ops: tuple[tuple[str, str], ...]  # Vela's own CPU list: (vela op type, name)
    npu_ops: tuple[tuple[str, str], ...]
    cpu_operator_count: int              # Vela-internal op counts (after its graph rewriting)
    npu_operator_count: int
    warnings: tuple[VelaWarning, ...]
    layers: tuple[VelaLayer, ...]
    sram_used_kib: float | None
    dram_used_kib: float | None
    total_cycles: int | None
    nn_macs: int | None
    estimated_latency_ms: float | None
    inferences_per_second: float | None
    summary_csv: dict[str, str]
    cached: bool = False

    def summary(self) -> str:
        lat = "n/a" if self.estimated_latency_ms is None else f"{self.estimated_latency_ms:.3f} ms"
        return (f"Vela {self.vela_version}: {len(self.cpu_ops)} CPU op(s), "
                f"{self.npu_operator_count} NPU operator(s); SRAM {self.sram_used_kib} KiB, "
                f"DRAM {self.dram_used_kib} KiB; estimated inference time {lat} (Vela estimate)")


def vela_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("ethos-u-vela")
    except PackageNotFoundError as exc:
        raise PlacementError("Vela is not installed (package ethos-u-vela); install it with "
                             "`pip install ethos-u-vela` to place ops for imx93.") from exc


def vela_command(model: str | Path, output_dir: str | Path, config: dict[str, str]) -> list[str]:
    """The Vela command line for ``model`` (the ``vela`` entry point next to this Python)."""
    exe = Path(sys.executable).with_name("vela")
    head = [str(exe)] if exe.exists() else [sys.executable, "-m", "ethosu.vela"]
    return head + [
        str(model),
        "--accelerator-config", config["accelerator_config"],
        "--config", config["config"],
        "--system-config", config["system_config"],
        "--memory-mode", config["memory_mode"],
        "--show-cpu-operations", "--verbose-performance",
        "--output-dir", str(output_dir),
    ]


def run_vela(model: str | Path, *, config: dict[str, str] | None = None, use_cache: bool = True,
             timeout: float = 600.0) -> VelaRun:
    """Compile ``model`` with Vela (or reuse the cached compilation) and parse the result."""
    from ..targets.imx93 import VELA_CONFIG
    config = dict(config or VELA_CONFIG)
    model = Path(model)
    version = vela_version()
    key = stable_hash({"model": sha256_file(model), "vela": version, "config": config})[:24]
    folder = cache_dir("vela") / key
    cached = use_cache and folder.is_dir()
    if cached and (damage := check_folder_seal(folder)) is not None:  # content checked, not presence
        damaged_cache_entry(folder, damage)
        cached = False
    if not cached:
        with atomic_path(folder, replace_folder=True) as tmp:
            tmp.mkdir()
            cmd = vela_command(model, tmp, config)
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
            except subprocess.TimeoutExpired as exc:
                raise PlacementError(f"{model}: Vela did not finish within {timeout:.0f} s "
                                     f"({' '.join(cmd)}).") from exc
            if proc.returncode != 0:
                tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-12:])
                raise PlacementError(
                    f"{model}: Vela {version} failed with exit code {proc.returncode} for imx93.\n"
                    f"command: {' '.join(cmd)}\n{tail}\nCheck that the model is a fully INT8 "
                    "TFLite file with static shapes.")
            atomic_write_text(tmp / STDOUT_FILE, proc.stdout)
            atomic_write_text(tmp / "command.txt", " ".join(cmd) + "\n")
            seal_folder(tmp)  # last: an entry without a matching seal is never trusted
    return parse_vela_output(folder, version=version, cached=cached)


def parse_vela_output(folder: str | Path, *, version: str = "", cached: bool = False) -> VelaRun:
    """Parse a Vela output folder (stdout text, per-layer CSV, summary CSV, _vela.tflite)."""
    folder = Path(folder)
    stdout = (folder / STDOUT_FILE).read_text(encoding="utf-8")
    command = tuple((folder / "command.txt").read_text().split()) if (folder / "command.txt").exists() else ()
    models = sorted(folder.glob("*_vela.tflite"))
    if not models:
        raise PlacementError(f"{folder}: Vela wrote no *_vela.tflite; see {folder / STDOUT_FILE}.")
    parsed = parse_vela_stdout(stdout)
    layers: tuple[VelaLayer, ...] = ()
    per_layer = sorted(folder.glob("*_per-layer.csv"))
    if per_layer:
        layers = parse_per_layer_csv(per_layer[0].read_text(encoding="utf-8"))
    summary: dict[str, str] = {}
    summaries = sorted(folder.glob("*_summary_*.csv"))
    if summaries:
        rows = list(csv.DictReader(summaries[0].read_text(encoding="utf-8").splitlines()))
        summary = dict(rows[0]) if rows else {}

    def num(key: str, cast=float):
        try:
            return cast(float(summary[key]))
        except (KeyError, ValueError, TypeError):
            return None

    latency = parsed["latency_ms"]
    if latency is None and num("inference_time") is not None:
        latency = num("inference_time") * 1000.0
    sram = parsed["memory"].get("SRAM", num("sram_memory_used"))
    dram = parsed["memory"].get("DRAM", num("dram_memory_used"))
    return VelaRun(
        vela_version=version, command=command, output_dir=str(folder), vela_model=str(models[0]),
        cpu_ops=parsed["cpu_ops"], npu_ops=parsed["npu_ops"],
        cpu_operator_count=parsed["counts"].get("CPU", len(parsed["cpu_ops"])),
        npu_operator_count=parsed["counts"].get("NPU", len(parsed["npu_ops"])),
        warnings=parsed["warnings"], layers=layers, sram_used_kib=sram, dram_used_kib=dram,
        total_cycles=num("cycles_total", int), nn_macs=num("nn_macs", int),
        estimated_latency_ms=latency, inferences_per_second=num("inferences_per_second"),
        summary_csv=summary, cached=cached)


def parse_vela_stdout(text: str) -> dict:
    """Warnings (op, reason), CPU/NPU op lists, operator counts, memory use and time from stdout."""
    warnings: list[VelaWarning] = []
    cpu: list[tuple[str, str]] = []
    npu: list[tuple[str, str]] = []
    counts: dict[str, int] = {}
    memory: dict[str, float] = {}
    latency = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _WARNING.match(line)
        if m:
            reason_lines = []
            j = i + 1
            while j < len(lines) and lines[j].strip() and not _WARNING.match(lines[j]):
                reason_lines.append(lines[j].strip())
                j += 1
            reason = " ".join(reason_lines)
            if reason.startswith("Reason: "):
                reason = reason[len("Reason: "):]
            warnings.append(VelaWarning(op_type=m.group(2), name=m.group(3), kind=m.group(1),
                                        reason=reason))
            i = j
            continue
        if (m := _OPLIST.match(line)):
            (cpu if m.group(1) == "CPU" else npu).append((m.group(2), m.group(3)))
        elif (m := _COUNT.match(line)):
            counts[m.group(1)] = int(m.group(2))
        elif (m := _MEM.match(line)):
            memory[m.group(1)] = float(m.group(2))
        elif (m := _TIME.match(line)):
            latency = float(m.group(1))
        i += 1
    return {"warnings": tuple(warnings), "cpu_ops": tuple(cpu), "npu_ops": tuple(npu),
            "counts": counts, "memory": memory, "latency_ms": latency}


def _header_value(row: dict[str, str], *names: str, default: str = "") -> str:
    for n in names:
        if n in row and row[n] is not None:
            return row[n]
    return default


def parse_per_layer_csv(text: str) -> tuple[VelaLayer, ...]:
    """Rows of ``<name>_per-layer.csv`` (Vela 3.x and 5.x headers)."""
    out = []
    for row in csv.DictReader(text.splitlines()):
        def integer(*names: str) -> int:
            try:
                return int(float(_header_value(row, *names, default="0") or 0))
            except ValueError:
                return 0
        out.append(VelaLayer(
            original_operator=_header_value(row, "Original Operator", "TFLite_operator"),
            nng_operator=_header_value(row, "NNG Operator"),
            target=_header_value(row, "Target", default="NPU"),
            name=_header_value(row, "Name"),
            op_cycles=integer("Op Cycles"),
            mac_count=integer("MAC Count"),
            staging_usage=integer("Staging Usage", "SRAM Usage")))
    return tuple(out)
