"""The result of a sweep: the table, the Pareto fronts and the recommendation per target.

The recommendation rule, stated once (:func:`recommend`): among a target's cells that
ran and pass the gate, keep those no other cell is faster than beyond noise, then take the
smallest worst-condition drop, then fewer CPU islands, then the higher NPU op share, then
fewer ops kept in float (then the cell's label: the same cells give the same pick in any
order, locally, on a scheduler, on a rerun).  "Faster beyond noise": a host-CPU latency only
when the two medians' 95% CIs do not overlap and the slower is more than 1.5x the faster (the
load of the machine moves between runs; a cell without a CI: host CPU does not decide);
a Vela estimate or a board latency by more than 5%.  Latencies of one target share one kind
(Vela estimate on imx93, host CPU elsewhere unless a board timed it), so they are compared
only within a target.

A recommendation never adds a CPU island without stating its latency cost
(:func:`island_cost`): when the chosen cell keeps ops in float, it is compared with the
same cell without exclusions (ops moved to the CPU, islands added, float ops left on the
NPU, the latency difference); when it has more CPU islands than another cell of its
target that ran (another recipe, say), it is compared with the fastest such cell.  A
Vela estimate leaves the CPU ops out, so the host-CPU difference is stated beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .._results import Result
from ..vocab import LatencySource
from .cell import CellResult
from .plan import SweepSpec

LATENCY_TIE = 0.05
#: host-CPU latencies decide only when also this much apart: a median's CI measures the noise within one run,
#: not the machine's load between runs. On a loaded 2-core host (load ~12) one tiny model measured 13% apart
#: within one sweep, and a8w8_pt/a8w8_pc 1% apart in one run and 25% in the next, flipping the pick between a
#: serial sweep and the same sweep on a Dask scheduler (tests/sweep/test_run.py)
HOST_CPU_TIE = 0.50


@dataclass(frozen=True)
class Recommendation(Result):
    """The recommended cell of one target (or why there is none)."""

    target: str
    cell: CellResult | None
    passed_gate: bool
    reason: str
    violations: tuple[str, ...] = ()
    island_cost: str = ""

    def summary(self) -> str:
        return f"{self.target}: {self.reason}" + (f" {self.island_cost}" if self.island_cost else "")


@dataclass(frozen=True)
class RecommendationTable(Result):
    """The recommendation per target as a table (what a notebook shows instead of a tuple's repr)."""

    recommendations: tuple[Recommendation, ...] = ()

    def summary(self) -> str:
        return "; ".join(r.summary() for r in self.recommendations) or "no recommendation"

    def _repr_html_(self) -> str:
        from .. import display
        rows = [(r.target, "-" if r.cell is None else r.cell.cell.recipe,
                 "-" if r.cell is None else f"{r.cell.cell.strategy}/{r.cell.cell.size}",
                 "pass" if r.passed_gate else "FAIL", r.reason, r.island_cost or "-")
                for r in self.recommendations]
        styles = ["" if r.passed_gate else display.BAD_STYLE for r in self.recommendations]
        return display.table(("target", "recipe", "calibration", "gate", "why", "CPU island cost"), rows,
                             row_styles=styles, caption="Recommendation per target")


@dataclass(frozen=True)
class SweepResult(Result):
    """Every cell's result, the gate used and the recommendation per target."""

    spec: SweepSpec
    model: str
    model_sha256: str
    cells: tuple[CellResult, ...]
    recommendations: tuple[Recommendation, ...]
    gate: dict[str, Any]
    scheduler: str
    workers: int
    seconds: float
    plots: tuple[str, ...] = ()

    @property
    def failed(self) -> tuple[CellResult, ...]:
        return tuple(c for c in self.cells if not c.ok)

    @property
    def cache_hits(self) -> int:
        return sum(1 for c in self.cells if c.cache_hit)

    def for_target(self, target: str) -> tuple[CellResult, ...]:
        return tuple(c for c in self.cells if c.cell.target == target)

    def recommendation_table(self) -> RecommendationTable:
        """The recommendations as a table (a notebook's view)."""
        return RecommendationTable(self.recommendations)

    def failure_table(self) -> str | Any:
        """The cells that did not run, as a table (a notebook's view); a sentence when none failed."""
        from .. import display
        if not self.failed:
            return "every cell ran"
        from IPython.display import HTML
        return HTML(display.table(("cell", "error"), [(c.cell.label, (c.error.splitlines() or [""])[0][:200])
                                                    for c in self.failed], caption="Cells that did not run"))

    def recommendation(self, target: str) -> Recommendation | None:
        return next((r for r in self.recommendations if r.target == target), None)

    def summary(self) -> str:
        return (f"{len(self.cells)} cells ({len(self.failed)} failed, {self.cache_hits} cache hits) in "
                f"{self.seconds:.1f} s on {self.scheduler} ({self.workers} worker(s)); "
                + "; ".join(r.summary() for r in self.recommendations))

    HEADERS = ("target", "recipe", "calibration", "exclude", "worst drop (pp)", "worst condition", "NPU ops",
               "CPU islands", "latency (ms)", "latency kind", "gate")

    def table_rows(self) -> list[tuple[Any, ...]]:
        recommended = {id(r.cell) for r in self.recommendations if r.cell is not None}
        rows: list[tuple[Any, ...]] = []
        for c in self.cells:
            passes = _gate_mark(c, self.gate)
            mark = " *" if any(r.cell is not None and r.cell.key == c.key and r.cell.cell == c.cell
                               for r in self.recommendations) or id(c) in recommended else ""
            if not c.ok:
                rows.append((c.cell.target + mark, c.cell.recipe, f"{c.cell.strategy}/{c.cell.size}",
                             c.cell.exclusion, "FAILED", c.error.splitlines()[0][:70] if c.error else "", "-", "-",
                             "-", "-", "-"))
                continue
            rows.append((c.cell.target + mark, c.cell.recipe, f"{c.cell.strategy}/{c.cell.size}",
                         c.cell.exclusion if not c.cell.exclude
                         else f"{c.cell.exclusion}: {','.join(c.cell.exclude)}"[:40],
                         f"{c.worst_drop_pp:+.2f}", c.worst_condition, f"{c.npu_ops}/{c.total_ops}", c.cpu_islands,
                         "-" if c.latency_ms is None else f"{c.latency_ms:.3f}", c.latency_kind,
                         "pass" if passes else "fail"))
        return rows

    def text(self) -> str:
        """The plain-text table and the recommendations (what ``workbench sweep`` prints)."""
        rows = [tuple(str(x) for x in r) for r in self.table_rows()]
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(self.HEADERS)]
        line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths))  # noqa: E731
        out = [self.summary().split(";")[0], "", line(self.HEADERS)]
        out += [line(r) for r in rows]
        out += ["", "* recommended. Recommendation per target (rule: among cells passing the gate, those no cell "
                "is faster than beyond noise (host CPU: the medians' 95% CIs apart and > 1.5x; Vela/board: > 5%), then "
                "smaller worst drop, fewer CPU islands, higher NPU share, fewer float ops):"]
        out += [f"  {r.summary()}" for r in self.recommendations]
        for c in self.failed:
            out.append(f"  failed: {c.cell.label}: {c.error.splitlines()[0] if c.error else ''}")
        return "\n".join(out)

    def _repr_html_(self) -> str:
        import matplotlib.pyplot as plt

        from .. import display
        styles = [display.BAD_STYLE if r[-1] in ("fail", "-") else "" for r in self.table_rows()]
        fig = self.plot()
        try:
            picture = display.figure_html(fig, alt="Pareto fronts")
        finally:
            plt.close(fig)
        recs = "".join(display.paragraph(r.summary()) for r in self.recommendations)
        return (display.heading("Sweep") + display.paragraph(self.summary().split(";")[0]) + recs
                + display.table(self.HEADERS, self.table_rows(), row_styles=styles,
                                caption="* recommended; red: fails the gate or did not run")
                + picture)

    def plot(self, axes: Any = None) -> Any:
        """Two rows of Pareto plots per target: worst-condition drop against latency and against NPU op share."""
        import matplotlib.pyplot as plt
        targets = list(self.spec.targets)
        if axes is None:
            fig, axes = plt.subplots(2, len(targets), figsize=(min(3.6 * len(targets), 10.8), 7), squeeze=False)
        else:
            fig = axes[0][0].figure
        for j, t in enumerate(targets):
            cells = [c for c in self.for_target(t) if c.ok]
            rec = self.recommendation(t)
            kind = next((c.latency_label for c in cells if c.latency_label), "")
            _pareto_axis(axes[0][j], cells, rec, x=lambda c: c.latency_ms, xlabel=f"latency (ms, {kind})",
                         minimize_x=True, title=t)
            _pareto_axis(axes[1][j], cells, rec, x=lambda c: c.npu_share, xlabel="NPU op share",
                         minimize_x=False, title=t)
        fig.tight_layout()
        return fig


def _gate_mark(c: CellResult, gate: dict[str, Any]) -> bool:
    return c.ok and not gate_violations(c, gate)


def _pareto_axis(ax: Any, cells: list[CellResult], rec: Recommendation | None, *, x: Any, xlabel: str,
                 minimize_x: bool, title: str) -> None:
    pts = [(x(c), c.worst_drop_pp, c) for c in cells
           if x(c) is not None and not math.isnan(x(c)) and c.worst_drop_pp is not None]
    recipes = sorted({c.cell.recipe for c in cells})
    markers = "osD^vP*X"
    for i, r in enumerate(recipes):
        sel = [(a, b) for a, b, c in pts if c.cell.recipe == r]
        if sel:
            ax.scatter(*zip(*sel), marker=markers[i % len(markers)], label=r, alpha=0.75)
    front = pareto_front([(a if minimize_x else -a, b) for a, b, _ in pts])
    fp = sorted((pts[i][0], pts[i][1]) for i in front)
    if fp:
        ax.plot(*zip(*fp), color="grey", lw=1, ls="--", label="Pareto front")
    if rec is not None and rec.cell is not None and x(rec.cell) is not None:
        ax.scatter([x(rec.cell)], [rec.cell.worst_drop_pp], s=220, facecolors="none", edgecolors="red",
                   linewidths=2, label="recommended")
    ax.set_xlabel(xlabel, fontsize=10)
    ax.set_ylabel("worst-condition drop (pp)", fontsize=10)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=10)


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats in both coordinates (both minimised)."""
    out = []
    for i, (a, b) in enumerate(points):
        dominated = any((a2 <= a and b2 <= b) and (a2 < a or b2 < b) for j, (a2, b2) in enumerate(points) if j != i)
        if not dominated:
            out.append(i)
    return out


def gate_violations(c: CellResult, gate: dict[str, Any]) -> list[str]:
    """Why cell ``c`` fails ``gate`` (a :class:`workbench.evaluate.gate.Gate` as a dict); empty if it passes."""
    from ..evaluate.gate import Gate
    g = Gate.from_dict(gate)
    out = []
    for s in c.scores:
        max_drop, _ = g.limits(s.condition)
        drop = s.drop_ci_high if g.use_ci else s.drop_pp
        if max_drop is not None and drop > max_drop + 1e-9:
            out.append(f"{s.condition} drops {drop:.2f} pp > {max_drop:g}")
    share = g.share_for(c.cell.target)
    npu_share = c.npu_share or 0.0   # set on every cell that ran (the only cells a gate sees)
    if share is not None and npu_share < share - 1e-12:
        out.append(f"NPU share {npu_share:.0%} < {share:.0%}")
    if g.max_cpu_islands is not None and c.cpu_islands > g.max_cpu_islands:
        out.append(f"{c.cpu_islands} CPU island(s) > {g.max_cpu_islands}")
    if g.max_latency_ms is not None and c.latency_ms is not None and c.latency_ms > g.max_latency_ms:
        out.append(f"latency {c.latency_ms:.3f} ms ({c.latency_kind}) > {g.max_latency_ms:g}")
    return out


def faster_beyond_noise(a: CellResult, b: CellResult) -> bool:
    """Whether ``a``'s latency is below ``b``'s by more than its noise (the rule in the module docstring)."""
    if a.latency_ms is None:
        return False
    if b.latency_ms is None:
        return True
    if LatencySource.HOST_CPU.value in (a.latency_kind, b.latency_kind):
        if a.latency_ci_high is None or b.latency_ci_low is None:
            return False                      # no measured CI: host-CPU noise must not decide
        return a.latency_ci_high < b.latency_ci_low and a.latency_ms * (1 + HOST_CPU_TIE) < b.latency_ms
    return a.latency_ms * (1 + LATENCY_TIE) < b.latency_ms


def recommend(target: str, cells: list[CellResult], gate: dict[str, Any]) -> Recommendation:
    """The recommended cell of ``target`` under ``gate`` (rule in the module docstring)."""
    ran = [c for c in cells if c.ok]
    if not ran:
        return Recommendation(target=target, cell=None, passed_gate=False,
                              reason=f"no cell ran ({len(cells)} failed)")
    passing = [c for c in ran if not gate_violations(c, gate)]
    pool = passing or ran
    def share(c: CellResult) -> float:
        return c.npu_share or 0.0      # set on every cell that ran
    near = [c for c in pool if not any(faster_beyond_noise(o, c) for o in pool)]
    if not passing:     # nothing passes: the closest cell (smallest number of violations, then drop)
        best = min(ran, key=lambda c: (len(gate_violations(c, gate)), c.worst_drop_pp, c.cell.label))
        viol = tuple(gate_violations(best, gate))
        return Recommendation(target=target, cell=best, passed_gate=False, violations=viol,
                              reason=f"no cell passes the gate; closest {_describe(best)}; fails: {'; '.join(viol)}",
                              island_cost=island_cost(best, ran))
    # no raw latency in the tie chain: what noise cannot separate was settled by `near` (equal drops on a tiny
    # model, latencies 1% apart, picked a8w8_pt serially and a8w8_pc on a Dask scheduler: tests/sweep/test_run.py)
    best = min(near, key=lambda c: (c.worst_drop_pp, c.cpu_islands, -share(c), len(c.cell.exclude), c.cell.label))
    return Recommendation(target=target, cell=best, passed_gate=True, reason=f"{_describe(best)} (passes the gate)",
                          island_cost=island_cost(best, ran))


def _describe(c: CellResult) -> str:
    lat = "-" if c.latency_ms is None else f"{c.latency_ms:.3f} ms {c.latency_kind}"
    excl = "" if not c.cell.exclude else f", float: {short_names(c.cell.exclude)}"
    return (f"{c.cell.recipe}, {c.cell.strategy} calibration of {c.cell.size}{excl}: worst drop "
            f"{c.worst_drop_pp:+.2f} pp ({c.worst_condition}), NPU {c.npu_ops}/{c.total_ops}, "
            f"{c.cpu_islands} CPU island(s), {lat}")


def short_names(names: tuple[str, ...] | list[str]) -> str:
    """Tensor names as a reader knows them: the first of a fused name, without the model's own scope."""
    out = []
    for name in names:
        first = name.split(";")[0]
        parts = first.split("/")
        out.append("/".join(parts[1:]) if len(parts) > 2 else first)
    return ", ".join(out)


def _latency_delta(c: CellResult, other: CellResult) -> str:
    costs = []
    if c.latency_ms is not None and other.latency_ms is not None:
        costs.append(f"{c.latency_ms - other.latency_ms:+.3f} ms {c.latency_kind}")
    if c.host_cpu_ms is not None and other.host_cpu_ms is not None and c.latency_kind != "host-cpu":
        costs.append(f"{c.host_cpu_ms - other.host_cpu_ms:+.3f} ms host CPU")
    note = (" (a Vela estimate covers the NPU part only: the CPU ops' time is not in it)"
            if c.latency_kind == "vela" and c.cpu_ops else "")
    return (", ".join(costs) or "not measured") + note


def island_cost(c: CellResult, cells: list[CellResult]) -> str:
    """What the cell's float ops and CPU islands cost against the cells it is chosen over (see the module doc).

    Empty only when the cell keeps nothing in float and no other cell of its target that ran has fewer
    CPU islands.
    """
    out = []
    same_target = [b for b in cells if b.ok and b.cell.target == c.cell.target and b is not c]
    if c.cell.exclude:
        base = next((b for b in same_target if not b.cell.exclude and b.cell.recipe == c.cell.recipe
                     and b.cell.strategy == c.cell.strategy and b.cell.size == c.cell.size), None)
        kept = short_names(c.cell.exclude)
        if base is None:
            out.append(f"Keeps {kept} in float ({c.cpu_islands} CPU island(s)); latency cost unknown: the same "
                       "cell without exclusions did not run.")
        else:
            added = c.cpu_islands - base.cpu_islands
            moved = len(c.cpu_ops) - len(base.cpu_ops)
            on_npu = len(c.float_npu_ops) - len(base.float_npu_ops)
            float_note = (f"; {on_npu} float op(s) stay on the NPU ({', '.join(c.float_npu_ops)}): the target "
                          "accepts them, but no latency here shows an NPU's float speed" if on_npu > 0 else "")
            out.append(f"Keeping {kept} in float moves {moved:+d} op(s) to the CPU and adds {added:+d} CPU "
                       f"island(s) over the same cell without exclusions{float_note}; latency cost "
                       f"{_latency_delta(c, base)}.")
    fewer = [b for b in same_target if b.cpu_islands < c.cpu_islands]
    if fewer:
        lat = lambda b: b.latency_ms if b.latency_ms is not None else math.inf  # noqa: E731
        other = min(fewer, key=lambda b: (b.cpu_islands, len(b.cell.exclude), lat(b), b.worst_drop_pp))
        what = f"{other.cell.recipe}, {other.cell.strategy}/{other.cell.size}" + (
            f", float: {short_names(other.cell.exclude)}" if other.cell.exclude else "")
        out.append(f"It has {c.cpu_islands - other.cpu_islands} more CPU island(s) than {what} ({other.cpu_islands}"
                   f", worst drop {other.worst_drop_pp:+.2f} pp); latency difference {_latency_delta(c, other)}.")
    return " ".join(out)
