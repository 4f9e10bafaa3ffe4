"""The accuracy quality gate: what drop and agreement a deployment may accept, per condition.

A :class:`Gate` is data (frozen, validated at construction, from keyword arguments
or a YAML file); :func:`check_gate` checks every candidate under every condition
of an :class:`~workbench.evaluate.accuracy.AccuracyReport` and returns every
violation with its reason, never only the first.

YAML form (every key optional)::

    max_drop_pp: 1.0          # largest accepted drop against FP32, percentage points
    min_agreement: 0.97       # smallest accepted FP32/INT8 argmax agreement (fraction)
    use_ci: false             # judge the upper end of the drop's CI instead of the point drop
    models: [a8w8_pc]         # which candidates (default: all)
    conditions:               # per-condition overrides
      low-light: {max_drop_pp: 3.0}
      sensor-noise: {max_drop_pp: 4.0, min_agreement: 0.9}

A file whose only key is ``gate`` holding that mapping is read the same way.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from .._results import Result
from .._validation import check_range
from ..errors import EvaluationError, WorkbenchWarning

DEFAULT_MAX_DROP_PP = 1.0
_LIMIT_KEYS = ("max_drop_pp", "min_agreement")
_GATE_KEYS = ("max_drop_pp", "min_agreement", "use_ci", "models", "conditions")
_ALIASES = {"max_drop": "max_drop_pp", "overrides": "conditions"}


def _check_limits(where: str, max_drop_pp: Any, min_agreement: Any) -> None:
    if max_drop_pp is not None:
        if isinstance(max_drop_pp, bool) or not isinstance(max_drop_pp, (int, float)):
            raise EvaluationError(f"`{where}max_drop_pp` must be a number of percentage points. "
                                  f"Got {max_drop_pp!r} instead.")
        check_range(f"{where}max_drop_pp", max_drop_pp, 0.0, 100.0, error=EvaluationError)
    if min_agreement is not None:
        if isinstance(min_agreement, bool) or not isinstance(min_agreement, (int, float)):
            raise EvaluationError(f"`{where}min_agreement` must be a fraction in [0, 1]. "
                                  f"Got {min_agreement!r} instead.")
        check_range(f"{where}min_agreement", min_agreement, 0.0, 1.0, error=EvaluationError)


@dataclass(frozen=True)
class ConditionLimit(Result):
    """Limits for one condition; ``None`` keeps the gate's default."""

    condition: str
    max_drop_pp: Optional[float] = None
    min_agreement: Optional[float] = None

    def __post_init__(self) -> None:
        _check_limits(f"conditions.{self.condition}.", self.max_drop_pp, self.min_agreement)


@dataclass(frozen=True)
class Gate(Result):
    """Maximum drop per condition (default 1.0 pp), optional minimum agreement, per-condition overrides.

    ``overrides`` may be given as a dict ``{condition: {"max_drop_pp": ..., "min_agreement": ...}}``
    or as a tuple of :class:`ConditionLimit`.
    """

    max_drop_pp: float = DEFAULT_MAX_DROP_PP
    min_agreement: Optional[float] = None
    overrides: tuple[ConditionLimit, ...] = ()
    use_ci: bool = False
    models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_limits("", self.max_drop_pp, self.min_agreement)
        object.__setattr__(self, "max_drop_pp", float(self.max_drop_pp))
        if self.min_agreement is not None:
            object.__setattr__(self, "min_agreement", float(self.min_agreement))
        overrides = self.overrides
        if isinstance(overrides, Mapping):
            limits = []
            for cond, spec in overrides.items():
                if isinstance(spec, (int, float)) and not isinstance(spec, bool):
                    spec = {"max_drop_pp": spec}
                if not isinstance(spec, Mapping):
                    raise EvaluationError(f"gate override for condition {cond!r} must be a mapping with "
                                          f"{' and/or '.join(_LIMIT_KEYS)}. Got {spec!r} instead.")
                spec = {_ALIASES.get(k, k): v for k, v in spec.items()}
                unknown = sorted(set(spec) - set(_LIMIT_KEYS))
                if unknown:
                    raise EvaluationError(f"gate override for condition {cond!r} has unknown key(s) "
                                          f"{', '.join(map(repr, unknown))}; allowed: {', '.join(_LIMIT_KEYS)}.")
                limits.append(ConditionLimit(condition=str(cond), **spec))
            overrides = tuple(limits)
        overrides = tuple(overrides)
        names = [o.condition for o in overrides]
        if len(set(names)) != len(names):
            raise EvaluationError(f"gate overrides name a condition twice: {names}.")
        object.__setattr__(self, "overrides", overrides)
        models = (self.models,) if isinstance(self.models, str) else tuple(self.models or ())
        object.__setattr__(self, "models", tuple(str(m) for m in models))
        object.__setattr__(self, "use_ci", bool(self.use_ci))

    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> Gate:
        """Read a gate from a YAML file (see the module docstring for the keys)."""
        import yaml
        try:
            with open(path, encoding="utf-8") as handle:
                data = yaml.safe_load(handle)
        except FileNotFoundError:
            raise EvaluationError(f"{path}: no such gate file.") from None
        except yaml.YAMLError as exc:
            raise EvaluationError(f"{path}: not valid YAML ({exc}).") from None
        if isinstance(data, Mapping) and set(data) == {"gate"}:
            data = data["gate"]
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise EvaluationError(f"{path}: a gate file holds a mapping of {', '.join(_GATE_KEYS)}; "
                                  f"got {type(data).__name__}.")
        try:
            return cls.from_mapping(data)
        except EvaluationError as exc:
            raise EvaluationError(f"{path}: {exc}") from None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Gate:
        """A gate from the YAML-form mapping (``conditions`` for the overrides)."""
        data = {_ALIASES.get(k, k): v for k, v in data.items()}
        unknown = sorted(set(data) - set(_GATE_KEYS))
        if unknown:
            raise EvaluationError(f"unknown gate key(s) {', '.join(map(repr, unknown))}; "
                                  f"allowed: {', '.join(_GATE_KEYS)}.")
        kwargs = dict(data)
        if "conditions" in kwargs:
            kwargs["overrides"] = kwargs.pop("conditions") or {}
        if kwargs.get("max_drop_pp") is None:
            kwargs.pop("max_drop_pp", None)
        return cls(**kwargs)

    def limits(self, condition: str) -> tuple[float, Optional[float]]:
        """``(max_drop_pp, min_agreement)`` that apply under ``condition``."""
        drop, agreement = self.max_drop_pp, self.min_agreement
        for o in self.overrides:
            if o.condition == condition:
                drop = o.max_drop_pp if o.max_drop_pp is not None else drop
                agreement = o.min_agreement if o.min_agreement is not None else agreement
        return drop, agreement

    def summary(self) -> str:
        text = f"max drop {self.max_drop_pp:g} pp" + (" (upper CI)" if self.use_ci else "")
        if self.min_agreement is not None:
            text += f", min agreement {self.min_agreement:.1%}"
        for o in self.overrides:
            parts = ([f"max drop {o.max_drop_pp:g} pp"] if o.max_drop_pp is not None else []) + \
                    ([f"min agreement {o.min_agreement:.1%}"] if o.min_agreement is not None else [])
            text += f"; {o.condition}: {', '.join(parts)}"
        return text


@dataclass(frozen=True)
class GateViolation(Result):
    condition: str
    model: str
    metric: str          # "drop_pp" or "agreement"
    value: float
    limit: float
    reason: str


@dataclass(frozen=True)
class GateResult(Result):
    """Pass/fail of a gate on a report, with one reason per violated condition and model."""

    passed: bool
    gate: Gate
    violations: tuple[GateViolation, ...]
    checked: int

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(v.reason for v in self.violations)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["reasons"] = list(self.reasons)
        return out

    def summary(self) -> str:
        if self.passed:
            return f"gate passed: {self.checked} model/condition pair(s) within {self.gate.summary()}"
        return f"gate FAILED: {len(self.violations)} violation(s) of {self.gate.summary()}"

    def text(self) -> str:
        return "\n".join([self.summary(), *[f"  - {r}" for r in self.reasons]])

    def _repr_html_(self) -> str:
        from .. import display
        rows = [(v.condition, v.model, v.metric, f"{v.value:.4g}", f"{v.limit:.4g}", v.reason)
                for v in self.violations]
        body = display.table(("condition", "model", "metric", "value", "limit", "reason"), rows,
                             row_styles=[display.BAD_STYLE] * len(rows)) if rows else ""
        return display.heading("Quality gate") + display.paragraph(self.summary()) + body


def check_gate(report: Any, gate: Gate | None = None, **kwargs: Any) -> GateResult:
    """Check every candidate under every condition of ``report`` against ``gate``.

    ``gate`` defaults to ``Gate(**kwargs)`` (so ``check_gate(report, max_drop_pp=2)`` works).
    """
    if gate is None:
        gate = Gate(**kwargs)
    elif kwargs:
        raise EvaluationError("give either a `gate` or gate keyword arguments, not both.")
    for o in gate.overrides:
        if o.condition not in report.conditions:
            warnings.warn(f"gate override for condition {o.condition!r} matches no condition of the report "
                          f"({', '.join(report.conditions)}); it is not applied.", WorkbenchWarning, stacklevel=2)
    candidates = report.candidates
    missing = [m for m in gate.models if m not in candidates]
    if missing:
        raise EvaluationError(f"gate names model(s) {', '.join(map(repr, missing))} that the report does not hold; "
                              f"candidates: {', '.join(candidates) or 'none'}.")
    chosen = gate.models or candidates
    violations, checked = [], 0
    for cond in report.conditions:
        max_drop, min_agreement = gate.limits(cond)
        for model in chosen:
            row = report.row(cond, model)
            checked += 1
            fp32 = report.accuracy(cond, report.reference)
            drop = row.drop_ci_high if gate.use_ci else row.drop_pp
            if drop > max_drop + 1e-9:
                what = "has a drop CI reaching" if gate.use_ci else "drops"
                violations.append(GateViolation(
                    condition=cond, model=model, metric="drop_pp", value=float(drop), limit=float(max_drop),
                    reason=(f"{cond}: {model} {what} {drop:.2f} pp ({fp32:.1%} FP32 -> {row.accuracy:.1%}, "
                            f"n={row.n}), more than the {max_drop:g} pp allowed")))
            if min_agreement is not None and row.agreement < min_agreement - 1e-12:
                violations.append(GateViolation(
                    condition=cond, model=model, metric="agreement", value=float(row.agreement),
                    limit=float(min_agreement),
                    reason=(f"{cond}: {model} agrees with FP32 on {row.agreement:.1%} of {row.n} samples, "
                            f"less than the {min_agreement:.1%} required")))
    return GateResult(passed=not violations, gate=gate, violations=tuple(violations), checked=checked)
