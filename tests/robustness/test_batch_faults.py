"""A batch killed with SIGKILL and run again gives the same results as an uninterrupted one;
shared artifacts of a batch hold no absolute path of this machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench._io import cache_dir, read_json, sha256_file

from .conftest import run_subprocess

ARGS = ["batch", "--targets", "imx93", "--stages", "calibration,quantize", "--calibration-size", "20",
        "--run-id", "r", "--no-progress"]
VOLATILE = {"saved_utc", "created_utc", "seconds", "train_seconds", "cache_hit"}  # provenance, not content


def _stable(obj):
    if isinstance(obj, dict):
        return {k: _stable(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_stable(v) for v in obj]
    return obj


def _results(out: Path) -> dict[str, object]:
    run = out / "runs" / "r" / "imx93"
    return {"files": sorted(p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file()),
            "calibration": _stable(read_json(run / "calibration.json")),
            "quantize": _stable(read_json(run / "quantize.json")),
            "manifest": _stable(read_json(run / "model" / "model_manifest.json")),
            "model": sha256_file(run / "model" / "model.tflite")}


@pytest.mark.slow
def test_batch_killed_then_rerun_matches_and_artifacts_hold_no_machine_paths(tmp_path, reference):
    clean = run_subprocess(*ARGS, "--out", tmp_path / "clean", cwd=tmp_path, timeout=900)
    assert clean.returncode == 0, clean.stderr[-2000:]
    expected = _results(tmp_path / "clean")
    # shared artifacts: executed notebooks, run JSON, HTML, summaries
    leaks = {str(Path.cwd()), str(Path(__file__).resolve().parents[2]), str(cache_dir()),
             os.path.realpath(cache_dir()), os.path.expanduser("~") + "/", str(tmp_path)}
    for path in (tmp_path / "clean").rglob("*"):
        if path.is_file() and path.suffix in (".ipynb", ".json", ".html", ".csv"):
            text = path.read_text(encoding="utf-8", errors="replace")
            found = [leak for leak in leaks if leak in text]
            assert not found, f"{path.relative_to(tmp_path)} holds {found}"

    # kill -9 the batch and its kernels once the first stage has saved its record
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "workbench", *ARGS, "--out", str(killed)], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    marker = killed / "runs" / "r" / "imx93" / "calibration.json"
    deadline = time.monotonic() + 600
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    rerun = run_subprocess(*ARGS, "--out", killed, cwd=tmp_path, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert _results(killed) == expected

