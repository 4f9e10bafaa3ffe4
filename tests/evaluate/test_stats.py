"""Paired bootstrap confidence intervals."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import EvaluationError
from workbench.evaluate.stats import accuracy_ci, bootstrap_indices, drop_ci, paired_bootstrap


def _correct(n, rate, seed):
    rng = np.random.default_rng(seed)
    return rng.random(n) < rate


@pytest.mark.parametrize("rate", [0.62, 0.9, 0.99])
def test_ci_contains_the_point_estimate(rate):
    ref = _correct(540, 0.95, 1)
    mod = _correct(540, rate, 2)
    out = paired_bootstrap(ref, mod, n_bootstrap=500, seed=3)
    assert out["ci_low"] <= out["accuracy"] <= out["ci_high"]
    assert out["drop_ci_low"] <= out["drop_pp"] <= out["drop_ci_high"]
    assert out["accuracy"] == pytest.approx(mod.mean())
    assert out["drop_pp"] == pytest.approx((ref.mean() - mod.mean()) * 100)


def test_ci_narrows_with_more_samples():
    widths, drop_widths = [], []
    for n in (100, 1000, 10000):
        ref = _correct(n, 0.9, 4)
        mod = ref & _correct(n, 0.95, 5)       # the model loses about 5% of the reference's hits
        out = paired_bootstrap(ref, mod, n_bootstrap=400, seed=6)
        widths.append(out["ci_high"] - out["ci_low"])
        drop_widths.append(out["drop_ci_high"] - out["drop_ci_low"])
    assert widths[0] > widths[1] > widths[2]
    assert drop_widths[0] > drop_widths[1] > drop_widths[2]


def test_pairing_makes_the_drop_ci_tighter_than_independent_intervals():
    ref = _correct(540, 0.7, 7)
    mod = ref.copy()
    mod[np.flatnonzero(ref)[:5]] = False         # 5 samples flip from right to wrong
    idx = bootstrap_indices(540, 1000, seed=0)
    low, high = drop_ci(ref, mod, idx)
    assert 0.0 < low <= 5 / 540 * 100 <= high
    acc_low, acc_high = accuracy_ci(mod, idx)
    assert high - low < (acc_high - acc_low) * 100 / 2


def test_identical_models_have_a_zero_drop_interval():
    ref = _correct(300, 0.8, 8)
    out = paired_bootstrap(ref, ref.copy(), n_bootstrap=200)
    assert (out["drop_pp"], out["drop_ci_low"], out["drop_ci_high"]) == (0.0, 0.0, 0.0)


def test_same_seed_same_interval():
    ref, mod = _correct(200, 0.9, 9), _correct(200, 0.85, 10)
    assert paired_bootstrap(ref, mod, seed=1) == paired_bootstrap(ref, mod, seed=1)


def test_errors():
    with pytest.raises(EvaluationError, match="same samples; got 10 and 9"):
        paired_bootstrap(np.ones(10, bool), np.ones(9, bool))
    with pytest.raises(EvaluationError, match="`n_bootstrap` must be a positive integer"):
        bootstrap_indices(10, 0)
    with pytest.raises(EvaluationError, match=r"`confidence` must be in \[0.0, 1.0\]"):
        accuracy_ci(np.ones(10, bool), bootstrap_indices(10, 5), confidence=1.5)
    with pytest.raises(EvaluationError, match="scored on the same 10 samples; got 9"):
        drop_ci(np.ones(9, bool), np.ones(9, bool), bootstrap_indices(10, 5))
