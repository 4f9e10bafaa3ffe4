"""The timing stage's findings at each rule's boundary (fast: timing results built from run lists, no board)."""

from __future__ import annotations

from dataclasses import replace

from workbench.board.coverage import PlacementMismatch
from workbench.board.findings import COLD_FACTOR, COLD_MIN_US, MIN_RUNS_FOR_P99, findings
from workbench.board.stats import summarize_latencies
from workbench.board.timing import TimingResult


def _timing(runs, *, on_board=True, **kw):
    fields = {"model": "model.tflite", "model_sha256": "0" * 64, "runner": "benchmark_model", "where": "board evk",
              "on_board": on_board, "n_warmup": 10, "n_runs": len(runs), "latency_us": summarize_latencies(runs),
              "runs_us": tuple(runs), "board": "evk", "target": "imx8mp"}
    return TimingResult(**{**fields, **kw})


def _codes(result, **kw):
    return {f.code: f for f in findings(result, target="imx8mp", **kw)}


def _cold(runs):
    f = _codes(_timing(runs)).get("timing.cold-start-in-steady-state")
    return None if f is None else [r["run"] for r in f.evidence["runs"]]


def test_a_cold_start_needs_three_runs():
    assert _cold([1e6, 2500.0]) is None
    assert _cold([1e6, 2500.0, 2500.0]) == [0]


def test_a_cold_start_is_past_the_factor_and_at_least_the_microseconds():
    assert (COLD_FACTOR, COLD_MIN_US) == (3.0, 50.0)
    steady = [2500.0] * 30
    assert _cold([3 * 2500.0] + steady) is None                 # exactly 3x the median: not past it
    assert _cold([3 * 2500.0 + 0.5] + steady) == [0]
    tiny = [10.0] * 30                                           # a 10 us model: 5.9x is timer noise under 50 us
    assert _cold([59.0] + tiny) is None
    assert _cold([60.0] + tiny) == [0]                           # exactly 50 us slower: enough
    f = _codes(_timing([60.0] + tiny))["timing.cold-start-in-steady-state"]
    assert f.evidence["median_us"] == 10.0 and f.evidence["factor"] == 3.0 and f.severity == "warning"


def test_a_cold_start_is_where_the_runs_begin_within_the_first_tenth():
    steady = [2500.0] * 40
    assert _cold([1e5] * 5 + steady[5:]) == [0, 1, 2, 3]         # 40 runs: the first max(3, 40 // 10) = 4
    assert _cold([1e5] * 5 + [2500.0] * 15) == [0, 1, 2]         # 20 runs: the first 3
    assert _cold([1e5, 2500.0, 1e5] + steady) == [0]            # stops at the first normal run
    assert _cold([2500.0] * 5 + [1e5] + steady) is None          # a spike later on: the host was busy


def test_too_few_runs_below_the_minimum_only():
    assert MIN_RUNS_FOR_P99 == 100
    assert "timing.too-few-runs" in _codes(_timing([2500.0] * (MIN_RUNS_FOR_P99 - 1)))
    assert "timing.too-few-runs" not in _codes(_timing([2500.0] * MIN_RUNS_FOR_P99))


def test_the_host_cpu_is_named_and_its_warm_up_effects_are_info():
    runs = [1e6] + [2500.0] * 30
    board = _codes(_timing(runs))
    assert "timing.host-cpu" not in board and board["timing.cold-start-in-steady-state"].severity == "warning"
    host = _codes(_timing(runs, on_board=False, where="host CPU"))
    assert host["timing.host-cpu"].severity == "info" and host["timing.cold-start-in-steady-state"].severity == "info"
    replay = _codes(_timing(runs, on_board=False, replayed_from="rec-1"))       # a board's recording, replayed
    assert "timing.host-cpu" not in replay and replay["timing.cold-start-in-steady-state"].severity == "warning"
    falling = _codes(_timing(runs, still_falling="the first kept runs are still getting faster. Next: raise"))
    assert falling["timing.still-falling"].message == "board evk: the first kept runs are still getting faster"


def test_a_placement_mismatch_is_an_npu_op_the_board_ran_on_the_cpu():
    npu_to_cpu = PlacementMismatch(op="MEAN", predicted="NPU", measured="CPU", evidence="op profile", count=2)
    cpu_to_npu = PlacementMismatch(op="ADD", predicted="CPU", measured="NPU", evidence="op profile", count=1)
    (f,) = [f for f in findings(_timing([2500.0] * 100, placement_mismatches=(npu_to_cpu, cpu_to_npu)))
            if f.code == "board.placement-mismatch"]
    assert [o["op"] for o in f.evidence["ops"]] == ["MEAN"] and "2x MEAN" in f.message
    assert "board.placement-mismatch" not in _codes(_timing([2500.0] * 100, placement_mismatches=(cpu_to_npu,)))
    assert "board.placement-mismatch" not in _codes(replace(_timing([2500.0] * 100)))


def test_the_findings_name_the_target_asked_for_else_the_results_own():
    result = _timing([2500.0] * 50)                              # timed for imx8mp
    assert {f.target for f in findings(result)} == {"imx8mp"}
    assert {f.target for f in findings(result, target="imx93")} == {"imx93"}
    assert {f.target for f in findings(replace(result, target=None))} == {""}


def test_only_a_predicted_npu_op_measured_on_the_cpu_is_a_mismatch():
    for predicted, measured in (("CPU", "CPU"), ("NPU", "NPU"), ("CPU", "NPU")):
        row = PlacementMismatch(op="ADD", predicted=predicted, measured=measured, evidence="op profile")
        assert "board.placement-mismatch" not in _codes(_timing([2500.0] * 100, placement_mismatches=(row,)))


def test_the_boards_int8_disagreement_names_the_flagged_conditions_only():
    from workbench.board.accuracy import BoardAccuracy, BoardAccuracyRow

    def row(cond, agreement, flagged):
        return BoardAccuracyRow(condition=cond, n=200, fp32_host=0.95, int8_host=0.94, int8_board=0.80,
                                agreement=agreement, flagged=flagged)
    acc = BoardAccuracy(rows=(row("daylight", 0.99, False), row("low-light", 0.81, True)), where="board evk")
    f = _codes(_timing([2500.0] * 100, accuracy=acc))["board.int8-disagreement"]
    assert [c["condition"] for c in f.evidence["conditions"]] == ["low-light"] and "low-light 81.0%" in f.message
    calm = BoardAccuracy(rows=(row("daylight", 0.99, False),), where="board evk")
    assert "board.int8-disagreement" not in _codes(_timing([2500.0] * 100, accuracy=calm))


def test_a_board_share_the_placement_did_not_predict_is_a_mismatch_on_a_board_only():
    """The recorded i.MX 93 log C1 states its delegate took 1 of 1 nodes (100% on the NPU); the placement stage's
    rule-table report of the tiny INT8 model predicts 4 of 4 ops on imx8mp's NPU (agrees) and 0 of 4 on imx93's
    (its dynamic batch keeps every op off the Ethos-U: disagrees)."""
    import warnings
    from pathlib import Path

    from workbench.board.coverage import coverage_from_log
    from workbench.board.parse import read_benchmark_log
    from workbench.placement.analyze import analyze_placement
    fixtures = Path(__file__).parent / "fixtures"
    coverage = coverage_from_log(read_benchmark_log(str(fixtures / "C1.log")))
    assert (coverage.npu_ops, coverage.total_ops, coverage.npu_share) == (1, 1, 1.0)
    tiny = fixtures / "replay" / "tiny_int8.tflite"
    agrees = analyze_placement(tiny, "imx8mp", use_vela=False)
    disagrees = analyze_placement(tiny, "imx93", use_vela=False)
    assert (agrees.npu_ops, disagrees.npu_ops) == (4, 0)
    result = _timing([2500.0] * 100, coverage=coverage)

    def mismatch(r, placement):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # cross_check also warns
            found = [f for f in findings(r, placement=placement) if f.code == "board.placement-mismatch"]
        return found[0] if found else None
    f = mismatch(result, disagrees)
    assert f is not None and (f.evidence["measured_share"], f.evidence["predicted_share"]) == (1.0, 0.0)
    assert "NPU share measured 100% vs predicted 0%" in f.message
    assert mismatch(result, agrees) is None
    assert mismatch(replace(result, on_board=False, where="host CPU"), disagrees) is None   # no board: no truth
    assert mismatch(result, None) is None
    assert mismatch(replace(result, coverage=None), disagrees) is None
