"""The spec's notebook parameters as CLI flags, and the spec of parsed arguments.

A command that runs the pipeline (``workbench batch``, ``workbench sweep``) calls :func:`add_spec_flags`
after its own flags: every notebook parameter of :class:`~workbench.pipeline.RunSpec` it does not take
yet becomes ``--name-with-dashes`` (typed from the field, default: the spec's).  :func:`spec_from_args`
reads them back through :meth:`RunSpec.from_parameters <workbench.pipeline.RunSpec.from_parameters>`.
So a new stage option with a notebook parameter is a flag of every such command, with no change to
the commands.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import typing
from collections.abc import Iterable
from typing import Any

from .spec import OPTION_GROUPS, OPTION_PARAMETERS, RunSpec, parameter_names

__all__ = ["add_spec_flags", "spec_from_args"]


def _field(name: str) -> tuple[Any, Any, str]:
    """(type, default, help) of the field behind the notebook parameter ``name``."""
    owner: Any = RunSpec
    field_name, where = name, f"RunSpec.{name}"
    for (group, option), parameter in OPTION_PARAMETERS.items():
        if parameter == name:
            owner, field_name = OPTION_GROUPS[group], option
            where = f"{owner.__name__}.{option}"
            break
    f = next(f for f in dataclasses.fields(owner) if f.name == field_name)
    default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    kind = typing.get_type_hints(owner).get(field_name, str)
    return kind, default, str(f.metadata.get("help", "")) or f"{where} (notebook parameter {name})"


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false; got {text!r}")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number; got {text!r}")
    return value


def _parser(kind: Any) -> Any:
    """The argparse ``type`` of a field type (``int | None`` parses as ``int``)."""
    args = [a for a in typing.get_args(kind) if a is not type(None)] or [kind]
    base = args[0]
    return {bool: _bool, int: int, float: _float}.get(base, str)


def add_spec_flags(parser: argparse.ArgumentParser, *, stage: str | None = None,
                   groups: Iterable[str] | None = None, skip: Iterable[str] = ()) -> None:
    """A ``--flag`` for each notebook parameter of the spec (``stage``: those its notebook reads; ``groups``:
    only the options of those stages, e.g. ``("calibration", "evaluation")``) that the parser has no argument
    for (by ``dest``) and ``skip`` does not name."""
    have = {a.dest for a in parser._actions} | set(skip)
    names = parameter_names(stage)
    if groups is not None:
        names = tuple(p for (g, _), p in OPTION_PARAMETERS.items() if p is not None and g in set(groups))
    for name in names:
        if name in have:
            continue
        kind, default, text = _field(name)
        parser.add_argument("--" + name.replace("_", "-"), dest=name, type=_parser(kind), default=None,
                            metavar=name.upper(), help=f"{text}; default {default!r}")


def spec_from_args(args: argparse.Namespace, *, skip: Iterable[str] = (), resolve: bool = False,
                   **overrides: Any) -> RunSpec:
    """The spec of the parsed arguments: every notebook parameter given (not None) but those ``skip`` names
    (what the command passes on another way), and ``overrides`` (by parameter name, e.g.
    ``dataset=args.data``); not resolved by default (nothing is loaded)."""
    given = {name: getattr(args, name) for name in parameter_names()
             if name not in set(skip) and getattr(args, name, None) is not None}
    given.update({k: v for k, v in overrides.items() if v is not None})
    return RunSpec.from_parameters(given, resolve=resolve)
