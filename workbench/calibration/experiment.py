"""``compare_calibration_strategies``: the experiment a data scientist runs first.

One call: curate a calibration set of the same size with each strategy, quantize
the FP32 model with each (``workbench.quantize``), evaluate every INT8 model on
every deployment condition against the FP32 model (``workbench.evaluate``), and
say plainly whether curation helped on this dataset.

The verdict rule is deliberately simple and stated in the result: a strategy
*helps* on a condition when its INT8 drop is smaller than the baseline's
(``random``) by more than ``margin_pp`` percentage points, and *hurts* when it is
larger by more than that.  Overall it helps when its mean drop over the conditions
is lower by more than the margin and it hurts on no condition; differences inside
the margin are reported as no measurable difference.  Accuracy confidence
intervals from the accuracy report are kept in the rows.  One seed per strategy is
one draw, so small differences may be the draw, not the strategy: with
``repeats=k`` every strategy is drawn and quantized with k seeds, drops are
averaged, and the margin widens to the spread of the baseline's own mean drop
across its seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._results import Result
from .._validation import check_choice, check_positive_int, check_range
from ..errors import CalibrationError
from .curate import STRATEGIES, CalibrationSet


@dataclass(frozen=True)
class ExperimentRow(Result):
    """INT8 accuracy of one strategy's model under one condition.

    Built from :class:`workbench.runs.ConditionAccuracy` (the per-condition row of every report),
    with the strategy and seed that made the model; ``accuracy``/``fp32_accuracy`` are its
    ``int8``/``fp32``.
    """

    strategy: str
    seed: int
    condition: str
    n: int
    accuracy: float
    fp32_accuracy: float
    drop_pp: float
    ci_low: float | None = None
    ci_high: float | None = None
    drop_ci_low: float | None = None
    drop_ci_high: float | None = None


@dataclass(frozen=True)
class CalibrationExperiment(Result):
    """Per-condition INT8 drop for each calibration strategy, and the verdict."""

    dataset: str
    model: str
    recipe: str
    n: int
    seeds: tuple[int, ...]
    split: str
    baseline: str
    margin_pp: float
    strategies: tuple[str, ...]
    conditions: tuple[str, ...]
    sets: tuple[CalibrationSet, ...]
    models: dict[str, str]
    model_sha256: dict[str, str]
    rows: tuple[ExperimentRow, ...]
    verdicts: dict[str, str]
    conclusion: str

    def row(self, strategy: str, condition: str, seed: int | None = None) -> ExperimentRow:
        """The row of one strategy, condition and seed (default: the first seed)."""
        seed = self.seeds[0] if seed is None else seed
        for r in self.rows:
            if r.strategy == strategy and r.condition == condition and r.seed == seed:
                return r
        check_choice("strategy", strategy, self.strategies, error=CalibrationError)
        check_choice("condition", condition, self.conditions, error=CalibrationError)
        check_choice("seed", seed, self.seeds, error=CalibrationError)
        raise CalibrationError(f"no row for strategy {strategy!r} under condition {condition!r}, seed {seed}.")

    def drop(self, strategy: str, condition: str) -> float:
        """INT8 drop in percentage points (FP32 minus INT8 accuracy), averaged over the seeds."""
        return float(np.mean([self.row(strategy, condition, seed).drop_pp for seed in self.seeds]))

    def accuracy(self, strategy: str, condition: str) -> float:
        """INT8 accuracy, averaged over the seeds."""
        return float(np.mean([self.row(strategy, condition, seed).accuracy for seed in self.seeds]))

    def mean_drop(self, strategy: str, seed: int | None = None) -> float:
        """Drop averaged over the conditions (and over the seeds unless ``seed`` is given)."""
        if seed is None:
            return float(np.mean([self.drop(strategy, c) for c in self.conditions]))
        return float(np.mean([self.row(strategy, c, seed).drop_pp for c in self.conditions]))

    def calibration_set(self, strategy: str, seed: int | None = None) -> CalibrationSet:
        seed = self.seeds[0] if seed is None else seed
        for s in self.sets:
            if s.strategy == strategy and s.seed == seed:
                return s
        raise CalibrationError(f"no calibration set for strategy {strategy!r}, seed {seed}; strategies: "
                               f"{', '.join(self.strategies)}, seeds: {', '.join(map(str, self.seeds))}.")

    def summary(self) -> str:
        return self.conclusion

    def table(self) -> list[tuple[Any, ...]]:
        """Rows ``(condition, FP32 accuracy, drop per strategy...)`` plus a mean row."""
        out = []
        for c in self.conditions:
            out.append((c, self.row(self.strategies[0], c).fp32_accuracy,
                        *[self.drop(s, c) for s in self.strategies]))
        out.append(("mean", float(np.mean([r[1] for r in out])), *[self.mean_drop(s) for s in self.strategies]))
        return out

    def text(self) -> str:
        head = f"{'condition':<14}{'FP32':>8}" + "".join(f"{s + ' drop':>18}" for s in self.strategies)
        seeds = f"seed {self.seeds[0]}" if len(self.seeds) == 1 else f"mean of seeds {', '.join(map(str, self.seeds))}"
        lines = [f"{self.recipe}, n={self.n} per strategy, {seeds}, {self.dataset}[{self.split}]", "", head]
        for row in self.table():
            lines.append(f"{row[0]:<14}{row[1]:>8.1%}" + "".join(f"{v:>15.2f} pp" for v in row[2:]))
        lines += ["", *[f"{s}: {v}" for s, v in self.verdicts.items()], "", self.conclusion]
        return "\n".join(lines)

    def plot(self, ax: Any = None) -> Any:
        """Grouped bars: INT8 drop (pp) per condition for each strategy."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(1.6 * len(self.conditions) + 2, 3.5))
        k = len(self.strategies)
        pos = np.arange(len(self.conditions))
        for j, s in enumerate(self.strategies):
            drops = np.array([self.drop(s, c) for c in self.conditions])
            yerr = None
            rows = [self.row(s, c) for c in self.conditions]
            if len(self.seeds) == 1 and all(r.drop_ci_low is not None and r.drop_ci_high is not None for r in rows):
                yerr = [np.maximum(drops - [r.drop_ci_low for r in rows], 0),
                        np.maximum(np.array([r.drop_ci_high for r in rows]) - drops, 0)]
            ax.bar(pos + (j - (k - 1) / 2) * 0.8 / k, drops, 0.8 / k, label=s, yerr=yerr, capsize=2)
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(pos, self.conditions, rotation=20)
        ax.set_ylabel("INT8 drop vs FP32 (pp)")
        seeds = "paired-bootstrap CI" if len(self.seeds) == 1 else f"mean of {len(self.seeds)} seeds"
        ax.set_title(f"{self.recipe}, {self.n} calibration samples ({seeds})", fontsize=10)
        ax.legend(fontsize=10)
        return ax

    def plot_accuracy(self, ax: Any = None) -> Any:
        """Accuracy per condition: FP32 (black marks) and each strategy's INT8 model with its CI."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(1.6 * len(self.conditions) + 2, 3.5))
        k = len(self.strategies)
        pos = np.arange(len(self.conditions))
        for j, s in enumerate(self.strategies):
            rows = [self.row(s, c) for c in self.conditions]   # the first seed's model, with its CI
            acc = np.array([r.accuracy for r in rows]) * 100
            lo = np.array([r.ci_low if r.ci_low is not None else r.accuracy for r in rows]) * 100
            hi = np.array([r.ci_high if r.ci_high is not None else r.accuracy for r in rows]) * 100
            ax.errorbar(pos + (j - (k - 1) / 2) * 0.15, acc, yerr=[acc - lo, hi - acc], fmt="o", ms=4,
                        capsize=2, label=f"INT8 {s}")
        ax.plot(pos, [self.row(self.strategies[0], c).fp32_accuracy * 100 for c in self.conditions], "k_",
                ms=18, mew=2, label="FP32")
        ax.set_xticks(pos, self.conditions, rotation=20)
        ax.set_ylabel("top-1 accuracy (%)")
        ax.legend(fontsize=10)
        return ax

    def figure(self) -> Any:
        import matplotlib.pyplot as plt
        fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4))
        self.plot(left)
        self.plot_accuracy(right)
        fig.tight_layout()
        return fig

    def _repr_html_(self) -> str:
        import matplotlib.pyplot as plt

        from .. import display
        fig = self.figure()
        picture = display.figure_html(fig, alt="calibration strategies")
        plt.close(fig)
        rows = [(r[0], f"{r[1]:.1%}", *[f"{v:.2f}" for v in r[2:]]) for r in self.table()]
        table = display.table(("condition", "FP32", *[f"{s} drop (pp)" for s in self.strategies]), rows,
                              caption="INT8 drop per condition")
        sets = display.table(("strategy", "seed", "set", *self.conditions),
                             [(s.strategy, s.seed, s.id, *[s.conditions.get(c, 0) for c in self.conditions])
                              for s in self.sets],
                             caption="Calibration sets (samples per condition)")
        return (display.heading("Calibration strategies compared") + display.paragraph(self.conclusion)
                + "".join(display.paragraph(f"{s}: {v}") for s, v in self.verdicts.items())
                + '<div style="display:flex;gap:12px;align-items:flex-start">'
                + f"<div>{table}{sets}</div><div>{picture}</div></div>")


def compare_calibration_strategies(model: Any, dataset: Any, *, n: int = 200,
                                   strategies: Sequence[str] = STRATEGIES, recipe: str = "a8w8_pc",
                                   seed: int = 0, condition_weights: Mapping[str, float] | None = None,
                                   pool: str = "calibration", split: str = "test",
                                   conditions: Sequence[str] | None = None, baseline: str | None = None,
                                   margin_pp: float = 1.0, repeats: int = 1,
                                   fp32_model: Any = None, input_spec: Any = None,
                                   spec: Any = None) -> CalibrationExperiment:
    """Quantize ``model`` with a calibration set per strategy (same ``n``) and compare per condition.

    Parameters
    ----------
    model : the FP32 Keras model (``.keras`` path or ``ReferenceModel``): the quantization
        source, the coverage strategy's embedding model and (by default) the FP32 reference.
    dataset : the ``Dataset`` (or name) with the calibration pool and the evaluation split.
    n : calibration set size, the same for every strategy.
    strategies : which strategies to compare (default all three).
    recipe : the quantization recipe (``a8w8_pc``...).
    seed, condition_weights, pool : passed to :func:`curate_calibration_set`.
    split, conditions : what the accuracy is measured on (default: every condition of ``test``).
    baseline : the strategy the others are compared with (default ``random`` if compared,
        else the first strategy).
    margin_pp : the difference in drop (percentage points) below which no verdict is drawn.
    repeats : draw and quantize each strategy with seeds ``seed .. seed+repeats-1``; drops are
        averaged, and the margin widens to the spread of the baseline's own draws.
    fp32_model : the FP32 model the accuracy report compares with (default: ``model``).
    input_spec : the model's input contract (card mapping, ``InputContract`` or YAML path) for
        the coverage embeddings, calibration and evaluation; default the card beside the model.
    spec : a :class:`~workbench.pipeline.RunSpec` (``resolve=False`` is enough) every run starts from: the
        arguments above set the model, dataset, recipe, input contract, the calibration draw and the split
        and conditions measured; every other option of the spec is taken whole.
    """
    from ..data.loaders import load_dataset
    from .activations import model_label
    data = load_dataset(dataset)
    strategies = tuple(strategies)
    if len(strategies) < 2:
        raise CalibrationError(f"`strategies` must name at least two of {', '.join(map(repr, STRATEGIES))} to "
                               f"compare. Got {list(strategies)} instead.")
    for s in strategies:
        check_choice("strategies", s, STRATEGIES, error=CalibrationError)
    if len(set(strategies)) != len(strategies):
        raise CalibrationError(f"`strategies` names a strategy twice: {list(strategies)}.")
    if baseline is None:
        baseline = "random" if "random" in strategies else strategies[0]
    check_choice("baseline", baseline, strategies, error=CalibrationError)
    check_range("margin_pp", margin_pp, 0.0, None, error=CalibrationError)
    check_positive_int("repeats", repeats, error=CalibrationError)
    source = getattr(model, "keras", model)
    from ..pipeline import MemoStore, Pipeline, RunSpec

    template = spec if spec is not None else RunSpec(resolve=False)
    base = template.replace(model=source, dataset=data, recipe=recipe,
                            input_spec=input_spec or template.input_spec or "",
                            evaluation=dict(split=split, conditions=tuple(conditions or ())), resolve=True)
    store = MemoStore()
    seeds = tuple(range(int(seed), int(seed) + repeats))
    sets, paths, shas = [], {}, {}
    for rep in seeds:
        for s in strategies:
            weights = dict(condition_weights) if condition_weights is not None else None
            pipe = Pipeline(base.replace(calibration=dict(n=n, strategy=s, seed=rep, pool=pool,
                                                          condition_weights=weights)), store)
            cal = pipe.calibrate()
            qm = pipe.quantize(cal)
            sets.append(cal)
            paths[f"{s}@{rep}"], shas[f"{s}@{rep}"] = qm.path, qm.sha256
    report = Pipeline(base, store).compare(dict(paths), fp32_model=fp32_model)
    conds = tuple(dict.fromkeys(r.condition for r in report.rows if r.model in paths))
    from ..run_summary import ConditionAccuracy
    rows = []
    for key in paths:
        strategy, seed_text = key.rsplit("@", 1)
        for c in conds:
            # the per-condition row every report uses, then the strategy and seed it belongs to
            a = ConditionAccuracy.from_report(report, c, model=key)
            assert a.n is not None and a.int8 is not None and a.drop_pp is not None   # `key` is a candidate
            fp32 = a.fp32 if a.fp32 is not None else a.int8 + a.drop_pp / 100.0
            rows.append(ExperimentRow(strategy=strategy, seed=int(seed_text), condition=c, n=int(a.n),
                                      accuracy=float(a.int8), fp32_accuracy=float(fp32),
                                      drop_pp=float(a.drop_pp), ci_low=_maybe(a, "ci_low"),
                                      ci_high=_maybe(a, "ci_high"), drop_ci_low=_maybe(a, "drop_ci_low"),
                                      drop_ci_high=_maybe(a, "drop_ci_high")))
    verdicts, conclusion = _verdicts(rows, strategies, seeds, conds, baseline, margin_pp, n, data.name)
    return CalibrationExperiment(
        dataset=data.name, model=model_label(model), recipe=str(getattr(recipe, "name", recipe)), n=int(n),
        seeds=seeds, split=split, baseline=baseline, margin_pp=float(margin_pp), strategies=strategies,
        conditions=conds, sets=tuple(sets), models=paths, model_sha256=shas, rows=tuple(rows),
        verdicts=verdicts, conclusion=conclusion)


def _maybe(row: Any, name: str) -> float | None:
    value = getattr(row, name, None)
    return None if value is None else float(value)


def _verdicts(rows: list[ExperimentRow], strategies: tuple[str, ...], seeds: tuple[int, ...],
              conds: tuple[str, ...], baseline: str, margin_pp: float, n: int,
              dataset: str) -> tuple[dict[str, str], str]:
    drop = {(s, c): float(np.mean([r.drop_pp for r in rows if r.strategy == s and r.condition == c]))
            for s in strategies for c in conds}
    per_seed = [np.mean([r.drop_pp for r in rows if r.strategy == baseline and r.seed == k]) for k in seeds]
    spread = float(max(per_seed) - min(per_seed)) if len(seeds) > 1 else 0.0
    margin = max(margin_pp, spread)    # a difference the baseline shows between its own draws is no finding
    noise = (f" (the {baseline} baseline's mean drop varied by {spread:.2f} pp across seeds "
             f"{', '.join(map(str, seeds))}, so the margin is {margin:.2f} pp)") if len(seeds) > 1 else ""
    verdicts: dict[str, str] = {}
    helped, hurt = [], []
    for s in strategies:
        if s == baseline:
            continue
        gain = {c: drop[(baseline, c)] - drop[(s, c)] for c in conds}   # > 0: smaller drop than the baseline
        better = [c for c in conds if gain[c] > margin]
        worse = [c for c in conds if gain[c] < -margin]
        mean_gain = float(np.mean(list(gain.values())))
        parts = []
        if better:
            parts.append("smaller drop on " + ", ".join(f"{c} ({gain[c]:+.2f} pp)" for c in better))
        if worse:
            parts.append("larger drop on " + ", ".join(f"{c} ({gain[c]:+.2f} pp)" for c in worse))
        if not parts:
            parts.append(f"within {margin:.2g} pp of {baseline} on every condition")
        if mean_gain > margin and not worse:
            word = "helped"
            helped.append(s)
        elif mean_gain < -margin or (worse and not better):
            word = "hurt"
            hurt.append(s)
        else:
            word = "no measurable difference" if not (better or worse) else "mixed"
        verdicts[s] = (f"{word} vs {baseline}: mean drop {np.mean([drop[(s, c)] for c in conds]):.2f} pp vs "
                       f"{np.mean([drop[(baseline, c)] for c in conds]):.2f} pp; " + "; ".join(parts) + ".")
    if helped:
        conclusion = (f"Curation helped on {dataset}: {', '.join(helped)} lowered the mean INT8 drop by more than "
                      f"{margin:.2g} pp against {baseline} at n={n}{noise}.")
    elif hurt and len(hurt) == len(verdicts):
        conclusion = f"Curation did not help on {dataset}: {', '.join(hurt)} did worse than {baseline} at n={n}{noise}."
    else:
        conclusion = (f"Curation did not measurably help on {dataset} at n={n}: no strategy lowered the mean INT8 "
                      f"drop by more than {margin:.2g} pp against {baseline} without raising it on some "
                      f"condition{noise}.")
    return verdicts, conclusion
