"""Record a board session to a folder, and replay it where no board exists.

A recording is a folder::

    recording.json        what was run: model name and sha256, runner, board, target,
                          delegate, runs/warm-up, when, the board fingerprint
    runner_output.txt     the runner's raw stdout, byte for byte (the Python runner's JSON
                          line, or benchmark_model's log)
    runner_stderr.txt     its stderr (kept for the reader; not used to rebuild the result)
    accuracy_output.txt   the accuracy runner's raw stdout, when three-way accuracy ran

Replaying parses ``runner_output.txt`` with the same code a live run uses, so a
recording is only as good as what the board printed.  A recording names the model
by its sha256: replaying it for another model is refused.  Recordings hold no
machine paths beyond what the board printed (the model is named by file name).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._io import sha256_file
from .._results import Result
from ..errors import BoardError
from .deploy import BoardFingerprint

FORMAT = "npu-workbench-board-recording"
VERSION = 1
MANIFEST = "recording.json"
OUTPUT = "runner_output.txt"
STDERR = "runner_stderr.txt"
ACCURACY_OUTPUT = "accuracy_output.txt"


@dataclass(frozen=True)
class Recording(Result):
    """What a recording folder states (the raw output is read separately)."""

    model_name: str
    model_sha256: str
    runner: str
    recorded_at: str
    board: str | None = None
    target: str | None = None
    delegate: str | None = None
    runs: int | None = None
    warmup: int | None = None
    returncode: int = 0
    fingerprint: BoardFingerprint | None = None
    accuracy_params: dict[str, Any] = field(default_factory=dict)
    format: str = FORMAT
    version: int = VERSION

    def summary(self) -> str:
        return (f"recording of {self.model_name} (sha256 {self.model_sha256[:12]}) on "
                f"{self.board or 'a board'} with the {self.runner} runner, {self.recorded_at}")


def save_recording(folder: str | os.PathLike, recording: Recording, *, stdout: str, stderr: str = "",
                   accuracy_stdout: str | None = None) -> Path:
    """Write a recording folder (each file written whole, then renamed into place).

    Refuses a folder that already holds a recording (nothing recorded is overwritten)
    and a path that is an existing file.
    """
    root = Path(folder)
    if root.exists() and not root.is_dir():
        raise BoardError(f"--record {str(root)!r} is an existing file, not a folder. Next: name a "
                         "new or empty folder for the recording.")
    if (root / MANIFEST).exists():
        raise BoardError(f"{root} already holds a board recording ({MANIFEST}); it is not "
                         "overwritten. Next: record into a new folder, or remove that one yourself.")
    root.mkdir(parents=True, exist_ok=True)
    files = {OUTPUT: stdout, STDERR: stderr}
    if accuracy_stdout is not None:
        files[ACCURACY_OUTPUT] = accuracy_stdout
    for name, text in files.items():
        _write(root / name, text)
    _write(root / MANIFEST, json.dumps(recording.to_dict(), indent=2, sort_keys=True) + "\n")
    return root


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def load_recording(folder: str | os.PathLike) -> tuple[Recording, str, str | None]:
    """``(recording, runner stdout, accuracy stdout or None)`` of a recording folder."""
    root = Path(folder)
    manifest = root / MANIFEST
    if not root.is_dir() or not manifest.is_file():
        raise BoardError(f"--replay {str(root)!r} is not a board recording (no {MANIFEST} in it). "
                         "Next: pass a folder written by `workbench bench ... --record DIR`.")
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise ValueError(f"format is {data.get('format')!r}, expected {FORMAT!r}")
        if data.get("version") != VERSION:
            raise ValueError(f"version {data.get('version')!r} is not {VERSION}")
        recording = Recording.from_dict(data)
    except (ValueError, TypeError, KeyError) as exc:
        raise BoardError(f"{manifest}: not a readable board recording ({exc}). Next: record it "
                         "again with `workbench bench ... --record DIR`.") from None
    output = root / OUTPUT
    if not output.is_file():
        raise BoardError(f"{root}: the recording has no {OUTPUT} (the runner's raw output). "
                         "Next: record it again.")
    accuracy = root / ACCURACY_OUTPUT
    return (recording, output.read_text(encoding="utf-8"),
            accuracy.read_text(encoding="utf-8") if accuracy.is_file() else None)


def check_same_model(recording: Recording, model: str | os.PathLike, folder: str | os.PathLike) -> str:
    """The model's sha256; refuses a recording made with another model."""
    digest = sha256_file(model)
    if digest != recording.model_sha256:
        raise BoardError(
            f"the recording in {folder} was made with model {recording.model_name} (sha256 "
            f"{recording.model_sha256[:12]}...), but {Path(model).name} has sha256 {digest[:12]}...: "
            "a replay only stands for the model that was measured. Next: replay a recording of "
            "this model, or time it on a board with --record.")
    return digest


def find_recording(folder: str | os.PathLike, *, target: str | None = None,
                   model_sha256: str | None = None) -> Path:
    """A recording folder, or among the recordings directly inside ``folder`` the one for
    ``model_sha256`` (else for ``target``): how ``batch --replay DIR`` picks one per target."""
    root = Path(folder)
    if (root / MANIFEST).is_file():
        return root
    if not root.is_dir():
        raise BoardError(f"--replay {str(root)!r} does not exist. Next: pass a folder written by "
                         "`workbench bench ... --record DIR` (or a folder of such folders).")
    found = []
    for sub in sorted(p for p in root.iterdir() if (p / MANIFEST).is_file()):
        try:
            data = json.loads((sub / MANIFEST).read_text(encoding="utf-8"))
        except ValueError:
            continue
        found.append((sub, data.get("model_sha256"), data.get("target")))
    for sub, sha, _ in found:
        if model_sha256 and sha == model_sha256:
            return sub
    for sub, _, tgt in found:
        if target and tgt == target:
            return sub
    if model_sha256 and len(found) == 1:
        return found[0][0]           # the only recording: replaying it names the sha mismatch
    listed = ", ".join(f"{s.name} ({t or 'no target'})" for s, _, t in found) or "none"
    raise BoardError(f"--replay {str(root)!r} is not a board recording and holds none for "
                     f"{'target ' + target if target else 'this model'} (recordings: {listed}). "
                     "Next: record one with `workbench bench MODEL --board NAME --record DIR`.")
