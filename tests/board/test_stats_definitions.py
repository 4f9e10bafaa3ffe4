"""Latency statistics against their plain definitions, and the warm-up trend rule at its thresholds."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.board.stats import (
    FALLING_MIN_US,
    FALLING_RATIO,
    FALLING_RHO,
    MIN_RUNS_FOR_TREND,
    still_falling,
    summarize_latencies,
)
from workbench.errors import BoardError


def _runs(n=150, seed=0):
    return list(2500.0 + np.random.default_rng(seed).normal(0, 40, n))


@pytest.mark.parametrize("kw", [{}, {"seed": 3, "n_boot": 500, "ci_level": 0.9}])
def test_summary_is_the_plain_definition(kw):
    data = 2500.0 + np.random.default_rng(0).lognormal(0, 1, 1000) * 40      # a long tail: p99 moves per draw
    s = summarize_latencies(data, **kw)
    seed, n_boot, level = kw.get("seed", 0), kw.get("n_boot", 2000), kw.get("ci_level", 0.95)
    assert s.n == 1000 and s.mean == pytest.approx(data.mean()) and s.std == pytest.approx(data.std(ddof=1))
    assert (s.p50, s.p90, s.p99) == pytest.approx(tuple(np.percentile(data, [50, 90, 99])))
    assert (s.min, s.max) == (data.min(), data.max()) and s.ci_level == level
    idx = np.random.default_rng(seed).integers(0, data.size, size=(n_boot, data.size))
    boot = np.percentile(data[idx], 99, axis=1)
    alpha = (1 - level) / 2
    assert s.p99_ci == pytest.approx(tuple(np.quantile(boot, [alpha, 1 - alpha])))
    assert s.p99_ci[0] <= s.p99 <= s.p99_ci[1] + 1e-9
    assert summarize_latencies(data, seed=seed + 1, n_boot=n_boot, ci_level=level).p99_ci != s.p99_ci


def test_one_run_and_bad_runs():
    s = summarize_latencies([1000.0])
    assert s.n == 1 and s.std == 0.0 and s.p99 == 1000.0 and s.p99_ci == (1000.0, 1000.0)
    assert summarize_latencies([1.0, 3.0]).std == pytest.approx(np.std([1.0, 3.0], ddof=1))
    with pytest.raises(BoardError, match="no steady-state runs"):
        summarize_latencies([])
    with pytest.raises(BoardError, match="NaN or infinite"):
        summarize_latencies([1.0, float("nan")])
    with pytest.raises(BoardError, match="NaN or infinite"):
        summarize_latencies([1.0, float("inf")])


def _falling(n, first, last):
    return list(np.linspace(first, last, n))


def test_still_falling_needs_enough_runs():
    assert MIN_RUNS_FOR_TREND == 8
    assert still_falling(_falling(7, 4000, 2000)) is None
    assert still_falling(_falling(8, 4000, 2000)) is not None


def test_still_falling_at_each_threshold():
    assert (FALLING_RATIO, FALLING_RHO, FALLING_MIN_US) == (1.10, -0.3, 5.0)
    n = 40
    reason = still_falling(_falling(n, 4000, 2000))
    assert reason and "first-quarter median" in reason and "Spearman rho -1.00" in reason
    # the quarters' medians: ratio just above / at 1.10
    q = n // 4
    tail = list(np.linspace(1050.0, 1000.0, n - 2 * q)) + [1000.0] * q     # last-quarter median exactly 1000
    assert still_falling([1100.5] * q + tail) is not None
    assert still_falling([1100.0] * q + tail) is None                     # ratio exactly 1.10: not above it
    # a steady decline below 5 us is timer noise
    assert still_falling(_falling(n, 24.0, 19.5)) is None
    assert still_falling(_falling(n, 26.0, 19.0)) is not None
    # one slow outlier in the first quarter, no trend: rho above -0.3
    spike = [1000.0] * n
    spike[: q] = [1500.0] * q
    spike[q:] = list(1000.0 + np.random.default_rng(0).normal(0, 5, n - q))
    rising = spike[:q] + sorted(spike[q:])
    assert still_falling(rising) is None
    # getting slower is not "still falling"
    assert still_falling(_falling(n, 2000, 4000)) is None


def test_steady_runs_are_not_falling():
    assert still_falling(_runs()) is None
