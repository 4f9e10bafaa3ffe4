"""The base of every result type: frozen dataclasses of plain data.

A result is a ``@dataclass(frozen=True)`` that also inherits :class:`Result`.
It then gets ``to_dict()`` / ``from_dict()`` (a JSON round trip: tuples become
lists and come back as tuples, nested results come back as their types),
``to_json()``, and ``_repr_html_()`` that defers to :mod:`workbench.display`.
Subclasses write ``summary()`` and, where a picture says more, ``plot(ax=None)``.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T", bound="Result")


class Result:
    """Mixin for frozen dataclass results."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _encode(getattr(self, f.name)) for f in dataclasses.fields(typing.cast(Any, self))}

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        hints = typing.get_type_hints(cls)
        kwargs = {}
        for f in dataclasses.fields(typing.cast(Any, cls)):
            if f.name in data:
                kwargs[f.name] = _decode(hints.get(f.name, Any), data[f.name])
        return cls(**kwargs)

    def to_json(self, **kwargs: Any) -> str:
        from ._io import to_json
        return to_json(self.to_dict(), **kwargs)

    @classmethod
    def from_json(cls: type[T], text: str) -> T:
        return cls.from_dict(json.loads(text))

    def summary(self) -> str:
        return type(self).__name__

    def _repr_html_(self) -> str:
        from .display import result_html
        return result_html(self)


def _encode(value: Any) -> Any:
    if isinstance(value, Result):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()  # numpy scalars / arrays
    if hasattr(value, "__fspath__"):
        return str(value)
    return value


def _decode(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _decode(arg, value)
            except (TypeError, ValueError, KeyError):
                continue
        return value
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise TypeError(f"expected a dict for {hint.__name__}")
        if issubclass(hint, Result):
            return hint.from_dict(value)
        sub = typing.get_type_hints(hint)
        return hint(**{k: _decode(sub.get(k, Any), v) for k, v in value.items()})
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v) for v in value)
        if args:
            return tuple(_decode(a, v) for a, v in zip(args, value))
        return tuple(value)
    if origin is list:
        return [_decode(args[0] if args else Any, v) for v in value]
    if origin is dict:
        kt, vt = args if args else (Any, Any)
        return {_decode(kt, k): _decode(vt, v) for k, v in value.items()}
    if hint is float and isinstance(value, int):
        return float(value)
    return value


def check_values(cls: type, data: Any, where: str = "") -> None:
    """Raise ``ValueError`` naming the first value of ``data`` that its field's type does not allow.

    For records read back from files (a stage record, a summary): a number must be a finite
    number (never NaN, infinite, text or a bool) where the field is a number, text where it is
    text, and ``null`` only where the field may be None.  ``from_dict`` alone would pass a NaN
    or a string through to the code that computes with it.
    """
    _check(cls, data, where or cls.__name__)


def _is_record(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _bad(where: str, value: Any, what: str) -> ValueError:
    shown = repr(value)
    return ValueError(f"{where} is {shown if len(shown) <= 60 else shown[:57] + '...'}, not {what}")


def _check(hint: Any, value: Any, where: str) -> None:
    import math
    if hint is Any or hint is object or isinstance(hint, typing.TypeVar):
        return
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if value is None:
        if hint is type(None) or (origin in (typing.Union, types.UnionType) and type(None) in args):
            return
        raise _bad(where, value, "a value (null is not allowed here)")
    if origin in (typing.Union, types.UnionType):
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                _check(arg, value, where)
                return
            except ValueError as exc:
                errors.append(exc)
        raise errors[0] if errors else _bad(where, value, str(hint))
    if origin is typing.Literal:
        if value not in args:
            raise _bad(where, value, f"one of {', '.join(map(repr, args))}")
        return
    if _is_record(hint):
        if not isinstance(value, dict):
            raise _bad(where, value, f"a mapping ({hint.__name__})")
        sub = typing.get_type_hints(hint)
        for key, item in value.items():
            if key in sub:
                _check(sub[key], item, f"{where}.{key}")
        return
    if origin in (tuple, list) or hint in (tuple, list):
        if not isinstance(value, list | tuple):
            raise _bad(where, value, "a list")
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            for i, (a, v) in enumerate(zip(args, value)):
                _check(a, v, f"{where}[{i}]")
            return
        item_hint = args[0] if args else Any
        for i, v in enumerate(value):
            _check(item_hint, v, f"{where}[{i}]")
        return
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise _bad(where, value, "a mapping")
        vt = args[1] if len(args) == 2 else Any
        for k, v in value.items():
            _check(vt, v, f"{where}[{k!r}]")
        return
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise _bad(where, value, "a finite number")
        return
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return
            raise _bad(where, value, "a whole number")
        return
    if hint is bool:
        if not isinstance(value, bool):
            raise _bad(where, value, "true or false")
        return
    if hint is str:
        if not isinstance(value, str):
            raise _bad(where, value, "text")
        return
