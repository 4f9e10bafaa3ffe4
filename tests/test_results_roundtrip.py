"""Every result type round-trips through JSON and renders itself.

The result types are discovered, not listed: every module of the package is imported and every
subclass of ``workbench._results.Result`` is built from example values derived from its type hints
(a few field names get a value their type's validation accepts, a few types an example in
``EXAMPLES``), then ``to_json`` -> ``from_json`` must give an equal object, and ``_repr_html_()`` and
``summary()`` must return text.  A new result type is covered the moment it exists; one that cannot be
built from its hints needs an entry in ``EXAMPLES``.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import types
import typing
from typing import Any

import pytest

import workbench
from workbench._results import Result

SKIP_MODULES = {"workbench.__main__"}


def _all_result_types() -> list[type]:
    for info in pkgutil.walk_packages(workbench.__path__, prefix="workbench."):
        if info.name not in SKIP_MODULES:
            importlib.import_module(info.name)
    found, todo = {}, [Result]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("workbench.") and not sub.__name__.startswith("_"):
                found[f"{sub.__module__}.{sub.__qualname__}"] = sub
    return [found[k] for k in sorted(found)]


RESULT_TYPES = _all_result_types()

#: values a field name needs to pass its type's validation (ids and names from the one vocabulary)
BY_NAME: dict[str, Any] = {
    "target": "imx93", "recipe": "a8w8_pc", "strategy": "stratified", "calibration_strategy": "stratified",
    "severity": "warning", "stage": "quantize", "status": "ok", "latency_statistic": "p50",
    "latency_source": "measured", "latency_kind": "host-cpu", "runner": "python", "backend": "tflite",
    "weights": "per_channel", "calibrator": "minmax", "input_dtype": "int8", "output_dtype": "int8",
    "activation_bits": 8, "weight_bits": 8, "coverage": "complete", "authority": "vela",
    "placement": "NPU", "where": "host CPU (not an NPU)", "kind": "class_scores",
    "task": "classification", "code": "quantize.float-op-left", "dtype": "int8", "mode": "batched",
    "confidence": 0.95, "percentile": 99.9, "layout": "NHWC",
}

#: a tuple of names (``conditions``) and the rows that refer to one of them (``condition``) must agree:
#: the builder passes each plural field's example down to nested results under its singular name
PLURALS = {"conditions": "daylight", "add_conditions": "daylight", "models": "a8w8_pc", "strategies": "stratified", "layers": "conv",
           "targets": "imx93", "candidates": "a8w8_pc", "classes": "0"}
SINGULAR = {"conditions": "condition", "add_conditions": "condition", "models": "model", "strategies": "strategy", "layers": "layer",
            "targets": "target", "candidates": "model", "classes": "label"}

#: dict fields keyed by the names of a plural field
KEYED_BY = {"calibrated_ranges": "layers"}

#: types whose fields cannot be derived from hints alone: a callable returning an instance
EXAMPLES: dict[str, Any] = {}


def _base(hint: Any) -> Any:
    """``X`` of ``X | None``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        real = [a for a in typing.get_args(hint) if a is not type(None)]
        return real[0] if len(real) == 1 else hint
    return hint


def _example(hint: Any, name: str, depth: int = 0, context: dict[str, str] | None = None) -> Any:
    context = context or {}
    if depth == 0 and name in context and _base(hint) is str:
        return context[name]
    if name in PLURALS and typing.get_origin(hint) is tuple and typing.get_args(hint)[:1] == (str,):
        return (PLURALS[name],)
    if (name in PLURALS or name in KEYED_BY) and typing.get_origin(hint) is dict \
            and typing.get_args(hint)[:1] == (str,):
        return {PLURALS[KEYED_BY.get(name, name)]: _example(typing.get_args(hint)[1], name, depth + 1, context)}
    if depth == 0 and name in BY_NAME and isinstance(BY_NAME[name], _base(hint) if isinstance(_base(hint), type)
                                                     else ()):
        return BY_NAME[name]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        real = [a for a in args if a is not type(None)]
        return _example(real[0], name, depth, context) if real else None
    if origin is typing.Literal:
        return args[0]
    if origin in (tuple, list):
        if not args:
            return origin()
        item = args[0]
        value = [_example(item, name, depth + 1, context)] if (len(args) == 2 and args[1] is Ellipsis) or origin is list \
            else [_example(a, name, depth + 1, context) for a in args]
        return tuple(value) if origin is tuple else value
    if origin is dict:
        return {"key": _example(args[1], name, depth + 1, context)} if args else {}
    if hint is str:
        return BY_NAME.get(name, name)
    if hint is bool:
        return False
    if hint is int:
        return BY_NAME.get(name, 1) if isinstance(BY_NAME.get(name), int) else 1
    if hint is float:
        return BY_NAME.get(name, 0.5) if isinstance(BY_NAME.get(name), float) else 0.5
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build(hint, context)
    return None   # Any and friends: no value


def _build(cls: type, context: dict[str, str] | None = None) -> Any:
    key = f"{cls.__module__}.{cls.__qualname__}"
    if key in EXAMPLES:
        return EXAMPLES[key]()
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    context = dict(context or {})
    context.update({SINGULAR[f.name]: PLURALS[f.name] for f in fields if f.name in PLURALS})
    if "models" in {f.name for f in fields}:
        context.setdefault("reference", PLURALS["models"])
    kwargs = {}
    for f in fields:
        hint = hints.get(f.name, Any)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required or (f.name in BY_NAME and _example(hint, f.name, 0, context) is not None):
            kwargs[f.name] = _example(hint, f.name, 0, context)
    return cls(**kwargs)


def test_result_types_are_found():
    names = {cls.__name__ for cls in RESULT_TYPES}
    assert {"CalibrationSet", "QuantizedModel", "AccuracyReport", "PlacementReport", "TimingResult",
            "RunSummary", "BatchResult", "Gate", "GateResult"} <= names
    assert len(RESULT_TYPES) >= 39


@pytest.mark.parametrize("cls", RESULT_TYPES, ids=lambda c: f"{c.__module__.removeprefix('workbench.')}.{c.__name__}")
def test_round_trip_and_render(cls):
    assert dataclasses.is_dataclass(cls), f"{cls.__name__} inherits Result but is not a dataclass"
    assert cls.__dataclass_params__.frozen, f"{cls.__name__} must be a frozen dataclass"
    obj = _build(cls)
    again = cls.from_json(obj.to_json())
    assert again == obj, f"{cls.__name__}: to_json/from_json changed the object"
    assert cls.from_dict(obj.to_dict()) == obj
    html = obj._repr_html_()
    assert isinstance(html, str) and html
    assert isinstance(obj.summary(), str)
