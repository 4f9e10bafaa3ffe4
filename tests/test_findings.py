"""The Finding type, the catalogue and its generated documentation."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.errors import WorkbenchError
from workbench.findings import (
    CATALOGUE,
    SEVERITIES,
    Finding,
    Findings,
    catalogue_markdown,
    collect,
    entry,
    make,
)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "findings.md"


def test_docs_are_generated_from_the_catalogue():
    assert DOCS.read_text(encoding="utf-8") == catalogue_markdown(), (
        "docs/findings.md is out of date: run `workbench findings --docs docs/findings.md`")


def test_catalogue_is_well_formed():
    for code, e in CATALOGUE.items():
        assert code == e.code and e.severity in SEVERITIES and code.startswith(e.stage + ".")
        assert e.title and e.meaning.endswith(".") and e.action.endswith(".")
        assert f"## {code}" in catalogue_markdown()


def test_finding_round_trip_and_html():
    f = make("quantize.float-op-left", "model.tflite: 1 op(s) compute in float: SIN #2", target="imx93",
             evidence={"ops": ({"op": "SIN", "index": 2, "name": "Sin"},), "ratio": 1.5})
    assert f.severity == "error" and f.stage == "quantize" and f.next_step == CATALOGUE[f.code].action
    assert f.evidence["ops"] == [{"op": "SIN", "index": 2, "name": "Sin"}]   # plain JSON data
    assert Finding.from_dict(f.to_dict()) == f and Finding.from_json(f.to_json()) == f
    html = f._repr_html_()
    assert "quantize.float-op-left" in html and "SIN #2" in html and "<script" not in html
    assert f.summary().startswith("ERROR [imx93] quantize.float-op-left")


def test_finding_rejects_unknown_code_bad_severity_and_multiline_message():
    with pytest.raises(WorkbenchError, match="unknown finding code 'nope'"):
        make("nope", "x")
    with pytest.raises(WorkbenchError, match="`severity` must be one of"):
        Finding(code="timing.still-falling", severity="fatal", stage="timing", message="x")
    with pytest.raises(WorkbenchError, match="one non-empty line"):
        make("timing.still-falling", "two\nlines")
    with pytest.raises(WorkbenchError):
        entry("quantize.nope")


def test_findings_collection_orders_filters_and_round_trips():
    a = make("timing.host-cpu", "host", target="imx93")
    b = make("placement.cpu-island", "island", target="imx95")
    c = make("quantize.float-op-left", "float", target="imx93")
    fs = Findings((a, b, c))
    assert [f.severity for f in fs] == ["error", "warning", "info"] and fs.max_severity == "error"
    assert fs.above("warning").codes == ("quantize.float-op-left",)
    assert len(fs.at_least("warning")) == 2 and len(fs.for_target("imx93")) == 2
    assert Findings.from_dict(fs.to_dict()) == fs and Findings.from_list(fs.to_list()) == fs
    assert fs.summary() == "3 finding(s): 1 error, 1 warning, 1 info"
    assert Findings().max_severity is None and Findings().summary() == "no findings"
    assert "next:" in fs.text() and "<table" in fs._repr_html_()
    assert len(collect(fs, [a, b])) == 3


# -- the gate's findings section --------------------------------------------------------------------
def _summary_with(*findings):
    from types import SimpleNamespace
    target = SimpleNamespace(target="imx93", status="ok", accuracy=(), npu_share=None, cpu_islands=None,
                             findings=tuple(findings))
    return SimpleNamespace(targets=(target,))


def test_gate_fails_on_a_finding_above_its_severity_with_the_message_as_reason():
    from workbench.evaluate.gate import Gate, check_quality_gate
    gate = Gate.from_mapping({"findings": {"max_severity": "warning"}})
    assert gate.findings_max_severity == "warning" and "findings <= warning" in gate.summary()
    error = make("quantize.float-op-left", "model.tflite: 1 op(s) compute in float inside the INT8 model: SIN #3",
                 target="imx93")
    warning = make("placement.cpu-island", "island", target="imx93")
    result = check_quality_gate(_summary_with(error, warning), gate)
    assert not result.passed and len(result.violations) == 1
    (v,) = result.violations
    assert v.check == "findings.max_severity" and v.target == "imx93"
    assert v.reason == ("imx93: error quantize.float-op-left: model.tflite: 1 op(s) compute in float inside "
                        "the INT8 model: SIN #3")
    assert check_quality_gate(_summary_with(warning), gate).passed
    strict = Gate.from_mapping({"findings": {"max_severity": "info"}})
    assert not check_quality_gate(_summary_with(warning), strict).passed
    # findings given explicitly (a run's collection) take the place of the summary's
    assert not check_quality_gate(_summary_with(), gate, findings=Findings((error,))).passed


def test_gate_findings_severity_is_validated():
    from workbench.errors import GateError
    from workbench.evaluate.gate import Gate
    with pytest.raises(GateError, match="`findings.max_severity` must be one of 'info', 'warning', 'error'"):
        Gate.from_mapping({"findings": {"max_severity": "fatal"}})


def test_a_catalogue_entry_with_a_bad_severity_or_stage_alone_is_refused():
    from workbench.findings_catalogue import CatalogueEntry, _entries
    good = CatalogueEntry("run.x", "error", "run", "T", "M.", "A.")
    assert list(_entries(good)) == ["run.x"]
    with pytest.raises(ValueError, match="bad severity or stage"):
        _entries(CatalogueEntry("run.x", "fatal", "run", "T", "M.", "A."))       # the severity alone
    with pytest.raises(ValueError, match="bad severity or stage"):
        _entries(CatalogueEntry("nope.x", "error", "nope", "T", "M.", "A."))     # the stage alone
    with pytest.raises(ValueError, match="must start with its stage"):
        _entries(CatalogueEntry("model.x", "error", "run", "T", "M.", "A."))


def test_findings_add_up_in_order():
    a = make("run.unreadable-record", "a", target="imx93")
    b = make("run.unreadable-record", "b", target="imx95")
    both = Findings((a,)) + [b]
    assert isinstance(both, Findings) and [f.message for f in both] == ["a", "b"] and len(both) == 2
