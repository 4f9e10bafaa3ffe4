"""The pipeline (workbench/pipeline/): a resolved RunSpec, Pipeline(spec, store) and its three stores,
on the real reference model, dataset, converter and placement rules."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

from workbench.errors import BatchError, TargetError, WorkbenchWarning
from workbench.pipeline import (
    CalibrationOptions,
    CellStore,
    MemoStore,
    Pipeline,
    RunFolderStore,
    RunSpec,
    Store,
    parameter_names,
)

N = 60


@pytest.fixture(scope="module")
def spec(reference, digits):
    return RunSpec("reference", digits, target="imx93", calibration=CalibrationOptions(n=N, seed=4))


def quiet():
    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("ignore", WorkbenchWarning)        # 60 samples: the small-set warning
    return ctx


def test_spec_is_resolved_once_at_construction(spec, reference, digits):
    assert spec.resolved
    assert spec.source_model == reference.keras and spec.fp32_model == reference.tflite
    assert spec.model_format == "keras"
    assert spec.data is digits and spec.dataset_hash == digits.hash
    assert spec.quant_recipe.name == "a8w8_pc" == spec.recipe_name        # imx93's default for "auto"
    assert spec.bsp_release and spec.bsp == ""
    assert not spec.contract_stated and spec.stage_input_spec is None
    assert spec.contract.source != ""                                       # inferred from the model, once
    assert spec.contract is spec.contract
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.target = "imx95"  # type: ignore[misc]


def test_spec_refuses_what_it_cannot_resolve(digits):
    with pytest.raises(TargetError, match="imx8m"):
        RunSpec("reference", digits, target="imx8m", resolve=False)
    with pytest.raises(Exception, match="target"):
        RunSpec("reference", digits, recipe="auto")                         # "auto" needs a target
    template = RunSpec("reference", "digits-conditions", resolve=False)    # a batch's template: no target yet
    assert template.replace(target="imx95").recipe_name == "a8w8_pc"
    unresolved = RunSpec("reference", "digits-conditions", target="imx8mp", resolve=False)
    assert not unresolved.resolved and unresolved.data is None and unresolved.recipe_name == "a8w8_pt"
    with pytest.raises(BatchError, match="resolve"):
        Pipeline(unresolved)


def test_parameters_round_trip():
    spec = RunSpec("model.keras", "my-data", target="imx95", recipe="a16w8_pc", input_spec="card.yaml",
                   bsp="lf-6.6.3_1.0.0", calibration=CalibrationOptions(n=300, strategy="random", seed=7),
                   resolve=False)
    params = spec.to_parameters()
    assert params["calibration_size"] == 300 and params["calibration_strategy"] == "random" and params["seed"] == 7
    assert params["target"] == "imx95" and params["input_spec"] == "card.yaml" and params["recipe"] == "a16w8_pc"
    back = RunSpec.from_parameters({**params, "run_dir": "runs/x", "unrelated": object()}, resolve=False)
    assert back == spec
    assert set(spec.to_parameters(stage="calibration")) == set(parameter_names("calibration"))
    assert "timing_runs" not in parameter_names("calibration") and "timing_runs" in parameter_names("timing")
    with pytest.raises(BatchError, match="plain value"):
        RunSpec("m.keras", "d", target="imx93", input_spec={"color": "rgb"}, resolve=False).to_parameters()


def test_replace_keeps_what_is_resolved(spec):
    other = spec.replace(calibration={"n": N + 1})
    assert other.calibration.n == N + 1 and other.calibration.seed == 4
    assert other.data is spec.data and other.resolved and other.target == "imx93"


def test_pipeline_steps_load_what_still_fits(spec, reference, digits):
    store = MemoStore()
    assert isinstance(store, Store)
    pipe = Pipeline(spec, store)
    ctx = quiet()
    try:
        placement = pipe.place()
        assert pipe.computed == ["calibration", "quantize", "placement"]
        assert placement.target == "imx93" and placement.model_sha256 == pipe.quantize().sha256
        assert pipe.computed == ["calibration", "quantize", "placement"]     # loaded from the memo
        # the spec's quantization is the cache entry a direct call makes (nothing of its own in the key)
        from workbench.quantize.engine import quantize
        direct = quantize(reference.keras, "a8w8_pc", pipe.calibrate(), dataset=digits)
        assert direct.cache_hit and direct.cache_key == pipe.quantize().cache_key
        # another option is another result
        again = Pipeline(spec.replace(calibration={"seed": 5}), store)
        assert again.calibrate().seed == 5 and again.computed == ["calibration"]
    finally:
        ctx.__exit__(None, None, None)


def test_run_folder_store_reuses_records_and_refuses_stale_ones(spec, tmp_path):
    from workbench.runs import RunFolder
    folder = RunFolder(tmp_path / "run", target="imx93")
    ctx = quiet()
    try:
        first = Pipeline(spec, RunFolderStore(folder))
        q = first.quantize()
        assert folder.has("calibration") and folder.has("quantize")
        assert folder.record("calibration")["params"]["calibration_size"] == N
        assert q.path.startswith(str(folder.path / "model"))
        second = Pipeline(spec, RunFolderStore(folder))
        assert second.quantize().sha256 == q.sha256 and second.computed == []
    finally:
        ctx.__exit__(None, None, None)
    changed = Pipeline(spec.replace(calibration={"n": N + 2}), RunFolderStore(folder))
    with pytest.warns(WorkbenchWarning, match="other parameters"):
        assert changed.calibrate().n == N + 2
    assert folder.load("calibration").n == N + 2


def test_cell_store_keeps_sealed_records(spec):
    store = CellStore("test-pipeline")
    ctx = quiet()
    try:
        first = Pipeline(spec, store)
        cal = first.calibrate()
        second = Pipeline(spec, CellStore("test-pipeline"))
        assert second.calibrate() == cal and second.computed == []
    finally:
        ctx.__exit__(None, None, None)


STAGE_NOTEBOOK = {"calibration": "10_calibration_set", "quantize": "20_quantize",
                  "accuracy": "30_accuracy_by_condition", "placement": "40_op_placement",
                  "timing": "50_board_timing"}


@pytest.mark.parametrize("stage", list(STAGE_NOTEBOOK))
def test_every_stage_notebook_declares_the_spec_parameters(stage):
    """A field added to RunSpec (or a stage's options) is a parameter every stage notebook that reads it
    must declare: the notebooks build their spec from their parameters (RunSpec.from_parameters)."""
    from pathlib import Path

    import nbformat
    path = Path(__file__).resolve().parents[1] / "notebooks" / f"{STAGE_NOTEBOOK[stage]}.ipynb"
    nb = nbformat.read(path, as_version=4)
    declared = {line.split(":")[0] for line in nb.cells[1].source.splitlines() if line.strip()}
    missing = set(parameter_names(stage)) - declared
    assert not missing, f"{path.name} does not declare {sorted(missing)}"
    code = "\n".join(c.source for c in nb.cells[2:] if c.cell_type == "code")
    assert "from_parameters(globals())" in code and ".pipeline()" in code


def test_a_new_field_travels_through_the_one_translation():
    """One field more on RunSpec is a notebook parameter, read back and written out with no other change."""
    extended = dataclasses.make_dataclass("Extended", [("knob", str, dataclasses.field(default="k"))],
                                          bases=(RunSpec,), frozen=True)
    spec = extended.from_parameters({"target": "imx93", "knob": "turned", "calibration_size": 64}, resolve=False)
    assert spec.knob == "turned" and spec.calibration.n == 64
    assert spec.to_parameters()["knob"] == "turned"
    assert extended.from_parameters(spec.to_parameters(), resolve=False) == spec


#: a stage's compute function, by module: only workbench/pipeline/ (and workbench/chain.py under it) calls them
COMPUTE = {"workbench.calibration.curate": "curate_calibration_set", "workbench.quantize.engine": "quantize",
           "workbench.evaluate.accuracy": "compare_accuracy", "workbench.placement.analyze": "analyze_placement",
           "workbench.board.timing": "time_on_board"}
CLIENTS = ("workbench/runs.py", "workbench/explore", "workbench/sweep", "workbench/batch",
           "workbench/calibration/experiment.py", "workbench/run_findings.py", "workbench/run_summary.py",
           "workbench/diff.py", "workbench/pipeline/flags.py")
CLIENT_NOTEBOOKS = ("00_explore", "10_calibration_set", "20_quantize", "30_accuracy_by_condition",
                    "40_op_placement", "50_board_timing", "60_sweep")


def _client_files():
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    for name in CLIENTS:
        path = root / name
        yield from sorted(path.rglob("*.py")) if path.is_dir() else ([path] if path.is_file() else [])


def _compute_imports(source: str, package: str) -> list[str]:
    """``from <module> import <compute function>`` (absolute or relative), ``wb.<compute function>``, and
    ``<module alias>.<compute function>`` after ``from <package> import <module>`` / ``import <module> as x``."""
    import ast
    found = []
    aliases = {"wb": set(COMPUTE.values())}              # name -> the compute functions reachable through it
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            module = node.module
            if node.level:                                   # relative: resolve against the file's package
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*parts, module])
            names = {a.name for a in node.names}
            if COMPUTE.get(module) in names:
                found.append(f"from {module} import {COMPUTE[module]}")
            for a in node.names:                         # from workbench.quantize import engine
                if f"{module}.{a.name}" in COMPUTE:
                    aliases[a.asname or a.name] = {COMPUTE[f"{module}.{a.name}"]}
        elif isinstance(node, ast.Import):
            for a in node.names:                         # import workbench.quantize.engine as engine
                if a.name in COMPUTE and a.asname:
                    aliases[a.asname] = {COMPUTE[a.name]}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.attr in aliases.get(node.value.id, ()):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_no_client_calls_a_stage_compute_function_directly():
    """Run folders, notebooks, the explorer, the sweep, the batch and the calibration experiment ask the
    Pipeline: none imports curate_calibration_set, quantize, compare_accuracy, analyze_placement or
    time_on_board itself."""
    from pathlib import Path

    import nbformat
    root = Path(__file__).resolve().parents[1]
    offenders = {}
    files = list(_client_files())
    assert len(files) >= 10
    for path in files:
        rel = path.relative_to(root).with_suffix("")
        package = ".".join(rel.parts[:-1]) if path.name != "__init__.py" else ".".join(rel.parts[:-1])
        if hits := _compute_imports(path.read_text(), package):
            offenders[str(path.relative_to(root))] = hits
    for name in CLIENT_NOTEBOOKS:
        nb = nbformat.read(root / "notebooks" / f"{name}.ipynb", as_version=4)
        source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        if hits := _compute_imports(source, "notebooks"):
            offenders[f"notebooks/{name}.ipynb"] = hits
    assert not offenders, f"clients calling a stage directly (ask workbench.pipeline.Pipeline): {offenders}"


def test_the_compute_import_check_finds_what_it_looks_for():
    assert _compute_imports("from ..placement.analyze import analyze_placement", "workbench.sweep") == [
        "from workbench.placement.analyze import analyze_placement"]
    assert _compute_imports("from .evaluate.accuracy import compare_accuracy", "workbench") == [
        "from workbench.evaluate.accuracy import compare_accuracy"]
    assert _compute_imports("acc = wb.compare_accuracy(a, b, c)", "notebooks") == ["wb.compare_accuracy"]
    assert _compute_imports("from ..quantize.engine import QuantizedModel", "workbench.sweep") == []
    assert _compute_imports("from ..quantize import engine\nengine.quantize(m, r)", "workbench.sweep") == [
        "engine.quantize"]
    assert _compute_imports("import workbench.placement.analyze as pa\npa.analyze_placement(q, t)", "x") == [
        "pa.analyze_placement"]
    assert _compute_imports("from ..quantize import engine\nengine.QuantizedModel", "workbench.sweep") == []


def test_a_damaged_record_is_computed_again(spec, tmp_path):
    from workbench.runs import RunFolder
    folder = RunFolder(tmp_path / "run", target="imx93")
    folder.file("calibration").write_text("{")
    with pytest.warns(WorkbenchWarning, match="not a stage record"):
        cal = Pipeline(spec, RunFolderStore(folder)).calibrate()
    assert folder.load("calibration") == cal
