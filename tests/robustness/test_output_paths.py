"""Output paths: only regular files are written; nothing the user made is deleted or replaced."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from workbench._io import atomic_path, atomic_write_bytes, atomic_write_json, check_output_path, read_json
from workbench.errors import OutputPathError

from .conftest import run_cli, snapshot


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.npz"
    os.mkfifo(path)
    return path


def _link(tmp_path: Path) -> Path:
    (tmp_path / "real.npz").write_bytes(b"user data")
    link = tmp_path / "link.npz"
    link.symlink_to(tmp_path / "real.npz")
    return link


def _dangling(tmp_path: Path) -> Path:
    link = tmp_path / "dangling.npz"
    link.symlink_to(tmp_path / "nowhere" / "x.npz")
    return link


KINDS = {
    "folder": (lambda tmp_path, precious: precious, "is a folder"),
    "dot": (lambda tmp_path, precious: Path("."), "is a folder"),
    "fifo": (lambda tmp_path, precious: _fifo(tmp_path), "is a named pipe"),
    "symlink": (lambda tmp_path, precious: _link(tmp_path), "is a symbolic link"),
    "dangling-symlink": (lambda tmp_path, precious: _dangling(tmp_path), "is a symbolic link"),
    "under-a-file": (lambda tmp_path, precious: precious / "notes.txt" / "x.npz", "is not a folder"),
    "device": (lambda tmp_path, precious: Path(os.devnull), "is a device"),
}


def _state(path: Path):
    st = os.lstat(path) if os.path.lexists(path) else None
    return None if st is None else (stat.S_IFMT(st.st_mode), st.st_ino, st.st_rdev)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_atomic_write_refuses_non_regular_targets(tmp_path, precious, kind, monkeypatch):
    monkeypatch.chdir(precious)
    make, phrase = KINDS[kind]
    path = make(tmp_path, precious)
    before, files = _state(path), snapshot(precious)
    with pytest.raises(OutputPathError, match=phrase):
        atomic_write_bytes(path, b"new")
    assert _state(path) == before and snapshot(precious) == files
    assert not any(p.name.endswith(".tmp") for p in precious.iterdir())  # no temporary left behind


# One command per writing option; the output is checked before any work, so each case is fast.
COMMANDS = {
    "data export -o": ["data", "export", "--split", "test", "-o"],
    "calibrate -o": ["calibrate", "--strategy", "random", "-n", "10", "-o"],
    "audit --plot": ["audit", "--calibration", "cal.json", "--model", "m.tflite", "--plot"],
    "calibrate-experiment --plot": ["calibrate-experiment", "--model", "m.keras", "-n", "10", "--plot"],
}


@pytest.mark.parametrize("kind", ["folder", "dot", "device", "symlink", "fifo"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_cli_output_options_refuse_non_regular_targets(tmp_path, precious, command, kind):
    make, phrase = KINDS[kind]
    path = make(tmp_path, precious)
    before, files = _state(path), snapshot(precious)
    result = run_cli(*COMMANDS[command], path, cwd=precious)
    assert result.code == 2, result
    assert phrase in result.err and "Traceback" not in result.err
    assert _state(path) == before and snapshot(precious) == files


def test_existing_regular_file_is_replaced_atomically(tmp_path):
    path = tmp_path / "out.json"
    atomic_write_json(path, {"v": 1})
    atomic_write_json(path, {"v": 2})
    assert read_json(path) == {"v": 2}


def test_a_failed_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_path(path) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("killed")
    assert path.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_cache_folders_are_replaced_only_when_asked(tmp_path):
    folder = tmp_path / "entry"
    folder.mkdir()
    (folder / "old").write_text("x")
    with pytest.raises(OutputPathError, match="is a folder"):
        with atomic_path(folder) as tmp:
            tmp.mkdir()
    assert (folder / "old").exists()
    with atomic_path(folder, replace_folder=True) as tmp:
        tmp.mkdir()
        (tmp / "new").write_text("y")
    assert sorted(p.name for p in folder.iterdir()) == ["new"]


def test_json_is_always_valid_nan_becomes_null(tmp_path):
    import json
    path = atomic_write_json(tmp_path / "m.json", {"scale": float("nan"), "x": [float("inf"), 1.0]})
    assert json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON")) == \
        {"scale": None, "x": [None, 1.0]}


def test_check_output_path_accepts_new_and_regular(tmp_path):
    assert check_output_path(tmp_path / "new" / "deeper" / "x.npz")
    (tmp_path / "f").write_text("")
    assert check_output_path(tmp_path / "f")


@pytest.mark.parametrize("target,phrase", [
    ("/dev/null", "is not a folder"), ("fifo", "is not a folder"), ("link.tflite", "is a symbolic link"),
    ("notes.txt/model.tflite", "is not a folder"), ("model.onnx", "cannot be written to a .onnx path")])
def test_quantize_output_is_checked_before_any_work(tmp_path, precious, target, phrase):
    if target == "fifo":
        target = str(_fifo(tmp_path))
    if target == "link.tflite":
        (precious / "link.tflite").symlink_to(precious / "notes.txt")
    files = snapshot(precious)
    result = run_cli("quantize", "no-such-model.keras", "-o", target, cwd=precious)
    assert result.code == 2 and phrase in result.err, result
    assert snapshot(precious) == files and stat.S_ISCHR(os.lstat(os.devnull).st_mode)


def _dead_pid() -> str:
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()


def test_temporaries_of_a_killed_process_are_removed_on_the_next_write(tmp_path):
    import subprocess
    import sys
    code = ("import sys; from workbench._io import make_own_temporary as m; t = m(sys.argv[1], '.out.json.'); "
            "(t / 'out.json').write_text('{half'); print(t)")
    stale = Path(subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                                check=True).stdout.strip())
    assert stale.is_dir() and stale.parent == tmp_path
    mine = tmp_path / ".out.json.notapid.tmp"          # not of the workbench's form: kept
    mine.mkdir()
    atomic_write_json(tmp_path / "out.json", {"v": 1})
    assert not stale.exists() and mine.exists()
    assert read_json(tmp_path / "out.json") == {"v": 1}


def test_a_users_folder_named_like_a_temporary_is_never_deleted(tmp_path):
    """The data-loss case of issue 24: `-o victim/notes.npz` deleted `.notes.npz.<dead pid>.x.tmp` beside it."""
    victim = tmp_path / "victim"
    victim.mkdir()
    dead = _dead_pid()
    folders = [victim / f".notes.npz.{dead}.x.tmp", victim / f".notes.npz.{dead}.{'a' * 32}.tmp"]
    for folder in folders:
        folder.mkdir()
        (folder / "thesis.tex").write_text("years of work\n")
    forged = folders[1] / ".npu-workbench-temporary"     # a marker that does not name this folder's token
    forged.write_text('{"made_by": "npu-workbench", "pid": %s, "token": "%s"}' % (dead, "b" * 32))
    before = snapshot(victim)
    result = run_cli("data", "export", "--split", "test", "-o", victim / "notes.npz")
    assert result.code == 0, result
    after = snapshot(victim)
    assert {k: v for k, v in after.items() if k != "notes.npz"} == before
