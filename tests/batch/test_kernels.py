"""Warm kernels (workbench/batch/kernels.py): a reused kernel runs the next notebook as a new one would.

Real papermill executions on the npu-workbench kernel through the batch's own ``Runner._execute``.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from workbench.batch.execute import Runner
from workbench.batch.export import Scrubber

# notebook "a" leaves everything a notebook can leave behind in its kernel
LEAVES_STATE = [
    "x = 41",
    "import os, sys, types, warnings\n"
    "os.environ['WB_TEST_LEAK'] = '1'\n"
    "os.chdir('/')\n"
    "sys.path.append('/wb-test-leak')\n"
    "warnings.simplefilter('ignore', FutureWarning)",
    # a module (stays imported, as TensorFlow does) whose warning shows once per location
    "mod = types.ModuleType('wb_test_mod')\n"
    "exec(\"import warnings\\ndef warn():\\n    warnings.warn('wb-test-warning', UserWarning)\", mod.__dict__)\n"
    "sys.modules['wb_test_mod'] = mod\n"
    "mod.warn()",
    "import matplotlib.pyplot as plt\nplt.figure()\nplt.rcParams['lines.linewidth'] = 7",
]
# notebook "b" reports what it finds
LOOKS = [
    "import json, os, sys, warnings\n"
    "import matplotlib.pyplot as plt\n"
    "import wb_test_mod\n"
    "wb_test_mod.warn()\n"
    "print(json.dumps({'x': 'x' in globals(), 'env': os.environ.get('WB_TEST_LEAK'), 'cwd': os.getcwd(),\n"
    "                  'path': '/wb-test-leak' in sys.path, 'figures': len(plt.get_fignums()),\n"
    "                  'linewidth': plt.rcParams['lines.linewidth'],\n"
    "                  'future_ignored': any(f[0] == 'ignore' and f[2] is FutureWarning for f in warnings.filters)}))",
]
# a figure made and not shown: the inline backend shows it at the end of the cell, in a new kernel or a reused one
PLOTS = ["import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 2))\nplt.plot([0, 1], [1, 0]);"]
# a notebook that leaves its kernel on another backend (a library calling matplotlib.use("Agg"))
AGG = ["import matplotlib\nmatplotlib.use('Agg')"]
DIES = ["import os\nos._exit(3)"]
PID = ["import os\nprint(os.getpid())"]


def _notebook(folder, name, cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "npu-workbench", "display_name": "npu-workbench", "language": "python"}
    nbformat.write(nb, folder / f"{name}.ipynb")


@pytest.fixture
def runner(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for name, cells in (("a", LEAVES_STATE), ("b", LOOKS), ("dies", DIES), ("pid", PID), ("plots", PLOTS),
                        ("agg", AGG)):
        _notebook(notebooks, name, cells)
    out = tmp_path / "out"
    out.mkdir()
    r = Runner(out, notebooks, "npu-workbench", 300, False, scrubber=Scrubber(out))
    yield r
    r.close()


def _outputs(runner, stage):
    nb = nbformat.read(runner.out_dir / "t" / f"{stage}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    return code, [o for c in code for o in c.get("outputs", [])]


def test_a_reused_kernel_runs_the_next_notebook_as_a_new_kernel_would(runner):
    first = runner._execute("t", "a", {})
    assert first.status == "ok", first.error
    code, outputs = _outputs(runner, "a")
    assert any("wb-test-warning" in o.get("text", "") for o in outputs)
    second = runner._execute("t", "b", {})
    assert second.status == "ok", second.error
    assert runner.kernels.started == 1, "the second notebook should run on the first one's kernel"
    code, outputs = _outputs(runner, "b")
    assert code[0].execution_count == 1
    seen = json.loads(next(o["text"] for o in outputs if o.get("name") == "stdout"))
    # "cwd": the output folder, which the executed notebook writes as "." (no absolute path in reports)
    assert seen == {"x": False, "env": None, "cwd": ".", "path": False, "figures": 0,
                    "linewidth": seen["linewidth"], "future_ignored": False}, seen
    assert seen["linewidth"] != 7
    # the module's warning shows again, as in a new kernel (its registry is not left from notebook a)
    assert any("wb-test-warning" in o.get("text", "") for o in outputs if o.get("name") == "stderr"), outputs


def _pid(runner) -> int:
    assert runner._execute("t", "pid", {}).status == "ok"
    return int(next(o["text"] for o in _outputs(runner, "pid")[1] if o.get("name") == "stdout"))


def test_a_dead_kernel_is_replaced_and_fresh_mode_starts_one_per_notebook(runner):
    first = _pid(runner)
    assert _pid(runner) == first and runner.kernels.started == 1
    dead = runner._execute("t", "dies", {})
    assert dead.status == "failed" and "DeadKernelError" in (dead.error or ""), dead
    after = _pid(runner)
    assert after != first and runner.kernels.started == 2
    runner.kernels.fresh = True
    pids = {_pid(runner), _pid(runner)}
    assert len(pids) == 2 and after not in pids and runner.kernels.started == 4


def test_a_reused_kernel_still_shows_the_figures_a_cell_draws(runner):
    """The reset restores matplotlib's rc from a snapshot taken before the inline backend was loaded; it
    must not turn interactive mode off (figures would vanish from every report after the first)."""
    for k in range(3):
        if k == 2:                                       # a notebook switched the kernel to Agg in between
            assert runner._execute("t", "agg", {}).status == "ok"
        assert runner._execute("t", "plots", {}).status == "ok"
        images = [o for o in _outputs(runner, "plots")[1] if "image/png" in o.get("data", {})]
        assert len(images) == 1, f"notebook run {k + 1} on the kernel: {len(images)} figure(s) shown"
    assert runner.kernels.started == 1
