"""Session-wide fixtures shared by every stage's tests, and which tests are `slow`.

One reference model per test run: it is built once into a folder of this run (so the suite never
trusts a model left on the machine by an earlier run), shared by both pytest-xdist workers, and
copied into each worker's session cache.  Set NPU_WORKBENCH_TEST_CACHE to a folder to reuse models
across runs while developing.

Expensive fixtures (:data:`EXPENSIVE`) decide two things at collection: a test that uses one,
directly or through another fixture, is marked ``slow`` (``make test-fast`` leaves it out), and under
pytest-xdist (``make test``: ``-n 2 --dist loadgroup``) it joins that fixture's ``xdist_group``, so one
worker builds the fixture and runs its tests.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from pathlib import Path

import pytest

# Session- and module-scoped fixtures that build, convert, quantize or run real models: seconds to
# minutes of CPU each (measured with `pytest --durations=0 --setup-show`; see CONTRIBUTING, "Tests").
# name -> the xdist group of the tests that use it; MODULE: the test's own module (a module-scoped
# fixture); None: no group (shared between the workers another way).
MODULE = "<module>"
EXPENSIVE: dict[str, str | None] = {
    "reference": None,                                  # built once per run under a lock (below)
    "batch": "batch",                                   # tests/batch: a two-target batch (10 notebooks)
    "int8_models": "evaluate", "report": "evaluate",    # tests/evaluate: three TFLite conversions
    "models": "quantize", "quantized": "quantize", "quantized_onnx": "quantize",   # tf2onnx, quantizations
    "tiny_models": "board",                             # tests/board: TFLite conversions for the loopback board
    "clean_keras_file": "placement", "clean_tflite": "placement", "reject_tflite": "placement",
    "float_op_tflite": "placement", "dynamic_tflite": "placement", "float_model_tflite": "placement",
    "tiny_model": "sweep",                              # tests/sweep: a trained tiny model
    "daylight_audit": "calibration",
    "tiny_onnx": "convert", "converted": "convert",     # onnx2tf in its tool environment
    "torch_onnx": MODULE,
    # module-scoped
    "ex": MODULE, "tradeoff": MODULE, "keypoints": MODULE, "int8": MODULE, "serial_result": MODULE,
    "pm1_keras": MODULE, "pm1_model": MODULE, "arch_models": MODULE, "recorded": MODULE,
    "ssh_result": MODULE, "experiment": MODULE, "chain": MODULE, "result": MODULE, "bright_case": MODULE,
    "docs_session": MODULE, "tiny": MODULE, "digits_int8": MODULE, "fp16_model": MODULE,
    "grouped_models": MODULE, "spec": MODULE, "tiny_keras": MODULE,
}


def expensive_fixtures(item: pytest.Item) -> list[str]:
    """The expensive session/module fixtures ``item`` uses (its whole fixture closure), in EXPENSIVE's order."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    used = []
    for name in EXPENSIVE:
        defs = info.name2fixturedefs.get(name)
        if name in item.fixturenames and defs and defs[-1].scope in ("session", "package", "module"):
            used.append(name)
    return used


@pytest.hookimpl(tryfirst=True)      # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        used = expensive_fixtures(item)
        if not used:
            continue
        item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("xdist_group") is None:
            group = next((EXPENSIVE[n] for n in used if EXPENSIVE[n] is not None), None)
            if group == MODULE:
                group = item.nodeid.split("::", 1)[0]
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))


def run_folder(tmp_path_factory) -> Path:
    """A folder every xdist worker of this run sees (the run's base temp); the session's own without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def exclusive(path: Path):
    """Hold an exclusive ``flock`` on ``path`` (another worker waits): build a shared thing once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield

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


@pytest.fixture(scope="module")
def tiny_keras(tmp_path_factory):
    """A tiny untrained Keras classifier on 32x32x1 (``tiny.keras``, seeded; what it computes does not matter),
    alone in a folder of its own per test module: a module may put a card beside it."""
    import io

    import keras
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((32, 32, 1)), keras.layers.Conv2D(4, 3, strides=2, activation="relu"),
                              keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)])
    path = tmp_path_factory.mktemp("tiny-keras") / "tiny.keras"
    with contextlib.redirect_stdout(io.StringIO()):
        model.save(path)
    return path


@pytest.fixture(scope="session")
def digits():
    """The built-in `digits-conditions` dataset."""
    from workbench.data.loaders import load_dataset
    return load_dataset("digits-conditions")


@pytest.fixture(scope="session")
def reference(workbench_cache, digits, tmp_path_factory):
    """The reference model, built once per run: `.keras`, `.saved_model`, `.tflite`, `.onnx`.

    The first worker builds it in the run's folder (the others wait for the lock), then each worker
    copies the exports into its own session cache, where ``reference_model()`` (and a batch or a
    notebook asking for model "reference") finds them.
    """
    from workbench.models.reference import reference_model
    if os.environ.get("NPU_WORKBENCH_TEST_CACHE"):
        with exclusive(Path(workbench_cache) / "reference.test-lock"):
            return reference_model(dataset=digits)
    shared = run_folder(tmp_path_factory) / "shared-reference"
    with exclusive(shared / ".lock"):
        built = reference_model(dataset=digits, cache_root=shared)
    folder = Path(built.keras).parent
    mine = Path(workbench_cache) / "reference" / folder.name
    if not mine.exists():
        partial = mine.with_name(mine.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(folder, partial)
        partial.rename(mine)
    model = reference_model(dataset=digits)
    assert model.cache_hit and Path(model.keras).parent == mine, "the copied reference model was not reused"
    return model
