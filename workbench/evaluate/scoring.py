"""Scoring one model under one condition: the :class:`AccuracyRow` (top-1 with its confusion matrix, or any
task metric), the paired bootstrap against FP32 seeded per condition, and the per-output fidelity rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._results import Result
from .fidelity import FidelityRow


@dataclass(frozen=True)
class AccuracyRow(Result):
    """One model under one condition.

    ``accuracy`` and its CI (``ci_low``, ``ci_high``) are fractions; ``drop_pp`` (FP32
    accuracy minus this model's, in percentage points, positive = worse) has the paired
    bootstrap CI ``drop_ci_low``/``drop_ci_high``; ``agreement`` is the share of samples
    where this model's argmax equals FP32's.
    """

    condition: str
    model: str
    n: int
    correct: int
    accuracy: float
    ci_low: float
    ci_high: float
    drop_pp: float
    drop_ci_low: float
    drop_ci_high: float
    agreement: float
    is_reference: bool
    per_class: tuple[float | None, ...] = ()
    class_counts: tuple[int, ...] = ()
    confusion: tuple[tuple[int, ...], ...] = ()


def condition_indices(n: int, n_bootstrap: int, seed: int, condition: str) -> np.ndarray:
    # Seeded by the condition's name, not its position: a condition's CI does not move when
    # another condition is added to or removed from the comparison.
    import zlib

    from .stats import bootstrap_indices
    return bootstrap_indices(n, n_bootstrap, seed=np.random.default_rng([seed, zlib.crc32(condition.encode())]))


def top1_row(name, cond, y, pred, pred_ref, idx, n_classes, confidence, *, is_reference) -> AccuracyRow:
    from .stats import accuracy_ci, drop_ci
    correct = pred == y
    correct_ref = pred_ref == y
    low, high = accuracy_ci(correct, idx, confidence=confidence)
    if is_reference:
        dlow = dhigh = drop = 0.0
    else:
        drop = float(correct_ref.mean() - correct.mean()) * 100.0
        dlow, dhigh = drop_ci(correct_ref, correct, idx, confidence=confidence)
    k = max(n_classes, int(pred.max()) + 1, int(y.max()) + 1)
    confusion = np.zeros((k, k), dtype=np.int64)
    np.add.at(confusion, (y, pred), 1)
    confusion = confusion[:n_classes, :n_classes] if k == n_classes else confusion
    counts = np.bincount(y, minlength=n_classes)[:n_classes]
    per_class = tuple(None if counts[c] == 0 else round(float(np.mean(correct[y == c])), 10)
                      for c in range(n_classes))
    return AccuracyRow(condition=cond, model=name, n=int(len(y)), correct=int(correct.sum()),
                       accuracy=float(correct.mean()), ci_low=low, ci_high=high, drop_pp=drop,
                       drop_ci_low=dlow, drop_ci_high=dhigh, agreement=float(np.mean(pred == pred_ref)),
                       is_reference=is_reference, per_class=per_class,
                       class_counts=tuple(int(c) for c in counts),
                       confusion=tuple(tuple(int(v) for v in row) for row in confusion))


def metric_row(name, cond, values, ref_values, idx, confidence, out, ref_out, y, kinds, fn, *,
               is_reference) -> AccuracyRow:
    """A row for any metric: per-sample values get the paired bootstrap over samples; a metric that
    returns one number is called again on each resample.  ``agreement`` is the argmax agreement when
    the first output is class scores, else the mean cosine similarity of the first output."""
    from .stats import _interval
    n = len(y)
    if isinstance(values, float) or isinstance(ref_values, float):
        arg = lambda o, rows: o[0][rows] if len(o) == 1 else tuple(v[rows] for v in o)  # noqa: E731
        boot = np.array([float(np.mean(fn(arg(out, r), y[r]))) for r in idx])
        boot_ref = boot if is_reference else np.array([float(np.mean(fn(arg(ref_out, r), y[r]))) for r in idx])
        value = float(np.mean(values))
        ref_value = float(np.mean(ref_values))
    else:
        boot = values[idx].mean(axis=1)
        boot_ref = ref_values[idx].mean(axis=1)
        value, ref_value = float(values.mean()), float(ref_values.mean())
    low, high = _interval(boot, confidence)
    if is_reference:
        drop = dlow = dhigh = 0.0
    else:
        drop = (ref_value - value) * 100.0
        dlow, dhigh = _interval((boot_ref - boot) * 100.0, confidence)
    a, b = ref_out[0], out[0]
    if kinds[0] == "class_scores" and a.shape[1] > 1:
        agreement = float(np.mean(a.argmax(axis=1) == b.argmax(axis=1)))
    else:
        norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
        agreement = float(np.mean(np.where(norms > 0, np.sum(a * b, axis=1) / np.where(norms > 0, norms, 1), 1.0)))
    correct = int(round(float(np.sum(values)))) if not isinstance(values, float) else int(round(value * n))
    return AccuracyRow(condition=cond, model=name, n=int(n), correct=correct, accuracy=value, ci_low=low,
                       ci_high=high, drop_pp=drop, drop_ci_low=dlow, drop_ci_high=dhigh, agreement=agreement,
                       is_reference=is_reference)

def task_metric_values(name: str, fn: Any, outputs: list[np.ndarray], y: np.ndarray, model: str, cond: str):
    from .metrics import metric_values
    return metric_values(name, fn, outputs, y, f"model {model!r}, condition {cond!r}")


def fidelity_of(cond, name, ref_out, out, idx, out_names, kinds, confidence, ref_layout=None,
                layout=None) -> list[FidelityRow]:
    from .fidelity import fidelity_rows, recorded_permutations
    return fidelity_rows(cond, name, ref_out, out, idx, names=out_names, kinds=kinds, confidence=confidence,
                         reference_layout=ref_layout, candidate_layout=layout,
                         permutations=recorded_permutations(layout, ref_layout))
