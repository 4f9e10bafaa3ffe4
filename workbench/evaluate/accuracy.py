"""Held-out accuracy per deployment condition: FP32 against its INT8 candidates.

``compare_accuracy`` reads as its steps: resolve the dataset split and the
conditions, resolve the models and their names, get every model's scores on
every condition (from the cache, or by running the model once per condition),
check that the labels fit the model's classes, then score: top-1 accuracy with a
bootstrap CI, the drop against FP32 with a paired bootstrap CI, the agreement
with FP32 (same argmax), per-class accuracy and the confusion matrix.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from .._io import sha256_file
from .._results import Result
from .._validation import check_positive_int, check_range
from ..errors import DataError, EvaluationError, ModelError

REFERENCE_NAME = "fp32"


@dataclass(frozen=True)
class AccuracyRow(Result):
    """One model under one condition.

    ``accuracy`` and its CI (``ci_low``, ``ci_high``) are fractions; ``drop_pp`` (FP32
    accuracy minus this model's, in percentage points, positive = worse) has the paired
    bootstrap CI ``drop_ci_low``/``drop_ci_high``; ``agreement`` is the share of samples
    where this model's argmax equals FP32's.
    """

    condition: str
    model: str
    n: int
    correct: int
    accuracy: float
    ci_low: float
    ci_high: float
    drop_pp: float
    drop_ci_low: float
    drop_ci_high: float
    agreement: float
    is_reference: bool
    per_class: tuple[Optional[float], ...] = ()
    class_counts: tuple[int, ...] = ()
    confusion: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class AccuracyReport(Result):
    """Accuracy of an FP32 model and its candidates on every condition of a split."""

    dataset: str
    dataset_hash: str
    split: str
    reference: str
    models: tuple[str, ...]
    conditions: tuple[str, ...]
    classes: tuple[str, ...]
    rows: tuple[AccuracyRow, ...]
    model_paths: dict[str, str]
    model_sha256: dict[str, str]
    modes: dict[str, str]
    n_bootstrap: int
    confidence: float
    seed: int
    cache_hits: int = 0
    seconds: float = 0.0

    # -- look-ups ----------------------------------------------------------------------------
    @property
    def candidates(self) -> tuple[str, ...]:
        return tuple(m for m in self.models if m != self.reference)

    def row(self, condition: str, model: str) -> AccuracyRow:
        for r in self.rows:
            if r.condition == condition and r.model == model:
                return r
        from .._validation import check_choice
        check_choice("condition", condition, self.conditions, error=EvaluationError)
        check_choice("model", model, self.models, error=EvaluationError)
        raise EvaluationError(f"no row for model {model!r} under condition {condition!r}.")

    def accuracy(self, condition: str, model: str) -> float:
        return self.row(condition, model).accuracy

    def drop(self, condition: str, model: str) -> float:
        """Drop in percentage points against FP32 (positive = the model is worse)."""
        return self.row(condition, model).drop_pp

    def worst(self, model: str | None = None) -> AccuracyRow | None:
        """The candidate row with the largest drop (of ``model``, or of any candidate)."""
        rows = [r for r in self.rows if not r.is_reference and (model is None or r.model == model)]
        return max(rows, key=lambda r: r.drop_pp, default=None)

    # -- views ------------------------------------------------------------------------------
    def summary(self) -> str:
        worst = self.worst()
        head = (f"{len(self.models)} model(s) on {len(self.conditions)} condition(s) of "
                f"{self.dataset}[{self.split}]")
        if worst is None:
            return head + f", {self.reference} only"
        return (head + f"; largest drop {worst.drop_pp:+.2f} pp ({worst.model}, {worst.condition}, "
                f"{self.confidence:.0%} CI {worst.drop_ci_low:+.2f}..{worst.drop_ci_high:+.2f})")

    def table_rows(self) -> list[tuple[Any, ...]]:
        """``(condition, model, n, accuracy %, CI, drop pp, drop CI, agreement %)`` as display strings."""
        out = []
        for r in self.rows:
            out.append((r.condition, r.model, r.n, f"{r.accuracy:.2%}", f"{r.ci_low:.1%}..{r.ci_high:.1%}",
                        "-" if r.is_reference else f"{r.drop_pp:+.2f}",
                        "-" if r.is_reference else f"{r.drop_ci_low:+.2f}..{r.drop_ci_high:+.2f}",
                        "-" if r.is_reference else f"{r.agreement:.1%}"))
        return out

    HEADERS = ("condition", "model", "n", "top-1", "95% CI", "drop (pp)", "drop CI (pp)", "agreement")

    def text(self) -> str:
        """A plain-text table (what ``workbench evaluate`` prints)."""
        rows = [tuple(str(c) for c in row) for row in self.table_rows()]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(self.HEADERS)]
        line = lambda cells: "  ".join(c.ljust(w) if i < 2 else c.rjust(w)  # noqa: E731
                                       for i, (c, w) in enumerate(zip(cells, widths)))
        out = [self.summary(), "", line(self.HEADERS)]
        previous = None
        for row in rows:
            if previous is not None and row[0] != previous:
                out.append("")
            out.append(line(row))
            previous = row[0]
        return "\n".join(out)

    def _repr_html_(self) -> str:
        import matplotlib.pyplot as plt

        from .. import display
        styles = [display.BAD_STYLE if (not r.is_reference and r.drop_ci_low > 0) else "" for r in self.rows]
        fig, ax = plt.subplots(figsize=(1.4 * len(self.conditions) + 2.5, 3.2))
        try:
            self.plot(ax=ax)
            picture = display.figure_html(fig, alt="accuracy per condition")
        finally:
            plt.close(fig)
        return (display.heading("Accuracy per condition") + display.paragraph(self.summary())
                + display.table(self.HEADERS, self.table_rows(), row_styles=styles,
                                caption="red: the drop's CI lies above zero")
                + picture)

    def plot(self, ax: Any = None) -> Any:
        """Grouped bars: accuracy per condition, one bar per model, CI whiskers."""
        from .plots import plot_accuracy_bars
        return plot_accuracy_bars(self, ax=ax)

    def plot_drop_heatmap(self, ax: Any = None) -> Any:
        """Heatmap of the drop (pp) per condition x candidate."""
        from .plots import plot_drop_heatmap
        return plot_drop_heatmap(self, ax=ax)

    def plot_confusion(self, model: str, condition: str, ax: Any = None, *, normalize: bool = True) -> Any:
        """Confusion matrix of one model under one condition (rows: true class)."""
        from .plots import plot_confusion
        return plot_confusion(self, model, condition, ax=ax, normalize=normalize)


# -- the verb --------------------------------------------------------------------------------

def compare_accuracy(fp32_model: Any, candidates: Any, dataset: Any, *, conditions: Sequence[str] | str | None = None,
                     split: str = "test", names: Sequence[str] | None = None, reference_name: str = REFERENCE_NAME,
                     n_bootstrap: int = 1000, confidence: float = 0.95, seed: int = 0, cache: bool = True,
                     batch_size: int = 128, num_threads: int | None = None) -> AccuracyReport:
    """Accuracy of ``fp32_model`` and each candidate on every condition of ``split``.

    Parameters
    ----------
    fp32_model : the reference (path, ``ReferenceModel`` or ``QuantizedModel``-like).
    candidates : a path, a ``QuantizedModel``-like, a list of those, or a dict name -> model.
        May be empty (``[]``) to score the FP32 model alone.
    dataset : a ``Dataset`` or a name/path for :func:`~workbench.data.loaders.load_dataset`.
    conditions : which conditions (default every condition present in ``split``).
    names : candidate names (default: the dict keys, a quantized model's recipe name, or the file stem).
    n_bootstrap, confidence, seed : the paired bootstrap.
    cache : reuse scores cached per (model hash, dataset hash, split, condition).
    """
    from ..data.loaders import load_dataset
    check_positive_int("n_bootstrap", n_bootstrap, error=EvaluationError)
    check_range("confidence", confidence, 0.5, 0.999, error=EvaluationError)
    start = time.perf_counter()
    data = load_dataset(dataset)
    held_out = data.select(split=split)
    conds = _resolve_conditions(held_out, conditions)
    models = _resolve_models(fp32_model, candidates, names, reference_name)
    scores, modes, hits, sha = _score_all(models, data, held_out, split, conds, cache=cache,
                                          batch_size=batch_size, num_threads=num_threads)
    rows = []
    for ci, cond in enumerate(conds):
        subset = held_out.select(condition=cond)
        y = subset.y.astype(np.int64)
        idx = _indices(len(y), n_bootstrap, seed, ci)
        pred_ref = scores[(reference_name, cond)].argmax(axis=1)
        for name, _ in models:
            rows.append(_score_row(name, cond, y, scores[(name, cond)].argmax(axis=1), pred_ref, idx,
                                   len(data.classes), confidence, is_reference=name == reference_name))
    return AccuracyReport(
        dataset=data.name, dataset_hash=data.hash, split=split, reference=reference_name,
        models=tuple(n for n, _ in models), conditions=conds, classes=tuple(data.classes), rows=tuple(rows),
        model_paths={n: p for n, p in models}, model_sha256=sha, modes=modes, n_bootstrap=n_bootstrap,
        confidence=confidence, seed=seed, cache_hits=hits, seconds=round(time.perf_counter() - start, 3))


def _resolve_conditions(held_out: Any, conditions: Sequence[str] | str | None) -> tuple[str, ...]:
    if conditions is None:
        return tuple(held_out.conditions)
    wanted = [c.strip() for c in conditions.split(",")] if isinstance(conditions, str) else list(conditions)
    wanted = [c for c in wanted if c]
    if not wanted:
        raise DataError(f"`conditions` is empty; conditions present in {held_out.name}: "
                        f"{', '.join(held_out.conditions)}.")
    held_out.select(condition=wanted)  # raises DataError naming what exists
    return tuple(dict.fromkeys(wanted))


def _default_name(model: Any, path: str) -> str:
    recipe = getattr(model, "recipe", None)
    recipe_name = getattr(recipe, "name", recipe if isinstance(recipe, str) else None)
    if recipe_name:
        return str(recipe_name)
    p = Path(path)
    return p.name if p.is_dir() else p.stem


def _resolve_models(fp32_model: Any, candidates: Any, names: Sequence[str] | None,
                    reference_name: str) -> list[tuple[str, str]]:
    from ..models.predict import resolve_model_path
    if isinstance(candidates, Mapping):
        if names is not None:
            raise EvaluationError("`names` cannot be combined with a dict of candidates (the keys are the names).")
        items = [(str(k), v) for k, v in candidates.items()]
    else:
        seq = [candidates] if isinstance(candidates, (str, os.PathLike)) or hasattr(candidates, "path") \
            else list(candidates)
        if names is not None:
            names = list(names)
            if len(names) != len(seq):
                raise EvaluationError(f"`names` has {len(names)} entries for {len(seq)} candidate model(s); "
                                      "give one name per candidate.")
            items = list(zip(map(str, names), seq))
        else:
            items = []
            for model in seq:
                base = _default_name(model, resolve_model_path(model))
                name, k = base, 2
                while name in {n for n, _ in items} or name == reference_name:
                    name, k = f"{base}_{k}", k + 1
                items.append((name, model))
    out = [(reference_name, resolve_model_path(fp32_model))]
    for name, model in items:
        if name in {n for n, _ in out}:
            raise EvaluationError(f"model name {name!r} is used twice (the FP32 model is {reference_name!r}); "
                                  "give every candidate its own name.")
        out.append((name, resolve_model_path(model)))
    for name, path in out:
        if not Path(path).exists():
            raise ModelError(f"{path}: no such model file or folder (model {name!r}).")
    return out


def _score_all(models, data, held_out, split, conds, *, cache, batch_size, num_threads):
    from ..models.predict import load_predictor
    from . import cache as eval_cache
    scores: dict[tuple[str, str], np.ndarray] = {}
    modes: dict[str, str] = {}
    sha: dict[str, str] = {}
    hits = 0
    subsets = {c: held_out.select(condition=c) for c in conds}
    for name, path in models:
        sha[name] = sha256_file(path)
        predictor = None
        for cond in conds:
            subset = subsets[cond]
            key = eval_cache.cache_key(sha[name], data.hash, split, cond)
            cached = eval_cache.load_scores(key, subset.ids) if cache else None
            if cached is not None:
                hits += 1
                scores[(name, cond)] = cached
                continue
            if predictor is None:
                predictor = load_predictor(path, batch_size=batch_size, num_threads=num_threads)
                _check_fits(name, predictor, data)
            out = predictor.predict(subset.x)
            eval_cache.save_scores(key, subset.ids, out)
            scores[(name, cond)] = out
        modes[name] = predictor.mode if predictor is not None else "cached"
        _check_labels(name, path, scores[(name, conds[0])].shape[1], held_out)
    return scores, modes, hits, sha


def _check_fits(name: str, predictor: Any, data: Any) -> None:
    if hasattr(predictor, "adapt_layout"):
        predictor.adapt_layout(data.input_shape)
    want = predictor.input_shape
    got = data.input_shape
    if len(want) != len(got) or any(w is not None and w != g for w, g in zip(want, got)):
        shown = tuple("?" if d is None else d for d in want)
        raise ModelError(f"model {name!r} ({predictor.path}) takes images of shape {shown} but dataset "
                         f"{data.name!r} has {got}; evaluate it on data of its own input shape or load the "
                         "dataset with load_dataset(..., resize=(height, width)).")


def _check_labels(name: str, path: str, n_outputs: int, held_out: Any) -> None:
    labels = np.unique(held_out.y)
    outside = labels[(labels < 0) | (labels >= n_outputs)]
    if len(outside):
        shown = ", ".join(f"{int(v)} ({held_out.classes[int(v)]!r})" if 0 <= v < len(held_out.classes) else str(int(v))
                          for v in outside[:8])
        raise EvaluationError(f"labels {shown} of dataset {held_out.name!r} are outside the "
                              f"{n_outputs} output classes (0..{n_outputs - 1}) of model {name!r} ({path}); is the "
                              "model trained for another class list?")


def _indices(n: int, n_bootstrap: int, seed: int, condition_index: int) -> np.ndarray:
    from .stats import bootstrap_indices
    return bootstrap_indices(n, n_bootstrap, seed=np.random.default_rng([seed, condition_index]))


def _score_row(name, cond, y, pred, pred_ref, idx, n_classes, confidence, *, is_reference) -> AccuracyRow:
    from .stats import accuracy_ci, drop_ci
    correct = pred == y
    correct_ref = pred_ref == y
    low, high = accuracy_ci(correct, idx, confidence=confidence)
    if is_reference:
        dlow = dhigh = drop = 0.0
    else:
        drop = float(correct_ref.mean() - correct.mean()) * 100.0
        dlow, dhigh = drop_ci(correct_ref, correct, idx, confidence=confidence)
    k = max(n_classes, int(pred.max()) + 1, int(y.max()) + 1)
    confusion = np.zeros((k, k), dtype=np.int64)
    np.add.at(confusion, (y, pred), 1)
    confusion = confusion[:n_classes, :n_classes] if k == n_classes else confusion
    counts = np.bincount(y, minlength=n_classes)[:n_classes]
    per_class = tuple(None if counts[c] == 0 else round(float(np.mean(correct[y == c])), 10)
                      for c in range(n_classes))
    return AccuracyRow(condition=cond, model=name, n=int(len(y)), correct=int(correct.sum()),
                       accuracy=float(correct.mean()), ci_low=low, ci_high=high, drop_pp=drop,
                       drop_ci_low=dlow, drop_ci_high=dhigh, agreement=float(np.mean(pred == pred_ref)),
                       is_reference=is_reference, per_class=per_class,
                       class_counts=tuple(int(c) for c in counts),
                       confusion=tuple(tuple(int(v) for v in row) for row in confusion))
