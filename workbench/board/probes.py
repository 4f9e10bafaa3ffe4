"""Where a bisection's runs happen: the host (:class:`HostRunner`, LiteRT here), the board
(:class:`BoardRunner`, the Python runner over SSH, one run per probe) or a recording of one
(:class:`ReplayRunner`, written by :func:`save_bisect_recording`)."""

from __future__ import annotations

import base64
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import BoardError
from .agreement import BisectResult
from .inventory import KERNEL_CHOICES as KERNELS

RECORDING_FORMAT = "npu-workbench-bisect-recording"
RECORDING_VERSION = 1
RECORDING_MANIFEST = "bisect-recording.json"


class HostRunner:
    """The host's side: LiteRT on this machine with the chosen kernels."""

    def __init__(self, kernels: str = "default"):
        from .._validation import check_choice
        check_choice("host kernels", kernels, KERNELS, error=BoardError)
        self.kernels = kernels

    def run(self, content: bytes, feeds: dict[str, Any]) -> dict[int, Any]:
        import numpy as np
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
        kinds = {"default": OpResolverType.AUTO, "optimized": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                 "reference": OpResolverType.BUILTIN_REF}
        interp = Interpreter(model_content=content, experimental_op_resolver_type=kinds[self.kernels])
        interp.allocate_tensors()
        ins, outs = interp.get_input_details(), interp.get_output_details()
        n = min(len(v) for v in feeds.values())
        rows: dict[int, list] = {d["index"]: [] for d in outs}
        for i in range(n):
            for k, d in enumerate(ins):
                interp.set_tensor(d["index"], feeds[f"input_{k}"][i:i + 1])
            interp.invoke()
            for d in outs:
                rows[d["index"]].append(np.array(interp.get_tensor(d["index"])))
        return {t: np.concatenate(v) for t, v in rows.items()}


class BoardRunner:
    """The board's side: the Python runner over SSH (or on this machine), one run per probe."""

    def __init__(self, session: Any, *, kernels: str = "default", threads: int | None = None,
                 delegate_options: dict[str, str] | None = None, timeout: float | None = None):
        from .._validation import check_choice
        check_choice("board kernels", kernels, KERNELS, error=BoardError)
        self.session, self.kernels, self.threads = session, kernels, threads
        self.delegate_options = dict(delegate_options or {})
        self.timeout = timeout
        self.outputs: list[tuple[tuple[int, ...], str]] = []     # (probe, raw stdout) for a recording
        self._runner_path: str | None = None

    @property
    def where(self) -> str:
        return self.session.where + (f", {self.kernels} kernels" if self.kernels != "default" else "")

    def run(self, content: bytes, feeds_npz: bytes, probe: tuple[int, ...]) -> dict[int, Any]:
        from . import deploy as dep
        from .runners import python_argv
        s = self.session
        with tempfile.TemporaryDirectory(prefix="npu-workbench-bisect-") as tmp:
            if s.local:
                model_path = os.path.join(tmp, "probe.tflite")
                inputs_path = os.path.join(tmp, "tensors.npz")
                Path(model_path).write_bytes(content)
                Path(inputs_path).write_bytes(feeds_npz)
                runner_path = str(Path(dep.__file__).with_name("remote_runner.py"))
            else:
                model_path = dep.push_bytes(s.transport, content, s.workdir, "probe.tflite").remote_path
                inputs_path = dep.push_bytes(s.transport, feeds_npz, s.workdir, "tensors.npz",
                                             kind="inputs").remote_path
                if self._runner_path is None:
                    self._runner_path = dep.deploy_runner(s.transport, s.workdir).remote_path
                runner_path = self._runner_path
            argv = python_argv(python=s.python, runner_path=runner_path, model_path=model_path, runs=1,
                               warmup=0, delegate=s.delegate, threads=self.threads,
                               delegate_options=self.delegate_options)
            argv += ["--tensors", inputs_path, "--kernels", self.kernels]
            result = s.transport.run(argv, check=False, timeout=self.timeout)
        self.outputs.append((probe, result.stdout))
        return tensors_from_output(result.stdout, stderr=result.stderr, returncode=result.returncode,
                                   label=self.where, python=s.python)


def tensors_from_output(stdout: str, *, stderr: str = "", returncode: int = 0, label: str = "board",
                        python: str | None = None) -> dict[int, Any]:
    """The raw tensors a runner printed (``--tensors`` mode), by tensor index."""
    import numpy as np

    from .runners import _python_payload
    payload = _python_payload(stdout, stderr=stderr, returncode=returncode, label=label, python=python)
    tensors = payload.get("tensors")
    if not isinstance(tensors, dict) or not isinstance(tensors.get("npz"), str):
        raise BoardError(f"{label}: the runner printed no tensors. Next: re-run; the runner on the board may "
                         "be an old copy (the workbench pushes its own on each run).")
    try:
        data = np.load(io.BytesIO(base64.b64decode(tensors["npz"], validate=True)), allow_pickle=False)
        return {int(key[1:]): data[key] for key in data.files if key.startswith("t")}
    except (ValueError, OSError) as exc:
        raise BoardError(f"{label}: the runner's tensors cannot be read ({exc}). Next: re-run; the output "
                         "may be cut.") from None


def delegation_note(stdout: str) -> str | None:
    """What the board's runtime made of the model (its ops after delegation), in one sentence."""
    from .runners import _last_json
    payload = _last_json(stdout) or {}
    ops = (payload.get("tensors") or {}).get("ops_run")
    if not isinstance(ops, list) or not ops:
        return None
    partitions = sum(1 for op in ops if op == "DELEGATE")
    if not partitions:
        return f"the board's runtime ran all {len(ops)} ops itself (no delegate partition): every tensor is visible"
    return (f"the board's runtime ran the model as {partitions} delegate partition(s) and {len(ops) - partitions} "
            "op(s) of its own: inside a partition only its outputs exist, so each probe makes its tensor a "
            "partition output (which can split a fused partition there)")


class ReplayRunner:
    """A recorded bisection: each probe's runner output, as the board printed it."""

    def __init__(self, folder: str | os.PathLike, model_sha256: str):
        from .._io import sha256_bytes
        root = Path(folder)
        manifest = root / RECORDING_MANIFEST
        if not manifest.is_file():
            raise BoardError(f"--replay {str(root)!r} is not a bisection recording (no {RECORDING_MANIFEST} in "
                             "it). Next: pass a folder written by `workbench bisect ... --record DIR`.")
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            if data.get("format") != RECORDING_FORMAT or data.get("version") != RECORDING_VERSION:
                raise ValueError(f"format {data.get('format')!r} version {data.get('version')!r}")
            runs = data["runs"]
        except (ValueError, KeyError, TypeError) as exc:
            raise BoardError(f"{manifest}: not a readable bisection recording ({exc}). Next: record it "
                             "again.") from None
        if data.get("model_sha256") != model_sha256:
            raise BoardError(f"the bisection recorded in {root} was made with model {data.get('model_name')} "
                             f"(sha256 {str(data.get('model_sha256'))[:12]}...), not this one (sha256 "
                             f"{model_sha256[:12]}...). Next: replay a recording of this model.")
        self.where = f"replayed from {data.get('where')} ({data.get('recorded_at')})"
        self.settings = data.get("settings", {})
        self.kernels = str(self.settings.get("board_kernels", "default"))
        self.runs: dict[tuple[int, ...], str] = {}
        for run in runs:
            path = root / run["file"]
            if not path.is_file():
                raise BoardError(f"{root}: the recording lists {run['file']} but it is missing. Next: record "
                                 "again.")
            text = path.read_text(encoding="utf-8")
            if sha256_bytes(text.encode("utf-8")) != run.get("sha256"):
                raise BoardError(f"{path}: its sha256 is not the one recorded: the file was changed after "
                                 "the board wrote it, so it is no measurement. Next: record again.")
            self.runs[tuple(int(t) for t in run["probe"])] = text
        self.outputs: list[tuple[tuple[int, ...], str]] = []

    def run(self, content: bytes, feeds_npz: bytes, probe: tuple[int, ...]) -> dict[int, Any]:
        if probe not in self.runs:
            raise BoardError(f"the recording holds no board run exposing tensors {list(probe)}: it was made "
                             "with other settings (tolerance, samples, condition) or another model. Next: "
                             "replay with the settings it was recorded with, or record again.")
        self.outputs.append((probe, self.runs[probe]))
        return tensors_from_output(self.runs[probe], label=self.where)


def save_bisect_recording(folder: str | os.PathLike, result: BisectResult,
                          outputs: list[tuple[tuple[int, ...], str]], settings: dict[str, Any]) -> Path:
    """Keep each board run's raw output, with its sha256, so a bisection can be replayed."""
    import datetime as dt

    from .._io import sha256_bytes
    root = Path(folder)
    if root.exists() and not root.is_dir():
        raise BoardError(f"--record {str(root)!r} is an existing file, not a folder. Next: name a new folder.")
    if (root / RECORDING_MANIFEST).exists():
        raise BoardError(f"{root} already holds a bisection recording; it is not overwritten. Next: record "
                         "into a new folder.")
    root.mkdir(parents=True, exist_ok=True)
    runs = []
    for k, (probe, text) in enumerate(outputs):
        name = f"run_{k:02d}.txt"
        _write(root / name, text)
        runs.append({"probe": list(probe), "file": name, "sha256": sha256_bytes(text.encode("utf-8"))})
    manifest = {"format": RECORDING_FORMAT, "version": RECORDING_VERSION, "model_name": result.model_name,
                "model_sha256": result.model_sha256, "where": result.where,
                "recorded_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "settings": settings, "runs": runs}
    _write(root / RECORDING_MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return root


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
