"""One value of a gate file, parsed with its key's name in every message, and the per-condition accuracy
limits (:class:`ConditionLimit`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..._results import Result
from ..._validation import check_range
from ...errors import GateError

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
