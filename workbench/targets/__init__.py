"""Targets: one declarative table per i.MX NPU.

``get_target("imx93")`` returns a :class:`Target` (frozen data: what the NPU is,
the delegate library, the BSP/tool version described, sources, the supported op
set, every op :class:`Constraint` and the model-level checks).  ``list_targets()``
returns them all.  The tables are plain data; placement analysis lives in
:mod:`workbench.placement`.

What differs between targets is data in the table, exceptions included: the compiler that
decides placement (``compiler``), whether it estimates latency, whether the board loads its
output (``deploys_compiled``), whether per-channel weights run at full speed
(``per_channel_fast``), the delegate library, the recipe, and per constraint the ops it exempts.
No module outside this package branches on a target id (``tests/targets/test_targets_as_data.py``).

A target is a module ``<id>.py`` here with a ``TARGET = Target(...)`` table: :func:`target_ids`
finds it.  :func:`register_target` adds a table at run time (a notebook's or a test's target).
"""

from __future__ import annotations

from ..errors import TargetError
from ..vocab import TARGETS as TARGET_IDS
from ._constraints import BspRelease, Constraint, Finding, ModelCheck, Reason, Target

__all__ = ["BspRelease", "Constraint", "Finding", "ModelCheck", "Reason", "Target", "TARGET_IDS",
           "get_target", "list_targets", "register_target", "target_ids", "unregister_target"]

#: tables added at run time with register_target(), by id
_REGISTERED: dict[str, Target] = {}
_NOT_TARGETS = frozenset({"commands"})


def _module_ids() -> tuple[str, ...]:
    """The ids of the table modules in this package (``<id>.py`` defining ``TARGET``), built-in order first."""
    import pkgutil
    found = [m.name for m in pkgutil.iter_modules(__path__)
             if not m.name.startswith("_") and m.name not in _NOT_TARGETS]
    return tuple(dict.fromkeys([*(t for t in TARGET_IDS if t in found), *sorted(found)]))


def target_ids() -> tuple[str, ...]:
    """Every target id: the tables of this package, then those registered at run time."""
    return tuple(dict.fromkeys([*_module_ids(), *_REGISTERED]))


def register_target(target: Target) -> Target:
    """Add ``target`` (a :class:`Target` table) under its id for this process: run folders, specs, the
    batch's validation, placement and timing take it like a built-in one.  An id of a built-in table is refused."""
    if not isinstance(target, Target):
        raise TargetError(f"`target` must be a Target table. Got {type(target).__name__} instead.")
    if target.id in _module_ids():
        raise TargetError(f"target id {target.id!r} is a built-in table; give the new target another id.")
    _REGISTERED[target.id] = target
    return target


def unregister_target(target_id: str) -> None:
    """Remove a table added with :func:`register_target` (nothing happens for an unknown id)."""
    _REGISTERED.pop(target_id, None)


def get_target(target: str | Target, *, bsp: str | None = None) -> Target:
    """The table of one target, with the rules of BSP release ``bsp`` when given.

    Without ``bsp`` a target id gives the table of the newest release the tables know
    (``Target.default_bsp``) and a :class:`Target` is returned as it is.  Raises
    :class:`TargetError` listing the known ids (or the known releases).
    """
    if isinstance(target, Target):
        return target if bsp is None else target.for_bsp(bsp)
    if target in _REGISTERED:
        table = _REGISTERED[target]
        return table if bsp is None else table.for_bsp(bsp)
    from .._validation import check_choice
    check_choice("target", target, target_ids(), error=TargetError)
    import importlib
    table = importlib.import_module(f"{__name__}.{target}").TARGET
    return table if bsp is None else table.for_bsp(bsp)


def list_targets() -> tuple[Target, ...]:
    """All target tables, in id order (registered ones last)."""
    return tuple(get_target(t) for t in target_ids())
