"""Targets: one declarative table per i.MX NPU.

``get_target("imx93")`` returns a :class:`Target` (frozen data: what the NPU is,
the delegate library, the BSP/tool version described, sources, the supported op
set, every op :class:`Constraint` and the model-level checks).  ``list_targets()``
returns them all.  The tables are plain data; placement analysis lives in
:mod:`workbench.placement`.
"""

from __future__ import annotations

from ..errors import TargetError
from ..vocab import TARGETS as TARGET_IDS
from ._constraints import BspRelease, Constraint, Finding, ModelCheck, Reason, Target

__all__ = ["BspRelease", "Constraint", "Finding", "ModelCheck", "Reason", "Target", "TARGET_IDS",
           "get_target", "list_targets"]


def get_target(target: str | Target, *, bsp: str | None = None) -> Target:
    """The table of one target, with the rules of BSP release ``bsp`` when given.

    Without ``bsp`` a target id gives the table of the newest release the tables know
    (``Target.default_bsp``) and a :class:`Target` is returned as it is.  Raises
    :class:`TargetError` listing the known ids (or the known releases).
    """
    if isinstance(target, Target):
        return target if bsp is None else target.for_bsp(bsp)
    from .._validation import check_choice
    check_choice("target", target, TARGET_IDS, error=TargetError)
    import importlib
    table = importlib.import_module(f"{__name__}.{target}").TARGET
    return table if bsp is None else table.for_bsp(bsp)


def list_targets() -> tuple[Target, ...]:
    """All target tables, in id order."""
    return tuple(get_target(t) for t in TARGET_IDS)
