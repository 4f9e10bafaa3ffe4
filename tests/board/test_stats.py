"""Steady-state statistics: tails, a seeded bootstrap CI for p99, the still-falling check."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.board.stats import LatencyStats, still_falling, summarize_latencies
from workbench.errors import BoardError


def test_statistics_match_numpy_and_keep_the_tail():
    rng = np.random.default_rng(1)
    data = np.concatenate([rng.normal(1000, 20, 980), rng.normal(3000, 50, 20)])
    s = summarize_latencies(data, seed=3)
    assert s.n == 1000
    assert s.mean == pytest.approx(data.mean()) and s.std == pytest.approx(data.std(ddof=1))
    assert (s.p50, s.p90, s.p99) == tuple(pytest.approx(v) for v in np.percentile(data, [50, 90, 99]))
    assert (s.min, s.max) == (data.min(), data.max())
    low, high = s.p99_ci
    assert low <= s.p99 <= high
    assert s.p99 > 1.5 * s.p50  # the 2 % slow runs show in p99 although the mean hides them
    assert summarize_latencies(data, seed=3) == s  # seeded: reproducible
    assert LatencyStats.from_dict(s.to_dict()) == s
    assert "p99" in s.summary()


def test_empty_or_corrupt_samples_are_errors():
    with pytest.raises(BoardError, match="no steady-state runs"):
        summarize_latencies([])
    with pytest.raises(BoardError, match="NaN or infinite"):
        summarize_latencies([1.0, float("nan")])


def test_still_falling_flags_a_decaying_series_only():
    rng = np.random.default_rng(0)
    runs = np.arange(40)
    decaying = 1000 + 800 * np.exp(-runs / 8) + rng.normal(0, 5, 40)
    flat = 1000 + rng.normal(0, 5, 40)
    one_spike = flat.copy()
    one_spike[0] = 5000
    assert "still getting faster" in still_falling(decaying)
    assert still_falling(flat) is None
    assert still_falling(one_spike) is None
    assert still_falling(decaying[:5]) is None  # too few runs to tell
    assert still_falling(decaying / 1000) is None  # a sub-microsecond drop is timer noise
