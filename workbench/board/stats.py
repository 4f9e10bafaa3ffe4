"""Latency statistics that keep the tail and do not count a cold start as steady state.

* :func:`summarize_latencies` gives mean, std, p50, p90, p99, min and max of the
  steady-state runs, with a seeded bootstrap confidence interval for p99.
* :func:`still_falling` checks that the first kept runs are not still warming up
  (caches, clocks, NPU graph compile): the median of the first quarter against the
  median of the last quarter, confirmed by a rank-correlation trend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._results import Result
from ..errors import BoardError

#: first-quarter median must exceed the last-quarter median by this factor ...
FALLING_RATIO = 1.10
#: ... and the Spearman correlation of latency with run index must be below this
FALLING_RHO = -0.3
#: ... and the drop must be at least this many microseconds (timer noise on µs-fast models)
FALLING_MIN_US = 5.0
#: fewer kept runs than this cannot show a trend
MIN_RUNS_FOR_TREND = 8


@dataclass(frozen=True)
class LatencyStats(Result):
    """Steady-state latency in microseconds.  ``None`` where the source does not say.

    ``p99_ci`` is the bootstrap (percentile method) interval for p99 at ``ci_level``;
    with fewer than 100 runs p99 is close to the maximum and its interval is wide.
    """

    n: int
    mean: float | None = None
    std: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    min: float | None = None
    max: float | None = None
    p99_ci: tuple[float, float] | None = None
    ci_level: float | None = None

    def summary(self) -> str:
        def ms(v: float | None) -> str:
            return "n/a" if v is None else f"{v / 1000:.3f} ms"
        ci = ""
        if self.p99_ci is not None:
            ci = f" [{ms(self.p99_ci[0])} .. {ms(self.p99_ci[1])}]"
        return (f"n={self.n} mean {ms(self.mean)}, p50 {ms(self.p50)}, p90 {ms(self.p90)}, "
                f"p99 {ms(self.p99)}{ci}, min {ms(self.min)}, max {ms(self.max)}")


def summarize_latencies(samples_us: Sequence[float], *, seed: int = 0, n_boot: int = 2000,
                        ci_level: float = 0.95) -> LatencyStats:
    """Statistics of steady-state samples (µs).  The bootstrap is seeded: same input, same CI."""
    import numpy as np

    data = np.asarray(list(samples_us), dtype=float)
    if data.size == 0:
        raise BoardError("no steady-state runs to summarise. Next: ask for at least one run "
                         "(`runs` >= 1).")
    if not np.all(np.isfinite(data)):
        raise BoardError("latency samples contain NaN or infinite values; the runner output is "
                         "corrupt. Next: re-run and check the board's log.")
    p50, p90, p99 = (float(v) for v in np.percentile(data, [50, 90, 99]))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.size, size=(n_boot, data.size))
    boot = np.percentile(data[idx], 99, axis=1)
    alpha = (1.0 - ci_level) / 2.0
    low, high = (float(v) for v in np.quantile(boot, [alpha, 1.0 - alpha]))
    return LatencyStats(
        n=int(data.size), mean=float(data.mean()),
        std=float(data.std(ddof=1)) if data.size > 1 else 0.0,
        p50=p50, p90=p90, p99=p99, min=float(data.min()), max=float(data.max()),
        p99_ci=(low, high), ci_level=ci_level)


def still_falling(samples_us: Sequence[float]) -> str | None:
    """Return a reason if the kept runs are still getting faster, else ``None``.

    Flags when the first quarter's median exceeds the last quarter's by more than
    ``FALLING_RATIO`` *and* the Spearman rank correlation of latency against run
    index is below ``FALLING_RHO`` (a trend, not one slow outlier) *and* the drop is at
    least ``FALLING_MIN_US`` (not timer noise).
    """
    import numpy as np

    data = np.asarray(list(samples_us), dtype=float)
    if data.size < MIN_RUNS_FOR_TREND:
        return None
    q = data.size // 4
    first, last = float(np.median(data[:q])), float(np.median(data[-q:]))
    ranks = data.argsort().argsort().astype(float)
    index = np.arange(data.size, dtype=float)
    if ranks.std() == 0:
        return None
    rho = float(np.corrcoef(index, ranks)[0, 1])
    if (last > 0 and first / last > FALLING_RATIO and rho < FALLING_RHO
            and first - last >= FALLING_MIN_US):
        return (f"the first kept runs are still getting faster: first-quarter median "
                f"{first:.1f} us vs last-quarter median {last:.1f} us "
                f"({first / last:.2f}x, Spearman rho {rho:.2f}); the steady state may not be "
                f"reached. Next: raise `warmup`.")
    return None
