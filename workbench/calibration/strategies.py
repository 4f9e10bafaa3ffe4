"""How a calibration set is drawn: the target share of each deployment condition, quotas that share a
short condition's shortfall among the others (:func:`allocate`, the ``stratified`` strategy) and k-center
greedy on embeddings (:func:`k_center_greedy`, the ``coverage`` strategy)."""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Mapping
from typing import Any, TypeVar

import numpy as np

from .._validation import check_choice, check_positive_int
from ..errors import CalibrationError, WorkbenchWarning


def _target_shares(data: Any, weights: Mapping[str, float] | None) -> dict[str, float]:
    if weights is None:
        conds = data.conditions
        return {c: 1.0 / len(conds) for c in conds}
    if not isinstance(weights, Mapping) or not weights:
        raise CalibrationError(f"`condition_weights` must be a non-empty mapping {{condition: weight}}. "
                               f"Got {weights!r} instead.")
    for cond, w in weights.items():
        check_choice("condition_weights key", cond, data.conditions, error=CalibrationError)
        if isinstance(w, bool) or not isinstance(w, (int, float, np.number)) or not np.isfinite(w) or w < 0:
            raise CalibrationError(f"`condition_weights[{cond!r}]` must be a finite number >= 0. Got {w!r} instead.")
    total = float(sum(weights.values()))
    if total <= 0:
        raise CalibrationError("`condition_weights` sum to 0; give at least one condition a positive weight.")
    return {c: float(w) / total for c, w in weights.items()}


K = TypeVar("K", bound=Hashable)   # a condition name, or a class index


def allocate(total: int, weights: Mapping[K, float], capacity: Mapping[K, int]) -> tuple[dict[K, int], list[K]]:
    """Split ``total`` into integer quotas proportional to ``weights``, at most ``capacity`` each.

    Largest remainders round the shares.  A key whose capacity is below its quota gets
    its whole capacity and the remainder goes to the others, in proportion to their
    weights (repeated until every quota fits).  Returns the quotas and the capped keys.
    """
    quotas = {k: 0 for k in weights}
    open_keys = [k for k in weights if weights[k] > 0 and capacity.get(k, 0) > 0]
    capped: list[K] = [k for k in weights if weights[k] > 0 and capacity.get(k, 0) <= 0]
    left = total
    while left > 0 and open_keys:
        w = np.array([weights[k] for k in open_keys], dtype=float)
        exact = left * w / w.sum()
        share = np.floor(exact).astype(int)
        order = np.argsort(-(exact - share), kind="stable")
        share[order[:left - int(share.sum())]] += 1
        full = [k for k, s in zip(open_keys, share) if quotas[k] + s >= capacity[k]]
        if not full:
            for k, s in zip(open_keys, share):
                quotas[k] += int(s)
            break
        for k in full:   # these give everything they have; re-share the rest among the others
            left -= capacity[k] - quotas[k]
            if weights[k] * total / sum(weights.values()) > capacity[k]:
                capped.append(k)
            quotas[k] = capacity[k]
        open_keys = [k for k in open_keys if k not in full]
    if left > 0 and not open_keys:   # weighted keys exhausted: fall back to what nobody asked for
        spare = [k for k in capacity if k not in weights or weights[k] <= 0]
        for k in spare:
            take = min(left, capacity[k] - quotas.get(k, 0))
            quotas[k] = quotas.get(k, 0) + take
            left -= take
    return quotas, capped


def _stratified(pool_set: Any, n: int, targets: dict[str, float], rng: np.random.Generator) -> np.ndarray:
    conds = pool_set.conditions
    capacity = {c: int(np.sum(pool_set.condition == c)) for c in conds}
    weights = {c: targets.get(c, 0.0) for c in conds} | {c: w for c, w in targets.items() if c not in capacity}
    quotas, capped = allocate(n, weights, capacity)
    if capped:
        detail = "; ".join(f"{c} wants ~{targets.get(c, 0.0) * n:.0f}, pool has {capacity.get(c, 0)}" for c in capped)
        warnings.warn(
            f"stratified: the pool cannot supply the quota of {len(capped)} condition(s) ({detail}); took all it "
            "has of each and shared the remainder among the other conditions by weight. Add samples of those "
            "conditions to the pool to reach the deployment mix.", WorkbenchWarning, stacklevel=3)
    picked: list[np.ndarray] = []
    n_classes = len(pool_set.classes)
    for c in conds:
        q = quotas.get(c, 0)
        if q <= 0:
            continue
        members = np.flatnonzero(pool_set.condition == c)
        if not getattr(pool_set, "is_classification", True):   # keypoints, boxes...: by condition only
            picked.append(rng.choice(members, size=min(q, len(members)), replace=False))
            continue
        by_class = {k: members[pool_set.y[members] == k] for k in range(n_classes)}
        class_q, _ = allocate(q, {k: 1.0 for k in range(n_classes)}, {k: len(v) for k, v in by_class.items()})
        for k in range(n_classes):
            if class_q.get(k, 0):
                picked.append(rng.choice(by_class[k], size=class_q[k], replace=False))
    return np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)


def k_center_greedy(points: np.ndarray, k: int, *, seed: int = 0) -> np.ndarray:
    """Indices of ``k`` points chosen by k-center greedy (farthest-point) selection.

    The first point is drawn with ``seed``; each next one is the point farthest (Euclidean)
    from all chosen so far, which minimises the largest distance from any point to its
    nearest chosen one within a factor of two.  Ties go to the lowest index.
    """
    points = np.asarray(points, dtype=np.float64).reshape(len(points), -1)
    check_positive_int("k", k, error=CalibrationError)
    if k > len(points):
        raise CalibrationError(f"k-center greedy cannot choose k={k} of {len(points)} points.")
    rng = np.random.default_rng(seed)
    first = int(rng.integers(len(points)))
    chosen = [first]
    dist = np.linalg.norm(points - points[first], axis=1)
    dist[first] = -1.0
    for _ in range(k - 1):
        nxt = int(np.argmax(dist))
        chosen.append(nxt)
        dist = np.minimum(dist, np.linalg.norm(points - points[nxt], axis=1))
        dist[chosen] = -1.0
    return np.array(chosen, dtype=np.int64)
