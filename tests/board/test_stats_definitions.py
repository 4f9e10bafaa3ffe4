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


def test_still_falling_compares_the_first_and_last_quarter_medians():
    """The medians the reason reports are those of the first and last n // 4 runs, not of another share."""
    n = 40
    data = list(np.linspace(2000.0, 1000.0, n))
    q = n // 4
    reason = still_falling(data)
    assert reason is not None
    assert f"first-quarter median {np.median(data[:q]):.1f} us vs last-quarter median {np.median(data[-q:]):.1f} us" \
        in reason


def test_still_falling_under_a_microsecond_is_still_falling():
    """A tiny model settling from 100 us to 0.5 us per run: the last quarter's median is below 1 us, not 0."""
    n = 40
    data = [100.0] * 10 + list(np.linspace(90.0, 0.5, 20)) + [0.5] * 10
    assert len(data) == n and np.median(data[-n // 4:]) == 0.5
    assert still_falling(data) is not None


def test_still_falling_at_exactly_the_ratio_and_at_exactly_the_microseconds():
    """A steady decline whose quarter medians are 1100 -> 1000 us (ratio exactly 1.10: not above it), and one of
    25 -> 20 us (exactly 5 us: enough)."""
    first = [1104.0, 1103, 1102, 1101, 1100, 1100, 1099, 1098, 1097, 1096]
    last = [1004.0, 1003, 1002, 1001, 1000, 1000, 999, 998, 997, 996]
    at_ratio = first + list(np.linspace(1095.0, 1005.0, 20)) + last
    assert (np.median(at_ratio[:10]), np.median(at_ratio[-10:])) == (1100.0, 1000.0)
    assert still_falling(at_ratio) is None
    assert still_falling([v + 0.5 for v in first] + at_ratio[10:]) is not None      # 1100.5 / 1000: above
    first = [29.0, 28, 27, 26, 25, 25, 24, 23, 22, 21]
    last = [24.0, 23, 22, 21, 20, 20, 19, 18, 17, 16]
    at_five = first + list(np.linspace(24.5, 20.5, 20)) + last
    assert (np.median(at_five[:10]), np.median(at_five[-10:])) == (25.0, 20.0)
    assert "first-quarter median 25.0 us vs last-quarter median 20.0 us" in still_falling(at_five)
    assert still_falling([v - 0.5 for v in first] + at_five[10:]) is None             # 4.5 us: timer noise


def test_a_last_quarter_at_zero_microseconds_gives_no_reason_and_no_error():
    """A timer of 1 us resolution reports 0 for a tiny model: no ratio to take, no reason, no ZeroDivisionError."""
    assert still_falling([100.0] * 10 + list(np.linspace(90.0, 0.0, 20)) + [0.0] * 10) is None
