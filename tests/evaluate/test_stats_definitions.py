"""The paired bootstrap against its plain definition (so that a changed constant or operator fails a test)."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import EvaluationError
from workbench.evaluate.stats import accuracy_ci, bootstrap_indices, drop_ci, paired_bootstrap


def _correct(n=200, p=0.8, seed=1):
    return np.random.default_rng(seed).random(n) < p


def test_indices_are_the_seeded_draw_with_replacement():
    idx = bootstrap_indices(50, 30, seed=3)
    assert idx.shape == (30, 50) and idx.dtype == np.int32 and idx.min() >= 0 and idx.max() <= 49
    assert np.array_equal(idx, np.random.default_rng(3).integers(0, 50, size=(30, 50), dtype=np.int32))
    assert np.array_equal(bootstrap_indices(50, 30), bootstrap_indices(50, 30, seed=0))
    assert bootstrap_indices(1, 1).shape == (1, 1)
    assert bootstrap_indices(7).shape == (1000, 7)
    gen = np.random.default_rng(5)
    assert np.array_equal(bootstrap_indices(9, 4, seed=gen), np.random.default_rng(5).integers(0, 9, size=(4, 9)))
    for bad in (0, -1):
        with pytest.raises(EvaluationError):
            bootstrap_indices(bad, 10)
        with pytest.raises(EvaluationError):
            bootstrap_indices(10, bad)


@pytest.mark.parametrize("confidence", [0.95, 0.9, 0.5])
def test_accuracy_ci_is_the_percentile_interval(confidence):
    c = _correct()
    idx = bootstrap_indices(len(c), 500, seed=2)
    means = c.astype(np.float32)[idx].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    assert accuracy_ci(c, idx, confidence=confidence) == pytest.approx(
        tuple(np.percentile(means, [tail, 100 - tail])), abs=1e-9)
    if confidence == 0.95:
        assert accuracy_ci(c, idx) == accuracy_ci(c, idx, confidence=0.95)


def test_drop_ci_is_reference_minus_model_in_points():
    ref, mod = _correct(seed=1, p=0.9), _correct(seed=2, p=0.7)
    idx = bootstrap_indices(len(ref), 400, seed=4)
    diff = (ref.astype(np.float32) - mod.astype(np.float32))[idx].mean(axis=1) * 100
    low, high = drop_ci(ref, mod, idx)
    assert (low, high) == pytest.approx(tuple(np.percentile(diff, [2.5, 97.5])), abs=1e-6)
    assert low > 0                      # the reference is better: a positive drop
    assert drop_ci(ref, mod, idx, confidence=0.5)[0] > low
    with pytest.raises(EvaluationError, match="same 200 samples"):
        drop_ci(ref[:-1], mod[:-1], idx)
    with pytest.raises(EvaluationError):
        drop_ci(ref, mod, idx, confidence=1.5)


def test_paired_bootstrap_is_its_parts():
    ref, mod = _correct(seed=1, p=0.9), _correct(seed=2, p=0.7)
    out = paired_bootstrap(ref, mod)
    idx = bootstrap_indices(len(ref), 1000, seed=0)
    assert out["accuracy"] == pytest.approx(mod.mean())
    assert out["drop_pp"] == pytest.approx((ref.mean() - mod.mean()) * 100)
    assert (out["ci_low"], out["ci_high"]) == accuracy_ci(mod, idx)
    assert (out["drop_ci_low"], out["drop_ci_high"]) == drop_ci(ref, mod, idx)
    other = paired_bootstrap(ref, mod, n_bootstrap=200, confidence=0.8, seed=3)
    idx = bootstrap_indices(len(ref), 200, seed=3)
    assert (other["drop_ci_low"], other["drop_ci_high"]) == drop_ci(ref, mod, idx, confidence=0.8)
    with pytest.raises(EvaluationError, match="same samples"):
        paired_bootstrap(ref, mod[:-1])
