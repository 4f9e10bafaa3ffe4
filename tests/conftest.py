"""Session-wide fixtures shared by every stage's tests, and which tests are `slow`.

One reference model per test run: it is built once into a folder of this run (so the suite never
trusts a model left on the machine by an earlier run), shared by both pytest-xdist workers, and
copied into each worker's session cache.  Set NPU_WORKBENCH_TEST_CACHE to a folder to reuse models
across runs while developing.

Expensive fixtures (:data:`EXPENSIVE`) decide two things at collection: a test that uses one,
directly or through another fixture, is marked ``slow`` (``make test-fast`` leaves it out), and under
pytest-xdist (``make test``: ``-n 2 --dist loadgroup``) it joins that fixture's ``xdist_group``, so one
worker builds the fixture and runs its tests (another slow test joins its module's group).  The groups
are handed out first, largest first (:func:`pytest_xdist_make_scheduler`), the single tests last.
"""

from __future__ import annotations

import contextlib
import dataclasses
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
    "grouped_models": MODULE, "spec": MODULE, "tiny_keras": MODULE, "three_runs": MODULE, "run_folder": MODULE,
    "reference_tflite": MODULE, "pair": MODULE, "prelu_model": MODULE, "wide_channel_model": MODULE,
    "padded_model": MODULE,
}


WIDE = ("session", "package", "module")


def _wide(defs) -> bool:
    """The fixture definitions ``defs`` (the last one wins) are shared beyond one test."""
    return bool(defs) and defs[-1].scope in WIDE


def expensive_fixtures(item: pytest.Item) -> list[str]:
    """The expensive session/module fixtures ``item`` uses, in EXPENSIVE's order: its whole fixture closure,
    and a fixture it gets by name (``request.getfixturevalue(name)``) from a parameter's value."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    by_name = set()
    if "request" in info.argnames and hasattr(item, "callspec"):     # the test itself takes `request`
        by_name = {v for v in item.callspec.params.values() if isinstance(v, str) and v in EXPENSIVE}
    manager = item.session._fixturemanager
    return [name for name in EXPENSIVE
            if (name in item.fixturenames and _wide(info.name2fixturedefs.get(name)))
            or (name in by_name and _wide(manager.getfixturedefs(name, item)))]


@pytest.hookimpl(trylast=True)      # after the fixtures are torn down (a failure before would skip that)
def pytest_runtest_teardown(item):
    """A test not marked ``slow`` that got an expensive fixture anyway (``request.getfixturevalue`` of a name
    expensive_fixtures() did not see) errors: ``make test-fast`` would pay for that fixture unawares."""
    request = getattr(item, "_request", None)
    if request is None or item.get_closest_marker("slow") is not None:
        return
    manager = item.session._fixturemanager
    missed = [name for name in request.fixturenames if name in EXPENSIVE and name not in item.fixturenames
              and _wide(manager.getfixturedefs(name, item))]
    if missed:
        pytest.fail(f"{item.nodeid} got the expensive fixture(s) {', '.join(missed)} but is not marked slow: "
                    "teach expensive_fixtures() in tests/conftest.py how it gets them, or mark the test "
                    "@pytest.mark.slow.", pytrace=False)


@pytest.hookimpl(wrapper=True)       # around pytest-xdist's hook: mark before it, check its ids after
def pytest_collection_modifyitems(config, items):
    mark_expensive(items)
    result = yield
    if getattr(config.option, "loadgroup", False):      # a pytest-xdist worker under --dist loadgroup
        group_ids(items)
    return result


def group_ids(items) -> None:
    """Give each grouped test the ``<nodeid>@<group>`` id pytest-xdist's scheduler groups by, where its hook
    could not: pytest 9.2 keeps a structured node id, and pytest-xdist 3.8 still writes the old
    ``item._nodeid`` (pytest-xdist issue 1386), so every xdist_group was silently spread over both workers
    and each expensive session fixture built twice."""
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        nodeid = item.nodeid
        ident = getattr(item, "_id", None)
        if not names or nodeid.rfind("@") > nodeid.rfind("]") or not dataclasses.is_dataclass(ident):
            continue                                    # no group, already grouped, or an older pytest
        # the parameters go into the last name, so the id's every string form ends with "@<group>"
        last = ident.names[-1] + ("" if ident.params is None else f"[{ident.params}]")
        item._id = dataclasses.replace(ident, names=(*ident.names[:-1], f"{last}@{'_'.join(names)}"), params=None)


def mark_expensive(items) -> None:
    """Mark ``slow`` every test that uses an expensive fixture, and put it in that fixture's xdist_group; a
    slow test in no group joins its module's (what a module's slow tests build, they often share)."""
    for item in items:
        used = expensive_fixtures(item)
        if used:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("slow") is None or item.get_closest_marker("xdist_group") is not None:
            continue
        group = next((EXPENSIVE[n] for n in used if EXPENSIVE[n] is not None), MODULE)
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0] if group == MODULE else group))


@pytest.hookimpl(optionalhook=True)      # a hook of pytest-xdist: unknown with -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` handing out the groups first, largest first, and the single tests after them.

    Every slow test is in a group, so the long work starts early and the end of the run is many short
    tests, which even out the two workers (pytest-xdist's own order put the zoo's 25-50 s batches last,
    in collection order, while the other worker idled)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class GroupsFirst(LoadGroupScheduling):
        ordered = False

        def _assign_work_unit(self, node):
            if not self.ordered:         # the queue is complete at the first assignment: order it once
                units = sorted(self.workqueue.items(), key=lambda unit: ("::" in unit[0], -len(unit[1])))
                self.workqueue.clear()
                self.workqueue.update(units)
                self.ordered = True
            super()._assign_work_unit(node)

    return GroupsFirst(config, log)


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
    """The reference model, built once per run: `.keras`, `.saved_model`, `.tflite` (the `.onnx` when asked for).

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
