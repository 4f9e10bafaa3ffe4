"""The one place that validates parameters, with one message form."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .errors import WorkbenchError


def check_choice(name: str, value: Any, choices: Iterable[Any],
                 error: type[Exception] = WorkbenchError) -> Any:
    """Return ``value`` if it is one of ``choices``, else raise ``error``.

    The message follows scikit-learn's form::

        `target` must be one of 'imx8mp', 'imx93', 'imx95'. Got 'imx8m' instead.
    """
    choices = list(choices)
    if value in choices:
        return value
    listed = ", ".join(repr(c) for c in choices)
    raise error(f"`{name}` must be one of {listed}. Got {value!r} instead.")


def check_finite(name: str, value: Any, error: type[Exception] = WorkbenchError) -> float:
    """Return ``value`` as a float if it is a finite real number (not NaN, not +-inf, not a bool).

    A NaN limit compares false with everything, so a gate with ``max_drop=nan``
    would pass every model: every limit goes through here.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not _is_real(value):
        raise error(f"`{name}` must be a finite number. Got {value!r} instead.")
    number = float(value)
    if not math.isfinite(number):
        raise error(f"`{name}` must be a finite number. Got {value!r} instead.")
    return number


def _is_real(value: Any) -> bool:
    """numpy scalars and other real numbers, without importing numpy."""
    import numbers
    return isinstance(value, numbers.Real)


def check_range(name: str, value: float, low: float | None = None, high: float | None = None,
                error: type[Exception] = WorkbenchError, *, low_open: bool = False,
                high_open: bool = False) -> float:
    """Return ``value`` if it is finite and ``low <= value <= high`` (either bound may be None).

    ``low_open`` / ``high_open`` exclude the bound itself.  NaN and infinities are refused.
    """
    check_finite(name, value, error)
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
        lo = "(-inf" if low is None else ("(" if low_open else "[") + repr(low)
        hi = "inf)" if high is None else repr(high) + (")" if high_open else "]")
        raise error(f"`{name}` must be in {lo}, {hi}. Got {value!r} instead.")
    return value


def finite_float(text: str) -> float:
    """``argparse`` type of every float option: a finite number (``nan`` and ``inf`` are refused).

    argparse names the option in its message (``argument --max-drop: must be a finite number``).
    """
    import argparse
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"must be a number. Got {text!r} instead.") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number. Got {text!r} instead.")
    return value


def check_positive_int(name: str, value: Any, error: type[Exception] = WorkbenchError) -> int:
    """Return ``value`` as an int if it is a whole number > 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise error(f"`{name}` must be a positive integer. Got {value!r} instead.")
    return value


def check_plain(name: str, value: Any, error: type[Exception] = WorkbenchError, *, _depth: int = 0) -> Any:
    """Return ``value`` if it is plain data: str, int, finite float, bool, None, or lists/dicts of them.

    This is what may reach a notebook's parameters cell: papermill writes other types
    (tuple, set, bytes, objects) into the cell without escaping, so they could carry code.
    Dict keys must be strings.  NaN and infinities are refused (a NaN limit passes everything).
    """
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return check_finite(name, value, error)
    if _depth < 32 and kind is list:
        return [check_plain(f"{name}[{i}]", v, error, _depth=_depth + 1) for i, v in enumerate(value)]
    if _depth < 32 and kind is dict:
        for key in value:
            if type(key) is not str:
                raise error(f"`{name}` must have string keys. Got key {key!r} instead.")
        return {k: check_plain(f"{name}[{k!r}]", v, error, _depth=_depth + 1) for k, v in value.items()}
    raise error(f"`{name}` must be plain data (a string, number, true/false, None, or a list/dict of them). "
                f"Got {kind.__name__} {value!r:.60} instead. Write a list as [1, 2] and text in quotes.")
