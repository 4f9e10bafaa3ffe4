"""Each gate key parsed at its edges (what a gate file may say, and what it may not): fast, no model."""

from __future__ import annotations

import pytest

from workbench.errors import GateError
from workbench.evaluate.gate import Gate


def _acc(**keys):
    return Gate.from_mapping({"accuracy": keys})


def test_models_a_name_a_list_or_none():
    assert _acc(models=["a8w8_pc", "a8w8_pt"]).models == ("a8w8_pc", "a8w8_pt")
    assert _acc(models=("a8w8_pc",)).models == ("a8w8_pc",)
    assert _acc(models="a8w8_pc").models == ("a8w8_pc",)
    assert _acc(models=None).models == ()
    with pytest.raises(GateError, match="accuracy.models"):
        _acc(models=5)
    with pytest.raises(GateError, match="accuracy.models"):
        _acc(models={"a8w8_pc": 1})


def test_per_condition_limits_alone_make_the_gate_check_accuracy():
    from workbench.evaluate.gate import ConditionLimit, check_quality_gate
    from workbench.runs import RunSummary, TargetSummary

    from .test_gate_boundaries import _t
    drop_only = Gate(max_drop_pp=None, overrides={"daylight": 2.0})
    agreement_only = Gate(max_drop_pp=None, overrides={"daylight": {"min_agreement": 0.99}})
    neither = Gate(max_drop_pp=None, overrides=(ConditionLimit("daylight"),), max_cpu_islands=0)
    assert drop_only.checks_accuracy and agreement_only.checks_accuracy and not neither.checks_accuracy
    assert not Gate(max_drop_pp=None, min_npu_share=0.5).checks_accuracy

    def gate(targets, g):
        return check_quality_gate(RunSummary(run_id="r", targets=tuple(targets)), g)
    r = gate([_t(drop=3.0)], drop_only)
    assert [v.check for v in r.violations] == ["accuracy.max_drop_pp"] and r.violations[0].limit == 2.0
    r = gate([_t(agreement=0.98)], agreement_only)
    assert [v.check for v in r.violations] == ["accuracy.min_agreement"]
    # no accuracy results: a gate with an accuracy limit fails, one without passes
    none = TargetSummary(target="imx93", status="ok", accuracy=(), npu_share=1.0, npu_ops=10, cpu_ops=0,
                         cpu_islands=0)
    assert [v.check for v in gate([none], drop_only).violations] == ["accuracy.max_drop_pp"]
    assert gate([none], neither).passed


def _report():
    from .test_accuracy_findings import _report as report
    from .test_accuracy_findings import _row
    return report([_row("daylight", "fp32", 0.99), _row("daylight", "int8", 0.985, 0.5, -0.5, 1.5),
                   _row("overexposed", "fp32", 0.80), _row("overexposed", "int8", 0.79, 1.0, 0.0, 2.0)])


def test_check_gate_notes_the_limits_an_accuracy_report_cannot_check():
    from workbench.evaluate.gate import check_gate
    assert check_gate(_report(), Gate(max_drop_pp=1.0)).notes == ()
    for extra in ({"max_cpu_islands": 0}, {"max_latency_ms": 5.0}, {"min_npu_share": 0.5}):
        (note,) = check_gate(_report(), Gate(max_drop_pp=1.0, **extra)).notes
        assert "not checked on an accuracy report" in note


def test_an_override_for_an_unknown_condition_warns_at_the_callers_line():
    from workbench.errors import WorkbenchWarning
    from workbench.evaluate.gate import check_gate
    with pytest.warns(WorkbenchWarning, match="'fog' matches no condition") as caught:
        check_gate(_report(), Gate(max_drop_pp=1.0, overrides={"fog": 3.0}))
    assert caught[0].filename == __file__           # stacklevel: the line that called check_gate


def test_check_gate_at_and_past_each_accuracy_limit():
    import dataclasses

    from workbench.evaluate.gate import check_gate

    from .test_accuracy_findings import _report as report
    from .test_accuracy_findings import _row

    def gated(drop, agreement, gate):
        int8 = dataclasses.replace(_row("daylight", "int8", 0.99 - drop / 100, drop, drop - 1, drop + 1),
                                   agreement=agreement)
        return check_gate(report([_row("daylight", "fp32", 0.99), int8], conditions=("daylight",)), gate)
    assert gated(2.0, 0.95, Gate(max_drop_pp=2.0, min_agreement=0.95)).passed        # both at their limit
    r = gated(2.0 + 1 / 540 * 100, 0.95, Gate(max_drop_pp=2.0))                      # one sample more
    assert [v.check for v in r.violations] == ["accuracy.max_drop_pp"] and r.checked == 1
    r = gated(0.0, 0.95 - 1 / 540, Gate(max_drop_pp=None, min_agreement=0.95))       # one sample fewer
    assert [v.check for v in r.violations] == ["accuracy.min_agreement"] and r.violations[0].limit == 0.95


def test_each_limit_checked_counts_once():
    from workbench.evaluate.gate import check_quality_gate
    from workbench.runs import RunSummary

    from .test_gate_boundaries import _t

    def checked(gate):
        return check_quality_gate(RunSummary(run_id="r", targets=(_t(),)), gate).checked
    assert checked(Gate(max_drop_pp=None, min_agreement=0.9)) == 1
    assert checked(Gate(max_drop_pp=1.0)) == 1
    assert checked(Gate(max_drop_pp=1.0, min_agreement=0.9)) == 2
    assert checked(Gate(max_drop_pp=None, min_npu_share=0.5, max_cpu_islands=0)) == 2


def _latency(targets, **gate):
    from workbench.evaluate.gate import check_quality_gate
    from workbench.runs import RunSummary
    return check_quality_gate(RunSummary(run_id="r", targets=tuple(targets)), Gate(max_drop_pp=None, **gate))


def test_vela_latency_is_checked_where_the_compiler_estimates_it():
    from .test_gate_boundaries import _t
    vela = {"max_latency_ms": 2.0, "latency_source": "vela"}
    assert _latency([_t("imx93", vela_estimate_ms=2.0)], **vela).passed                   # at the limit
    r = _latency([_t("imx93", vela_estimate_ms=2.001)], **vela)
    assert [v.check for v in r.violations] == ["latency.max_ms"] and r.checked == 1
    r = _latency([_t("imx93", vela_estimate_ms=None)], **vela)                           # Ethos-U: estimate missing
    assert "no Vela estimate" in r.violations[0].reason
    r = _latency([_t("imx8mp", vela_estimate_ms=None)], **vela)                          # no estimate exists there
    assert r.passed and "latency not checked" in r.notes[0]
    assert not _latency([_t("imx8mp", vela_estimate_ms=3.0)], **vela).passed             # one given is checked


def test_board_latency_takes_a_board_or_its_replayed_recording_not_the_host():
    from .test_gate_boundaries import _t
    board = {"max_latency_ms": 5.0, "latency_source": "board"}
    for source in ("board", "board-cpu", "replayed"):
        t = _t(latency_ms=2.0, latency_p99_ms=3.0, latency_kind="board evk", latency_source=source)
        assert _latency([t], **board).passed
    host = _t(latency_ms=2.0, latency_p99_ms=3.0, latency_kind="host CPU", latency_source="host-cpu")
    r = _latency([host], **board)
    assert not r.passed and "no board measurement" in r.violations[0].reason
    assert _latency([host], max_latency_ms=5.0).passed                                  # source measured: any
    r = _latency([host], latency_allow_missing=True, **board)
    assert r.passed and "allow_missing" in r.notes[0]


def test_latency_and_findings_limits_count_once_each():
    from .test_gate_boundaries import _t
    t = _t(latency_ms=2.0, latency_p99_ms=3.0, latency_kind="board evk", latency_source="board")
    assert _latency([t], max_latency_ms=5.0).checked == 1
    assert _latency([t], findings_max_severity="warning").checked == 1
