"""The explorer: set widget values as a user would, and check what was computed and redrawn.

Runs on the real reference model (trained once per session by tests/conftest.py), real
calibration curation, TFLite quantization, LiteRT evaluation, Keras activations for the
audit and Vela for imx93.  A small calibration set and two conditions keep it quick.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

# small calibration sets from a mostly-daylight pool warn on purpose; the warnings are asserted once below
pytestmark = pytest.mark.filterwarnings("ignore::workbench.errors.WorkbenchWarning")

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "00_explore.ipynb"
CONDITIONS = ("daylight", "low-light")
IMAGE = "data:image/png;base64,"


@pytest.fixture(scope="module")
def ex(reference, digits):
    from workbench.explore import explorer
    return explorer(model=reference, dataset=digits, target="imx8mp", recipe="a8w8_pc",
                    calibration_strategy="random", calibration_size=60, conditions=list(CONDITIONS))


def _panels(ex):
    return ex.accuracy_panel.value, ex.audit_panel.value, ex.placement_panel.value


def test_first_view_is_computed_and_drawn(ex):
    r = ex.result
    assert ex.updates == 1 and ex.error is None
    assert r.settings.recipe == "a8w8_pc" and r.settings.target == "imx8mp"
    assert r.quantized.recipe.name == "a8w8_pc" and r.quantized.weight_granularity == "per_channel"
    assert r.calibration.strategy == "random" and r.calibration.n == 60
    assert tuple(row.condition for row in r.accuracy_table()) == CONDITIONS
    assert r.audit.conditions == CONDITIONS
    assert r.placement.target == "imx8mp" and r.placement.model_sha256 == r.quantized.sha256
    assert all(IMAGE in panel for panel in _panels(ex))
    assert r.quantized.sha256[:12] in ex.status.value


def test_step_warnings_are_kept_in_the_result_and_shown(ex):
    from workbench.errors import WorkbenchWarning
    # 60 random samples from a pool that is ~90% daylight: curation warns (small set, thin conditions)
    assert any(w.startswith("calibration: ") for w in ex.result.warnings)
    assert "warning: calibration: " in ex.status.value
    with pytest.warns(WorkbenchWarning):   # re-issued when the memoized set is reused
        again = ex.compute()
    assert again.warnings == ex.result.warnings


def test_changing_widgets_recomputes_and_redraws(ex):
    r0, panels0, n0 = ex.result, _panels(ex), ex.updates

    # recipe: per-channel -> per-tensor re-quantizes; accuracy and placement follow the new model
    ex.recipe.value = "a8w8_pt"
    r1 = ex.result
    assert ex.updates == n0 + 1
    assert r1.quantized.sha256 != r0.quantized.sha256
    assert (r0.quantized.weight_granularity, r1.quantized.weight_granularity) == ("per_channel", "per_tensor")
    assert r1.accuracy.rows != r0.accuracy.rows
    assert [row.condition for row in r1.accuracy_table()] == list(CONDITIONS)
    assert r1.placement.model_sha256 == r1.quantized.sha256
    assert r1.calibration.hash == r0.calibration.hash
    assert _panels(ex)[0] != panels0[0]

    # target: imx8mp -> imx93 places the same INT8 model again (a quantization cache hit) with Vela
    ex.target.value = "imx93"
    r2 = ex.result
    assert r2.placement.target == "imx93" and r2.placement.label == "vela"
    assert r2.quantized.sha256 == r1.quantized.sha256 and r2.quantized.cache_hit
    assert _panels(ex)[2] != panels0[2]

    # calibration strategy: random -> stratified changes the set, the ranges, the model and the audit
    ex.calibration_strategy.value = "stratified"
    r3 = ex.result
    assert r3.calibration.strategy == "stratified" and r3.calibration.hash != r2.calibration.hash
    assert r3.calibration.conditions != r2.calibration.conditions
    assert r3.quantized.sha256 != r2.quantized.sha256
    assert r3.audit.calibration_hash == r3.calibration.hash != r2.audit.calibration_hash
    assert r3.audit.calibrated_ranges != r2.audit.calibrated_ranges
    assert _panels(ex)[1] != panels0[1]

    # back to the first settings in one held update: an identical quantization is a cache hit
    with ex.hold():
        ex.recipe.value = "a8w8_pc"
        ex.calibration_strategy.value = "random"
        ex.target.value = "imx8mp"
    r4 = ex.result
    assert ex.updates == n0 + 4
    assert r4.settings == r0.settings
    assert r4.quantized.cache_hit and r4.quantized.sha256 == r0.quantized.sha256
    assert r4.accuracy_table() == r0.accuracy_table()


def test_conditions_widget_selects_what_is_measured(ex):
    ex.conditions.value = ("low-light",)
    r = ex.result
    assert [row.condition for row in r.accuracy_table()] == ["low-light"]
    assert r.audit.conditions == ("low-light",)
    assert r.accuracy_table()[0].n == len(ex.dataset.select(split="test", condition="low-light"))
    ex.conditions.value = CONDITIONS
    assert ex.result.audit.conditions == CONDITIONS


def test_error_in_a_widget_update_shows_in_status_and_keeps_the_last_result(ex):
    from workbench.errors import DataError
    before, n = ex.result, ex.updates
    ex.conditions.value = ()
    assert isinstance(ex.error, DataError)
    assert "no deployment condition selected" in ex.status.value
    assert ex.result is before and ex.updates == n
    with pytest.raises(DataError, match="select at least one of"):
        ex.update()
    ex.conditions.value = CONDITIONS
    assert ex.error is None and ex.updates == n + 1


def test_compute_is_plain_data_and_leaves_the_widgets_alone(ex):
    n, settings = ex.updates, ex.settings
    r = ex.compute(replace(settings, target="imx95", recipe="a16w8_pc"))
    assert ex.updates == n and ex.settings == settings
    assert r.quantized.recipe.activation_bits == 16 and r.audit.activation_bits == 16
    assert r.quantized.input_quantization.dtype.lower() == "int16"
    # a target that cannot take the model leaves the reason instead of hiding accuracy and audit
    assert (r.placement is None) == bool(r.placement_error)
    if r.placement is None:
        assert "imx95" in r.placement_error
        assert "no placement on imx95" in r.summary()
    else:
        assert r.placement.target == "imx95"


def test_exploration_round_trips_and_renders(ex):
    from workbench.explore import Exploration
    r = ex.result
    back = Exploration.from_dict(json.loads(r.to_json()))
    assert back.to_dict() == r.to_dict()
    assert back.settings == r.settings and back.accuracy_table() == r.accuracy_table()
    html = r._repr_html_()
    assert IMAGE in html and "drop (pp)" in html and r.quantized.sha256 in html
    assert "http://" not in html and "https://" not in html


@pytest.mark.parametrize("kwargs, error, phrase", [
    ({"target": "imx8m"}, "TargetError", "`target` must be one of 'imx8mp', 'imx93', 'imx95'. Got 'imx8m'"),
    ({"recipe": "a8w4_pc"}, "QuantizationError", "`recipe` must be one of"),
    ({"calibration_strategy": "best"}, "CalibrationError", "`calibration_strategy` must be one of"),
    ({"calibration_size": 0}, "CalibrationError", "`calibration_size` must be a positive integer"),
    ({"calibration_size": 100_000}, "CalibrationError", "size of the calibration pool"),
    ({"conditions": "daylight,fog"}, "DataError", "`conditions` must be one of"),
])
def test_bad_settings_name_the_knob(reference, digits, kwargs, error, phrase):
    from workbench import errors
    from workbench.explore import explorer
    with pytest.raises(getattr(errors, error), match=phrase.replace("(", r"\(")):
        explorer(model=reference, dataset=digits, compute=False, **kwargs)


def test_bad_model_and_dataset(reference, digits, tmp_path):
    from workbench.errors import DataError, ModelError
    from workbench.explore import explorer
    with pytest.raises(ModelError, match=r"\.keras or \.h5"):
        explorer(model=reference.tflite, dataset=digits, compute=False)
    with pytest.raises(ModelError, match="model file .* does not exist"):
        explorer(model=tmp_path / "missing.keras", dataset=digits, compute=False)
    with pytest.raises(DataError, match="has no 'calibration' split"):
        explorer(model=reference, dataset=digits.select(split="test"), compute=False)


def test_explorer_without_auto_update_waits_for_update(reference, digits):
    from workbench.explore import explorer
    lazy = explorer(model=reference, dataset=digits, calibration_strategy="random", calibration_size=60,
                    conditions="daylight", auto_update=False, compute=False)
    assert lazy.settings.conditions == ("daylight",)
    assert lazy.result is None and lazy.accuracy_panel.value == ""
    lazy.target.value = "imx95"
    assert lazy.result is None
    assert lazy.update().placement.target == "imx95"
    assert IMAGE in lazy.placement_panel.value


def test_notebook_passes_every_parameter_to_the_explorer():
    # thinness, kernel and `papermill --help-notebook` are checked for every notebook in tests/notebooks
    import ast
    import inspect

    import nbformat

    from workbench.explore import explorer
    nb = nbformat.read(NOTEBOOK, as_version=4)
    params = [line.split(":")[0] for line in nb.cells[1].source.splitlines() if line.strip()]
    call = next(node for c in nb.cells if c.cell_type == "code" for node in ast.walk(ast.parse(c.source))
                if isinstance(node, ast.Call) and ast.unparse(node.func) == "wb.explorer")
    passed = {k.arg: ast.unparse(k.value) for k in call.keywords}
    assert passed == {p: p for p in params}
    assert set(params) <= set(inspect.signature(explorer).parameters)


def test_explore_notebook_runs_under_papermill(reference, tmp_path):
    """The notebook itself, executed by papermill on the npu-workbench kernel with small parameters."""
    import nbformat
    import papermill as pm
    out = tmp_path / "00_explore.out.ipynb"
    pm.execute_notebook(str(NOTEBOOK), str(out), kernel_name="npu-workbench", cwd=str(tmp_path),
                        parameters={"target": "imx93", "calibration_size": 60,
                                    "calibration_strategy": "random", "conditions": "daylight,low-light"},
                        progress_bar=False)
    nb = nbformat.read(out, as_version=4)
    last = nb.cells[-1].outputs
    html = "".join(o.get("data", {}).get("text/html", "") for o in last)
    assert "imx93" in html and IMAGE in html


def test_findings_of_the_current_settings_are_shown(ex):
    found = ex.result.findings()
    assert f"Findings on {ex.result.settings.target}" in ex.findings_panel.value
    assert found.summary() in ex.findings_panel.value
    # 60 random samples: the set is too small, and the finding says so in the panel
    assert "calibration.too-small" in found.codes and "calibration.too-small" in ex.findings_panel.value
