"""Side by side across targets, the strip plot, and the input-size sweep."""

from __future__ import annotations

import json

import pytest

from workbench.errors import ModelError
from workbench.models.tflite_graph import read_tflite
from workbench.placement.compare import PlacementComparison, compare_placement


def test_compare_three_targets(reject_tflite):
    import matplotlib
    matplotlib.use("Agg")
    c = compare_placement(reject_tflite)
    assert c.targets == ("imx8mp", "imx93", "imx95")
    assert [r.target for r in c.reports] == list(c.targets)
    assert c.report("imx95").npu_segments == 3
    ax = c.plot()
    assert len(ax.patches) == sum(len(r.ops) for r in c.reports)
    assert [t.get_text() for t in ax.get_yticklabels()][0].startswith("imx8mp")
    assert PlacementComparison.from_dict(json.loads(c.to_json())) == c
    assert "data:image/png;base64" in c._repr_html_()


def test_shape_sweep_reexports_and_reanalyses(clean_keras_file, tmp_path):
    c = compare_placement(clean_keras_file, ("imx8mp", "imx95"), input_sizes=[16, (24, 20)],
                          workdir=tmp_path)
    assert {(p.input_size, p.target) for p in c.sweep} == {
        ((16, 16), "imx8mp"), ((16, 16), "imx95"), ((24, 20), "imx8mp"), ((24, 20), "imx95")}
    for p in c.sweep:
        graph = read_tflite(p.model)
        assert graph.input_tensors()[0].shape == (1, *p.input_size, 3)
        assert graph.input_tensors()[0].dtype == "INT8"
        assert p.npu_share == 1.0
    assert "random" in c.sweep_note
    assert c.plot_sweep() is not None


def test_sweep_needs_keras_model(clean_tflite):
    with pytest.raises(ModelError, match="needs the Keras model"):
        compare_placement(clean_tflite, input_sizes=[32])


def test_keras_model_without_sweep_is_refused(clean_keras_file):
    with pytest.raises(ModelError, match="Quantize it first"):
        compare_placement(clean_keras_file)


def test_cross_target_differences_name_each_targets_reason(reject_tflite, capsys):
    from workbench import cli
    c = compare_placement(reject_tflite)
    types = [op.type for op in read_tflite(reject_tflite).ops]
    diffs = {d.type: d for d in c.differences()}
    # TILE: not in the VX op map, not in Vela 3.10.0's list, not a Neutron-S op -> CPU everywhere, no diff
    assert "TILE" not in diffs and "CONV_2D" not in diffs
    softmax = diffs["SOFTMAX"]
    assert softmax.index == types.index("SOFTMAX")
    cells = {p.target: p for p in softmax.placements}
    assert (cells["imx8mp"].placement, cells["imx93"].placement, cells["imx95"].placement) == ("NPU", "NPU", "CPU")
    assert cells["imx95"].reason.startswith("neutron.op_list") and cells["imx8mp"].reason == ""
    assert "Ops the targets place differently" in c._repr_html_()
    assert cli.main(["placement", str(reject_tflite), "--target", "all"]) == 0
    out = capsys.readouterr().out
    assert "op(s) placed differently across imx8mp" in out and "imx95: neutron.op_list" in out


def test_same_placement_everywhere_says_so(clean_tflite):
    c = compare_placement(clean_tflite, ("imx8mp", "imx95"))
    assert c.differences() == () and "place every op the same way" in c.format_differences()


def test_cli_sizes_sweep(clean_keras_file, capsys):
    from workbench import cli
    assert cli.main(["placement", str(clean_keras_file), "--target", "imx8mp,imx95", "--sizes", "16,24x20",
                     "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {(tuple(p["input_size"]), p["target"]) for p in data["sweep"]} == {
        ((16, 16), "imx8mp"), ((16, 16), "imx95"), ((24, 20), "imx8mp"), ((24, 20), "imx95")}
    assert "random" in data["sweep_note"]


@pytest.mark.parametrize("sizes, phrase", [("96,abc", "`--sizes` must be"), ("0", "`--sizes` must be")])
def test_cli_sizes_rejects_bad_values(clean_keras_file, capsys, sizes, phrase):
    from workbench import cli
    assert cli.main(["placement", str(clean_keras_file), "--target", "imx8mp", "--sizes", sizes]) == 2
    assert phrase in capsys.readouterr().err


def test_bsp_applies_to_the_targets_with_rules_for_it():
    from workbench.errors import TargetError
    from workbench.placement.compare import bsp_for_targets
    assert bsp_for_targets(("imx8mp", "imx93", "imx95"), "lf-6.6.3_1.0.0") == {
        "imx8mp": "lf-6.6.3_1.0.0", "imx93": "lf-6.6.3_1.0.0"}         # imx95 knows it, without rules
    assert bsp_for_targets(("imx93", "imx95"), "lf-6.6.52_2.2.0") == {"imx95": "lf-6.6.52_2.2.0"}
    with pytest.raises(TargetError, match="Got 'lf-1' instead"):
        bsp_for_targets(("imx93",), "lf-1")
    with pytest.raises(TargetError, match="no operator rules"):
        bsp_for_targets(("imx95",), "lf-6.6.3_1.0.0")


def test_cli_unknown_bsp_is_exit_2(clean_tflite, capsys):
    from workbench import cli
    assert cli.main(["placement", str(clean_tflite), "--target", "imx93", "--bsp", "lf-0"]) == 2
    assert "`bsp` must be one of" in capsys.readouterr().err
