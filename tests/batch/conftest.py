"""One real batch over two targets per session: papermill executes every stage notebook.

Small parameters keep it short (60 calibration samples, 5 timed runs).
"""

from __future__ import annotations

import pytest

TARGETS = ("imx8mp", "imx93")
SMALL = {"calibration_size": 60, "timing_runs": 5, "timing_warmup": 2}


@pytest.fixture(scope="session")
def batch_out(tmp_path_factory):
    return tmp_path_factory.mktemp("batch")


@pytest.fixture(scope="session")
def launch_dir(tmp_path_factory):
    """An empty folder the session batch is started from: nothing may be written there."""
    return tmp_path_factory.mktemp("launch")


@pytest.fixture(scope="session")
def batch(batch_out, launch_dir, reference):
    """``run_batch`` on imx8mp and imx93 (jobs=2) into a session folder, started from ``launch_dir``."""
    import os

    from workbench.batch import run_batch
    previous = os.getcwd()
    os.chdir(launch_dir)
    try:
        return run_batch(TARGETS, out=batch_out, run_id="session", jobs=2, progress=False, **SMALL)
    finally:
        os.chdir(previous)
