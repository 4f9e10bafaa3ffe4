"""An installed tool environment (:class:`ToolEnv`), where environments live, and their install
(:func:`ensure`, :func:`find`, :func:`verify`)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._io import atomic_write_json, atomic_write_text, cache_dir, read_json
from ..errors import ToolError
from .content import CONTENT, _check_content, content_record
from .locks import ToolSpec, spec
from .processes import run_in_group

INSTALL_TIMEOUT_S = 1800.0
TOOLS_ENV = "NPU_WORKBENCH_TOOLS"



@dataclass(frozen=True)
class ToolEnv:
    """An installed tool environment."""

    name: str
    root: Path
    lock_sha256: str
    versions: Mapping[str, str] = field(default_factory=dict)

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> Path:
        return self.bin_dir / "python"

    def environ(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The process environment for the tool: its ``bin`` first on PATH, nothing of ours leaking in."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
        env["PATH"] = str(self.bin_dir) + os.pathsep + env.get("PATH", "")
        env["VIRTUAL_ENV"] = str(self.root)
        env["PYTHONNOUSERSITE"] = "1"
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env.update(extra or {})
        return env

    def run(self, args: Sequence[str | os.PathLike], *, cwd: str | os.PathLike | None = None,
            timeout: float | None = 600.0, env: Mapping[str, str] | None = None,
            check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run a command of the tool (``args[0]`` is looked up in the environment's ``bin`` first).

        Output is captured as text.  A time-out raises :class:`ToolError`; so does a non-zero exit
        when ``check`` is true (with the command's last output lines).
        """
        argv = [str(a) for a in args]
        exe = self.bin_dir / argv[0]
        if exe.exists():
            argv[0] = str(exe)
        try:
            proc = run_in_group(argv, cwd=cwd, env=self.environ(env), timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ToolError(f"{self.name}: `{' '.join(map(str, args))}` did not finish within {timeout:g} s; "
                            "pass a larger timeout or check the input") from None
        except FileNotFoundError:
            raise ToolError(f"{self.name}: command {argv[0]!r} not found in {self.bin_dir}; reinstall with "
                            f"`workbench tools install {self.name} --force`") from None
        if check and proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
            raise ToolError(f"{self.name}: `{' '.join(map(str, args))}` exited with {proc.returncode}:\n{tail}")
        return proc

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "lock_sha256": self.lock_sha256, "versions": dict(self.versions)}

    def summary(self) -> str:
        versions = ", ".join(f"{k} {v}" for k, v in self.versions.items())
        return f"{self.name} (lock {self.lock_sha256[:12]}): {versions}"


def tools_dir() -> Path:
    """Where tool environments live: ``$NPU_WORKBENCH_TOOLS``, else ``<cache>/tools``.

    The test suite points the workbench cache at a fresh folder per session but keeps the tools
    where ``make tools`` installed them, through this variable.
    """
    folder = os.environ.get(TOOLS_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        return Path(folder)
    return cache_dir("tools")


def _root(tool: ToolSpec) -> Path:
    return tools_dir() / f"{tool.name}-{tool.lock_sha256[:12]}"


def _load(tool: ToolSpec, root: Path) -> ToolEnv | None:
    """The environment at ``root`` if its install completed for this exact lock, else None."""
    try:
        if (root / ".complete").read_text().strip() != tool.lock_sha256:
            return None
        info = read_json(root / "toolenv.json")
    except (OSError, ValueError):
        return None
    if not (root / "bin" / "python").exists():
        return None
    _check_content(tool.name, root)
    return ToolEnv(tool.name, root, tool.lock_sha256, dict(info.get("versions", {})))


def verify(name: str) -> str:
    """Hash every file of tool ``name``'s environment again; returns its content sha256 (raises when changed)."""
    tool = spec(name)
    root = _root(tool)
    if _load(tool, root) is None:
        raise ToolError(f"{name} is not installed. Next: `workbench tools install {name}`.")
    _check_content(name, root, full=True)
    return str(read_json(root / CONTENT)["content_sha256"])


def find(name: str) -> ToolEnv | None:
    """The installed environment of ``name``, or None (never installs)."""
    tool = spec(name)
    return _load(tool, _root(tool))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure(name: str, *, force: bool = False, timeout: float = INSTALL_TIMEOUT_S) -> ToolEnv:
    """The environment of tool ``name``, created from its lock when missing or incomplete.

    ``force`` removes and recreates it.  Needs the package index the first time (about a minute
    for Vela, several for onnx2tf); afterwards it is a folder look-up.
    """
    tool = spec(name)
    root = _root(tool)
    if not force and (env := _load(tool, root)) is not None:
        return env
    with _locked(root.with_name(root.name + ".lock")):
        if not force and (env := _load(tool, root)) is not None:
            return env  # another process installed it while we waited
        if root.exists():
            shutil.rmtree(root)  # our own cache folder: incomplete, damaged or forced
        return _install(tool, root, timeout)


def _install(tool: ToolSpec, root: Path, timeout: float) -> ToolEnv:
    def step(argv: list[str], what: str) -> subprocess.CompletedProcess[str]:
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
        except subprocess.TimeoutExpired:
            raise ToolError(f"{tool.name}: {what} did not finish within {timeout:g} s; "
                            f"retry with `workbench tools install {tool.name}`") from None
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-12:])
            raise ToolError(f"{tool.name}: {what} failed (exit {proc.returncode}) in {root}; the package index "
                            f"must be reachable for the first install. Last output:\n{tail}")
        return proc

    base = getattr(sys, "_base_executable", None) or sys.executable
    step([base, "-m", "venv", str(root)], "creating the virtual environment")
    atomic_write_text(root / "lock.txt", tool.lock_text)
    python = str(root / "bin" / "python")
    step([python, "-m", "pip", "install", "--quiet", "--no-input", "-r", str(root / "lock.txt")],
         f"`pip install -r lock.txt` ({len(tool.requirements)} pinned packages)")
    env = ToolEnv(tool.name, root, tool.lock_sha256)
    check = env.run(list(tool.check), timeout=timeout)
    if check.returncode != 0:
        tail = "\n".join((check.stderr or check.stdout).strip().splitlines()[-12:])
        raise ToolError(f"{tool.name}: installed, but `{' '.join(tool.check)}` fails:\n{tail}")
    script = ("import json, sys\nfrom importlib import metadata\nout = {}\n"
              "for n in sys.argv[1:]:\n    try: out[n] = metadata.version(n)\n"
              "    except metadata.PackageNotFoundError: pass\nprint(json.dumps(out))")
    versions = json.loads(step([python, "-c", script, *tool.report], "reading versions").stdout)
    atomic_write_json(root / "toolenv.json", {"name": tool.name, "lock_sha256": tool.lock_sha256,
                                              "summary": tool.summary, "versions": versions})
    atomic_write_json(root / CONTENT, content_record(root))     # what later uses trust: recorded at install
    atomic_write_text(root / ".complete", tool.lock_sha256 + "\n")
    return ToolEnv(tool.name, root, tool.lock_sha256, versions)
