"""One real batch over two targets per session: papermill executes every stage notebook.

Small parameters keep it short (60 calibration samples, 5 timed runs).  The accuracy
stage runs when ``workbench.evaluate.accuracy`` exists (stage 3 of the project).
"""

from __future__ import annotations

import importlib.util

import pytest

TARGETS = ("imx8mp", "imx93")
SMALL = {"calibration_size": 60, "timing_runs": 5, "timing_warmup": 2}


def has_evaluate() -> bool:
    try:
        return importlib.util.find_spec("workbench.evaluate.accuracy") is not None
    except ModuleNotFoundError:
        return False


STAGES = None if has_evaluate() else ["calibration", "quantize", "placement", "timing"]


@pytest.fixture(scope="session")
def batch_out(tmp_path_factory):
    return tmp_path_factory.mktemp("batch")


@pytest.fixture(scope="session")
def batch(batch_out, reference):
    """``run_batch`` on imx8mp and imx93 (jobs=2) into a session folder."""
    from workbench.batch import run_batch
    return run_batch(TARGETS, out=batch_out, run_id="session", jobs=2, stages=STAGES, progress=False, **SMALL)
