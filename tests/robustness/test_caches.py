"""Caches and reused records are trusted on their content hash, never on a file's presence.

A truncated or rewritten entry gives a WorkbenchWarning, is removed and computed again:
never a traceback, never a false result.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from workbench import _io
from workbench.errors import WorkbenchWarning


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _rewrite_scores(path):
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["scores"] = arrays["scores"][::-1].copy()       # other numbers, old sha256
    np.savez(path, **arrays)


def _empty(path):
    path.write_bytes(b"")


@pytest.mark.parametrize("damage", [_truncate, _rewrite_scores, _empty])
def test_evaluation_cache_entry_damaged_is_redone_with_a_note(damage):
    from workbench.evaluate import cache
    ids = np.array([f"s{i}" for i in range(20)])
    scores = np.random.default_rng(0).random((20, 10)).astype(np.float32)
    key = "robustness-" + damage.__name__
    path = cache.save_scores(key, ids, scores)
    np.testing.assert_array_equal(cache.load_scores(key, ids), scores)
    damage(path)
    with pytest.warns(WorkbenchWarning, match="is damaged"):
        assert cache.load_scores(key, ids) is None
    assert not path.exists()


@pytest.mark.parametrize("damage", [_truncate, _empty])
def test_evaluation_outputs_cache_damaged_is_redone(damage):
    from workbench.evaluate import cache
    ids = np.array(["a", "b"])
    path = cache.save_outputs("robust-out-" + damage.__name__, ids, [np.ones((2, 3)), np.zeros((2, 2))])
    damage(path)
    with pytest.warns(WorkbenchWarning, match="is damaged"):
        assert cache.load_outputs("robust-out-" + damage.__name__, ids) is None


@pytest.mark.parametrize("module", ["models/predict/runtime_tflite.py", "models/contract/pixels.py"])
def test_evaluation_cache_key_covers_every_predictor_and_contract_module(monkeypatch, module):
    """A change to any module of the predictor or contract packages (not only their __init__) is a miss."""
    from workbench.evaluate import cache
    real = cache.sha256_file
    before = cache._predictor_code()
    edited = lambda path: "edited" if str(path).replace("\\", "/").endswith(module) else real(path)  # noqa: E731
    monkeypatch.setattr(cache, "sha256_file", edited)
    cache._predictor_code.cache_clear()
    try:
        assert cache._predictor_code() != before
    finally:
        cache._predictor_code.cache_clear()


@pytest.mark.parametrize("module", ["keras_graph.py", "onnx_graph.py", "numeric.py"])
def test_equalize_cache_key_covers_every_module_of_the_transforms(monkeypatch, module):
    """+cle/+bc models are cached under a key holding the transforms' code: every module of the package."""
    from workbench.quantize import equalize
    real = equalize.sha256_file
    before = equalize._code_hash()
    monkeypatch.setattr(equalize, "sha256_file", lambda path: "edited" if str(path).endswith(module) else real(path))
    assert equalize._code_hash() != before


@pytest.mark.parametrize("edit", ["truncate", "value", "not-json", "list"])
def test_sealed_json_entry_edited_is_refused(tmp_path, edit):
    path = _io.write_sealed_json(tmp_path / "entry.json", {"clip_rate": 0.25, "rows": [1, 2]})
    assert _io.read_sealed_json(path) == {"clip_rate": 0.25, "rows": [1, 2]}
    text = path.read_text()
    path.write_text({"truncate": text[:20], "value": text.replace("0.25", "0.0"), "not-json": "NaN",
                     "list": "[1, 2]"}[edit])
    with pytest.warns(WorkbenchWarning, match="is damaged"):
        assert _io.read_sealed_json(path) is None
    assert not path.exists()


def test_sealed_folder_detects_a_changed_missing_or_unsealed_file(tmp_path):
    folder = tmp_path / "entry"
    folder.mkdir()
    (folder / "a.txt").write_text("a")
    (folder / "sub").mkdir()
    (folder / "sub" / "b.bin").write_bytes(b"b")
    _io.seal_folder(folder)
    assert _io.check_folder_seal(folder) is None
    (folder / "sub" / "b.bin").write_bytes(b"B")
    assert "does not match" in _io.check_folder_seal(folder)
    (folder / "sub" / "b.bin").unlink()
    assert _io.check_folder_seal(folder)
    (folder / _io.SEAL_FILE).unlink()
    assert "is missing" in _io.check_folder_seal(folder)


def test_quantize_cache_entry_with_a_changed_model_is_redone(tmp_path):
    from workbench.quantize import cache
    manifest = {"schema": "npu-workbench/model-manifest/1", "file": "model.tflite",
                "sha256": _io.sha256_bytes(b"model"), "size_bytes": 5}
    model, _ = cache.store("robustness-key", ".tflite", b"model", manifest)
    assert cache.lookup("robustness-key", ".tflite") is not None
    model.write_bytes(b"other")
    with pytest.warns(WorkbenchWarning, match="is damaged"):
        assert cache.lookup("robustness-key", ".tflite") is None
    assert not model.parent.exists()


def test_manifest_json_never_holds_nan(tmp_path):
    from workbench._io import atomic_write_json
    path = atomic_write_json(tmp_path / "m.json", {"scale": np.float32("nan"), "zp": np.int64(3)})
    assert json.loads(path.read_text()) == {"scale": None, "zp": 3}


def test_entry_lock_lets_one_process_compute_an_entry_while_the_other_waits(tmp_path):
    """Two kernels of a batch needing one cache entry: the second enters only after the first left."""
    import subprocess
    import sys
    import time

    from workbench._io import entry_lock
    entry = tmp_path / "audit" / "key.json"
    code = ("import sys, time, pathlib\n"
            "from workbench._io import entry_lock\n"
            "entry, held, done = map(pathlib.Path, sys.argv[1:])\n"
            "with entry_lock(entry):\n"
            "    held.write_text('1')\n"
            "    time.sleep(1.0)\n"
            "    done.write_text('1')\n")
    held, done = tmp_path / "held", tmp_path / "done"
    proc = subprocess.Popen([sys.executable, "-c", code, str(entry), str(held), str(done)])
    try:
        deadline = time.monotonic() + 120
        while not held.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the other process never took the lock"
            time.sleep(0.05)
        with entry_lock(entry):
            assert done.exists(), "entered while the other process still held the entry"
    finally:
        proc.wait(timeout=120)
    assert proc.returncode == 0 and (entry.parent / "key.json.lock").exists() and not entry.exists()
