"""Task metrics: ``top1`` for classifiers, ``pck`` for keypoints, or your own ``module:function``.

A metric is called once per model and condition as ``metric(outputs, labels)``:

- ``outputs``: the model's output for that condition's samples, float32 ``(N, values)``
  (one output tensor), or a tuple of such arrays when the model has several outputs;
- ``labels``: the dataset's labels of those samples, ``(N,)`` class indices or ``(N, ...)``
  arrays (keypoints, boxes...), as the dataset holds them.

It returns either one value per sample (``(N,)``: the report's value is their mean and its
CIs come from the paired bootstrap over samples, like top-1), or a single number (its CIs
come from calling it again on each bootstrap resample).  Higher is better: the "drop" of a
candidate is FP32's value minus its own (x100, as percentage points for a fraction).

CLI ``--metric module:function`` / notebooks ``metric="module:function"``; the module is
imported by name (a file on ``PYTHONPATH`` or in the working folder).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import EvaluationError

Metric = Callable[[Any, np.ndarray], Any]
PCK_THRESHOLD = 0.05


def top1(outputs: Any, labels: np.ndarray) -> np.ndarray:
    """1.0 where the first output's argmax is the label, else 0.0."""
    scores = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
    return (np.asarray(scores).argmax(axis=1) == np.asarray(labels).reshape(-1)).astype(np.float64)


def pck(outputs: Any, labels: np.ndarray, *, threshold: float = PCK_THRESHOLD) -> np.ndarray:
    """Percentage of correct keypoints per sample: the share of keypoints whose predicted
    ``(y, x)`` is within ``threshold`` (a fraction of the image size) of the label.

    ``labels`` ``(N, K, 2)`` (or ``(N, 2K)``) in image fractions; the output is read as ``(N, K, 2)``.
    """
    pred = np.asarray(outputs[0] if isinstance(outputs, (tuple, list)) else outputs, np.float64)
    true = np.asarray(labels, np.float64).reshape(len(labels), -1, 2)
    if pred.size != true.size:
        raise EvaluationError(f"pck: the model gives {pred.shape[1] if pred.ndim > 1 else pred.size} values per "
                              f"sample but the labels hold {true.shape[1]} keypoints (y, x) = {true.shape[1] * 2} "
                              "values; is this a keypoint model for this dataset?")
    pred = pred.reshape(true.shape)
    dist = np.linalg.norm(pred - true, axis=2)
    return (dist <= threshold).mean(axis=1)


def mean_keypoint_error(outputs: Any, labels: np.ndarray) -> np.ndarray:
    """Minus the mean distance between predicted and true keypoints (image fractions; higher is better)."""
    pred = np.asarray(outputs[0] if isinstance(outputs, (tuple, list)) else outputs, np.float64)
    true = np.asarray(labels, np.float64).reshape(len(labels), -1, 2)
    return -np.linalg.norm(pred.reshape(true.shape) - true, axis=2).mean(axis=1)


BUILTIN: dict[str, Metric] = {"top1": top1, "pck": pck, "keypoint_error": mean_keypoint_error}


def resolve_metric(metric: str | Metric | None) -> tuple[str, Metric | None]:
    """``(name, function)`` for a built-in name, ``"module:function"`` or a callable (``None``: no metric)."""
    if metric is None or metric == "":
        return "", None
    if callable(metric):
        return getattr(metric, "__name__", "metric"), metric
    if not isinstance(metric, str):
        raise EvaluationError(f"`metric` must be a name ({', '.join(BUILTIN)}), 'module:function' or a callable. "
                              f"Got {metric!r} instead.")
    if metric in BUILTIN:
        return metric, BUILTIN[metric]
    module_name, sep, func_name = metric.partition(":")
    if not sep or not module_name or not func_name:
        raise EvaluationError(f"`metric` must be one of {', '.join(map(repr, BUILTIN))} or 'module:function'. "
                              f"Got {metric!r} instead.")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EvaluationError(f"metric {metric!r}: cannot import module {module_name!r} ({exc}); put it on "
                              "PYTHONPATH or in the working folder.") from exc
    func = getattr(module, func_name, None)
    if not callable(func):
        raise EvaluationError(f"metric {metric!r}: module {module_name!r} has no function {func_name!r}.")
    return metric, func


def metric_values(name: str, func: Metric, outputs: list[np.ndarray], labels: np.ndarray,
                  where: str) -> np.ndarray | float:
    """Call the metric; per-sample values (N,) as float64, or one float."""
    arg = outputs[0] if len(outputs) == 1 else tuple(outputs)
    try:
        value = func(arg, labels)
    except EvaluationError:
        raise
    except Exception as exc:  # noqa: BLE001 - a user's metric may raise anything; name it
        raise EvaluationError(f"metric {name!r} failed on {where}: {type(exc).__name__}: {exc}") from exc
    try:
        raw = np.asarray(value)
    except Exception:  # noqa: BLE001 - ragged lists and odd objects
        raw = np.asarray(None)
    if raw.dtype.kind not in "biuf":
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise EvaluationError(f"metric {name!r} returned {type(value).__name__} {shown} on {where}; a metric returns "
                              "a number, or one number per sample (a list or numpy array of numbers). "
                              "Next: return float(...) or a numeric array from your function.")
    arr = raw.astype(np.float64)
    if arr.ndim == 0:
        if not np.isfinite(arr):
            raise EvaluationError(f"metric {name!r} returned {float(arr)} on {where}; a metric must be finite.")
        return float(arr)
    if arr.shape != (len(labels),):
        raise EvaluationError(f"metric {name!r} returned shape {arr.shape} on {where}; expected one value per "
                              f"sample ({len(labels)},) or a single number.")
    if not np.all(np.isfinite(arr)):
        raise EvaluationError(f"metric {name!r} returned NaN/inf for some samples on {where}.")
    return arr
