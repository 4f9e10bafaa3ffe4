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
