"""The gate as data: :class:`Gate` (validated at construction), the YAML :data:`SCHEMA` it is read with
(``section -> key -> (field, parse)``) and :func:`load_gate`."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._results import Result
from ..._validation import check_choice, check_range
from ...errors import GateError, missing_file
from .limits import (
    ConditionLimit,
    _check_limits,
    _count,
    _flag,
    _names,
    _number,
    _optional_number,
    _overrides,
    _per_condition,
    _shares,
    _text,
)

#: the drop limit ``check_gate(report)`` and ``workbench evaluate --max-drop/--min-agreement`` use by default
DEFAULT_MAX_DROP_PP = 1.0
LATENCY_STATISTICS = ("p50", "p99")
#: ``measured``: whatever the timing stage measured (a board, or labelled, the host CPU);
#: ``board``: board measurements only (host timings are noted, not checked); ``vela``: the Vela estimate
GATE_LATENCY_SOURCES = ("measured", "board", "vela")


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


# -- the gate ----------------------------------------------------------------------------------
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
                from ...findings import SEVERITIES
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


def _target_ids() -> tuple[str, ...]:
    from ...targets import target_ids
    return target_ids()
