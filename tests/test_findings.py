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
