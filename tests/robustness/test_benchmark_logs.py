"""Benchmark logs (the board engineer's parser) as a hostile or careless user gives them.

The logs are the recorded fixtures of tests/board/fixtures (real benchmark_model output),
with one line changed per case."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import run_cli

A1 = Path(__file__).resolve().parents[1] / "board" / "fixtures" / "A1.log"


def _edit(old: str, new: str):
    return lambda text: text.replace(old, new)


CASES = [
    ("inference-avg-nan", _edit("Inference (avg): 2525.59", "Inference (avg): nan"), "not a finite number"),
    ("inference-avg-inf", _edit("Inference (avg): 2525.59", "Inference (avg): inf"), "not a finite number"),
    ("stat-avg-nan", _edit("avg=2525.59", "avg=nan"), "not a finite number"),
    ("failed-at-the-end", lambda t: t + "Benchmarking failed.\n", "benchmarking failed"),
    ("failed-in-the-middle", _edit("Initialized session in", "Benchmarking failed.\nInitialized session in"),
     "benchmarking failed"),
    ("empty", lambda t: "", "holds no benchmark_model output"),
    ("binary", lambda t: "\x00\xff garbage", "holds no benchmark_model output"),
]


@pytest.mark.parametrize("edit,phrase", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_log_that_is_not_a_measurement_is_exit_2(tmp_path, edit, phrase):
    log = tmp_path / "run.log"
    log.write_text(edit(A1.read_text()))
    result = run_cli("parse-benchmark", log, "--json")
    assert result.code == 2, result
    assert phrase in result.err and "Traceback" not in result.err
    assert '"error"' in result.out                     # --json callers get a JSON error object


def test_the_unedited_log_still_parses():
    result = run_cli("parse-benchmark", A1)
    assert result.code == 0, result


def test_missing_log_names_the_file(tmp_path):
    result = run_cli("parse-benchmark", tmp_path / "nope.log")
    assert result.code == 2 and "nope.log" in result.err and "does not exist" in result.err
