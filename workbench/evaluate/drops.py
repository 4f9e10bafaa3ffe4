"""Which accuracy drops are worth acting on (a finding, a remedy): beyond ``DEFAULT_MAX_DROP_PP`` and beyond
noise.  Its own module: the findings rules and the remedies both read it, and the remedies measure accuracy."""

from __future__ import annotations

from typing import Any

#: an INT8 drop beyond this (pp) with its CI above zero is a drop worth a finding (the gate's default)
DEFAULT_MAX_DROP_PP = 1.0


def drops_beyond(report: Any, max_drop_pp: float = DEFAULT_MAX_DROP_PP) -> list[Any]:
    """The candidate rows whose drop exceeds ``max_drop_pp`` and whose CI lies above zero (beyond noise)."""
    if getattr(report, "metric", "top1") == "none":
        return []
    return [r for r in report.rows if not r.is_reference and r.drop_pp > max_drop_pp and r.drop_ci_low > 0]
