"""Findings: every silent failure the workbench notices, named once, as data.

A :class:`Finding` is one observation about one model on one target: a stable
``code`` (``quantize.float-op-left``), its ``severity`` (``info``, ``warning``,
``error``), the ``stage`` that noticed it, the ``target``, a one-line
``message``, the ``evidence`` (op index and name, tensor, the numbers; plain
JSON data) and the ``next_step``.  Every code is defined once, in
:data:`CATALOGUE` (:mod:`workbench.findings_catalogue`: severity, stage, title, what it means, what to do);
``docs/findings.md`` is generated from it (``workbench findings --docs``) and a
test keeps the two in sync.

Stages keep their result types; the rules that read them live beside each stage
(``workbench/<stage>/findings.py``) and compute findings from the result's data,
so a result saved before findings existed still yields them.
:func:`findings_for` dispatches a result to its rules; :func:`~workbench.run_findings.run_findings`
collects every stage of a run folder's target (the run side reads findings, never the reverse), and
:mod:`workbench.findings_html` draws them.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ._results import Result
from .errors import WorkbenchError
from .findings_catalogue import CATALOGUE, FINDING_STAGES, CatalogueEntry
from .vocab import SEVERITIES as _SEVERITIES

SEVERITIES = _SEVERITIES                    # vocab.Severity, lowest first
_RANK = {s: i for i, s in enumerate(SEVERITIES)}


def entry(code: str) -> CatalogueEntry:
    """The catalogue entry of ``code``; a :class:`WorkbenchError` naming the known codes otherwise."""
    try:
        return CATALOGUE[code]
    except KeyError:
        raise WorkbenchError(f"unknown finding code {code!r}; known codes: {', '.join(CATALOGUE)}.") from None


def severity_rank(severity: str) -> int:
    from ._validation import check_choice
    check_choice("severity", severity, SEVERITIES)
    return _RANK[severity]


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data (tuples become lists, numpy scalars numbers)."""
    from ._results import _encode
    return json.loads(json.dumps(_encode(value), allow_nan=False))


@dataclass(frozen=True)
class Finding(Result):
    """One silent failure, noticed: code, severity, stage, target, message, evidence, next step."""

    code: str
    severity: str
    stage: str
    message: str
    target: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    next_step: str = ""

    def __post_init__(self) -> None:
        entry(self.code)
        severity_rank(self.severity)
        if "\n" in self.message or not self.message.strip():
            raise WorkbenchError(f"finding {self.code}: the message must be one non-empty line.")
        object.__setattr__(self, "evidence", _plain(dict(self.evidence)))

    @property
    def title(self) -> str:
        return CATALOGUE[self.code].title

    @property
    def rank(self) -> int:
        return _RANK[self.severity]

    def summary(self) -> str:
        where = f"[{self.target}] " if self.target else ""
        return f"{self.severity.upper()} {where}{self.code}: {self.message}"

    def _repr_html_(self) -> str:
        return Findings((self,))._repr_html_()


def make(code: str, message: str, *, target: str = "", evidence: dict[str, Any] | None = None,
         next_step: str | None = None, severity: str | None = None) -> Finding:
    """A :class:`Finding` of ``code`` with its catalogue severity, stage and next step."""
    e = entry(code)
    return Finding(code=code, severity=severity or e.severity, stage=e.stage, message=message, target=target,
                   evidence=evidence or {}, next_step=next_step or e.action)


@dataclass(frozen=True)
class Findings(Result):
    """The findings of one result, one target or a whole run, most severe first."""

    items: tuple[Finding, ...] = ()

    def __post_init__(self) -> None:
        ordered = sorted(self.items, key=lambda f: (-f.rank, f.target, FINDING_STAGES.index(f.stage), f.code))
        object.__setattr__(self, "items", tuple(ordered))

    def __iter__(self) -> Iterator[Finding]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __add__(self, other: Iterable[Finding]) -> Findings:
        return Findings(self.items + tuple(other))

    @property
    def max_severity(self) -> str | None:
        """The highest severity present, or None when there is no finding."""
        return max((f.severity for f in self.items), key=_RANK.__getitem__, default=None)

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.code for f in self.items))

    def above(self, severity: str) -> Findings:
        """The findings strictly more severe than ``severity``."""
        rank = severity_rank(severity)
        return Findings(tuple(f for f in self.items if f.rank > rank))

    def at_least(self, severity: str) -> Findings:
        rank = severity_rank(severity)
        return Findings(tuple(f for f in self.items if f.rank >= rank))

    def for_target(self, target: str) -> Findings:
        return Findings(tuple(f for f in self.items if f.target in (target, "")))

    def with_code(self, code: str) -> Findings:
        entry(code)
        return Findings(tuple(f for f in self.items if f.code == code))

    def counts(self) -> dict[str, int]:
        return {s: sum(f.severity == s for f in self.items) for s in reversed(SEVERITIES)}

    def summary(self) -> str:
        if not self.items:
            return "no findings"
        counts = ", ".join(f"{k} {s}" + ("s" if k != 1 else "") for s, k in self.counts().items() if k)
        return f"{len(self.items)} finding(s): {counts}"

    def text(self) -> str:
        """One line per finding (what ``workbench findings`` prints)."""
        return "\n".join([self.summary()] + [
            f"  {f.summary()}\n      next: {f.next_step}" for f in self.items])

    def _repr_html_(self) -> str:
        from .findings_html import findings_html
        return findings_html(self)

    def to_list(self) -> list[dict[str, Any]]:
        return [f.to_dict() for f in self.items]

    @classmethod
    def from_list(cls, data: Iterable[dict[str, Any]]) -> Findings:
        return cls(tuple(Finding.from_dict(d) for d in data))


# -- computing findings from results -----------------------------------------------------------------
#: result type name -> module holding ``findings(result, *, target, **context)``
RULES = {
    "ModelInspection": "workbench.quantize.findings",
    "QuantizedModel": "workbench.quantize.findings",
    "CalibrationSet": "workbench.calibration.findings",
    "CoverageAudit": "workbench.calibration.findings",
    "AccuracyReport": "workbench.evaluate.findings",
    "PlacementReport": "workbench.placement.findings",
    "TimingResult": "workbench.board.findings",
    "BisectResult": "workbench.board.divergence",
}


def findings_for(result: Any, *, target: str = "", **context: Any) -> Findings:
    """The findings of one stage result (computed from its data).

    ``context`` passes what a rule needs beyond the result (``dataset=`` for a calibration set,
    ``placement=`` for a board timing).  A result type without rules gives no findings.
    """
    module = RULES.get(type(result).__name__)
    if module is None:
        return Findings()
    rules = importlib.import_module(module)
    return Findings(tuple(rules.findings(result, target=target, **context)))


def collect(*groups: Iterable[Finding]) -> Findings:
    """One :class:`Findings` from several (duplicates of the same code and message dropped)."""
    seen: dict[tuple[str, str, str], Finding] = {}
    for group in groups:
        for f in group:
            seen.setdefault((f.code, f.target, f.message), f)
    return Findings(tuple(seen.values()))


#: names that moved out of this module, by their new module (the old import path keeps working)
_MOVED = {**dict.fromkeys(("RunLocation", "resolve_run", "run_findings", "target_findings"), "workbench.run_findings"),
          **dict.fromkeys(("SEVERITY_STYLE", "findings_html", "grouped", "op_groups"), "workbench.findings_html"),
          **dict.fromkeys(("catalogue_markdown", "write_docs"), "workbench.findings_docs")}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'workbench.findings' has no attribute {name!r}")


__all__ = [
    "CATALOGUE",
    "SEVERITIES",
    "CatalogueEntry",
    "Finding",
    "Findings",
    "collect",
    "entry",
    "findings_for",
    "make",
]

