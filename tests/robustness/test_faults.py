"""Faults: kill -9 at each write, a full disk, a file-size limit, a closed pipe, a crash.

A kill before any rename, then a rerun, gives the same files as an uninterrupted run;
a full disk names the path and replaces nothing; nothing half-written is trusted.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workbench._io import read_json, sha256_file

from .conftest import run_cli, run_subprocess, snapshot

# Runs the workbench CLI with os.replace / os.unlink patched so that the process kills itself
# with SIGKILL at the Nth call: a deterministic `kill -9` at each atomic write.
KILL_AT = textwrap.dedent("""
    import os, signal, sys
    n, calls = int(os.environ["KILL_AT"]), [0]
    def armed(real):
        def wrapper(*args, **kwargs):
            calls[0] += 1
            if calls[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        return wrapper
    os.replace, os.unlink = armed(os.replace), armed(os.unlink)
    from workbench.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def _run_killed(at: int, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", KILL_AT, *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "KILL_AT": str(at)})


def _model_files(folder: Path) -> dict[str, object]:
    """The published model and its manifest (the manifest without its creation time)."""
    manifest = read_json(folder / "model_manifest.json")
    manifest.pop("created_utc", None)
    return {"model": sha256_file(folder / "model.tflite"), "manifest": manifest}


@pytest.mark.slow
def test_quantize_killed_at_every_write_then_rerun_gives_the_same_files(tmp_path, reference):
    out = tmp_path / "out"
    args = ["quantize", "reference", "--calibration", "50", "-o", out]
    clean = run_subprocess(*args, cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr
    expected = _model_files(out)            # also the "earlier model" each killed run replaces
    for at in (1, 2, 3):      # 1: the old manifest goes, 2: the model lands, 3: the manifest lands
        killed = _run_killed(at, *args, cwd=tmp_path)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        # whatever is on disk is a sound pair or a model without a manifest: never a mismatched pair
        if (out / "model_manifest.json").exists():
            assert read_json(out / "model_manifest.json")["sha256"] == sha256_file(out / "model.tflite")
        rerun = run_subprocess(*args, cwd=tmp_path)
        assert rerun.returncode == 0, rerun.stderr
        assert _model_files(out) == expected
        assert sorted(p.name for p in out.iterdir()) == ["model.tflite", "model_manifest.json"]


def test_disk_full_names_the_path_and_replaces_nothing(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        (mnt / "test.npz").write_bytes(b"earlier export")
        result = run_cli("data", "export", "--split", "test", "-o", mnt / "test.npz")
        assert result.code == 2, result
        assert "test.npz: cannot be written (No space left on device)" in result.err
        assert (mnt / "test.npz").read_bytes() == b"earlier export"
        assert sorted(p.name for p in mnt.iterdir()) == ["test.npz"]     # no temporary left
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_file_size_limit_names_the_path_and_replaces_nothing(tmp_path):
    out = tmp_path / "test.npz"
    out.write_bytes(b"earlier export")

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
    proc = run_subprocess("data", "export", "--split", "test", "-o", out, cwd=tmp_path, preexec_fn=limit)
    assert proc.returncode == 2, proc.stderr
    assert "cannot be written (File too large)" in proc.stderr and "Traceback" not in proc.stderr
    assert out.read_bytes() == b"earlier export" and sorted(p.name for p in tmp_path.iterdir()) == ["test.npz"]


def test_json_into_a_closed_pipe_ends_quietly(tmp_path):
    reader = subprocess.Popen(["head", "-c", "0"], stdin=subprocess.PIPE)
    proc = subprocess.run([sys.executable, "-m", "workbench", "data", "info", "--json"], stdout=reader.stdin,
                          stderr=subprocess.PIPE, text=True, timeout=300)
    reader.stdin.close()
    reader.wait()
    assert proc.returncode == 141 and proc.stderr == ""


def test_a_crash_inside_a_command_is_an_internal_error_with_exit_3(monkeypatch):
    from workbench.data import loaders

    def broken(*args, **kwargs):
        raise ZeroDivisionError("simulated bug")
    monkeypatch.setattr(loaders, "load_dataset", broken)
    result = run_cli("data", "info")
    assert result.code == 3
    assert "internal error: ZeroDivisionError: simulated bug" in result.err
    assert "WORKBENCH_DEBUG=1" in result.err and "Traceback" not in result.err


def test_permission_denied_is_bad_input_not_a_crash(tmp_path, monkeypatch):
    from workbench.data import loaders

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / "data.csv"))
    monkeypatch.setattr(loaders, "load_dataset", refused)
    result = run_cli("data", "info", "--dataset", tmp_path / "data.csv")
    assert result.code == 2 and "data.csv: Permission denied" in result.err


def test_two_batches_into_one_folder_wait_for_each_other(tmp_path):
    """The second holder of a folder lock waits (with a note) until the first is gone, even after kill -9."""
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from workbench._io import folder_lock
        with folder_lock({str(tmp_path)!r}):
            print("locked", flush=True)
            time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    waiter = subprocess.Popen([sys.executable, "-W", "always", "-c", textwrap.dedent(f"""
        from workbench._io import folder_lock
        with folder_lock({str(tmp_path)!r}, what="batch"):
            print("got it", flush=True)
    """)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with pytest.raises(subprocess.TimeoutExpired):
        waiter.wait(timeout=3)                     # still waiting while the first one holds the folder
    holder.kill()                                  # kill -9: the lock dies with its process
    out, err = waiter.communicate(timeout=60)
    assert out.strip() == "got it"
    assert f"pid {holder.pid}" in err and "waiting for it to finish" in err


def test_automatic_run_ids_never_share_a_folder(tmp_path):
    from workbench.batch.pipeline import _unused_run_id
    first = _unused_run_id(tmp_path, "20260101-120000")
    second = _unused_run_id(tmp_path, "20260101-120000")
    assert (first, second) == ("20260101-120000", "20260101-120000-2")
    assert (tmp_path / "runs" / first).is_dir() and (tmp_path / "runs" / second).is_dir()


def test_interrupted_atomic_write_leaves_old_content(tmp_path):
    path = tmp_path / "record.json"
    path.write_text('{"v": 1}')
    proc = subprocess.run([sys.executable, "-c", KILL_AT.replace(
        "from workbench.cli import main\nsys.exit(main(sys.argv[1:]))",
        f"from workbench._io import atomic_write_json\natomic_write_json({str(path)!r}, {{'v': 2}})")],
        env={**os.environ, "KILL_AT": "1"}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert json.loads(path.read_text()) == {"v": 1}
    assert snapshot(tmp_path).keys() >= {"record.json"}
