"""Put models and the runner on a board, check the delegate, record the board's state.

Uploads go into ``<workdir>/models/<sha256[:16]>/<file name>``: a model whose
hash is already there is not sent again.  Every remote path is quoted.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from .._io import sha256_bytes
from .._results import Result
from ..errors import BoardError, ModelError


@dataclass(frozen=True)
class Deployed:
    """A file on the board."""

    remote_path: str
    sha256: str
    uploaded: bool        # False when the same hash was already there


@dataclass(frozen=True)
class BoardFingerprint(Result):
    """The state of a board at measurement time (``None`` where it could not be read)."""

    kernel: str | None = None
    os_release: str | None = None
    machine: str | None = None
    cpu_governor: str | None = None
    temperature_c: float | None = None
    tflite_runtime: str | None = None
    delegate_file: str | None = None     # the delegate's resolved path (often carries a version)
    delegate_package: str | None = None  # package owning the delegate, where a package DB exists
    bsp_release: str | None = None       # NXP BSP release (lf-6.6.3_1.0.0) from os-release/buildinfo
    os_version_id: str | None = None     # VERSION_ID / BUILD_ID of /etc/os-release
    buildinfo: str | None = None         # /etc/buildinfo's DISTRO / layer lines (Yocto images)
    delegate_sha256: str | None = None
    delegate_version: str | None = None  # from the package, the .so version suffix, or its strings
    benchmark_model_version: str | None = None
    vela_version: str | None = None      # `vela --version` on the board, when vela is there

    def summary(self) -> str:
        parts = [p for p in (self.bsp_release, self.os_release, self.kernel, self.tflite_runtime)
                 if p]
        if self.delegate_version:
            parts.append(f"delegate {self.delegate_version}")
        if self.cpu_governor:
            parts.append(f"governor {self.cpu_governor}")
        if self.temperature_c is not None:
            parts.append(f"{self.temperature_c:.1f} °C")
        return "; ".join(parts) or "board state not readable"


def _remote_sha256_cmd(path: str) -> str:
    q = shlex.quote(path)
    return (f"if [ -f {q} ]; then (sha256sum {q} 2>/dev/null || "
            f"openssl dgst -sha256 -r {q} 2>/dev/null) | cut -c1-64; fi")


def push_bytes(transport, data: bytes, workdir: str, name: str, *, kind: str = "models",
               mode: str | None = None) -> Deployed:
    """Upload ``data`` as ``<workdir>/<kind>/<sha[:16]>/<name>`` unless it is there already."""
    digest = sha256_bytes(data)
    remote = f"{workdir.rstrip('/')}/{kind}/{digest[:16]}/{name}"
    present = transport.run_shell(_remote_sha256_cmd(remote)).stdout.strip()
    if present == digest:
        return Deployed(remote, digest, uploaded=False)
    transport.upload(data, remote, mode=mode)
    check = transport.run_shell(_remote_sha256_cmd(remote)).stdout.strip()
    if check and check != digest:
        raise BoardError(f"{transport.label}: {remote} has sha256 {check[:12]}... after upload, "
                         f"expected {digest[:12]}... Next: check free space in {workdir}.")
    return Deployed(remote, digest, uploaded=True)


def deploy_model(transport, model: str | os.PathLike, workdir: str) -> Deployed:
    """Upload a model file (kept under its own file name) into the work folder."""
    path = Path(model)
    if not path.is_file():
        raise ModelError(f"model file {str(path)!r} does not exist. Next: pass a .tflite file.")
    return push_bytes(transport, path.read_bytes(), workdir, path.name)


def deploy_runner(transport, workdir: str) -> Deployed:
    """Upload the Python runner script (``remote_runner.py``)."""
    source = Path(__file__).with_name("remote_runner.py").read_bytes()
    return push_bytes(transport, source, workdir, "remote_runner.py", kind="runner")


def check_remote_file(transport, path: str, *, what: str, hint: str = "",
                      executable: bool = False) -> None:
    """Raise :class:`BoardError` naming the board when ``path`` is not a file there."""
    test = "-x" if executable else "-f"
    result = transport.run_shell(f"test {test} {shlex.quote(path)}", check=False)
    if result.returncode != 0:
        state = "executable file" if executable else "file"
        raise BoardError(f"{transport.label}: {what} {path!r} is not an existing {state} on the "
                         f"board. Next: {hint or 'check the path in boards.yaml'}.")


_FINGERPRINT_SCRIPT = r"""
echo "kernel=$(uname -sr 2>/dev/null)"
echo "machine=$(uname -m 2>/dev/null)"
if [ -r /etc/os-release ]; then echo "os_release=$(. /etc/os-release; echo "${PRETTY_NAME:-$NAME $VERSION}")"; fi
if [ -r /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor ]; then echo "cpu_governor=$(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor)"; fi
if [ -r /sys/class/thermal/thermal_zone0/temp ]; then echo "temp_millic=$(cat /sys/class/thermal/thermal_zone0/temp)"; fi
if [ -r /etc/os-release ]; then echo "os_version_id=$(. /etc/os-release; echo "${VERSION_ID:-}${BUILD_ID:+ build $BUILD_ID}")"; fi
if [ -r /etc/os-release ]; then echo "bsp_os=$(grep -o -E 'lf-[0-9][0-9.]*[-_][0-9][0-9.]*|rel_imx_[0-9][0-9.]*_[0-9][0-9.]*' /etc/os-release | head -n1)"; fi
if [ -r /etc/buildinfo ]; then echo "bsp_build=$(grep -o -E 'lf-[0-9][0-9.]*[-_][0-9][0-9.]*|rel_imx_[0-9][0-9.]*_[0-9][0-9.]*' /etc/buildinfo | head -n1)"; echo "buildinfo=$(grep -E '^(DISTRO|DISTRO_VERSION|MACHINE) *=' /etc/buildinfo | tr -s ' ' | tr '\n' ';' | cut -c1-300)"; fi
if command -v vela >/dev/null 2>&1; then echo "vela_version=$(vela --version 2>/dev/null | head -n1)"; fi
"""

_RUNTIME_PROBE = ("import importlib\n"
                  "for n in ('tflite_runtime','ai_edge_litert','tensorflow'):\n"
                  "    try:\n"
                  "        m=importlib.import_module(n); print(n+' '+getattr(m,'__version__','?')); break\n"
                  "    except Exception:\n"
                  "        pass\n")


def board_fingerprint(transport, *, python: str | None = None, delegate: str | None = None,
                      benchmark_model: str | None = None) -> BoardFingerprint:
    """Kernel, OS and BSP release, CPU governor, temperature, TFLite runtime, the delegate
    file with its sha256 and version, benchmark_model's version, Vela's when installed."""
    script = _FINGERPRINT_SCRIPT
    if delegate:
        q = shlex.quote(delegate)
        script += (f'echo "delegate_file=$(readlink -f {q} 2>/dev/null)"\n'
                   f'if command -v dpkg >/dev/null 2>&1; then echo "delegate_package=$(dpkg -S '
                   f'$(readlink -f {q}) 2>/dev/null | head -n1)"; fi\n'
                   f'if command -v opkg >/dev/null 2>&1; then echo "delegate_package=$(opkg search '
                   f'$(readlink -f {q}) 2>/dev/null | head -n1)"; fi\n'
                   f'if [ -f {q} ]; then echo "delegate_sha256=$( (sha256sum {q} 2>/dev/null || '
                   f'openssl dgst -sha256 -r {q} 2>/dev/null) | cut -c1-64)"; '
                   f'echo "delegate_strings_version=$(grep -a -o -m1 -E '
                   f"'[Vv]ersion[ :=]+[0-9]+[.][0-9]+[.0-9]*' {q} 2>/dev/null | head -n1)\"; fi\n")
    if benchmark_model:
        script += f'echo "benchmark_model_file=$(readlink -f {shlex.quote(benchmark_model)} 2>/dev/null)"\n'
    out = transport.run_shell(script, check=False).stdout
    values: dict[str, str] = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep and value.strip():
            values[key.strip()] = value.strip()
    runtime = None
    if python:
        probe = transport.run([python, "-c", _RUNTIME_PROBE], check=False, timeout=120)
        lines = [ln for ln in probe.stdout.splitlines() if ln.strip()]
        runtime = lines[-1].strip() if probe.returncode == 0 and lines else None
    temp = None
    if "temp_millic" in values:
        try:
            temp = int(values["temp_millic"]) / 1000.0
        except ValueError:
            temp = None
    return BoardFingerprint(kernel=values.get("kernel"), os_release=values.get("os_release"),
                            machine=values.get("machine"), cpu_governor=values.get("cpu_governor"),
                            temperature_c=temp, tflite_runtime=runtime,
                            delegate_file=values.get("delegate_file"),
                            delegate_package=values.get("delegate_package"),
                            bsp_release=bsp_release(values.get("bsp_build") or values.get("bsp_os")),
                            os_version_id=values.get("os_version_id"),
                            buildinfo=values.get("buildinfo"),
                            delegate_sha256=values.get("delegate_sha256"),
                            delegate_version=_delegate_version(values),
                            benchmark_model_version=_tool_version(values.get("benchmark_model_file")),
                            vela_version=values.get("vela_version"))


def bsp_release(text: str | None) -> str | None:
    """NXP's release name ``lf-<kernel>_<release>`` from an ``lf-6.6.3_1.0.0``/``lf-6.6.3-1.0.0``
    branch name or a ``rel_imx_6.6.3_1.0.0`` tag found in ``/etc/buildinfo`` or ``/etc/os-release``."""
    m = re.fullmatch(r"(?:lf-|rel_imx_)(\d+(?:\.\d+)+)[-_](\d+(?:\.\d+)+)\.?", (text or "").strip())
    return f"lf-{m.group(1)}_{m.group(2)}" if m else None


def _delegate_version(values: dict[str, str]) -> str | None:
    """The delegate's version: a ``.so.X.Y`` suffix, else its own strings, else its package."""
    resolved = values.get("delegate_file") or ""
    m = re.search(r"\.so\.(\d[\w.]*)$", resolved)
    if m:
        return m.group(1)
    m = re.search(r"(\d+\.\d+[.\d]*)", values.get("delegate_strings_version") or "")
    if m:
        return m.group(1)
    return values.get("delegate_package")


def _tool_version(path: str | None) -> str | None:
    """benchmark_model's version from NXP's install path ``/usr/bin/tensorflow-lite-2.11.1/...``."""
    m = re.search(r"tensorflow-lite-(\d[\w.]*)", path or "")
    return f"tensorflow-lite {m.group(1)}" if m else None
