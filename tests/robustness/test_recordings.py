"""Board recordings as a hostile or careless user hands them over: edited, negative, NaN, incomplete.

Each case copies the committed real recording (tests/board/fixtures/replay/loopback-python), changes
one thing, and replays it through ``workbench bench --replay``: exit 2 with a message naming the file
or the value, never a latency."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from workbench._io import sha256_file
from workbench.board.record import FILES, MANIFEST, OUTPUT, STDERR, SUMS

from .conftest import run_cli

REPLAY = Path(__file__).resolve().parents[1] / "board" / "fixtures" / "replay"
A1 = Path(__file__).resolve().parents[1] / "board" / "fixtures" / "A1.log"


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "rec"
    shutil.copytree(REPLAY / "loopback-python", folder)
    shutil.copyfile(REPLAY / "tiny_int8.tflite", tmp_path / "tiny_int8.tflite")
    return folder


def _reseal(folder: Path) -> None:
    """What a careful forger does: rewrite SHA256SUMS after the edit (the sums are not a signature)."""
    (folder / SUMS).write_text("".join(f"{sha256_file(folder / n)}  {n}\n" for n in FILES if (folder / n).is_file()))


def _runs(folder: Path, edit) -> None:
    line = json.loads((folder / OUTPUT).read_text().strip().splitlines()[-1])
    edit(line)
    (folder / OUTPUT).write_text(json.dumps(line) + "\n")


def _replay(tmp_path: Path, folder: Path):
    return run_cli("bench", tmp_path / "tiny_int8.tflite", "--replay", folder)


def test_the_committed_recording_replays(tmp_path):
    result = _replay(tmp_path, _copy(tmp_path))
    assert result.code == 0 and "replayed from loopback-sshd" in result.out, result


def _negate(line):
    line["runs_us"] = [-v for v in line["runs_us"]]


def _nan_first(line):
    line["first_inference_us"] = float("nan")


def _text_runs(line):
    line["runs_us"] = "123"


def _bool_run(line):
    line["runs_us"][0] = True


def _negative_cold(line):
    line["cold_start_us"] = -1.0


EDITED = [("negative-runs", _negate, "runs_us = -"), ("nan-first-inference", _nan_first, "first_inference_us = nan"),
          ("runs-as-text", _text_runs, "runs_us (str, not a list of numbers)"),
          ("bool-run", _bool_run, "True is not a number"), ("negative-cold-start", _negative_cold, "cold_start_us = -1.0")]


@pytest.mark.parametrize("edit,phrase", [c[1:] for c in EDITED], ids=[c[0] for c in EDITED])
def test_an_edited_output_is_refused_by_name(tmp_path, edit, phrase):
    folder = _copy(tmp_path)
    _runs(folder, edit)
    result = _replay(tmp_path, folder)
    assert result.code == 2 and "runner_output.txt changed after it was recorded" in result.err, result
    _reseal(folder)                 # sums rewritten too: the numbers themselves are still checked
    result = _replay(tmp_path, folder)
    assert result.code == 2 and phrase in result.err and "Traceback" not in result.err, result
    assert "mean" not in result.out


@pytest.mark.parametrize("name", [MANIFEST, STDERR])
def test_any_changed_file_is_named(tmp_path, name):
    folder = _copy(tmp_path)
    with open(folder / name, "a") as handle:
        handle.write(" ")
    result = _replay(tmp_path, folder)
    assert result.code == 2 and f"{name} changed after it was recorded" in result.err, result


def test_a_missing_listed_file_is_named(tmp_path):
    folder = _copy(tmp_path)
    (folder / STDERR).unlink()
    result = _replay(tmp_path, folder)
    assert result.code == 2 and f"{STDERR}, listed in {SUMS}, is missing" in result.err, result


def test_a_file_added_after_the_recording_is_refused(tmp_path):
    folder = _copy(tmp_path)
    (folder / "accuracy_output.txt").write_text('{"ok": true, "outputs": {}}\n')
    result = _replay(tmp_path, folder)
    assert result.code == 2 and "accuracy_output.txt is not listed in SHA256SUMS" in result.err, result


def test_a_recording_without_sums_is_refused(tmp_path):
    folder = _copy(tmp_path)
    (folder / SUMS).unlink()
    result = _replay(tmp_path, folder)
    assert result.code == 2 and "has no SHA256SUMS" in result.err, result


@pytest.mark.parametrize("text", ["", "zz  recording.json\n", f"{'0' * 64}  ../../etc/passwd\n",
                                  f"{'0' * 64}  recording.json\n{'0' * 64}  recording.json\n"])
def test_a_garbled_sums_file_is_refused(tmp_path, text):
    folder = _copy(tmp_path)
    (folder / SUMS).write_text(text)
    result = _replay(tmp_path, folder)
    assert result.code == 2 and SUMS in result.err and "Traceback" not in result.err, result


@pytest.mark.parametrize("key,value,phrase", [("runs", -5, "runs -5 is not a count"),
                                              ("warmup", "many", "warmup 'many' is not a count"),
                                              ("model_sha256", "abc", "model_sha256 'abc' is not a sha256"),
                                              ("runner", "rm -rf", "runner 'rm -rf'"),
                                              ("returncode", 0.5, "returncode 0.5")])
def test_a_resealed_manifest_with_bad_values_is_refused(tmp_path, key, value, phrase):
    folder = _copy(tmp_path)
    data = json.loads((folder / MANIFEST).read_text())
    data[key] = value
    (folder / MANIFEST).write_text(json.dumps(data))
    _reseal(folder)
    result = _replay(tmp_path, folder)
    assert result.code == 2 and phrase in result.err and "Traceback" not in result.err, result


def test_a_manifest_that_is_a_list_is_refused(tmp_path):
    folder = _copy(tmp_path)
    (folder / MANIFEST).write_text("[1, 2]")
    _reseal(folder)
    result = _replay(tmp_path, folder)
    assert result.code == 2 and "not a readable board recording" in result.err, result


@pytest.mark.parametrize("old,new,phrase", [
    ("Inference (avg): 2525.59", "Inference (avg): -2525.59", "inference_avg_us = -2525.59"),
    ("avg=2525.59", "avg=-2525.59", "avg = -2525.59"),
    ("min=2471", "min=-2471", "min = -2471"), ("curr=4625131", "curr=-4625131", "curr = -4.62513e+06")])
def test_a_live_log_with_a_negative_time_is_refused(tmp_path, old, new, phrase):
    text = A1.read_text()
    assert old in text
    log = tmp_path / "run.log"
    log.write_text(text.replace(old, new, 1))
    result = run_cli("parse-benchmark", log)
    assert result.code == 2 and "negative time" in result.err and phrase in result.err, result


def test_a_fresh_recording_lists_every_file(tmp_path):
    from workbench.board.record import Recording, load_recording, save_recording
    rec = Recording(model_name="m.tflite", model_sha256="a" * 64, runner="python", recorded_at="2026-12-01")
    folder = save_recording(tmp_path / "r", rec, stdout="{}\n", stderr="", accuracy_stdout="{}\n")
    names = sorted(re.findall(r"  (\S+)\n", (folder / SUMS).read_text()))
    assert names == sorted(FILES)
    load_recording(folder)
