"""CI without a board gates on a replay: the committed recording passes the gate, labelled."""

from __future__ import annotations

from workbench.board.timing import time_on_board

from .conftest import FIXTURES

REPLAY = FIXTURES / "replay"


def test_replayed_recording_passes_the_ci_gate_labelled_replayed(tmp_path):
    from workbench.evaluate.gate import Gate, check_quality_gate
    from workbench.runs import RunFolder, summarize_run
    r = time_on_board(REPLAY / "tiny_int8.tflite", replay=REPLAY / "loopback-python")
    RunFolder(tmp_path / "run", target="imx8mp").save("timing", r)
    summary = summarize_run(tmp_path / "run")
    (t,) = summary.targets
    assert t.latency_source == "replayed" and t.latency_kind == r.latency_label
    assert t.latency_kind.startswith("replayed from loopback-sshd 2026-12-01")
    for source in ("measured", "board"):
        result = check_quality_gate(summary, Gate(max_latency_ms=5.0, latency_source=source))
        assert result.passed, result.text()
        assert any("replayed from loopback-sshd" in n and "within" in n for n in result.notes)


def _target(source, label, p50=1.0):
    import types
    return types.SimpleNamespace(target="imx93", status="ok", accuracy=(), npu_share=None, cpu_islands=None,
                                 latency_ms=p50, latency_p99_ms=None, latency_kind=label,
                                 latency_source=source, vela_estimate_ms=None)


def test_gate_latency_lines_say_what_the_latency_is():
    import types

    from workbench.evaluate.gate import Gate, check_quality_gate, load_gate
    from workbench.vocab import latency_label
    host = _target("host-cpu", latency_label("host-cpu"))
    board = _target("board", latency_label("board", board="evk93", delegate="libethosu_delegate.so"))
    summary = types.SimpleNamespace(targets=(host,))
    # source: measured names the kind in its line, passing or failing
    passed = check_quality_gate(summary, Gate(max_latency_ms=5.0))
    assert passed.passed and passed.notes == (
        "imx93: p50 latency 1.000 ms (host CPU (not an NPU)) within the limit of 5 ms",)
    failed = check_quality_gate(summary, Gate(max_latency_ms=0.5))
    assert "(host CPU (not an NPU))" in failed.violations[0].reason
    # the committed default gate.yaml does not pass host-CPU timings silently
    default = check_quality_gate(summary, load_gate(FIXTURES.parents[2] / "gate.yaml"))
    assert any("host CPU (not an NPU)" in line for line in default.notes + default.reasons)
    # source: board fails without a board measurement, unless allow_missing
    strict = check_quality_gate(summary, Gate(max_latency_ms=5.0, latency_source="board"))
    assert not strict.passed and "no board measurement" in strict.violations[0].reason
    lenient = check_quality_gate(summary, Gate(max_latency_ms=5.0, latency_source="board",
                                               latency_allow_missing=True))
    assert lenient.passed and "allow_missing: true" in lenient.notes[0]
    on_board = check_quality_gate(types.SimpleNamespace(targets=(board,)),
                                  Gate(max_latency_ms=5.0, latency_source="board"))
    assert on_board.passed and "board evk93 via libethosu_delegate.so" in on_board.notes[0]


def test_gate_allow_missing_is_read_from_yaml_and_validated(tmp_path):
    import pytest

    from workbench.errors import GateError
    from workbench.evaluate.gate import Gate, load_gate
    path = tmp_path / "g.yaml"
    path.write_text("latency:\n  max_ms: 5\n  source: board\n  allow_missing: true\n")
    assert load_gate(path).latency_allow_missing is True
    path.write_text("latency:\n  max_ms: 5\n  allow_missing: 'yes'\n")
    with pytest.raises(GateError, match="allow_missing` must be true or false"):
        load_gate(path)
    with pytest.raises(GateError, match="allow_missing` must be true or false"):
        Gate(latency_allow_missing="yes")
