import json
import subprocess
import sys

import numpy as np


def _run(*args):
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True)


def test_data_info_json():
    proc = _run("data", "info", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["name"] == "digits-conditions" and len(info["conditions"]) >= 5
    assert info["counts"]["test"]["low-light"] == 540


def test_data_export(tmp_path):
    out = tmp_path / "ll.npz"
    proc = _run("data", "export", "--split", "test", "--condition", "low-light", "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    with np.load(out) as data:
        assert data["x"].shape == (540, 32, 32, 1) and data["x"].dtype == np.float32


def test_data_info_bad_path_is_a_clear_error(tmp_path):
    proc = _run("data", "info", "--dataset", str(tmp_path / "nope"))
    assert proc.returncode == 2 and "no such dataset" in proc.stderr
