"""The accuracy.drop threshold is the gate's max_drop_pp (per condition), 1 pp without a gate: in the rule, and
in every view of a run (run_findings reads the gate the batch saved in the run folder)."""

from __future__ import annotations

import json

import pytest

from workbench.evaluate.drops import DEFAULT_MAX_DROP_PP, drop_limit, drops_beyond
from workbench.evaluate.findings import drop_findings, findings
from workbench.evaluate.gate import Gate
from workbench.run_findings import RUN_GATE_FILE, run_findings, run_gate, save_run_gate
from workbench.runs import RunFolder

from .test_accuracy_findings import _report, _row


def _drops(day=(3.0, 1.0, 5.0), over=(3.0, 1.0, 5.0)):
    """A report whose INT8 model drops ``(drop, ci_low, ci_high)`` pp on daylight and on overexposed."""
    return _report([_row("daylight", "fp32", 0.99), _row("daylight", "int8", 0.99 - day[0] / 100, *day),
                    _row("overexposed", "fp32", 0.80), _row("overexposed", "int8", 0.80 - over[0] / 100, *over)])


def test_the_limit_is_the_gates_max_drop_per_condition_else_one_point():
    gate = Gate(max_drop_pp=4.0, overrides={"overexposed": 2.0, "daylight": {"min_agreement": 0.9}})
    assert drop_limit(gate, "overexposed") == 2.0
    assert drop_limit(gate, "daylight") == 4.0          # an override without max_drop_pp keeps the gate's
    assert drop_limit(Gate(max_drop_pp=None, max_cpu_islands=0), "daylight") == DEFAULT_MAX_DROP_PP == 1.0
    assert drop_limit(None, "daylight") == 1.0 and drop_limit(2.5, "daylight") == 2.5
    assert drop_limit(Gate(max_drop_pp=0.0), "daylight") == 0.0        # a zero limit is a limit, not "none"


def test_a_drop_within_the_gates_max_drop_is_not_a_finding():
    report = _drops()
    assert [f.evidence["condition"] for f in drop_findings(report)] == ["daylight", "overexposed"]   # 1 pp
    assert drop_findings(report, max_drop_pp=Gate(max_drop_pp=4.0)) == []
    (f,) = drop_findings(report, max_drop_pp=Gate(max_drop_pp=4.0, overrides={"overexposed": 2.0}))
    assert f.evidence["condition"] == "overexposed" and f.evidence["threshold_pp"] == 2.0
    assert "threshold 2 pp" in f.message
    # the rule's entry point takes the gate as context (what run_findings passes)
    assert [f.code for f in findings(report, gate=Gate(max_drop_pp=4.0))] == []
    assert len(findings(report, gate=Gate(max_drop_pp=2.9))) == 2
    assert len(findings(report, gate=None, max_drop_pp=2.9)) == 2
    # at the limit is not past it; just past it is
    assert drops_beyond(_drops(day=(2.0, 0.5, 3.5)), Gate(max_drop_pp=2.0))[0].condition == "overexposed"
    assert len(drops_beyond(_drops(day=(2.0, 0.5, 3.5)), Gate(max_drop_pp=2.0))) == 1


@pytest.fixture
def run_dir(tmp_path):
    folder = RunFolder(tmp_path / "run-1", target="imx93", dataset="trap-data")
    folder.save("accuracy", _drops())
    return tmp_path / "run-1"


def test_run_findings_judge_drops_by_the_runs_gate(run_dir):
    assert len(run_findings(run_dir).with_code("accuracy.drop")) == 2        # no gate: 1 pp
    save_run_gate(run_dir, Gate(max_drop_pp=4.0, overrides={"overexposed": 2.0}, source="gate.yaml"))
    assert run_gate(run_dir).limits("overexposed") == (2.0, None)
    (f,) = run_findings(run_dir).with_code("accuracy.drop")
    assert f.evidence["condition"] == "overexposed" and f.evidence["threshold_pp"] == 2.0
    save_run_gate(run_dir, Gate(max_drop_pp=5.0))
    assert not run_findings(run_dir).with_code("accuracy.drop")


def test_an_unreadable_run_gate_is_an_error_finding_not_a_silent_default(run_dir, capsys):
    (run_dir / RUN_GATE_FILE).write_text('{"gate": {"max_drop_pp": "lots"')
    found = run_findings(run_dir)
    (bad,) = found.with_code("run.unreadable-record")
    assert bad.severity == "error" and RUN_GATE_FILE in bad.message and bad.evidence["stage"] == "gate"
    assert len(found.with_code("accuracy.drop")) == 2                        # judged by 1 pp meanwhile
    (run_dir / RUN_GATE_FILE).write_text(json.dumps({"gate": {"max_drop_pp": -3.0}}))
    assert run_findings(run_dir).with_code("run.unreadable-record")           # an invalid limit is refused too
    import argparse

    from workbench.errors import WorkbenchError
    from workbench.findings_commands import _findings
    args = argparse.Namespace(docs=None, run_dir=str(run_dir), targets=None, target="", min_severity="info",
                              fail_above=None, json=True)
    with pytest.raises(WorkbenchError, match="gate.json"):
        _findings(args)
