"""Planning cells: exclusion sets resolved per target and recipe (no model needed)."""

from __future__ import annotations

from workbench.sweep.plan import SweepSpec, plan_cells


def test_cpu_ops_are_per_recipe_and_worst_k_per_target():
    """imx93's head: Vela leaves it on the CPU with per-channel weights only (measured, docs/sweep.md), so
    `cpu-ops` of a8w8_pt must not keep it in float; `worst-K` is the same for every recipe."""
    spec = SweepSpec(targets=("imx93", "imx8mp"), recipes=("a8w8_pc", "a8w8_pt"), strategies=("stratified",),
                     sizes=(64,), exclusions=("none", "cpu-ops", "worst-1"))
    resolved = {("imx93", "cpu-ops", "a8w8_pc"): ("FULLY_CONNECTED", "RESIZE_BILINEAR"),
                ("imx93", "cpu-ops", "a8w8_pt"): ("RESIZE_BILINEAR",),
                ("imx8mp", "cpu-ops", "a8w8_pc"): (), ("imx8mp", "cpu-ops", "a8w8_pt"): (),
                ("imx93", "worst-1"): ("stem",), ("imx8mp", "worst-1"): ("stem",)}
    cells = {(c.target, c.recipe, c.exclusion): c.exclude for c in plan_cells(spec, resolved)}
    assert cells[("imx93", "a8w8_pc", "cpu-ops")] == ("FULLY_CONNECTED", "RESIZE_BILINEAR")
    assert cells[("imx93", "a8w8_pt", "cpu-ops")] == ("RESIZE_BILINEAR",)
    assert ("imx8mp", "a8w8_pc", "cpu-ops") not in cells          # nothing on the CPU: equals the 'none' cell
    assert cells[("imx8mp", "a8w8_pt", "worst-1")] == ("stem",) and cells[("imx93", "a8w8_pc", "none")] == ()
    assert len(cells) == 2 * 2 + 2 + 2 * 2


def test_quantization_groups_put_a_quantization_in_one_task():
    """Cells differing only in target are one Dask task (two workers never quantize the same thing at once)."""
    from workbench.sweep.plan import plan_cells
    from workbench.sweep.run import quantization_groups
    spec = SweepSpec(model="m.keras", targets=("imx8mp", "imx93", "imx95"))
    cells = plan_cells(spec)
    groups = quantization_groups(cells)
    assert len(cells) == 36 and len(groups) == 12 and sorted(i for g in groups for i in g) == list(range(36))
    for group in groups:
        members = [cells[i] for i in group]
        assert [c.target for c in members] == ["imx8mp", "imx93", "imx95"]
        assert len({(c.recipe, c.strategy, c.size, c.exclude) for c in members}) == 1
    assert len({(cells[g[0]].recipe, cells[g[0]].strategy, cells[g[0]].size) for g in groups}) == 12
    # an exclusion set resolving to other ops on one target is another quantization
    excl = {("imx93", "cpu-ops", "a8w8_pc"): ("SOFTMAX",), ("imx95", "cpu-ops", "a8w8_pc"): ("SOFTMAX",),
            ("imx8mp", "cpu-ops", "a8w8_pc"): ("RESIZE_BILINEAR",)}
    spec2 = SweepSpec(model="m.keras", recipes=("a8w8_pc",), strategies=("random",), sizes=(64,),
                      exclusions=("none", "cpu-ops"))
    cells2 = plan_cells(spec2, excl)
    groups2 = [[cells2[i].label for i in g] for g in quantization_groups(cells2)]
    assert len(cells2) == 6 and len(groups2) == 3
    assert ["imx93 a8w8_pc random/64 excl cpu-ops", "imx95 a8w8_pc random/64 excl cpu-ops"] in groups2
