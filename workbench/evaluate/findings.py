"""Findings of the accuracy stage, computed from an :class:`AccuracyReport`.

- ``model.input-contract``: the FP32 reference is near chance on every condition, which says the
  images do not match what the model was trained on (scale, channel order, normalisation).
"""

from __future__ import annotations

from typing import Any

from ..findings import Finding, make

#: FP32 below ``min(NEAR_CHANCE_CAP, chance * NEAR_CHANCE_FACTOR)`` on every condition is "near chance"
#: (the rule of ``evaluate/guards.py``: a binary classifier is near chance below 50%, never at 88.8%)
NEAR_CHANCE_FACTOR = 2.0
NEAR_CHANCE_CAP = 0.5


def near_chance_threshold(n_classes: int) -> float:
    """Top-1 below which an FP32 model is "near chance" for ``n_classes`` classes."""
    return min(NEAR_CHANCE_CAP, NEAR_CHANCE_FACTOR / max(n_classes, 1))


def findings(report: Any, *, target: str = "", **_: Any) -> list[Finding]:
    n_classes = len(report.classes)
    if n_classes < 2:
        return []
    chance = 1.0 / n_classes
    fp32 = {r.condition: r for r in report.rows if r.is_reference}
    if not fp32:
        return []
    best = max(r.accuracy for r in fp32.values())
    threshold = near_chance_threshold(n_classes)
    if best >= threshold:
        return []
    listed = ", ".join(f"{c} {r.accuracy:.1%}" for c, r in fp32.items())
    return [make("model.input-contract",
                 f"FP32 {report.reference} is near chance ({chance:.1%} for {n_classes} classes) on every "
                 f"condition: {listed}", target=target,
                 evidence={"model": report.reference, "chance": round(chance, 6), "n_classes": n_classes,
                           "threshold": round(threshold, 6), "dataset": report.dataset,
                           "fp32_accuracy": {c: r.accuracy for c, r in fp32.items()},
                           "n": {c: r.n for c, r in fp32.items()}})]
