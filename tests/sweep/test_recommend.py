"""The recommendation rule on hand-built cell results: it never adds a CPU island (or keeps ops in
float) without stating the latency cost, and prefers the smaller change among equals.

The numbers below are shaped like the measured exclusion sweep of the trade-off model
(docs/sweep.md): a float stem that moves ops to the CPU on imx95, a recipe whose head Vela leaves on
the CPU on imx93.
"""

from __future__ import annotations

import dataclasses

import pytest

from workbench.evaluate.gate import Gate
from workbench.sweep.cell import CellResult, ConditionScore
from workbench.sweep.plan import SweepCell
from workbench.sweep.result import island_cost, recommend, short_names

GATE = Gate(max_drop_pp=1.0).to_dict()
STEM = "tradeoff_mobilenet_1/stem_bn_1/batchnorm/add_1;tradeoff_mobilenet_1/stem_1/convolution"


def cell(target="imx95", recipe="a8w8_pt", exclude=(), *, drop=0.5, islands=0, cpu_ops=(), latency=0.150,
         kind="host-cpu", host=None, float_npu=(), npu=11, total=12) -> CellResult:
    c = SweepCell(target=target, recipe=recipe, strategy="stratified", size=64,
                  exclusion="none" if not exclude else "worst-1", exclude=tuple(exclude))
    score = ConditionScore(condition="overexposed", fp32=0.45, int8=0.45 - drop / 100, drop_pp=drop,
                           drop_ci_low=drop - 0.5, drop_ci_high=drop + 0.5, n=540)
    return CellResult(cell=c, ok=True, scores=(score,), worst_condition="overexposed", worst_drop_pp=drop,
                      npu_ops=npu, total_ops=total, npu_share=npu / total, cpu_ops=tuple(cpu_ops),
                      cpu_islands=islands, latency_ms=latency, latency_kind=kind,
                      host_cpu_ms=latency if host is None else host, float_npu_ops=tuple(float_npu),
                      key=f"{target}{recipe}{exclude}")


def test_an_exclusion_that_adds_a_cpu_island_states_its_cost():
    base = cell(drop=1.85, cpu_ops=("#11 SOFTMAX",))                       # fails the 1 pp gate
    island = cell(exclude=(STEM, "m/block3_pw_relu6_1/Relu6"), drop=0.93, islands=1, latency=0.215,
                  cpu_ops=("#0 QUANTIZE", "#1 CONV_2D", "#2 DEQUANTIZE", "#7 DEQUANTIZE", "#8 CONV_2D",
                           "#9 QUANTIZE", "#15 SOFTMAX"), npu=9, total=16)
    rec = recommend("imx95", [base, island], GATE)
    assert rec.passed_gate and rec.cell is island
    assert "moves +6 op(s) to the CPU and adds +1 CPU island(s)" in rec.island_cost
    assert "latency cost +0.065 ms host-cpu" in rec.island_cost
    assert "stem_bn_1/batchnorm/add_1" in rec.summary() and "tradeoff_mobilenet_1/" not in rec.summary()


def test_a_vela_estimate_is_stated_with_the_host_cpu_difference():
    base = cell(target="imx93", drop=1.85, islands=1, cpu_ops=("#6 RESIZE_BILINEAR",), latency=0.035, kind="vela",
                host=0.150)
    island = cell(target="imx93", exclude=(STEM,), drop=0.9, islands=2, latency=0.038, kind="vela", host=0.223,
                  cpu_ops=("#0 QUANTIZE", "#1 CONV_2D", "#6 RESIZE_BILINEAR"))
    cost = recommend("imx93", [base, island], GATE).island_cost
    assert "+0.003 ms vela, +0.073 ms host CPU" in cost and "NPU part only" in cost


def test_a_recipe_with_more_islands_states_its_cost_against_the_fewest_island_cell():
    """imx93: per-channel passes the gate with the head on the CPU (2 islands); per-tensor has 1."""
    pc = cell(target="imx93", recipe="a8w8_pc", drop=0.56, islands=2, latency=0.035, kind="vela", host=0.233,
              cpu_ops=("#6 RESIZE_BILINEAR", "#10 FULLY_CONNECTED"), npu=10)
    pt = cell(target="imx93", recipe="a8w8_pt", drop=1.85, islands=1, latency=0.035, kind="vela", host=0.144,
              cpu_ops=("#6 RESIZE_BILINEAR",))
    rec = recommend("imx93", [pc, pt], GATE)
    assert rec.cell is pc
    assert "1 more CPU island(s) than a8w8_pt, stratified/64 (1, worst drop +1.85 pp)" in rec.island_cost
    assert "+0.000 ms vela, +0.089 ms host CPU" in rec.island_cost


def test_float_ops_left_on_the_npu_are_named():
    base = cell(target="imx8mp", drop=1.85, npu=12, total=12)
    kept = cell(target="imx8mp", exclude=(STEM,), drop=0.93, npu=14, total=14, float_npu=("#1 CONV_2D",))
    cost = recommend("imx8mp", [base, kept], GATE).island_cost
    assert "adds +0 CPU island(s)" in cost and "1 float op(s) stay on the NPU (#1 CONV_2D)" in cost


def test_an_exclusion_without_its_base_cell_says_the_cost_is_unknown():
    assert "latency cost unknown" in island_cost(cell(exclude=(STEM,), islands=1), [])


@pytest.mark.parametrize("latencies", [(0.150, 0.151, 0.148), (0.150, 0.148, 0.151)])
def test_among_equals_the_smaller_change_wins(latencies):
    """Within the 5% latency tie and with the same drop, fewer float ops beat host-CPU noise."""
    none_fails = cell(target="imx8mp", drop=1.85, latency=latencies[0])
    one = cell(target="imx8mp", exclude=(STEM,), drop=0.93, latency=latencies[1])
    two = cell(target="imx8mp", exclude=(STEM, "m/b/Relu6"), drop=0.93, latency=latencies[2])
    assert recommend("imx8mp", [none_fails, one, two], GATE).cell is one


def test_every_recommendation_with_an_island_or_float_op_states_a_latency():
    """Over every combination of these cells: a chosen cell with exclusions or with more CPU islands than
    another cell of its target always carries a cost that names a latency (or says it is unknown)."""
    import itertools
    import random
    pool = [cell(drop=d, islands=i, exclude=e, latency=lat)
            for d, i, e, lat in itertools.product((0.5, 1.5), (0, 1, 2), ((), (STEM,)), (0.1, 0.2))]
    rng = random.Random(0)
    combos = list(itertools.combinations(pool, 2)) + [tuple(rng.sample(pool, 3)) for _ in range(60)]
    for combo in combos:
        rec = recommend("imx95", list(combo), GATE)
        chosen = rec.cell
        assert chosen is not None
        others = [c for c in combo if c is not chosen]
        if chosen.cell.exclude or any(c.cpu_islands < chosen.cpu_islands for c in others):
            assert "latency" in rec.island_cost, (rec.summary(), combo)


def test_short_names():
    assert short_names([STEM, "x"]) == "stem_bn_1/batchnorm/add_1, x"


def _timed(recipe, drop, ms, low, high, **kw):
    return dataclasses.replace(cell(target="imx95", recipe=recipe, drop=drop, latency=ms, **kw),
                               latency_ci_low=low, latency_ci_high=high)


def test_host_cpu_noise_cannot_pick_a_worse_drop():
    """A 9% host-CPU difference inside the medians' CIs: the better drop wins, in any order of the cells."""
    fast_worse = _timed("a8w8_pt", 0.80, 0.140, 0.120, 0.170)
    slow_better = _timed("a8w8_pc", 0.30, 0.153, 0.130, 0.180)
    for cells in ([fast_worse, slow_better], [slow_better, fast_worse]):
        assert recommend("imx95", cells, GATE).cell is slow_better
    # no CI measured (a cell cached before CIs): host-CPU latency does not decide at all
    a = dataclasses.replace(fast_worse, latency_ci_low=None, latency_ci_high=None)
    b = dataclasses.replace(slow_better, latency_ci_low=None, latency_ci_high=None)
    assert recommend("imx95", [a, b], GATE).cell is b


def test_host_cpu_latency_decides_beyond_its_ci():
    fast = _timed("a8w8_pt", 0.80, 0.100, 0.095, 0.105)
    slow = _timed("a8w8_pc", 0.30, 0.153, 0.140, 0.170)
    assert recommend("imx95", [slow, fast], GATE).cell is fast


def test_ties_prefer_the_better_drop_then_fewer_islands_in_any_order():
    a = _timed("a8w8_pt", 0.50, 0.150, 0.14, 0.16, islands=1)
    b = _timed("a8w8_pc", 0.50, 0.150, 0.14, 0.16, islands=0)
    c = _timed("a16w8_pc", 0.70, 0.150, 0.14, 0.16, islands=0)
    import itertools
    picks = {recommend("imx95", list(order), GATE).cell.cell.recipe for order in itertools.permutations([a, b, c])}
    assert picks == {"a8w8_pc"}


def test_median_ci_brackets_the_median_with_order_statistics():
    from workbench.sweep.cell import median_ci
    median, low, high = median_ci(list(range(1, 51)))
    assert median == 25.5 and (low, high) == (18.0, 33.0)      # ranks 18 and 33 of 50: the binomial 95% CI


def test_host_cpu_cis_apart_by_a_load_sized_difference_do_not_decide():
    """Medians 1% apart with tight CIs that do not overlap (one run's noise is small, the load between runs
    is not): the better drop wins, as it would on a rerun where the order of the latencies flipped."""
    fast_worse = _timed("a8w8_pt", 0.80, 0.02585, 0.02580, 0.02590)
    slow_better = _timed("a8w8_pc", 0.30, 0.02612, 0.02605, 0.02620)
    for cells in ([fast_worse, slow_better], [slow_better, fast_worse]):
        assert recommend("imx95", cells, GATE).cell is slow_better
