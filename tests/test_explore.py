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
    # ... the target does not make the model: no "this knob changed nothing" message (that is for the
    # knobs that make it, tested with the calibrator below)
    assert r2.same_model_as == "" and ex.message.value == ""
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
    assert IMAGE in html and "drop pp [95% CI]" in html and r.quantized.sha256 in html
    assert "drop = FP32 - quantized" in html
    assert r.placement is None or "why it runs on the CPU" in html or "every op of the model runs on the NPU" in html
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
    pm.execute_notebook(str(NOTEBOOK), str(out), kernel_name="npu-workbench", cwd=str(tmp_path), iopub_timeout=60,
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


# --------------------------------------------------------------------------- issue 15: what a person sees

def _png_sizes(html):
    import base64
    import re
    import struct
    sizes = []
    for data in re.findall(r'src="data:image/png;base64,([^"]+)"', html):
        head = base64.b64decode(data[:64])
        sizes.append(struct.unpack(">II", head[16:24]))
    return sizes


def test_auto_recipe_is_the_targets_default():
    import inspect

    from workbench.explore import ExplorerSettings, explorer
    from workbench.targets import get_target
    assert inspect.signature(explorer).parameters["recipe"].default == "auto"
    assert ExplorerSettings().recipe == "auto"
    assert ExplorerSettings(target="imx8mp").effective_recipe == "a8w8_pt" == get_target("imx8mp").recipe
    assert ExplorerSettings(target="imx93").effective_recipe == "a8w8_pc"
    assert ExplorerSettings(target="imx93", recipe="a16w8_pc").effective_recipe == "a16w8_pc"


def test_panels_are_stacked_and_fit_a_1200px_column(ex):
    import ipywidgets as w
    # no row of the layout holds two panels side by side
    panels = {ex.accuracy_panel, ex.audit_panel, ex.placement_panel, ex.findings_panel, ex.history_panel}
    for child in ex.widget.children:
        if isinstance(child, w.HBox):
            assert not panels & set(child.children)
    assert ex.widget.layout.max_width == "1180px"
    for panel in (ex.accuracy_panel, ex.audit_panel, ex.placement_panel):
        sizes = _png_sizes(panel.value)
        assert sizes and all(width <= 1180 for width, _ in sizes), (panel.description, sizes)


def test_heatmap_has_one_colour_scale_and_marks_the_threshold(ex):
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from workbench.explore import HEATMAP_VMAX
    audit = ex.result.audit
    ax = audit.plot(vmax=HEATMAP_VMAX)
    image = ax.get_images()[0]
    assert image.get_clim() == (0, HEATMAP_VMAX)     # 0.13% and 8.24% get different reds on every redraw
    outlined = [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]
    assert len(outlined) == int((audit.matrix("clip_rate") >= audit.clip_threshold).sum())
    assert "at risk" in ax.get_title()
    plt.close(ax.figure)


def test_placement_names_each_cpu_op_and_why(ex):
    from workbench.explore import placement_html
    r = ex.compute(replace(ex.settings, target="imx8mp", recipe="a16w8_pc"))
    if r.placement is None:
        assert "imx8mp" in r.placement_error
        return
    cpu = [o for o in r.placement.ops if o.placement != "NPU"]
    assert cpu, "a16w8 on the INT8-only imx8mp NPU falls back to the CPU"
    html = placement_html(r)
    assert "why it runs on the CPU" in html
    for o in cpu:
        assert o.type in html
        for reason in o.reasons:
            assert reason.constraint in html


def test_cli_command_field_holds_commands_that_parse(ex):
    import shlex

    from workbench import cli
    s = ex.result.settings
    assert ex.cli.value == s.cli_commands(model=ex._cli_model(), dataset=ex.dataset.name)
    lines = ex.cli.value.splitlines()
    assert [ln.split()[1] for ln in lines] == ["calibrate", "quantize", "evaluate", "placement"]
    assert f"--recipe {s.effective_recipe}" in lines[1] and f"--target {s.target}" in lines[3]
    parser = cli.build_parser()
    for line in lines:
        parser.parse_args(shlex.split(line)[1:])


def test_busy_state_disables_the_knobs_and_marks_stale_panels(ex):
    ex._busy(True)
    assert all(c.disabled for c in ex.controls) and ex.pin.disabled
    assert "wb-stale" in ex.accuracy_panel._dom_classes
    ex._busy(False)
    assert not any(c.disabled for c in ex.controls)
    assert "wb-stale" not in ex.accuracy_panel._dom_classes
    ex.conditions.value = ()                      # an error: knobs usable again, panels stay stale
    assert ex.error is not None and not ex.conditions.disabled
    assert "wb-stale" in ex.audit_panel._dom_classes
    ex.conditions.value = CONDITIONS
    assert ex.error is None and "wb-stale" not in ex.audit_panel._dom_classes


def _visible_rows(html: str) -> list[str]:
    """The text a person sees in each data row of a table (tags and their attributes dropped)."""
    import html as html_lib
    import re
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", html)
    return [html_lib.unescape(re.sub(r"<[^>]+>", "", r)).strip() for r in rows if "<td" in r]


def test_history_and_pinned_baseline(ex, monkeypatch):
    first = len(ex.history)
    assert ex.baseline is not None and ex.history
    ex.seed = 1
    assert ex.result.settings.seed == 1 and ex.result.calibration.seed == 1
    assert len(ex.history) == first + 1 and ex.history[-1].settings.seed == 1
    assert ex.pin_baseline() is ex.history[-1]
    assert "&#9733; pinned" in ex.history_panel.value and "vs baseline pp" in ex.history_panel.value
    from workbench.explore import rendering
    notes: list[str] = []
    real = rendering.note_baseline
    monkeypatch.setattr(rendering, "note_baseline", lambda ax, text: (notes.append(text), real(ax, text)))
    ex.seed = 0
    assert ex.history[-1].settings.seed == 0 and ex.baseline.settings.seed == 1
    # compact: one short line per setting, the knobs that differ from the pinned one; the full label on hover
    lines = _visible_rows(ex.history_panel.value)
    assert len(lines) == len(ex.history) and all(len(line) <= 90 for line in lines), lines
    assert lines[-1].startswith(f"#{len(ex.history)}seed=0") and "pinned" not in lines[-1], lines
    pinned = [line for line in lines if "pinned" in line]
    assert len(pinned) == 1 and pinned[0].startswith(f"#{first + 1}") and ex.settings.target in pinned[0], lines
    assert not any(ex.result.settings.label() in line for line in lines)
    assert f'title="{ex.result.settings.label()}; sha256' in ex.history_panel.value
    # the pinned baseline drawn on the heatmap and the placement strip too (the accuracy bars: diamonds)
    assert any("layer(s) at risk" in n for n in notes) and any(" NPU" in n for n in notes), notes


def test_a_conditions_ci_does_not_move_when_another_is_toggled(ex):
    both = {r.condition: r for r in ex.result.accuracy_table()}
    ex.conditions.value = ("low-light",)
    alone = ex.result.accuracy_table()[0]
    ex.conditions.value = CONDITIONS
    assert (alone.drop_ci_low, alone.drop_ci_high) == (both["low-light"].drop_ci_low, both["low-light"].drop_ci_high)


def test_tool_output_stays_out_of_the_cell(ex, capfd):
    capfd.readouterr()
    ex.seed = 7                                   # a new calibration set: quantized now (on a fresh cache)
    out, err = capfd.readouterr()
    assert ex.result.settings.seed == 7
    assert out == "" and err == "", (out, err)
    ex.seed = 0


def test_worst_drop_within_noise_is_said_so():
    from workbench.explore import ConditionAccuracy, _drop_phrase
    noisy = ConditionAccuracy("fog", 100, 0.9, 0.88, 2.0, drop_ci_low=-1.0, drop_ci_high=5.0)
    real = ConditionAccuracy("fog", 100, 0.9, 0.80, 10.0, drop_ci_low=4.0, drop_ci_high=16.0)
    assert "within noise" in _drop_phrase(noisy)
    assert "within noise" not in _drop_phrase(real)


def test_explorer_fits_1200px_in_chromium(ex, tmp_path):
    """The explorer's panels as a page in a 1200 px Chromium window: no horizontal scrolling, every
    image decoded, no error text."""
    from tests._browser import chromium
    from workbench import display
    from workbench.explore import STYLE
    body = "".join(p.value for p in (ex.status, ex.message, ex.findings_panel, ex.accuracy_panel, ex.audit_panel,
                                     ex.placement_panel, ex.history_panel))
    page = tmp_path / "explorer.html"
    page.write_text(display.page("explorer", f'{STYLE}<div class="wb-explorer" style="max-width:1180px">{body}</div>'))
    driver = chromium(tmp_path / "profile", width=1200)
    try:
        driver.get(page.as_uri())
        widths = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth];")
        images = driver.execute_script("return Array.from(document.images).map(i => i.complete && i.naturalWidth > 0);")
        text = driver.find_element("tag name", "body").text
        assert driver.save_screenshot(str(tmp_path / "explorer.png"))
    finally:
        driver.quit()
    assert widths[0] <= widths[1], f"horizontal scrolling: page {widths[0]} px in a {widths[1]} px window"
    assert len(images) >= 3 and all(images)
    assert "Traceback" not in text and "Error:" not in text
    for cond in ex.result.settings.conditions:
        assert cond in text


def test_a_burst_of_changes_in_a_kernel_computes_once(ex):
    """With an event loop running (as in ipykernel), knob changes within `debounce` seconds are one update."""
    import asyncio
    n = ex.updates

    async def burst():
        ex.seed = 3
        ex.seed = 4
        ex.seed = 0
        assert ex.updates == n                        # nothing computed yet: waiting for the knobs to rest
        await asyncio.sleep(ex.debounce + 0.2)

    asyncio.run(burst())
    assert ex.updates == n + 1 and ex.result.settings.seed == 0


def test_output_capture_takes_python_and_c_level_text_and_lets_go(capfd):
    import os
    import sys

    from workbench.explore import _captured_output
    with _captured_output() as captured:
        print("python text")
        os.write(2, b"C-level text\n")
        kept = sys.stderr                      # what a logging handler made during the capture holds
    assert "python text" in captured.text and "C-level text" in captured.text
    kept.write("after\n")
    kept.close()                               # a handler closing its stream at exit must not raise
    out, err = capfd.readouterr()
    assert "python text" not in out + err and "after" in err


# --------------------------------------------------------------------------- the calibrator, seeds and severity

@pytest.mark.slow      # converts the Keras model with tf2onnx for ONNX Runtime (~45 s on a loaded 2-core machine)
def test_backend_knob_offers_its_calibrators_and_an_onnx_model_is_not_placed(ex):
    """TFLite calibrates with min/max or percentile; ONNX Runtime has entropy too (minmax-global is their
    minmax, not offered), and its QDQ model runs on the CPU: the placement panel says so instead of drawing a
    strip."""
    assert [v for _, v in ex.calibrator.options] == ["minmax", "percentile"]
    with ex.hold():
        ex.recipe.value = "a8w8_pc"
        ex.backend.value = "onnx"
    n = ex.updates
    minmax = ex.result
    assert [v for _, v in ex.calibrator.options] == ["minmax", "percentile", "entropy"]
    assert minmax.settings.backend == "onnx" and minmax.quantized.path.endswith(".onnx")
    assert minmax.quantized.recipe.backend == "onnx" and minmax.quantized.recipe.calibrator == "minmax"
    assert minmax.placement is None and "ONNX Runtime on the CPU only" in minmax.placement_error
    assert "ONNX Runtime on the CPU only" in ex.placement_panel.value
    assert "# no placement on imx8mp" in ex.cli.value and "--backend onnx --calibrator minmax" in ex.cli.value
    ex.calibrator.value = "percentile"
    pct = ex.result
    assert ex.updates == n + 1 and pct.quantized.recipe.calibrator == "percentile"
    assert pct.quantized.sha256 != minmax.quantized.sha256        # percentile clips: other scales
    assert "min/max ranges" in ex.audit_panel.value               # the audit's ranges are not the calibrator's
    ex.calibrator.value = "entropy"
    ent = ex.result
    # a knob that makes the model: when the file is byte-identical to an earlier one, the explorer says so
    identical = ent.quantized.sha256 == minmax.quantized.sha256
    assert (ent.same_model_as == minmax.settings.label()) == identical
    assert ("same activation ranges as" in ex.message.value) == identical
    # back to TFLite: the calibrator falls back to min/max in the same (single) update
    n = ex.updates
    with ex.hold():
        ex.backend.value = "tflite"
        ex.recipe.value = "a8w8_pc"
    assert ex.updates == n + 1 and ex.calibrator.value == "minmax" and ex.result.settings.calibrator == "minmax"
    assert ex.error is None and ex.result.placement is not None


@pytest.mark.parametrize("changes, phrase", [
    ({"calibrator": "entropy"}, "the TFLite backend has no 'entropy' calibrator"),
    ({"backend": "onnx", "recipe": "a16w8_pc"}, "16-bit activations"),
    ({"backend": "tensorrt"}, "`backend` must be one of"),
    ({"severity": 6}, "`severity` must be one of"),
])
def test_invalid_backend_calibrator_or_severity_is_refused(ex, changes, phrase):
    from workbench.errors import WorkbenchError
    with pytest.raises(WorkbenchError, match=phrase):
        ex.compute(replace(ex.settings, **changes))


def test_severity_knob_measures_the_test_conditions_at_that_severity(ex):
    base = ex.result
    assert base.settings.severity == 3 and ex.severity.value == 3
    ex.severity.value = 5
    harsh = ex.result
    assert harsh.settings.severity == 5 and ex.error is None
    # the same images calibrate (the pool is as collected), so the model is the same file
    assert harsh.calibration.sample_ids == base.calibration.sample_ids
    assert harsh.quantized.sha256 == base.quantized.sha256 and harsh.same_model_as == ""
    assert harsh.dataset_hash != base.dataset_hash
    rows0 = {r.condition: r for r in base.accuracy_table()}
    rows5 = {r.condition: r for r in harsh.accuracy_table()}
    assert rows5["low-light"].fp32 < rows0["low-light"].fp32        # harsher low light: the FP32 model suffers
    assert rows5["low-light"].n == rows0["low-light"].n
    assert "--severity 5" in ex.cli.value and "sev=5" in ex.history_panel.value
    assert harsh.audit.calibrated_ranges == base.audit.calibrated_ranges
    ex.severity.value = 3                                           # shown before: from memory
    assert ex.result.accuracy_table() == base.accuracy_table() and ex.result.seconds["accuracy"] < 0.5


def test_the_cli_evaluates_at_the_same_severity(ex, capsys):
    """`workbench evaluate --severity 4` scores the explorer's model as the explorer does at severity 4."""
    from workbench import cli
    s = replace(ex.settings, severity=4)
    r = ex.compute(s)
    line = next(ln for ln in s.cli_commands().splitlines() if ln.startswith("workbench evaluate"))
    assert "--severity 4" in line and "--seed 0" in line
    capsys.readouterr()
    assert cli.main(["evaluate", ex.keras_path, r.quantized.path, "--severity", "4", "--conditions", "low-light",
                     "--names", "q", "--no-fidelity", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    cli_acc = next(row["accuracy"] for row in rows if row["condition"] == "low-light" and row["model"] == "q")
    assert cli_acc == pytest.approx({x.condition: x for x in r.accuracy_table()}["low-light"].int8)
    assert cli_acc != pytest.approx({x.condition: x for x in ex.result.accuracy_table()}["low-light"].int8)


def test_bootstrap_seed_moves_only_the_cis(ex):
    a = ex.compute(replace(ex.settings, bootstrap_seed=0)).accuracy_table()
    b = ex.compute(replace(ex.settings, bootstrap_seed=11)).accuracy_table()
    assert [(x.fp32, x.int8, x.drop_pp) for x in a] == [(x.fp32, x.int8, x.drop_pp) for x in b]
    ex.bootstrap_seed.value = 11
    assert ex.result.settings.bootstrap_seed == 11 and "--seed 11" in ex.cli.value
    assert "ci-seed=11" in ex.history_panel.value
    ex.bootstrap_seed.value = 0


def test_a_recorded_dataset_has_no_severity(reference, digits):
    from workbench.data.loaders import load_dataset
    from workbench.errors import DataError
    from workbench.explore import explorer
    recorded = digits.select(condition=["daylight", "low-light"])     # not the built-in dataset any more
    ex = explorer(model=reference, dataset=recorded, compute=False)
    assert ex.settings.severity is None and ex.severity not in ex.controls
    with pytest.raises(DataError, match="has no severity|have no severity"):
        explorer(model=reference, dataset=recorded, severity=5, compute=False)
    with pytest.raises(DataError, match="have no severity"):
        load_dataset(recorded, severity=2)


def test_compute_alone_writes_no_widget_and_update_reports_its_steps(ex):
    """compute() is plain data in, data out (the status line stays); update() shows each step with its time."""
    before = ex.status.value
    ex.compute(replace(ex.settings, target="imx95"))
    assert ex.status.value == before
    seen = []
    original = ex.on_step

    def spy(name, number, started):
        original(name, number, started)
        seen.append(ex.status.value)
    ex.on_step = spy
    try:
        ex.update()
    finally:
        del ex.on_step
    assert len(seen) == 5 and "step 1/5 calibration" in seen[0] and "step 5/5 placement" in seen[-1]
    assert all("s so far" in s for s in seen)
