"""Record a board session to a folder, and replay it where no board exists.

A recording is a folder::

    recording.json        what was run: model name and sha256, runner, board, target,
                          delegate, runs/warm-up, when, the board fingerprint
    runner_output.txt     the runner's raw stdout, byte for byte (the Python runner's JSON
                          line, or benchmark_model's log)
    runner_stderr.txt     its stderr (kept for the reader; not used to rebuild the result)
    accuracy_output.txt   the accuracy runner's raw stdout, when three-way accuracy ran
    SHA256SUMS            written last: the sha256 of every file above (``sha256sum -c`` reads it)

Replaying parses ``runner_output.txt`` with the same code a live run uses, so a
recording is only as good as what the board printed.  Before anything is parsed, every
file is checked against ``SHA256SUMS``: a changed, missing or unlisted file is refused
by name.  A recording names the model by its sha256: replaying it for another model is
refused.  Recordings hold no machine paths beyond what the board printed (the model is
named by file name).

What a recording proves: that these bytes were written together by one recording (an
edit, a truncation or a copy that lost a file is caught).  What it does not prove: who
made it.  The sums are not a signature (anyone can rewrite a file and its sum), so a
recording is evidence only as far as you trust the person or CI job that produced it.
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
SUMS = "SHA256SUMS"
FILES = (MANIFEST, OUTPUT, STDERR, ACCURACY_OUTPUT)   # every file a recording may hold (besides SUMS)


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
    files[MANIFEST] = json.dumps(recording.to_dict(), indent=2, sort_keys=True) + "\n"
    (root / SUMS).unlink(missing_ok=True)
    for name, text in files.items():
        _write(root / name, text)
    _write(root / SUMS, "".join(f"{sha256_file(root / name)}  {name}\n" for name in sorted(files)))
    return root


def check_recording_files(root: Path) -> None:
    """Refuse a recording whose files do not match its ``SHA256SUMS`` (naming the file)."""
    import re
    sums = root / SUMS
    fix = ("Next: record it again with `workbench bench MODEL --board NAME --record DIR`; a recording "
           "whose files changed is not a measurement")
    if not sums.is_file():
        raise BoardError(f"{root}: the recording has no {SUMS} (the sha256 of each of its files), so "
                         f"nothing shows its files are the ones recorded. {fix}.")
    listed: dict[str, str] = {}
    try:
        text = sums.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BoardError(f"{sums}: cannot be read ({exc}). {fix}.") from None
    for number, line in enumerate(text.splitlines(), start=1):
        m = re.fullmatch(r"([0-9a-f]{64}) [ *](\S+)", line.strip())
        if m is None or m[2] not in FILES or m[2] in listed:
            raise BoardError(f"{sums}: line {number} is not `<sha256>  <file of the recording>`: {line[:80]!r}. "
                             f"{fix}.")
        listed[m[2]] = m[1]
    if MANIFEST not in listed or OUTPUT not in listed:
        raise BoardError(f"{sums}: does not list {MANIFEST} and {OUTPUT}. {fix}.")
    for name in FILES:
        path = root / name
        if name not in listed:
            if path.exists():
                raise BoardError(f"{root}: {name} is not listed in {SUMS}: it was added after the recording. "
                                 f"Remove it or {fix[6:]}.")
            continue
        if not path.is_file():
            raise BoardError(f"{root}: {name}, listed in {SUMS}, is missing. {fix}.")
        digest = sha256_file(path)
        if digest != listed[name]:
            raise BoardError(f"{root}: {name} changed after it was recorded (sha256 {digest[:12]}..., "
                             f"{SUMS} says {listed[name][:12]}...). {fix}.")


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
        _check_fields(recording)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise BoardError(f"{manifest}: not a readable board recording ({exc}). Next: record it "
                         "again with `workbench bench ... --record DIR`.") from None
    check_recording_files(root)
    output = root / OUTPUT
    if not output.is_file():
        raise BoardError(f"{root}: the recording has no {OUTPUT} (the runner's raw output). "
                         "Next: record it again.")
    accuracy = root / ACCURACY_OUTPUT
    try:
        return (recording, output.read_text(encoding="utf-8"),
                accuracy.read_text(encoding="utf-8") if accuracy.is_file() else None)
    except UnicodeDecodeError as exc:
        raise BoardError(f"{root}: the recorded runner output is not UTF-8 text ({exc}). "
                         "Next: record it again.") from None


def _check_fields(rec: Recording) -> None:
    """The recorded values a replay uses must be what a recording writes (raises ValueError naming one)."""
    import re
    if not isinstance(rec.model_sha256, str) or not re.fullmatch(r"[0-9a-f]{64}", rec.model_sha256):
        raise ValueError(f"model_sha256 {rec.model_sha256!r} is not a sha256")
    if rec.runner not in ("python", "benchmark_model"):
        raise ValueError(f"runner {rec.runner!r} is not 'python' or 'benchmark_model'")
    for key in ("runs", "warmup"):
        value = getattr(rec, key)
        if value is not None and (type(value) is not int or value < 0):
            raise ValueError(f"{key} {value!r} is not a count (a whole number >= 0)")
    if type(rec.returncode) is not int:
        raise ValueError(f"returncode {rec.returncode!r} is not an integer")
    for key in ("model_name", "recorded_at"):
        if not isinstance(getattr(rec, key), str):
            raise ValueError(f"{key} {getattr(rec, key)!r} is not text")
    for key in ("board", "target", "delegate"):
        if getattr(rec, key) is not None and not isinstance(getattr(rec, key), str):
            raise ValueError(f"{key} {getattr(rec, key)!r} is not text")
    if not isinstance(rec.accuracy_params, dict):
        raise ValueError(f"accuracy_params {rec.accuracy_params!r} is not a mapping")


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
        except (ValueError, OSError):
            continue
        if not isinstance(data, dict):
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
