"""Which accuracy drops are worth acting on (a finding, a remedy): beyond the threshold and beyond noise.
Its own module: the findings rules and the remedies both read it, and the remedies measure accuracy.

The threshold is a number of percentage points, or the gate the run uses (a :class:`~workbench.evaluate.gate.Gate`:
its ``max_drop_pp`` with its per-condition overrides); a gate that sets no drop limit for a condition, or none
given, means :data:`DEFAULT_MAX_DROP_PP`."""

from __future__ import annotations

from typing import Any

#: an INT8 drop beyond this (pp) with its CI above zero is a drop worth a finding (the gate's default)
DEFAULT_MAX_DROP_PP = 1.0


def drop_limit(max_drop_pp: Any, condition: str) -> float:
    """The drop threshold (pp) under ``condition``: ``max_drop_pp`` is a number, a gate (anything with
    ``limits(condition) -> (max_drop_pp, min_agreement)``) or None (:data:`DEFAULT_MAX_DROP_PP`)."""
    if max_drop_pp is None:
        return DEFAULT_MAX_DROP_PP
    if hasattr(max_drop_pp, "limits"):
        limit = max_drop_pp.limits(condition)[0]
        return DEFAULT_MAX_DROP_PP if limit is None else float(limit)
    return float(max_drop_pp)


def drops_beyond(report: Any, max_drop_pp: Any = DEFAULT_MAX_DROP_PP) -> list[Any]:
    """The candidate rows whose drop exceeds the threshold under their condition (:func:`drop_limit`) and whose
    CI lies above zero (beyond noise)."""
    if getattr(report, "metric", "top1") == "none":
        return []
    return [r for r in report.rows
            if not r.is_reference and r.drop_pp > drop_limit(max_drop_pp, r.condition) and r.drop_ci_low > 0]
