"""The one place that validates parameters, with one message form."""

from __future__ import annotations

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


def check_range(name: str, value: float, low: float | None = None, high: float | None = None,
                error: type[Exception] = WorkbenchError) -> float:
    """Return ``value`` if ``low <= value <= high`` (either bound may be None)."""
    if (low is not None and value < low) or (high is not None and value > high):
        lo = "-inf" if low is None else repr(low)
        hi = "inf" if high is None else repr(high)
        raise error(f"`{name}` must be in [{lo}, {hi}]. Got {value!r} instead.")
    return value


def check_positive_int(name: str, value: Any, error: type[Exception] = WorkbenchError) -> int:
    """Return ``value`` as an int if it is a whole number > 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise error(f"`{name}` must be a positive integer. Got {value!r} instead.")
    return value
