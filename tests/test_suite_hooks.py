"""The suite's own hooks (tests/conftest.py) under pytest-xdist, as `make test` runs them: the tests of one
expensive fixture land on one worker, a fixture got by a parameter's name marks its test `slow`, and a test
that gets an expensive fixture unseen errors instead of slowing `make test-fast` down."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFTEST = """
import os
import pytest
from tests.conftest import (  # the hooks under test
    pytest_collection_modifyitems, pytest_runtest_teardown, pytest_xdist_make_scheduler)

@pytest.fixture(scope="session")
def batch():                      # an EXPENSIVE name (group "batch"); cheap here
    return os.environ.get("PYTEST_XDIST_WORKER", "main")
"""

TESTS = """
import os
import time
import pytest

def started(name):
    with open(os.environ["TOY_LOG"], "a") as log:
        log.write(f"{name} {time.time()}\\n")

def test_one(batch): print("worker", batch)
def test_two(batch): print("worker", batch)

@pytest.mark.parametrize("fixture", ["batch"])
def test_by_name(fixture, request): print("worker", request.getfixturevalue(fixture))

def test_unseen(request): request.getfixturevalue("batch")

@pytest.mark.parametrize("i", range(6))
def test_plain(i):
    started(f"plain{i}")
    time.sleep(0.2)

@pytest.mark.slow
def test_slow_alone(): started("slow")     # in no fixture's group: its module's, handed out before single tests
"""


def test_an_expensive_fixtures_tests_share_one_worker_and_unseen_uses_error(tmp_path):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_toy.py").write_text(textwrap.dedent(TESTS))
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "TOY_LOG": str(tmp_path / "started.log")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                           "-rA", "-v", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout
    ran_on = {name: w for w, name in re.findall(r"\[(gw\d)\].* PASSED .*::(test_one|test_two|test_by_name\S*)", out)}
    assert len(ran_on) == 3, out
    assert len(set(ran_on.values())) == 1, (ran_on, out)                    # one worker builds `batch`
    assert all(f"::{name}" in out and "@batch" in out for name in ("test_one", "test_two")), out
    assert "ERROR test_toy.py::test_unseen" in out and " 1 error in" in out, out      # nothing else errs
    assert "test_unseen got the expensive fixture(s) batch but is not marked slow" in out, out
    started = dict(line.split() for line in (tmp_path / "started.log").read_text().splitlines())
    assert float(started.pop("slow")) < min(map(float, started.values())), started    # the groups go first
    fast = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "not slow",
                           "-p", "no:xdist", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    # `make test-fast` keeps the plain tests and the unseen one (which errors), never those marked by the hook
    assert re.search(r"7 passed, 4 deselected, .*1 error", fast.stdout), fast.stdout
