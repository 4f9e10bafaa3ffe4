"""Paired bootstrap confidence intervals for accuracy and for the accuracy drop.

Every model of a condition is scored on the same samples, so the honest interval
for a difference resamples *samples*, not models: one set of bootstrap indices
per condition is drawn and applied to the FP32 and every candidate alike.  The
interval is the percentile interval of the resampled statistic.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_positive_int, check_range
from ..errors import EvaluationError


def bootstrap_indices(n: int, n_bootstrap: int = 1000, *, seed: int | np.random.Generator = 0) -> np.ndarray:
    """``(n_bootstrap, n)`` sample indices drawn with replacement."""
    check_positive_int("n", n, error=EvaluationError)
    check_positive_int("n_bootstrap", n_bootstrap, error=EvaluationError)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    return rng.integers(0, n, size=(n_bootstrap, n), dtype=np.int32 if n < 2**31 else np.int64)


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    check_range("confidence", confidence, 0.0, 1.0, error=EvaluationError)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return float(low), float(high)


def accuracy_ci(correct: np.ndarray, indices: np.ndarray, *, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile CI of top-1 accuracy (a fraction) from a 0/1 vector of correct answers."""
    correct = np.asarray(correct, dtype=np.float32)
    return _interval(correct[indices].mean(axis=1), confidence)


def drop_ci(correct_reference: np.ndarray, correct_model: np.ndarray, indices: np.ndarray, *,
            confidence: float = 0.95) -> tuple[float, float]:
    """Paired percentile CI of the drop in percentage points (reference minus model)."""
    diff = np.asarray(correct_reference, np.float32) - np.asarray(correct_model, np.float32)
    if diff.shape != (indices.shape[1],):
        raise EvaluationError(f"paired bootstrap needs both models scored on the same {indices.shape[1]} samples; "
                              f"got {diff.shape[0] if diff.ndim else 0}.")
    return _interval(diff[indices].mean(axis=1) * 100.0, confidence)


def paired_bootstrap(correct_reference: np.ndarray, correct_model: np.ndarray, *, n_bootstrap: int = 1000,
                     confidence: float = 0.95, seed: int = 0) -> dict[str, float]:
    """Point estimates and CIs in one call: ``accuracy``, ``ci_low``, ``ci_high`` (model accuracy,
    fractions) and ``drop_pp``, ``drop_ci_low``, ``drop_ci_high`` (percentage points)."""
    ref = np.asarray(correct_reference, bool)
    mod = np.asarray(correct_model, bool)
    if ref.shape != mod.shape:
        raise EvaluationError(f"paired bootstrap needs both models scored on the same samples; got {ref.shape[0]} "
                              f"and {mod.shape[0]}.")
    idx = bootstrap_indices(len(ref), n_bootstrap, seed=seed)
    low, high = accuracy_ci(mod, idx, confidence=confidence)
    dlow, dhigh = drop_ci(ref, mod, idx, confidence=confidence)
    return {"accuracy": float(mod.mean()), "ci_low": low, "ci_high": high,
            "drop_pp": float(ref.mean() - mod.mean()) * 100.0, "drop_ci_low": dlow, "drop_ci_high": dhigh}
