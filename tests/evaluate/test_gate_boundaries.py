"""The quality gate over a run summary at each limit's boundary (fast: summaries built from numbers)."""

from __future__ import annotations

import pytest

from workbench.errors import GateError
from workbench.evaluate.gate import Gate, check_quality_gate
from workbench.findings import make
from workbench.runs import ConditionAccuracy, RunSummary, TargetSummary


def _t(target="imx93", *, drop=0.5, agreement=0.99, share=1.0, islands=0, findings=(), status="ok", **kw):
    acc = (ConditionAccuracy(condition="daylight", n=500, fp32=0.99, int8=0.99 - drop / 100, drop_pp=drop,
                             agreement=agreement),)
    return TargetSummary(target=target, status=status, accuracy=acc, npu_share=share, npu_ops=10, cpu_ops=0,
                         cpu_islands=islands, findings=tuple(findings), **kw)


def _gate(summary_targets, gate):
    return check_quality_gate(RunSummary(run_id="r", targets=tuple(summary_targets)), gate)


def test_accuracy_drop_at_and_past_the_limit():
    assert _gate([_t(drop=1.0)], Gate(max_drop_pp=1.0)).passed                 # at the limit: passes
    r = _gate([_t(drop=1.01)], Gate(max_drop_pp=1.0))
    assert not r.passed and r.violations[0].check == "accuracy.max_drop_pp" and r.violations[0].value == 1.01
    assert r.checked == 1
    assert not _gate([_t(drop=1.0)], Gate(max_drop_pp=0.99)).passed


def test_agreement_at_and_below_the_minimum():
    assert _gate([_t(agreement=0.95)], Gate(max_drop_pp=None, min_agreement=0.95)).passed
    r = _gate([_t(agreement=0.9499)], Gate(max_drop_pp=None, min_agreement=0.95))
    assert not r.passed and r.violations[0].check == "accuracy.min_agreement"


def test_npu_share_and_islands_at_their_limits():
    assert _gate([_t(share=0.9)], Gate(max_drop_pp=None, min_npu_share=0.9)).passed
    r = _gate([_t(share=0.89)], Gate(max_drop_pp=None, min_npu_share=0.9))
    assert not r.passed and r.violations[0].check == "placement.min_npu_share" and r.checked == 1
    r = _gate([_t(share=None)], Gate(max_drop_pp=None, min_npu_share=0.9))
    assert not r.passed and "did not run" in r.reasons[0]
    assert _gate([_t(islands=1)], Gate(max_drop_pp=None, max_cpu_islands=1)).passed
    r = _gate([_t(islands=2)], Gate(max_drop_pp=None, max_cpu_islands=1))
    assert not r.passed and r.violations[0].value == 2
    assert not _gate([_t(islands=None)], Gate(max_drop_pp=None, max_cpu_islands=1)).passed
    with pytest.raises(GateError):
        Gate(max_cpu_islands=-1)


def test_findings_at_and_above_the_severity():
    warn = make("calibration.too-small", "set x: 60 samples", target="imx93")
    err = make("calibration.test-ids", "set x: 1 test id", target="imx93")
    other = make("calibration.test-ids", "set x: 1 test id", target="imx95")
    assert _gate([_t(findings=[warn])], Gate(max_drop_pp=None, findings_max_severity="warning")).passed
    r = _gate([_t(findings=[warn, err])], Gate(max_drop_pp=None, findings_max_severity="warning"))
    assert [v.check for v in r.violations] == ["findings.max_severity"] and "calibration.test-ids" in r.reasons[0]
    # findings given for the run: each target is judged on its own
    run = RunSummary(run_id="r", targets=(_t(), _t("imx95")))
    r = check_quality_gate(run, Gate(max_drop_pp=None, findings_max_severity="warning"), findings=[warn, other])
    assert [v.target for v in r.violations] == ["imx95"]
    r = _gate([_t(findings=[warn])], Gate(max_drop_pp=None, findings_max_severity="info"))
    assert not r.passed and r.violations[0].value == 1 and r.violations[0].limit == 0
    assert _gate([_t(findings=[warn, err])], Gate(max_drop_pp=None, findings_max_severity="error")).passed


def test_failed_target_and_notes():
    r = _gate([_t(status="failed", error="boom", failed_stage="quantize")], Gate())
    assert not r.passed and r.violations[0].check == "target.failed" and "quantize" in r.reasons[0]
    r = _gate([_t()], Gate(use_ci=True))
    assert any("use_ci" in n for n in r.notes)
    assert not any("use_ci" in n for n in _gate([_t()], Gate()).notes)
    r = _gate([_t(), _t("imx95")], Gate(max_drop_pp=1.0, min_npu_share=0.5, max_cpu_islands=0))
    assert r.passed and r.checked == 6


def test_latency_at_the_limit():
    t = _t(latency_ms=2.0, latency_p99_ms=3.0, latency_kind="board evk", latency_source="board")
    assert _gate([t], Gate(max_drop_pp=None, max_latency_ms=2.0)).passed
    r = _gate([t], Gate(max_drop_pp=None, max_latency_ms=1.99))
    assert not r.passed and r.violations[0].check == "latency.max_ms"


def test_a_statistic_the_timing_does_not_state_is_a_violation_not_a_pass():
    """A recorded benchmark_model log (tests/board/fixtures/B4.log) states a median and no p99, and the board
    stage invents no percentile: a gate on p99 fails with the reason, one on p50 checks the median."""
    from pathlib import Path

    from workbench.board.measure import _latency_from_log
    from workbench.board.parse import read_benchmark_log
    latency = _latency_from_log(read_benchmark_log(str(Path(__file__).parents[1] / "board" / "fixtures" / "B4.log")))
    assert latency.p50 == 1239807.0 and latency.p99 is None
    t = _t(latency_ms=latency.p50 / 1000, latency_p99_ms=None, latency_kind="board evk via libvx_delegate.so",
           latency_source="board")
    r = _gate([t], Gate(max_drop_pp=None, max_latency_ms=5000.0, latency_statistic="p99"))
    assert not r.passed and [v.check for v in r.violations] == ["latency.max_ms"]
    assert "no p99 latency" in r.violations[0].reason
    ok = _gate([t], Gate(max_drop_pp=None, max_latency_ms=5000.0))
    assert ok.passed and any("p50 latency 1239.807 ms" in n for n in ok.notes)


def test_a_latency_limit_below_one_ms_is_accepted():
    assert Gate(max_latency_ms=0.5).max_latency_ms == 0.5
    with pytest.raises(GateError):
        Gate(max_latency_ms=-0.1)
