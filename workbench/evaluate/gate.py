"""The one quality gate: what a deployment may accept, read by every command that takes ``--gate``.

A :class:`Gate` is data (frozen, validated at construction, from keyword arguments
or a YAML file).  Two checks read it and return every violation with its reason,
never only the first:

- :func:`check_gate` on an :class:`~workbench.evaluate.accuracy.AccuracyReport`
  (``workbench evaluate --gate``): the ``accuracy`` section;
- :func:`check_quality_gate` on a :class:`~workbench.runs.RunSummary`
  (``workbench batch --gate``): every section, per target.

YAML form (every section and key optional; a limit a file does not state is not checked)::

    accuracy:
      max_drop_pp: 3.0            # largest FP32 -> INT8 top-1 drop, percentage points
      min_agreement: 0.97         # smallest FP32/INT8 argmax agreement (fraction)
      use_ci: false               # judge the upper end of the drop's CI (evaluate only)
      models: [a8w8_pc]           # which candidates (evaluate only; default all)
      per_condition:              # per-condition overrides: a number (max_drop_pp) or a mapping
        sensor-noise: 5.0
        low-light: {max_drop_pp: 4.0, min_agreement: 0.9}
    placement:
      min_npu_share: 0.9          # every target, or {imx8mp: 0.9, imx93: 1.0}
      max_cpu_islands: 0
    latency:
      max_ms: 5.0
      statistic: p50              # p50 | p99
      source: measured            # measured | board | vela
      allow_missing: false        # source board: pass (noted) when there is no board measurement
    findings:
      max_severity: warning       # fail on any finding more severe (an error); see docs/findings.md

Every number must be finite (NaN compares false with every value and would pass
anything): a NaN or infinite limit is refused with its key's name.

Extending the gate (a new section or key): add the field to :class:`Gate` (validated
in ``__post_init__``), one row to :data:`SCHEMA` (``section -> key -> (field, parse)``),
the check in :func:`check_quality_gate` (and in :func:`check_gate` if an accuracy
report holds what it needs), a line in ``Gate.summary`` and in the committed ``gate.yaml``.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._results import Result
from .._validation import check_choice, check_range
from ..errors import GateError, WorkbenchWarning, missing_file
from ..vocab import LatencySource, is_board_source

#: the drop limit ``check_gate(report)`` and ``workbench evaluate --max-drop/--min-agreement`` use by default
DEFAULT_MAX_DROP_PP = 1.0
LATENCY_STATISTICS = ("p50", "p99")
#: ``measured``: whatever the timing stage measured (a board, or labelled, the host CPU);
#: ``board``: board measurements only (host timings are noted, not checked); ``vela``: the Vela estimate
GATE_LATENCY_SOURCES = ("measured", "board", "vela")
_LIMIT_KEYS = ("max_drop_pp", "min_agreement")


# -- parsing one value: the key's name is in every message ---------------------------------
def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GateError(f"`{key}` must be a finite number. Got {value!r} instead.")
    if not math.isfinite(value):
        raise GateError(f"`{key}` must be a finite number. Got {value!r} instead.")
    return float(value)


def _optional_number(key: str, value: Any) -> float | None:
    return None if value is None else _number(key, value)


def _count(key: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise GateError(f"`{key}` must be an integer >= 0. Got {value!r} instead.")
    return value


def _flag(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise GateError(f"`{key}` must be true or false. Got {value!r} instead.")
    return value


def _names(key: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = (value,) if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise GateError(f"`{key}` must be a list of names. Got {value!r} instead.")
    return tuple(str(v) for v in items)


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise GateError(f"`{key}` must be a string. Got {value!r} instead.")
    return value


def _shares(key: str, value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(t): _number(f"{key}.{t}", v) for t, v in value.items()}
    return {"*": _number(f"{key}.*", value)}


def _per_condition(key: str, value: Any) -> tuple[ConditionLimit, ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise GateError(f"`{key}` must map condition names to limits. Got {value!r} instead.")
    return _overrides(value, key)


#: section -> key -> (Gate field, parse(key, value)).  One row per YAML key; see the module docstring.
SCHEMA: dict[str, dict[str, tuple[str, Callable[[str, Any], Any]]]] = {
    "accuracy": {
        "max_drop_pp": ("max_drop_pp", _optional_number),
        "min_agreement": ("min_agreement", _optional_number),
        "use_ci": ("use_ci", _flag),
        "models": ("models", _names),
        "per_condition": ("overrides", _per_condition),
    },
    "placement": {
        "min_npu_share": ("min_npu_share", _shares),
        "max_cpu_islands": ("max_cpu_islands", _count),
    },
    "latency": {
        "max_ms": ("max_latency_ms", _optional_number),
        "statistic": ("latency_statistic", _text),
        "source": ("latency_source", _text),
        "allow_missing": ("latency_allow_missing", _flag),
    },
    "findings": {
        "max_severity": ("findings_max_severity", _text),
    },
}


def _check_limits(where: str, max_drop_pp: Any, min_agreement: Any) -> None:
    if max_drop_pp is not None:
        check_range(f"{where}max_drop_pp", _number(f"{where}max_drop_pp", max_drop_pp), 0.0, 100.0,
                    error=GateError)
    if min_agreement is not None:
        check_range(f"{where}min_agreement", _number(f"{where}min_agreement", min_agreement), 0.0, 1.0,
                    error=GateError)


def _overrides(spec: Mapping[str, Any], where: str = "accuracy.per_condition") -> tuple[ConditionLimit, ...]:
    limits = []
    for cond, limit in spec.items():
        if isinstance(limit, (int, float)) and not isinstance(limit, bool):
            limit = {"max_drop_pp": limit}
        if not isinstance(limit, Mapping):
            raise GateError(f"gate override for condition {cond!r} must be a number (max_drop_pp) or a mapping "
                            f"with {' and/or '.join(_LIMIT_KEYS)}. Got {limit!r} instead.")
        unknown = sorted(set(limit) - set(_LIMIT_KEYS))
        if unknown:
            raise GateError(f"gate override for condition {cond!r} has unknown key(s) "
                            f"{', '.join(map(repr, unknown))}; allowed: {', '.join(_LIMIT_KEYS)}.")
        limits.append(ConditionLimit(condition=str(cond), **dict(limit)))
    return tuple(limits)


# -- the gate ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConditionLimit(Result):
    """Limits for one condition; ``None`` keeps the gate's default."""

    condition: str
    max_drop_pp: float | None = None
    min_agreement: float | None = None

    def __post_init__(self) -> None:
        _check_limits(f"accuracy.per_condition.{self.condition}.", self.max_drop_pp, self.min_agreement)
        for name in _LIMIT_KEYS:
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, float(value))


@dataclass(frozen=True)
class Gate(Result):
    """Limits a model or a batch must meet; a limit left ``None`` (or empty) is not checked.

    ``overrides`` may be given as a dict ``{condition: max_drop_pp}`` or
    ``{condition: {"max_drop_pp": ..., "min_agreement": ...}}``, or as a tuple of
    :class:`ConditionLimit`; ``min_npu_share`` as a number (every target) or
    ``{target or "*": share}``.
    """

    # accuracy
    max_drop_pp: float | None = None
    min_agreement: float | None = None
    overrides: tuple[ConditionLimit, ...] = ()
    use_ci: bool = False
    models: tuple[str, ...] = ()
    # placement
    min_npu_share: dict[str, float] = field(default_factory=dict)
    max_cpu_islands: int | None = None
    # latency
    max_latency_ms: float | None = None
    latency_statistic: str = "p50"
    latency_source: str = "measured"
    latency_allow_missing: bool = False     # source board: no board measurement is noted, not failed
    # findings (workbench.findings): fail on a finding more severe than this (info | warning | error)
    findings_max_severity: str | None = None
    #: the file it was read from (not part of equality)
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        try:
            _check_limits("accuracy.", self.max_drop_pp, self.min_agreement)
            for name in ("max_drop_pp", "min_agreement", "max_latency_ms"):
                if getattr(self, name) is not None:
                    object.__setattr__(self, name, _number(name, getattr(self, name)))
            overrides = self.overrides
            overrides = _overrides(overrides) if isinstance(overrides, Mapping) else tuple(overrides)
            names = [o.condition for o in overrides]
            if len(set(names)) != len(names):
                raise GateError(f"gate overrides name a condition twice: {names}.")
            object.__setattr__(self, "overrides", overrides)
            models = (self.models,) if isinstance(self.models, str) else tuple(self.models or ())
            object.__setattr__(self, "models", tuple(str(m) for m in models))
            object.__setattr__(self, "use_ci", bool(self.use_ci))
            _flag("latency.allow_missing", self.latency_allow_missing)
            shares = self.min_npu_share
            shares = _shares("placement.min_npu_share", shares if shares not in ({}, None) else None)
            for t, v in shares.items():
                check_choice("placement.min_npu_share target", t, ("*", *_target_ids()), error=GateError)
                check_range(f"placement.min_npu_share.{t}", v, 0.0, 1.0, error=GateError)
            object.__setattr__(self, "min_npu_share", shares)
            _count("placement.max_cpu_islands", self.max_cpu_islands)
            if self.max_latency_ms is not None:
                check_range("latency.max_ms", self.max_latency_ms, 0.0, None, error=GateError)
            check_choice("latency.statistic", self.latency_statistic, LATENCY_STATISTICS, error=GateError)
            check_choice("latency.source", self.latency_source, GATE_LATENCY_SOURCES, error=GateError)
            if self.findings_max_severity is not None:
                from ..findings import SEVERITIES
                check_choice("findings.max_severity", self.findings_max_severity, SEVERITIES, error=GateError)
        except GateError as exc:
            raise GateError(f"{self.source}: {exc}" if self.source else str(exc)) from None

    # -- reading -----------------------------------------------------------------------------
    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> Gate:
        """Read a gate YAML file (sections ``accuracy``, ``placement``, ``latency``)."""
        import yaml
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise missing_file("gate file", path, "copy gate.yaml from the project root and edit it",
                               GateError) from None
        except yaml.YAMLError as exc:
            raise GateError(f"{path}: not valid YAML ({exc}).") from None
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise GateError(f"{path}: a gate file is a mapping with sections {', '.join(SCHEMA)}; "
                            f"got {type(data).__name__}.")
        try:
            return cls.from_mapping(data, source=path.name)
        except GateError as exc:
            text = str(exc)
            raise GateError(text if text.startswith(f"{path.name}: ") else f"{path}: {text}") from None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "") -> Gate:
        """A gate from the YAML-form mapping (sections of keys)."""
        kwargs: dict[str, Any] = {}
        for section, body in data.items():
            if section not in SCHEMA:
                raise GateError(f"unknown section {section!r}; sections are {', '.join(SCHEMA)}.")
            if body is None:
                continue
            if not isinstance(body, Mapping):
                raise GateError(f"section {section!r} must be a mapping of limits. Got {body!r} instead.")
            for key, value in body.items():
                if key not in SCHEMA[section]:
                    raise GateError(f"unknown key {section}.{key}; {section} takes "
                                    f"{', '.join(SCHEMA[section])}.")
                name, parse = SCHEMA[section][key]
                kwargs[name] = parse(f"{section}.{key}", value)
        return cls(source=source, **kwargs)

    # -- questions ---------------------------------------------------------------------------
    @property
    def checks_accuracy(self) -> bool:
        return (self.max_drop_pp is not None or self.min_agreement is not None
                or any(o.max_drop_pp is not None or o.min_agreement is not None for o in self.overrides))

    def limits(self, condition: str) -> tuple[float | None, float | None]:
        """``(max_drop_pp, min_agreement)`` that apply under ``condition`` (None: not checked)."""
        drop, agreement = self.max_drop_pp, self.min_agreement
        for o in self.overrides:
            if o.condition == condition:
                drop = o.max_drop_pp if o.max_drop_pp is not None else drop
                agreement = o.min_agreement if o.min_agreement is not None else agreement
        return drop, agreement

    def share_for(self, target: str) -> float | None:
        return self.min_npu_share.get(target, self.min_npu_share.get("*"))

    def summary(self) -> str:
        parts = []
        if self.max_drop_pp is not None:
            parts.append(f"max drop {self.max_drop_pp:g} pp" + (" (upper CI)" if self.use_ci else ""))
        if self.min_agreement is not None:
            parts.append(f"min agreement {self.min_agreement:.1%}")
        for o in self.overrides:
            limits = ([f"max drop {o.max_drop_pp:g} pp"] if o.max_drop_pp is not None else []) + \
                     ([f"min agreement {o.min_agreement:.1%}"] if o.min_agreement is not None else [])
            parts.append(f"{o.condition}: {', '.join(limits)}")
        if self.min_npu_share:
            parts.append("NPU share >= " + ", ".join(f"{v:.0%}" + ("" if t == "*" else f" ({t})")
                                                     for t, v in self.min_npu_share.items()))
        if self.max_cpu_islands is not None:
            parts.append(f"CPU islands <= {self.max_cpu_islands}")
        if self.max_latency_ms is not None:
            parts.append(f"{self.latency_statistic} latency ({self.latency_source}) <= {self.max_latency_ms:g} ms"
                         + (" (board measurement may be missing)" if self.latency_allow_missing else ""))
        if self.findings_max_severity is not None:
            parts.append(f"findings <= {self.findings_max_severity}")
        return "; ".join(parts) or "no limits"


def load_gate(path: str | os.PathLike | Gate) -> Gate:
    """A :class:`Gate` from a YAML file (a ``Gate`` is returned as is)."""
    return path if isinstance(path, Gate) else Gate.from_yaml(path)


#: the name the batch used for the same type
QualityGate = Gate


# -- results -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class GateViolation(Result):
    """One broken limit: ``check`` is ``<section>.<key>`` (``accuracy.max_drop_pp``...)."""

    check: str
    reason: str
    value: float | None = None
    limit: float | None = None
    target: str | None = None
    condition: str | None = None
    model: str | None = None

    def summary(self) -> str:
        return self.reason


@dataclass(frozen=True)
class GateResult(Result):
    """Pass/fail of a gate, with one reason per violation and notes on what was not checked."""

    passed: bool
    gate: Gate
    violations: tuple[GateViolation, ...] = ()
    checked: int = 0
    notes: tuple[str, ...] = ()

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(v.reason for v in self.violations)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["reasons"] = list(self.reasons)
        return out

    def summary(self) -> str:
        if self.passed:
            return f"gate passed: {self.checked} check(s) within {self.gate.summary()}"
        return f"gate FAILED: {len(self.violations)} violation(s) of {self.gate.summary()}"

    def text(self) -> str:
        return "\n".join([self.summary(), *[f"  - {r}" for r in self.reasons],
                          *[f"  note: {n}" for n in self.notes]])

    def _repr_html_(self) -> str:
        from .. import display
        rows = [(v.target or "", v.condition or "", v.model or "", v.check,
                 "" if v.value is None else f"{v.value:.4g}", "" if v.limit is None else f"{v.limit:.4g}", v.reason)
                for v in self.violations]
        body = display.table(("target", "condition", "model", "check", "value", "limit", "reason"), rows,
                             row_styles=[display.BAD_STYLE] * len(rows)) if rows else ""
        return (display.heading("Quality gate") + display.paragraph(self.summary()) + body
                + "".join(display.paragraph(n) for n in self.notes))


#: the name the batch used for the same type
GateReport = GateResult


# -- check an accuracy report (workbench evaluate --gate) ---------------------------------------
def check_gate(report: Any, gate: Gate | None = None, **kwargs: Any) -> GateResult:
    """Check every candidate under every condition of ``report`` against ``gate``'s accuracy limits.

    ``gate`` defaults to ``Gate(**kwargs)`` with ``max_drop_pp`` defaulting to
    :data:`DEFAULT_MAX_DROP_PP` (so ``check_gate(report)`` and ``check_gate(report, max_drop_pp=2)`` work).
    Placement and latency limits are not in an accuracy report: they are noted, not checked.
    """
    if gate is None:
        gate = Gate(**{"max_drop_pp": DEFAULT_MAX_DROP_PP, **kwargs})
    elif kwargs:
        raise GateError("give either a `gate` or gate keyword arguments, not both.")
    for o in gate.overrides:
        if o.condition not in report.conditions:
            warnings.warn(f"gate override for condition {o.condition!r} matches no condition of the report "
                          f"({', '.join(report.conditions)}); it is not applied.", WorkbenchWarning, stacklevel=2)
    candidates = report.candidates
    missing = [m for m in gate.models if m not in candidates]
    if missing:
        raise GateError(f"gate names model(s) {', '.join(map(repr, missing))} that the report does not hold; "
                        f"candidates: {', '.join(candidates) or 'none'}.")
    notes = []
    if gate.min_npu_share or gate.max_cpu_islands is not None or gate.max_latency_ms is not None:
        notes.append("placement and latency limits are not checked on an accuracy report "
                     "(`workbench batch --gate` checks them per target)")
    chosen = gate.models or candidates
    violations, checked = [], 0
    for cond in report.conditions:
        max_drop, min_agreement = gate.limits(cond)
        if max_drop is None and min_agreement is None:
            continue
        for model in chosen:
            row = report.row(cond, model)
            checked += 1
            fp32 = report.accuracy(cond, report.reference)
            drop = row.drop_ci_high if gate.use_ci else row.drop_pp
            if max_drop is not None and drop > max_drop + 1e-9:
                what = "has a drop CI reaching" if gate.use_ci else "drops"
                violations.append(GateViolation(
                    check="accuracy.max_drop_pp", condition=cond, model=model, value=float(drop),
                    limit=float(max_drop),
                    reason=(f"{cond}: {model} {what} {drop:.2f} pp ({fp32:.1%} FP32 -> {row.accuracy:.1%}, "
                            f"n={row.n}), more than the {max_drop:g} pp allowed")))
            if min_agreement is not None and row.agreement < min_agreement - 1e-12:
                violations.append(GateViolation(
                    check="accuracy.min_agreement", condition=cond, model=model, value=float(row.agreement),
                    limit=float(min_agreement),
                    reason=(f"{cond}: {model} agrees with FP32 on {row.agreement:.1%} of {row.n} samples, "
                            f"less than the {min_agreement:.1%} required")))
    return GateResult(passed=not violations, gate=gate, violations=tuple(violations), checked=checked,
                      notes=tuple(notes))


# -- check a run summary (workbench batch --gate) ------------------------------------------------
def check_quality_gate(summary: Any, gate: Gate | str | os.PathLike, *, findings: Any = None) -> GateResult:
    """Check every target of a :class:`~workbench.runs.RunSummary`; every violation, not the first.

    ``findings`` (a :class:`~workbench.findings.Findings` of the run) feeds the ``findings`` section;
    by default each target summary's own ``findings`` are used."""
    gate = load_gate(gate)
    out: list[GateViolation] = []
    notes: list[str] = []
    checked = 0

    def add(target: str, check: str, reason: str, **kw: Any) -> None:
        out.append(GateViolation(check=check, target=target, reason=f"{target}: {reason}", **kw))

    if gate.use_ci or gate.models:
        notes.append("accuracy.use_ci and accuracy.models apply to `workbench evaluate` only")
    for t in summary.targets:
        if t.status == "failed":
            add(t.target, "target.failed", f"the run failed at {t.failed_stage or '?'} ({t.error}); nothing to check")
            continue
        if gate.checks_accuracy:
            if not t.accuracy:
                add(t.target, "accuracy.max_drop_pp", "no accuracy results (the accuracy stage did not run)")
            for a in t.accuracy:
                limit, agreement = gate.limits(a.condition)
                if limit is not None and a.drop_pp is not None:
                    checked += 1
                    if a.drop_pp > limit + 1e-9:
                        add(t.target, "accuracy.max_drop_pp", f"accuracy drop under {a.condition} is "
                            f"{a.drop_pp:.2f} pp (FP32 {a.fp32:.2%} -> INT8 {a.int8:.2%}), above the limit of "
                            f"{limit:g} pp", condition=a.condition, limit=limit, value=a.drop_pp)
                value = getattr(a, "agreement", None)
                if agreement is not None and value is not None:
                    checked += 1
                    if value < agreement - 1e-12:
                        add(t.target, "accuracy.min_agreement", f"FP32/INT8 agreement under {a.condition} is "
                            f"{value:.1%}, below the minimum of {agreement:.1%}", condition=a.condition,
                            limit=agreement, value=value)
        share = gate.share_for(t.target)
        if share is not None:
            checked += 1
            if t.npu_share is None:
                add(t.target, "placement.min_npu_share", "no placement result (the placement stage did not run)")
            elif t.npu_share < share:
                add(t.target, "placement.min_npu_share", f"NPU op share is {t.npu_share:.1%} ({t.npu_ops}/"
                    f"{(t.npu_ops or 0) + (t.cpu_ops or 0)} ops), below the minimum of {share:.1%}",
                    limit=share, value=t.npu_share)
        if gate.max_cpu_islands is not None:
            checked += 1
            if t.cpu_islands is None:
                add(t.target, "placement.max_cpu_islands", "no placement result (the placement stage did not run)")
            elif t.cpu_islands > gate.max_cpu_islands:
                add(t.target, "placement.max_cpu_islands", f"{t.cpu_islands} CPU island(s) between NPU segments, "
                    f"above the maximum of {gate.max_cpu_islands}", limit=gate.max_cpu_islands, value=t.cpu_islands)
        if gate.max_latency_ms is not None:
            checked += 1
            _check_latency(t, gate, add, notes)
        if gate.findings_max_severity is not None:
            checked += 1
            _check_findings(t, gate, add, findings)
    return GateResult(passed=not out, gate=gate, violations=tuple(out), checked=checked, notes=tuple(notes))


def _check_findings(t: Any, gate: Gate, add: Callable[..., None], findings: Any) -> None:
    """One violation per finding of target ``t`` more severe than ``findings.max_severity``."""
    from ..findings import severity_rank
    found = getattr(t, "findings", None) if findings is None else [f for f in findings if f.target == t.target]
    if gate.findings_max_severity is None:
        return
    limit = severity_rank(gate.findings_max_severity)
    for f in found or ():
        if f.rank > limit:
            add(t.target, "findings.max_severity", f"{f.severity} {f.code}: {f.message}", value=f.rank, limit=limit)


def _check_latency(t: Any, gate: Gate, add: Callable[..., None], notes: list[str]) -> None:
    limit = gate.max_latency_ms
    assert limit is not None
    if gate.latency_source == "vela":
        if t.vela_estimate_ms is None and not get_target(t.target).compiler_estimates_latency:
            notes.append(f"{t.target}: latency not checked (its compiler gives no latency estimate; a Vela "
                         "estimate exists for Ethos-U targets only)")
        elif t.vela_estimate_ms is None:
            add(t.target, "latency.max_ms", "no Vela estimate (the placement stage did not run)")
        elif t.vela_estimate_ms > limit:
            add(t.target, "latency.max_ms", f"Vela-estimated latency is {t.vela_estimate_ms:.3f} ms, above the limit "
                f"of {limit:g} ms (a compiler estimate, not a board measurement)", limit=limit,
                value=t.vela_estimate_ms)
        return
    value = t.latency_ms if gate.latency_statistic == "p50" else t.latency_p99_ms
    source = getattr(t, "latency_source", None)
    # a replayed recording is a board measurement (CI without a board gates on replays)
    on_board = is_board_source(source) or source == LatencySource.REPLAYED
    if gate.latency_source == "board" and not on_board:
        reason = (f"no board measurement: latency was timed on the {t.latency_kind}" if t.latency_kind
                  else "no board measurement (the timing stage did not run)")
        if gate.latency_allow_missing:
            notes.append(f"{t.target}: latency not checked ({reason}; allow_missing: true)")
        else:
            add(t.target, "latency.max_ms", f"{reason}, and the gate asks for a board (latency source: board). "
                "Next: time on a board, replay a board recording (--replay), or set allow_missing: true")
        return
    if t.latency_kind is None or value is None:
        add(t.target, "latency.max_ms", f"no {gate.latency_statistic} latency (the timing stage did not run)")
        return
    if value > limit:
        add(t.target, "latency.max_ms", f"{gate.latency_statistic} latency is {value:.3f} ms ({t.latency_kind}), "
            f"above the limit of {limit:g} ms", limit=limit, value=value)
    else:   # a passing latency line names where the number comes from, too
        notes.append(f"{t.target}: {gate.latency_statistic} latency {value:.3f} ms ({t.latency_kind}) within "
                     f"the limit of {limit:g} ms")


def _target_ids() -> tuple[str, ...]:
    from ..targets import target_ids
    return target_ids()


def get_target(target: str) -> Any:
    """The target's table (the gate reads what its compiler reports from it)."""
    from ..targets import get_target as _get
    return _get(target)
