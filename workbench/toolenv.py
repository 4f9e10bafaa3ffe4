"""Pinned tool environments: tools whose dependencies cannot live beside the workbench's own.

``onnx2tf`` pins TensorFlow 2.19, numpy 1.26 and protobuf 4 (the workbench runs TensorFlow 2.21);
the Vela that an NXP BSP ships (3.10.0 for lf-6.6.3_1.0.0) is older than the one installed here.
Each such tool gets its own virtual environment, created on first need from an exact lock (every
package ``==`` pinned, the list below) under the cache folder::

    <cache>/tools/<name>-<lock sha256[:12]>/     ($NPU_WORKBENCH_TOOLS instead of <cache>/tools)
        bin/ lib/ ...        the venv
        lock.txt             the requirements it was installed from
        toolenv.json         name, lock sha256, versions of the packages that matter
        content.json         the sha256 and size of every file of the environment, recorded at install
        .complete            written last: an environment without it is never used

An environment is trusted on its content, not its folder name: at install the sha256 of every file is
recorded in ``content.json`` (with one digest over all of them); each use checks that the same files with
the same sizes are there (a second, not a minute of hashing 2.6 GB), and :func:`verify` (``workbench tools
verify NAME``) hashes every file again.  A changed environment is refused, naming a changed file.

A new lock gives a new folder, so an environment is never half-upgraded; an interrupted
install (no ``.complete``) is removed and redone on the next call.  Two processes asking for the
same tool at once wait on one file lock, and one of them installs.

    >>> from workbench import toolenv
    >>> env = toolenv.ensure("vela-3.10.0")            # doctest: +SKIP
    >>> env.run(["vela", "--version"]).stdout          # doctest: +SKIP
    '3.10.0\\n'
"""

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

from ._io import _alive, atomic_write_json, atomic_write_text, cache_dir, read_json, sha256_bytes
from .errors import ToolError

INSTALL_TIMEOUT_S = 1800.0
TOOLS_ENV = "NPU_WORKBENCH_TOOLS"


@dataclass(frozen=True)
class ToolSpec:
    """A tool and the exact lock of its environment.

    ``requirements`` pins every package (``name==version``); ``report`` names the packages whose
    versions go into manifests; ``check`` is a command run after install that must succeed.
    """

    name: str
    summary: str
    requirements: tuple[str, ...]
    report: tuple[str, ...]
    check: tuple[str, ...]

    def __post_init__(self) -> None:
        loose = [r for r in self.requirements if "==" not in r]
        if loose:
            raise ValueError(f"tool {self.name!r}: every requirement must be pinned with ==; got {loose}")

    @property
    def lock_text(self) -> str:
        return "".join(f"{r}\n" for r in sorted(self.requirements, key=str.lower))

    @property
    def lock_sha256(self) -> str:
        """sha256 of the lock and the Python it is installed for (major.minor)."""
        python = f"python{sys.version_info.major}.{sys.version_info.minor}\n"
        return sha256_bytes((python + self.lock_text).encode())


# `pip freeze` of `pip install onnx2tf==1.29.24` on Python 3.11 (2026-12-01).
_ONNX2TF_LOCK = (
    "absl-py==2.5.1", "ai-edge-litert==2.1.0", "astunparse==1.6.3", "backports.strenum==1.2.8",
    "certifi==2026.10.19.post1", "charset-normalizer==3.5.3", "coloredlogs==15.0.1",
    "flatbuffers==25.12.19", "gast==0.7.0", "google-pasta==0.2.0", "grpcio==1.85.3", "h5py==3.11.0",
    "humanfriendly==10.0", "idna==3.20", "json2onnx==2.0.3", "keras==3.15.1", "libclang==18.1.1",
    "Markdown==3.11.3", "markdown-it-py==4.3.0", "MarkupSafe==3.0.4", "mdurl==0.1.2",
    "ml_dtypes==0.5.1", "mpmath==1.3.0", "namex==0.1.0", "numpy==1.26.4", "onnx==1.19.1",
    "onnx2json==2.0.4", "onnx2tf==1.29.24", "onnx_graphsurgeon==0.5.8", "onnxoptimizer==0.4.2",
    "onnxruntime==1.23.0", "onnxsim==0.4.36", "opencv-python==4.11.0.86", "opt_einsum==3.4.0",
    "optree==0.20.0", "packaging==26.4", "protobuf==4.25.5", "psutil==5.9.5", "Pygments==2.21.0",
    "requests==2.32.5", "rich==15.0.0", "sam4onnx==2.0.0", "sbi4onnx==1.0.7", "scc4onnx==1.0.7",
    "scs4onnx==1.0.18", "sde4onnx==1.0.0", "sed4onnx==1.0.5", "simple_onnx_processing_tools==1.1.32",
    "sio4onnx==1.0.3", "sit4onnx==1.0.10", "six==1.17.0", "sna4onnx==1.0.6", "snc4onnx==1.0.14",
    "snd4onnx==1.1.7", "sne4onnx==2.0.1", "sng4onnx==2.0.1", "soa4onnx==1.0.5", "soc4onnx==1.0.2",
    "sod4onnx==1.0.0", "sog4onnx==1.0.17", "sor4onnx==1.0.7", "spo4onnx==1.0.5", "ssc4onnx==1.0.8",
    "ssi4onnx==1.0.4", "svs4onnx==1.0.0", "sympy==1.14.0", "tensorboard==2.19.0",
    "tensorboard-data-server==0.7.2", "tensorflow==2.19.0", "tensorflow-io-gcs-filesystem==0.37.1",
    "termcolor==3.3.0", "tf_keras==2.19.0", "tqdm==4.70.1", "typing_extensions==4.16.0",
    "urllib3==2.8.0", "Werkzeug==3.1.9", "wrapt==2.5.2",
)

TOOLS: dict[str, ToolSpec] = {
    "onnx2tf": ToolSpec(
        name="onnx2tf",
        summary="ONNX -> TensorFlow SavedModel / TFLite converter (PINTO0309), with its own TensorFlow 2.19",
        requirements=_ONNX2TF_LOCK,
        report=("onnx2tf", "tensorflow", "onnx", "onnxruntime", "onnxsim", "numpy"),
        check=("python", "-c", "import onnx2tf, tensorflow"),
    ),
    "vela-3.10.0": ToolSpec(
        name="vela-3.10.0",
        summary="Arm Vela 3.10.0, the Ethos-U compiler NXP BSP lf-6.6.3_1.0.0 ships for the i.MX 93",
        # numpy 1.26: with numpy 2.x Vela 3.10.0's scheduler overflows an int32 on every model
        # ("Python integer 4294967296 out of bounds for int32", measured on the reference a8w8_pc model).
        requirements=("ethos-u-vela==3.10.0", "flatbuffers==23.5.26", "lxml==6.1.3", "numpy==1.26.4"),
        report=("ethos-u-vela", "numpy"),
        check=("vela", "--version"),
    ),
    # torch 2.13 CPU for exporting PyTorch models to ONNX (the test zoo: MTCNN's ONet, a heatmap net);
    # `pip freeze` after `pip install torch==2.13.0 numpy==1.26.4 onnx==1.19.1` on Python 3.11
    # (2026-12-01). torchvision is left out: its index build does not load against the CPU torch.
    "torch-2.13": ToolSpec(
        name="torch-2.13",
        summary="PyTorch 2.13 (CPU) and onnx 1.19.1, for torch.onnx.export of the test zoo's PyTorch models",
        requirements=("filelock==4.3.1", "fsspec==2026.9.0", "Jinja2==3.1.6", "MarkupSafe==3.0.4",
                      "ml_dtypes==0.5.4", "mpmath==1.3.0", "networkx==3.6.1", "numpy==1.26.4", "onnx==1.19.1",
                      "protobuf==7.36.2", "sympy==1.14.0", "torch==2.13.0", "typing_extensions==4.16.0"),
        report=("torch", "onnx", "numpy"),
        check=("python", "-c", "import torch, onnx"),
    ),
    # BSP lf-6.1.55_2.2.0 ships Vela 3.9.1.dev7 (an NXP build); 3.9.0 is the nearest on the package
    # index (`pip freeze` after `pip install ethos-u-vela==3.9.0 numpy==1.26.4`, Python 3.11).
    "vela-3.9.0": ToolSpec(
        name="vela-3.9.0",
        summary="Arm Vela 3.9.0, nearest release to the Vela 3.9.1.dev7 NXP BSP lf-6.1.55_2.2.0 ships",
        requirements=("ethos-u-vela==3.9.0", "flatbuffers==2.0.7", "lxml==6.1.3", "numpy==1.26.4"),
        report=("ethos-u-vela", "numpy"),
        check=("vela", "--version"),
    ),
}


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


# -- the tool's processes live and die with the workbench ---------------------------------------------
# A tool runs in its own process group (its children too), started through a tiny wrapper that asks the
# kernel to SIGKILL it when the workbench dies (PR_SET_PDEATHSIG: also after kill -9 of the workbench).  A
# time-out or an interrupt kills the whole group.  The tool's work folder (``cwd``) gets a marker naming the
# workbench's pid, the group and a random token; the next tool run removes marked work folders in the temp
# folder whose workbench is gone, after killing any process of their group still running there.
RUN_MARKER = ".npu-workbench-tool-run"
_WRAPPER = """\
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
except Exception:
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(137)                                                # the workbench is already gone
os.execvp(sys.argv[2], sys.argv[2:])
"""


def run_in_group(argv: Sequence[str], *, cwd: str | os.PathLike | None = None, env: Mapping[str, str] | None = None,
                 timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True)`` in a new process group that dies with us."""
    import secrets
    remove_stale_work_folders()
    wrapped = [sys.executable, "-c", _WRAPPER, str(os.getpid()), *argv]
    proc = subprocess.Popen(wrapped, cwd=cwd, env=dict(env) if env is not None else None, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    marker = None
    if cwd is not None:
        marker = Path(cwd) / RUN_MARKER
        with contextlib.suppress(OSError):
            marker.write_text(json.dumps({"made_by": "npu-workbench", "pid": os.getpid(), "pgid": proc.pid,
                                          "token": secrets.token_hex(16),
                                          "folder": os.path.realpath(cwd)}), encoding="utf-8")
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:        # a time-out, Ctrl-C, an error: the tool and its children go with it
        _kill_group(proc.pid)
        proc.communicate()
        raise
    finally:
        if marker is not None:
            with contextlib.suppress(OSError):
                marker.unlink()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _kill_group(pgid: int) -> None:
    import signal
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def remove_stale_work_folders(parent: str | os.PathLike | None = None) -> list[Path]:
    """Remove tool work folders (``wb-*`` in the temp folder) left by a workbench that was killed.

    Only folders holding this module's marker for that very folder, whose workbench process is gone, are
    touched; processes of the marker's group still running inside the folder are killed first."""
    import tempfile
    root = Path(parent or tempfile.gettempdir())
    removed = []
    try:
        candidates = [p for p in root.iterdir() if p.name.startswith("wb-") and p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
    for folder in candidates:
        marker = folder / RUN_MARKER
        try:
            if not marker.is_file() or marker.is_symlink() or marker.stat().st_size > 4096:
                continue
            info = json.loads(marker.read_text(encoding="utf-8"))
            pid, pgid = int(info["pid"]), int(info["pgid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if info.get("made_by") != "npu-workbench" or info.get("folder") != os.path.realpath(folder):
            continue
        if pid == os.getpid() or _alive(pid):
            continue
        for member in _group_members(pgid):
            with contextlib.suppress(OSError):
                where = os.path.realpath(f"/proc/{member}/cwd")
                if where == info["folder"] or where.startswith(info["folder"] + os.sep):
                    _kill_group(pgid)
                    break
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _group_members(pgid: int) -> list[int]:
    out = []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    if int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
                        out.append(int(entry))
    return out


def spec(name: str) -> ToolSpec:
    try:
        return TOOLS[name]
    except KeyError:
        listed = ", ".join(repr(n) for n in TOOLS)
        raise ToolError(f"`tool` must be one of {listed}. Got {name!r} instead.") from None


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


CONTENT = "content.json"
_OWN_FILES = {".complete", "toolenv.json", CONTENT}
_checked: dict[str, float] = {}


def _files(root: Path) -> dict[str, int]:
    """Relative path -> size of every file of the environment (not Python's byte-code caches)."""
    out: dict[str, int] = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in names:
            path = Path(folder, name)
            rel = path.relative_to(root).as_posix()
            if rel in _OWN_FILES or name.endswith(".pyc"):
                continue
            out[rel] = path.lstat().st_size
    return out


def content_record(root: Path) -> dict[str, object]:
    """``{"content_sha256": ..., "files": {rel: [size, sha256]}}`` of the environment at ``root``."""
    from ._io import sha256_file
    files = {}
    for rel, size in sorted(_files(root).items()):
        path = root / rel
        files[rel] = [size, "link:" + os.readlink(path) if path.is_symlink() else sha256_file(path)]
    digest = sha256_bytes("".join(f"{rel}\0{h}\n" for rel, (_, h) in files.items()).encode())
    return {"content_sha256": digest, "files": files}


def _check_content(name: str, root: Path, *, full: bool = False) -> None:
    """Refuse an environment whose files differ from ``content.json`` (sizes and names; ``full``: every sha256)."""
    import warnings

    from .errors import WorkbenchWarning
    record_path = root / CONTENT
    fix = f"Next: reinstall it with `workbench tools install {name} --force`"
    if not record_path.is_file():   # installed before content hashes were recorded: record them now, once
        atomic_write_json(record_path, content_record(root))
        warnings.warn(f"{name}: its content hash was recorded now ({root.name}/{CONTENT}), not at install; "
                      f"reinstall with `workbench tools install {name} --force` to record it from a clean install",
                      WorkbenchWarning, stacklevel=4)
    key = str(root)
    stamp = record_path.stat().st_mtime
    if not full and _checked.get(key) == stamp:
        return
    try:
        recorded = read_json(record_path)
        files = {rel: (int(v[0]), str(v[1])) for rel, v in recorded["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise ToolError(f"{name}: {root / CONTENT} cannot be read ({type(exc).__name__}: {exc}). {fix}.") from None
    found = _files(root)
    for rel in sorted(set(files) | set(found)):
        if rel not in found:
            raise ToolError(f"{name}: {rel} is missing from the tool environment {root}. {fix}.")
        if rel not in files:
            raise ToolError(f"{name}: {rel} was added to the tool environment {root} after install. {fix}.")
        if found[rel] != files[rel][0]:
            raise ToolError(f"{name}: {rel} in the tool environment {root} changed after install ({found[rel]} "
                            f"bytes, {files[rel][0]} recorded). {fix}.")
    if full:
        now = content_record(root)["files"]
        assert isinstance(now, dict)
        for rel, (_, digest) in files.items():
            if now[rel][1] != digest:
                raise ToolError(f"{name}: {rel} in the tool environment {root} changed after install (sha256 "
                                f"differs from {CONTENT}). {fix}.")
    _checked[key] = stamp


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
