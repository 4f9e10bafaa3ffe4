"""Session-wide fixtures shared by every stage's tests.

One trained reference model per test session: it is trained once into a
session-private cache folder (so the suite never trusts a model left on the
machine by an earlier run) and shared by every test that needs a real model.
Set NPU_WORKBENCH_TEST_CACHE to a folder to reuse models across sessions while
developing.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(scope="session", autouse=True)
def workbench_cache(tmp_path_factory):
    """Point the workbench cache at a session folder (or NPU_WORKBENCH_TEST_CACHE)."""
    folder = os.environ.get("NPU_WORKBENCH_TEST_CACHE") or str(tmp_path_factory.mktemp("wb-cache"))
    # pinned tool environments (onnx2tf, Vela 3.10.0) stay where `make tools` installed them
    from workbench.toolenv import tools_dir
    os.environ.setdefault("NPU_WORKBENCH_TOOLS", str(tools_dir()))
    # and so does the model zoo (tests/zoo/fetch.py): downloaded and exported once per machine
    from tests.zoo.fetch import ZOO_ENV, zoo_dir
    os.environ.setdefault(ZOO_ENV, str(zoo_dir()))
    previous = os.environ.get("NPU_WORKBENCH_CACHE")
    os.environ["NPU_WORKBENCH_CACHE"] = folder
    yield folder
    if previous is None:
        os.environ.pop("NPU_WORKBENCH_CACHE", None)
    else:
        os.environ["NPU_WORKBENCH_CACHE"] = previous


@pytest.fixture(scope="session")
def digits():
    """The built-in `digits-conditions` dataset."""
    from workbench.data.loaders import load_dataset
    return load_dataset("digits-conditions")


@pytest.fixture(scope="session")
def reference(workbench_cache, digits):
    """The reference model, trained once per session: `.keras`, `.saved_model`, `.tflite`, `.onnx`."""
    from workbench.models.reference import reference_model
    return reference_model(dataset=digits)
