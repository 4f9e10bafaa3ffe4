"""Run Arm Vela for the i.MX 93 and read back what it decided.

``run_vela(model, version=...)`` compiles a .tflite with the imx93 configuration
(:data:`workbench.targets.imx93.VELA_CONFIG`) in a subprocess: the Vela installed
beside the workbench (``version=None`` or its own version), or an older one from its
pinned tool environment (``toolenv.ensure("vela-3.10.0")``).  The whole output folder
(stdout, per-layer CSV, summary CSV, ``<name>_vela.tflite``) is cached under
``cache_dir("vela")`` keyed by the model's sha256, the Vela version, the configuration
and the .ini file's sha256, and parsed into a :class:`VelaRun`.  Parsers key on CSV
header names, not column positions, and read both the 3.x and the 5.x stdout forms.
The latency is the summary CSV's ``inference_time`` (seconds, full precision); the
stdout line is rounded to 0.01 ms and used only when the CSV is missing.
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._io import (
    atomic_path,
    atomic_write_text,
    cache_dir,
    check_folder_seal,
    damaged_cache_entry,
    seal_folder,
    sha256_file,
    stable_hash,
)
from .._results import Result
from ..errors import PlacementError

STDOUT_FILE = "vela_stdout.txt"

_WARNING = re.compile(r"^Warning \(([^)]*)\) operator: (\S+), ofm: '(.*)'\s*$")
# Vela 3.x: "Warning: <OP> '<name>' is not supported on the NPU. Placing on CPU instead" then " - reason"
_WARNING_3X = re.compile(r"^Warning: (\S+) '(.*)' is not supported on the NPU\. Placing on CPU instead\s*$")
_SEMANTIC_3X = re.compile(r"^Warning: Unsupported TensorFlow Lite semantics for (\S+) '(.*)'\. "
                          r"Placing on CPU instead\s*$")
_CPU_ONLY_3X = re.compile(r"^Info: (\S+) '(.*)' is a CPU only op\s*$")
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
    """The version of the Vela installed beside the workbench (the newest this machine has)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("ethos-u-vela")
    except PackageNotFoundError as exc:
        raise PlacementError("Vela is not installed (package ethos-u-vela); install it with "
                             "`pip install ethos-u-vela` to place ops for imx93.") from exc


def vela_ini(config: str = "Arm/vela.ini") -> Path:
    """The .ini file ``config`` names: inside the installed Vela's ``config_files``, or a path.

    Every Vela version gets this same file (by absolute path), so the system configuration
    and memory mode are the same numbers whichever compiler runs; Vela 3.10.0's own
    ``Arm/vela.ini`` has no ``Dedicated_Sram_384KB``.
    """
    path = Path(config)
    if path.is_file():
        return path.resolve()
    try:
        import ethosu
    except ImportError as exc:
        raise PlacementError(f"the Vela configuration {config!r} is looked up in the installed Vela "
                             "(package ethos-u-vela), which is missing; install it.") from exc
    found = Path(list(ethosu.__path__)[0]) / "config_files" / config
    if not found.is_file():
        raise PlacementError(f"Vela configuration file {config!r} not found (looked in {found.parent}); "
                             "give an existing .ini path.")
    return found


def tool_env_name(version: str) -> str:
    """The :mod:`workbench.toolenv` name of Vela ``version`` (``vela-3.10.0``)."""
    return f"vela-{version}"


def vela_command(model: str | Path, output_dir: str | Path, config: dict[str, str], *,
                 executable: str | None = None, show_cpu_operations: bool = True) -> list[str]:
    """The Vela command line for ``model`` (default: the ``vela`` entry point next to this Python).

    ``show_cpu_operations=False`` for Vela 3.x: its ``--show-cpu-operations`` crashes on an op
    with an omitted optional input (``format_tens_list`` reads ``None.shape``); the CPU list
    is then read from the compiled ``_vela.tflite`` (every op that is not ``ethos-u``).
    """
    if executable is None:
        exe = Path(sys.executable).with_name("vela")
        head = [str(exe)] if exe.exists() else [sys.executable, "-m", "ethosu.vela"]
    else:
        head = [executable]
    return head + [
        str(model),
        "--accelerator-config", config["accelerator_config"],
        "--config", config["config"],
        "--system-config", config["system_config"],
        "--memory-mode", config["memory_mode"],
        *(["--show-cpu-operations"] if show_cpu_operations else []), "--verbose-performance",
        "--output-dir", str(output_dir),
    ]


def shareable_command(command: Sequence[str]) -> tuple[str, ...]:
    """``command`` without this machine's paths, as records and reports keep it.

    The executable becomes its name (``vela``), the Vela configuration inside the installed
    package ``ethosu/config_files/<name>``, the output folder ``<output-dir>``, any other
    absolute path (the model) its file name.  The cache key holds the ini's content hash, so
    nothing is lost for reuse."""
    command = list(command)
    if len(command) >= 3 and command[1:3] == ["-m", "ethosu.vela"]:
        command = ["vela", *command[3:]]
    out: list[str] = []
    for i, arg in enumerate(command):
        previous = command[i - 1] if i else ""
        if i == 0:
            out.append(Path(arg).name)
        elif previous == "--output-dir":
            out.append("<output-dir>")
        elif previous != "--config" and arg.startswith("/"):
            out.append(Path(arg).name)
        elif previous == "--config" and arg.startswith("/"):
            _, sep, rest = arg.partition("/config_files/")
            out.append(f"ethosu/config_files/{rest}" if sep else Path(arg).name)
        else:
            out.append(arg)
    return tuple(out)


def run_vela(model: str | Path, *, config: dict[str, str] | None = None, use_cache: bool = True,
             timeout: float = 600.0, version: str | None = None) -> VelaRun:
    """Compile ``model`` with Vela (or reuse the cached compilation) and parse the result.

    ``version`` picks the compiler: None (or the installed version) runs the Vela installed
    beside the workbench; another version runs from its pinned tool environment, created on
    first need (:func:`workbench.toolenv.ensure`; raises :class:`PlacementError` naming
    ``workbench tools install`` when it cannot be created).
    """
    from ..targets.imx93 import VELA_CONFIG
    config = dict(config or VELA_CONFIG)
    ini = vela_ini(config["config"])
    config["config"] = str(ini)
    model = Path(model)
    installed = vela_version()
    env = None
    if version is None or version == installed:
        version = installed
    else:
        env = _tool_env(version)
        version = env.versions.get("ethos-u-vela", version)
    # the ini by content, not by where this machine's venv keeps it: the same compile, the same key
    key = stable_hash({"model": sha256_file(model), "vela": version, "config": {**config, "config": ini.name},
                       "ini": sha256_file(ini)})[:24]
    folder = cache_dir("vela") / key
    cached = use_cache and folder.is_dir()
    if cached and (damage := check_folder_seal(folder)) is not None:  # content checked, not presence
        damaged_cache_entry(folder, damage)
        cached = False
    if not cached:
        with atomic_path(folder, replace_folder=True) as tmp:
            tmp.mkdir()
            cmd = vela_command(model, tmp, config, executable=None if env is None else "vela",
                               show_cpu_operations=not version.startswith("3."))
            try:
                if env is None:
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
                else:
                    proc = env.run(cmd, timeout=timeout)
                    cmd = [str(env.bin_dir / "vela")] + cmd[1:]
            except subprocess.TimeoutExpired as exc:
                raise PlacementError(f"{model}: Vela did not finish within {timeout:.0f} s "
                                     f"({' '.join(cmd)}).") from exc
            if proc.returncode != 0:
                tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-12:])
                raise VelaCrash(
                    f"{model}: Vela {version} failed with exit code {proc.returncode} for imx93.\n"
                    f"command: {' '.join(cmd)}\n{tail}\nCheck that the model is a fully INT8 "
                    "TFLite file with static shapes.", version=version, returncode=proc.returncode, tail=tail)
            atomic_write_text(tmp / STDOUT_FILE, proc.stdout)
            atomic_write_text(tmp / "command.txt", " ".join(cmd) + "\n")
            seal_folder(tmp)  # last: an entry without a matching seal is never trusted
    return parse_vela_output(folder, version=version, cached=cached)


class VelaCrash(PlacementError):
    """Vela exited with an error (an assertion inside the compiler, an unsupported model): ``version``,
    ``returncode`` and the last lines it printed (``tail``)."""

    def __init__(self, message: str, *, version: str, returncode: int, tail: str):
        super().__init__(message)
        self.version, self.returncode, self.tail = version, returncode, tail

    @property
    def reason(self) -> str:
        """The compiler's own last words: the exception line of its traceback (``AssertionError ...``)."""
        lines = [ln.strip() for ln in self.tail.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.split(":")[0].endswith(("Error", "Exception")) or "Error:" in ln]
        frames = list(dict.fromkeys(ln.rsplit(" in ", 1)[-1] for ln in lines
                                    if ln.startswith("File ") and " in " in ln))
        text = errors[-1] if errors else (lines[-1] if lines else f"exit code {self.returncode}")
        return f"{text}{' (in ' + ' > '.join(frames[-3:]) + ')' if frames else ''}"[:300]


def _tool_env(version: str):
    from .. import toolenv
    from ..errors import WorkbenchError
    name = tool_env_name(version)
    if name not in toolenv.TOOLS:
        known = sorted(n.removeprefix("vela-") for n in toolenv.TOOLS if n.startswith("vela-"))
        raise PlacementError(f"Vela {version} has no tool environment; known: "
                             f"{', '.join(known + [vela_version() + ' (installed)'])}.")
    try:
        return toolenv.ensure(name)
    except WorkbenchError as exc:
        raise PlacementError(f"Vela {version} is needed but its tool environment could not be created "
                             f"({exc}). Run `workbench tools install {name}` with the package index "
                             "reachable, or place with the installed Vela (`--vela-versions "
                             f"{vela_version()}`).") from exc


def parse_vela_output(folder: str | Path, *, version: str = "", cached: bool = False) -> VelaRun:
    """Parse a Vela output folder (stdout text, per-layer CSV, summary CSV, _vela.tflite)."""
    folder = Path(folder)
    stdout = (folder / STDOUT_FILE).read_text(encoding="utf-8")
    command = tuple((folder / "command.txt").read_text().split()) if (folder / "command.txt").exists() else ()
    command = shareable_command(command)
    models = sorted(folder.glob("*_vela.tflite"))
    if not models:
        raise PlacementError(f"{folder}: Vela wrote no *_vela.tflite; see {folder / STDOUT_FILE}.")
    parsed = parse_vela_stdout(stdout)
    if "--show-cpu-operations" not in command and not parsed["cpu_ops"] and not parsed["npu_ops"]:
        from ..models.tflite_graph import read_tflite
        compiled = read_tflite(models[0])
        parsed["cpu_ops"] = tuple((op.type, op.name) for op in compiled.ops if op.type != "ethos-u")
        parsed["npu_ops"] = tuple((op.type, op.name) for op in compiled.ops if op.type == "ethos-u")
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

    latency = parsed["latency_ms"]          # stdout: rounded to 0.01 ms
    if num("inference_time") is not None:    # the summary CSV: seconds, full precision
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
        m3 = _WARNING_3X.match(line) or _SEMANTIC_3X.match(line)
        if m3:
            reason_lines = []
            j = i + 1
            while j < len(lines) and (lines[j].startswith(" ") or lines[j].startswith("\t")) \
                    and lines[j].strip():
                reason_lines.append(lines[j].strip().removeprefix("- "))
                j += 1
            kind = "semantic" if line.startswith("Warning: Unsupported TensorFlow Lite semantics") \
                else "supported operators"
            warnings.append(VelaWarning(op_type=m3.group(1), name=m3.group(2), kind=kind,
                                        reason=" ".join(reason_lines) or line.strip()))
            i = j
            continue
        if (m3 := _CPU_ONLY_3X.match(line)):
            warnings.append(VelaWarning(op_type=m3.group(1), name=m3.group(2), kind="cpu only",
                                        reason=f"{m3.group(1)} is a CPU only op"))
            i += 1
            continue
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
                return int(float(_header_value(row, *names, default="0") or 0))  # noqa: B023 (this row)
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
