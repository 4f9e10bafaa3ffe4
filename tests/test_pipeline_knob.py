"""A new knob reaches every client by adding one field to a stage's options (and, for a notebook
parameter, its name in ``OPTION_PARAMETERS``): the CLI's flags and the spec they build, the stage
notebooks (their parameters through papermill), ``run_batch``, the sweep's cells, the explorer and the
calibration experiment.  None of those clients is edited here: the knob is added the way a developer
adds one (a field on ``EvaluationOptions``, registered in ``workbench/pipeline/spec.py``'s tables).

Each client is run for real up to the ``Pipeline`` it builds; :func:`stop_at_pipeline` records the
spec it is given and stops there (what the stages would compute with the knob is not the point).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from workbench import cli
from workbench.pipeline import spec as spec_module
from workbench.pipeline.options import EvaluationOptions
from workbench.pipeline.spec import RunSpec

ROOT = Path(__file__).resolve().parents[1]


class Reached(Exception):
    """A client built its Pipeline (raised by :func:`stop_at_pipeline` once the spec is recorded)."""


@pytest.fixture
def knob(monkeypatch):
    """``EvaluationOptions`` with one more field, ``knob`` (notebook parameter ``knob``), registered as the
    evaluation stage's options: the one change a new option is."""
    extended = dataclasses.make_dataclass("EvaluationOptions", [("knob", int, dataclasses.field(default=0))],
                                          bases=(EvaluationOptions,), frozen=True, namespace={"__module__": __name__})
    monkeypatch.setitem(spec_module.OPTION_GROUPS, "evaluation", extended)
    monkeypatch.setitem(spec_module.OPTION_PARAMETERS, ("evaluation", "knob"), "knob")
    return extended


@pytest.fixture
def stop_at_pipeline(monkeypatch):
    """The specs the clients build their Pipeline with (each construction recorded, then :class:`Reached`)."""
    from workbench.pipeline import core
    seen: list[RunSpec] = []

    def record(self, spec, *args, **kwargs):
        seen.append(spec)
        raise Reached(spec.summary())

    monkeypatch.setattr(core.Pipeline, "__init__", record)
    return seen


def test_a_spec_carries_the_knob_through_its_one_translation(knob):
    spec = RunSpec("m.keras", "digits-conditions", target="imx93", evaluation=knob(knob=3), resolve=False)
    assert RunSpec("m.keras", resolve=False).evaluation == knob()          # the registered class is the default
    assert spec.to_parameters(stage="accuracy")["knob"] == 3
    assert "knob" not in spec.to_parameters(stage="calibration")           # only the stages that read it
    assert RunSpec.from_parameters(spec.to_parameters(), resolve=False) == spec
    assert spec.replace(target="imx95", evaluation={"split": "test"}).evaluation.knob == 3


def test_the_cli_has_a_flag_for_it_and_builds_the_spec_with_it(knob):
    """``workbench batch|sweep|calibrate-experiment --knob 3``: argument parsing -> spec."""
    from workbench.batch.commands import batch_spec
    from workbench.sweep.commands import sweep_spec
    parser = cli.build_parser()                    # built after the knob exists: its flags read the tables
    batch = batch_spec(parser.parse_args(["batch", "--targets", "imx93", "--knob", "3", "--calibration-size", "64"]))
    assert batch.evaluation.knob == 3 and batch.calibration.n == 64
    sweep = sweep_spec(parser.parse_args(["sweep", "--targets", "imx93", "--knob", "3", "--sizes", "64"]))
    assert sweep.evaluation.knob == 3 and sweep.options()["evaluation"].knob == 3
    from workbench.calibration.commands import experiment_spec
    experiment = experiment_spec(parser.parse_args(["calibrate-experiment", "--model", "m.keras", "-n", "16",
                                                    "--knob", "3"]))
    assert experiment.evaluation.knob == 3
    assert batch_spec(parser.parse_args(["batch"])).evaluation.knob == 0
    with pytest.raises(SystemExit):
        parser.parse_args(["batch", "--knob", "three"])


def test_run_batch_keywords_take_the_knob(knob):
    from workbench.batch.options import batch_request
    spec, _ = batch_request(knob=3, calibration_size=64)
    assert spec.evaluation.knob == 3 and spec.to_parameters(stage="accuracy")["knob"] == 3


def test_a_stage_notebook_builds_its_pipeline_with_the_knob(knob, stop_at_pipeline, tiny_keras, tmp_path):
    """Papermill writes the spec's parameters into the real 30_accuracy notebook; its own cells then build
    the run folder's Pipeline from ``globals()`` (executed here in this process, cell by cell)."""
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook
    spec = RunSpec(str(tiny_keras), "digits-conditions", target="imx93", evaluation=knob(knob=3), resolve=False)
    params = {**spec.to_parameters(stage="accuracy"), "run_dir": str(tmp_path / "run")}
    nb = parameterize_notebook(load_notebook_node(str(ROOT / "notebooks" / "30_accuracy_by_condition.ipynb")),
                               params)
    injected = next(c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert "knob = 3" in injected.source
    namespace: dict = {}
    with pytest.raises(Reached):
        for cell in nb.cells:
            if cell.cell_type == "code":
                exec(compile(cell.source, "notebook", "exec"), namespace)   # noqa: S102 - the notebook's own code
    assert stop_at_pipeline[-1].evaluation.knob == 3 and stop_at_pipeline[-1].source_model == str(tiny_keras)


def test_the_sweep_cells_take_the_knob(knob, stop_at_pipeline, tiny_keras):
    from workbench.sweep.cell import cell_key
    from workbench.sweep.plan import SweepCell, SweepSpec
    from workbench.sweep.run import sweep
    spec = SweepSpec(model=str(tiny_keras), targets="imx93", recipes="a8w8_pc", strategies="random,stratified",
                     sizes="32", evaluation=knob(knob=3))
    result = sweep(spec=spec, executor="serial", cache=False, progress=False)
    assert len(stop_at_pipeline) == 2 and all(s.evaluation.knob == 3 for s in stop_at_pipeline)
    assert all("Reached" in (c.error or "") for c in result.cells)           # each cell built its Pipeline
    cell = SweepCell(target="imx93", recipe="a8w8_pc", strategy="random", size=32)
    plain = dataclasses.replace(spec, evaluation=None)
    assert cell_key(cell, spec, "m", "d") != cell_key(cell, plain, "m", "d")   # a cell made without it is not reused


def test_the_explorer_takes_the_knob(knob, stop_at_pipeline, tiny_keras):
    from workbench.explore import explorer
    ex = explorer(model=str(tiny_keras), target="imx93", compute=False,
                  spec=RunSpec(evaluation=knob(knob=3), resolve=False))
    with pytest.raises(Reached):
        ex.pipeline()
    assert stop_at_pipeline[-1].evaluation.knob == 3 and stop_at_pipeline[-1].target == "imx93"


def test_the_calibration_experiment_takes_the_knob(knob, stop_at_pipeline, tiny_keras):
    from workbench.calibration.experiment import compare_calibration_strategies
    with pytest.raises(Reached):
        compare_calibration_strategies(str(tiny_keras), "digits-conditions", n=16,
                                       spec=RunSpec(evaluation=knob(knob=3), resolve=False))
    assert stop_at_pipeline[-1].evaluation.knob == 3 and stop_at_pipeline[-1].calibration.n == 16


STAGE_NOTEBOOK = {"cells": [
    {"cell_type": "code", "id": "parameters", "metadata": {"tags": ["parameters"]}, "source":
        'target: str = ""  # target\nknob: int = 0  # the new knob\ncalibration_size: int = 200  # samples\n'
        'run_dir: str = ""  # run folder', "outputs": [], "execution_count": None},
    {"cell_type": "code", "id": "write", "metadata": {}, "outputs": [], "execution_count": None, "source":
        'import json\nopen(f"knob-{target}.json", "w").write(json.dumps({"knob": knob, "n": calibration_size}))'}],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                 "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.slow
def test_run_batch_passes_the_knob_to_the_notebooks(knob, tmp_path):
    """A real batch (papermill, a kernel) over a stage notebook that declares the knob, as CONTRIBUTING asks
    of every stage notebook that reads a new parameter: the notebook receives the spec's value."""
    from workbench.batch import run_batch
    from workbench.batch.execute import KERNEL
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for name in ("30_accuracy_by_condition", "90_summary"):
        (notebooks / f"{name}.ipynb").write_text(json.dumps(STAGE_NOTEBOOK))
    model = tmp_path / "m.keras"
    model.write_bytes(b"not read by these notebooks")
    spec = RunSpec(str(model), "digits-conditions", evaluation=knob(knob=3), resolve=False)
    run_batch(["imx93"], spec=spec, stages=["accuracy"], notebooks_dir=notebooks, out=tmp_path / "out",
              kernel=KERNEL, progress=False, reuse=False)
    assert json.loads((tmp_path / "out" / "knob-imx93.json").read_text()) == {"knob": 3, "n": 200}
