"""Held-out accuracy per deployment condition: FP32 against its INT8 candidates.

``compare_accuracy`` reads as its steps: resolve the dataset split and the
conditions, the models and their names, and the model's input contract (its card,
``input_spec=`` or inferred); get every model's outputs on every condition (from the
cache, or by running the model once per condition, the contract applied batch by
batch); check that the outputs fit the dataset's classes; then score: the task
metric (top-1 by default, or any ``metric``) with a bootstrap CI, the drop against
FP32 with a paired bootstrap CI, the agreement with FP32, per-class accuracy and
the confusion matrix (classification), and the FP32-vs-INT8 fidelity of every
output tensor (:mod:`workbench.evaluate.fidelity`).  Guards against a wrong
contract (:mod:`workbench.evaluate.guards`) land in ``report.issues``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._io import sha256_file
from .._results import Result
from .._validation import check_positive_int, check_range
from ..errors import DataError, EvaluationError, ModelError, missing_file
from ..models.contract import ContractIssue, InputContract
from .fidelity import FidelityRow

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
    per_class: tuple[float | None, ...] = ()
    class_counts: tuple[int, ...] = ()
    confusion: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class FixTrial(Result):
    """One recipe tried on the spot against a drop (:func:`workbench.evaluate.remedies.try_fixes`): its drop
    against FP32 under one condition, with the paired-bootstrap CI, on the same test images."""

    recipe: str
    condition: str
    drop_pp: float | None
    drop_ci_low: float | None
    drop_ci_high: float | None
    accuracy: float | None
    error: str = ""                  # the recipe could not be built or run: why

    def summary(self) -> str:
        if self.error or self.drop_pp is None or self.drop_ci_low is None or self.drop_ci_high is None:
            return f"{self.recipe} on {self.condition}: not measured ({self.error})"
        return (f"{self.recipe} on {self.condition}: drop {self.drop_pp:+.1f} pp "
                f"[{self.drop_ci_low:+.1f}, {self.drop_ci_high:+.1f}]")


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
    metric: str = "top1"
    task: str = "classification"
    contract: InputContract | None = None
    fidelity: tuple[FidelityRow, ...] = ()
    issues: tuple[ContractIssue, ...] = ()
    fix_trials: tuple[FixTrial, ...] = ()          # recipes tried against a drop (evaluate/remedies.py)

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
            if not self.rows and self.fidelity:
                low = min(self.fidelity, key=lambda r: -1e9 if r.sqnr_db is None else r.sqnr_db)
                return head + (f", no task metric; lowest SQNR {low.sqnr_db:.1f} dB ({low.model}, {low.condition}, "
                               f"{low.output})" if low.sqnr_db is not None else ", no task metric")
            return head + f", {self.reference} only"
        unit = "pp" if self.metric == "top1" else f"x100 {self.metric}"
        noise = ", within noise: the CI includes 0" if worst.drop_ci_low <= 0 <= worst.drop_ci_high else ""
        return (head + f"; largest drop {worst.drop_pp:+.2f} {unit} ({worst.model}, {worst.condition}, "
                f"{self.confidence:.0%} CI {worst.drop_ci_low:+.2f}..{worst.drop_ci_high:+.2f}{noise})")

    def _value(self, v: float) -> str:
        return f"{v:.2%}" if self.metric in ("top1", "pck") else f"{v:.4g}"

    def table_rows(self) -> list[tuple[Any, ...]]:
        """``(condition, model, n, metric, CI, drop pp, drop CI, agreement %)`` as display strings."""
        out = []
        for r in self.rows:
            out.append((r.condition, r.model, r.n, self._value(r.accuracy),
                        f"{self._value(r.ci_low)}..{self._value(r.ci_high)}",
                        "-" if r.is_reference else f"{r.drop_pp:+.2f}",
                        "-" if r.is_reference else f"{r.drop_ci_low:+.2f}..{r.drop_ci_high:+.2f}",
                        "-" if r.is_reference else f"{r.agreement:.1%}"))
        return out

    HEADERS = ("condition", "model", "n", "top-1", "95% CI", "drop (pp)", "drop CI (pp)", "agreement")

    @property
    def headers(self) -> tuple[str, ...]:
        if self.metric == "top1":
            return self.HEADERS
        return ("condition", "model", "n", self.metric, "95% CI", "drop (x100)", "drop CI", "agreement")

    def text(self) -> str:
        """A plain-text table (what ``workbench evaluate`` prints): issues first, the contract, the
        task metric per condition, then the per-output fidelity."""
        from . import fidelity as fid
        out = [f"{i.severity.upper()} [{i.code}] {i.message}" for i in self.issues]
        out += ([""] if out else []) + [self.summary()]
        if self.contract is not None:
            out.append(self.contract.summary())
        rows = [tuple(str(c) for c in row) for row in self.table_rows()]
        headers = self.headers
        if rows:
            widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
            line = lambda cells: "  ".join(c.ljust(w) if i < 2 else c.rjust(w)  # noqa: E731
                                           for i, (c, w) in enumerate(zip(cells, widths)))
            out += ["", line(headers)]
            previous = None
            for row in rows:
                if previous is not None and row[0] != previous:
                    out.append("")
                out.append(line(row))
                previous = row[0]
        if self.fidelity:
            out += ["", "FP32 vs INT8 fidelity per output:", fid.text(self.fidelity)]
        return "\n".join(out)

    def _repr_html_(self) -> str:
        import matplotlib.pyplot as plt

        from .. import display
        styles = [display.BAD_STYLE if (not r.is_reference and r.drop_ci_low > 0) else "" for r in self.rows]
        picture = ""
        if self.rows:
            fig, ax = plt.subplots(figsize=(1.4 * len(self.conditions) + 2.5, 3.2))
            try:
                self.plot(ax=ax)
                picture = display.figure_html(fig, alt="accuracy per condition")
            finally:
                plt.close(fig)
        from . import fidelity as fid
        issues = "".join(display.alert(f"[{i.code}] {i.message}") for i in self.issues)
        contract = self.contract._repr_html_() if self.contract is not None else ""
        title = "Accuracy per condition" if self.metric == "top1" else f"Task metric per condition ({self.metric})"
        body = (display.table(self.headers, self.table_rows(), row_styles=styles,
                              caption=f"{display.DROP_CONVENTION}; red: the drop's CI lies above zero")
                + picture) if self.rows else ""
        return (issues + display.heading(title) + display.paragraph(self.summary()) + body
                + (fid.html(self.fidelity) if self.fidelity else "") + contract)

    def plot(self, ax: Any = None) -> Any:
        """Grouped bars: accuracy per condition, one bar per model, CI whiskers."""
        from .plots import plot_accuracy_bars
        return plot_accuracy_bars(self, ax=ax)

    def plot_drop_heatmap(self, ax: Any = None) -> Any:
        """Heatmap of the drop (pp) per condition x candidate."""
        from .plots import plot_drop_heatmap
        return plot_drop_heatmap(self, ax=ax)

    def plot_confusions(self, model: str | None = None, *, normalize: bool = True) -> Any:
        """One confusion matrix per condition of ``model`` (default the first candidate), in one figure."""
        from .plots import plot_confusions
        return plot_confusions(self, model, normalize=normalize)

    def plot_confusion(self, model: str, condition: str, ax: Any = None, *, normalize: bool = True) -> Any:
        """Confusion matrix of one model under one condition (rows: true class)."""
        from .plots import plot_confusion
        return plot_confusion(self, model, condition, ax=ax, normalize=normalize)


# -- the verb --------------------------------------------------------------------------------

def compare_accuracy(fp32_model: Any, candidates: Any, dataset: Any, *, conditions: Sequence[str] | str | None = None,
                     split: str = "test", names: Sequence[str] | None = None, reference_name: str = REFERENCE_NAME,
                     n_bootstrap: int = 1000, confidence: float = 0.95, seed: int = 0, cache: bool = True,
                     batch_size: int = 128, num_threads: int | None = None, input_spec: Any = None,
                     metric: Any = None, fidelity: bool = True, check_contract: bool = True) -> AccuracyReport:
    """Task metric and fidelity of ``fp32_model`` and each candidate on every condition of ``split``.

    Parameters
    ----------
    fp32_model : the reference (path, ``ReferenceModel`` or ``QuantizedModel``-like).
    candidates : a path, a ``QuantizedModel``-like, a list of those, or a dict name -> model.
        May be empty (``[]``) to score the FP32 model alone.
    dataset : a ``Dataset`` or a name/path for :func:`~workbench.data.loaders.load_dataset`.
    conditions : which conditions (default every condition present in ``split``).
    names : candidate names (default: the dict keys, a quantized model's recipe name, or the file stem).
    n_bootstrap, confidence, seed : the paired bootstrap.
    cache : reuse outputs cached per (model hash, dataset hash, split, condition, contract).
    input_spec : the input contract (an ``InputContract``, a card mapping or a YAML path); default the
        card beside ``fp32_model`` (``<model>.card.yaml``), else inferred from its input.  Candidates
        share it (quantization keeps the model's input contract).
    metric : ``"top1"``, ``"pck"``, ``"module:function"`` or a callable ``metric(outputs, labels)``
        (see :mod:`workbench.evaluate.metrics`); default top-1 for class labels, PCK for a
        keypoint card, none (fidelity only) otherwise.
    fidelity : also compare every output tensor of each candidate with FP32's (SQNR, cosine...).
    check_contract : run the guards (near-chance baseline, a better-scoring alternative contract,
        float/INT8 swaps); their issues go to ``report.issues`` with a ``WorkbenchWarning``.
    """
    import warnings

    from ..data.loaders import load_dataset
    from ..errors import WorkbenchWarning
    from ..models.contract import resolve_contract
    from . import guards
    check_positive_int("n_bootstrap", n_bootstrap, error=EvaluationError)
    check_range("confidence", confidence, 0.5, 0.999, error=EvaluationError)
    start = time.perf_counter()
    data = load_dataset(dataset)
    held_out = data.select(split=split)
    conds = _resolve_conditions(held_out, conditions)
    models = _resolve_models(fp32_model, candidates, names, reference_name)
    contract = resolve_contract(models[0][1], input_spec)
    metric_name, metric_fn = _resolve_task_metric(metric, data, contract)
    issues = guards.check_model_roles(models, reference_name) if check_contract else []
    outputs, modes, hits, sha = _score_all(models, data, held_out, split, conds, cache=cache, batch_size=batch_size,
                                           num_threads=num_threads, contract=contract)
    labels_of = _label_mapper(data, held_out, contract, outputs[(reference_name, conds[0])], models,
                              metric_name)
    n_outputs = len(outputs[(reference_name, conds[0])])
    layouts = _output_layouts(models, data, contract) if fidelity else {}
    own = layouts.get(reference_name)
    # the card's names, else the FP32 model's own (an ONNX model's `heatmaps`), else output_<k>
    out_names = tuple(contract.output_name(k) if k < len(contract.outputs) or not own or len(own) != n_outputs
                      else own[k][0] for k in range(n_outputs))
    kinds = tuple(contract.output_kind(k, n_outputs) for k in range(n_outputs))
    rows, fid_rows = [], []
    for cond in conds:
        subset = held_out.select(condition=cond)
        y = labels_of(subset.y)
        idx = _indices(len(subset), n_bootstrap, seed, cond)
        ref_out = outputs[(reference_name, cond)]
        if metric_fn is not None:
            ref_values = _metric(metric_name, metric_fn, ref_out, y, reference_name, cond)
            for name, _ in models:
                out = outputs[(name, cond)]
                if metric_name == "top1":
                    rows.append(_score_row(name, cond, y, out[0].argmax(axis=1), ref_out[0].argmax(axis=1), idx,
                                           len(data.classes), confidence, is_reference=name == reference_name))
                else:
                    values = ref_values if name == reference_name else _metric(metric_name, metric_fn, out, y, name,
                                                                                cond)
                    rows.append(_metric_row(name, cond, values, ref_values, idx, confidence, out, ref_out, y, kinds,
                                            metric_fn, is_reference=name == reference_name))
        if fidelity:
            for name, _ in models[1:]:
                fid_rows += _fidelity(cond, name, ref_out, outputs[(name, cond)], idx, out_names, kinds, confidence,
                                      layouts.get(reference_name), layouts.get(name))
    if check_contract and metric_name == "top1":
        issues += guards.check_baseline(models[0][1], data, held_out, conds, rows, contract, reference_name,
                                        batch_size=batch_size, num_threads=num_threads, cache=cache,
                                        label_map=labels_of,
                                        reference_outputs={c: outputs[(reference_name, c)] for c in conds})
    for issue in issues:
        warnings.warn(issue.message, WorkbenchWarning, stacklevel=2)
    return AccuracyReport(
        dataset=data.name, dataset_hash=data.hash, split=split, reference=reference_name,
        models=tuple(n for n, _ in models), conditions=conds, classes=tuple(data.classes), rows=tuple(rows),
        model_paths={n: p for n, p in models}, model_sha256=sha, modes=modes, n_bootstrap=n_bootstrap,
        confidence=confidence, seed=seed, cache_hits=hits, seconds=round(time.perf_counter() - start, 3),
        metric=metric_name or "none", task=contract.task, contract=contract, fidelity=tuple(fid_rows),
        issues=tuple(issues))


def _resolve_task_metric(metric: Any, data: Any, contract: InputContract) -> tuple[str, Any]:
    from .metrics import resolve_metric
    if metric is None:
        if data.is_classification and contract.task == "classification":
            metric = "top1"
        elif contract.task == "keypoints" and not data.is_classification:
            metric = "pck"
        else:
            return "", None
    name, fn = resolve_metric(metric)
    if name == "top1" and not data.is_classification:
        raise EvaluationError(f"metric 'top1' needs class labels but dataset {data.name!r} has labels of shape "
                              f"{tuple(np.asarray(data.y).shape[1:])} per sample; pass metric='module:function' "
                              "for this task (see workbench.evaluate.metrics), or metric=None for fidelity only.")
    return name, fn


def _metric(name: str, fn: Any, outputs: list[np.ndarray], y: np.ndarray, model: str, cond: str):
    from .metrics import metric_values
    return metric_values(name, fn, outputs, y, f"model {model!r}, condition {cond!r}")


def _fidelity(cond, name, ref_out, out, idx, out_names, kinds, confidence, ref_layout=None,
              layout=None) -> list[FidelityRow]:
    from .fidelity import fidelity_rows, recorded_permutations
    return fidelity_rows(cond, name, ref_out, out, idx, names=out_names, kinds=kinds, confidence=confidence,
                         reference_layout=ref_layout, candidate_layout=layout,
                         permutations=recorded_permutations(layout, ref_layout))


def _output_layouts(models, data: Any, contract: InputContract) -> dict[str, Any]:
    """Each model's output names and per-sample shapes (:func:`~.fidelity.output_layouts`), so that
    fidelity compares a converted NHWC output with the FP32 model's NCHW one in the same layout."""
    from .fidelity import output_layouts
    shape = tuple(data.input_shape)
    if contract.size is not None:
        shape = (*contract.size, contract.channels)
    layouts = {}
    for name, path in models:
        layout = output_layouts(path, shape)
        if layout is not None:
            layouts[name] = _Layout(layout, path)
    return layouts


class _Layout(list):
    """An output layout (``[(name, shape)]``) that remembers the model file it was read from."""

    def __init__(self, items, path):
        super().__init__(items)
        self.path = path


def _label_mapper(data: Any, held_out: Any, contract: InputContract, ref_outputs: list[np.ndarray], models,
                  metric_name: str):
    """Labels as the metric sees them.  For top-1: the dataset's class indices, mapped onto the model's
    class order when the card names the model's classes; outputs that do not match the dataset's
    classes are an error (a 1000-class model on a 10-class dataset)."""
    if metric_name != "top1":
        return lambda y: np.asarray(y)
    width = int(ref_outputs[0].shape[1])
    name, path = models[0]
    if contract.classes:
        if len(contract.classes) != width:
            raise EvaluationError(f"the input contract ({contract.source}) names {len(contract.classes)} classes but "
                                  f"model {name!r} ({path}) gives {width} class scores; fix the card's classes.")
        position = {c: i for i, c in enumerate(contract.classes)}
        missing = [c for c in data.classes if c not in position]
        if missing:
            raise EvaluationError(f"dataset {data.name!r} has class(es) {', '.join(map(repr, missing[:8]))} that the "
                                  f"model's card ({contract.source}) does not name; its classes are "
                                  f"{', '.join(contract.classes[:12])}{' ...' if len(contract.classes) > 12 else ''}.")
        table = np.array([position[c] for c in data.classes], np.int64)
        return lambda y: table[np.asarray(y, np.int64)]
    if width != len(data.classes):
        labels = np.unique(np.asarray(held_out.y))
        outside = labels[(labels < 0) | (labels >= width)]
        if len(outside):
            _check_labels(name, path, width, held_out)
        raise EvaluationError(f"model {name!r} ({path}) gives {width} class scores but dataset {data.name!r} has "
                              f"{len(data.classes)} classes ({', '.join(data.classes[:10])}"
                              f"{' ...' if len(data.classes) > 10 else ''}); top-1 would compare unrelated indices. "
                              "Evaluate on the model's own classes, or name the model's classes in its card "
                              "(classes: or classes_file:) so the dataset's classes map onto them.")
    return lambda y: np.asarray(y, np.int64)


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
            raise missing_file(f"model file or folder of {name!r}", path,
                               "check the path (a .keras/.h5 file, SavedModel folder, .tflite or .onnx)", ModelError)
    return out


def _score_all(models, data, held_out, split, conds, *, cache, batch_size, num_threads, contract):
    from ..models.predict import load_predictor
    from . import cache as eval_cache
    outputs: dict[tuple[str, str], list[np.ndarray]] = {}
    modes: dict[str, str] = {}
    sha: dict[str, str] = {}
    hits = 0
    subsets = {c: held_out.select(condition=c) for c in conds}
    params = contract.to_params()
    for name, path in models:
        sha[name] = sha256_file(path)
        predictor = None
        for cond in conds:
            subset = subsets[cond]
            key = eval_cache.cache_key(sha[name], data.hash, split, cond, contract=params)
            cached = eval_cache.load_outputs(key, subset.ids) if cache else None
            if cached is not None:
                hits += 1
                outputs[(name, cond)] = cached
                continue
            if predictor is None:
                predictor = load_predictor(path, batch_size=batch_size, num_threads=num_threads, contract=contract)
                _check_fits(name, predictor, data, contract)
            out = predictor.predict_outputs(subset.x, ids=subset.ids)
            eval_cache.save_outputs(key, subset.ids, out)
            outputs[(name, cond)] = out
        modes[name] = predictor.mode if predictor is not None else "cached"
    return outputs, modes, hits, sha


def _check_fits(name: str, predictor: Any, data: Any, contract: InputContract) -> None:
    got = tuple(data.input_shape)
    if len(got) == 3:                       # the contract converts channels, and resizes when told how
        size = contract.size if contract.size is not None and "resize" not in contract.inferred else got[:2]
        got = (*size, contract.channels)
    if hasattr(predictor, "adapt_layout"):
        predictor.adapt_layout(got)
    want = predictor.input_shape
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


def _indices(n: int, n_bootstrap: int, seed: int, condition: str) -> np.ndarray:
    # Seeded by the condition's name, not its position: a condition's CI does not move when
    # another condition is added to or removed from the comparison.
    import zlib

    from .stats import bootstrap_indices
    return bootstrap_indices(n, n_bootstrap, seed=np.random.default_rng([seed, zlib.crc32(condition.encode())]))


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


def _metric_row(name, cond, values, ref_values, idx, confidence, out, ref_out, y, kinds, fn, *,
                is_reference) -> AccuracyRow:
    """A row for any metric: per-sample values get the paired bootstrap over samples; a metric that
    returns one number is called again on each resample.  ``agreement`` is the argmax agreement when
    the first output is class scores, else the mean cosine similarity of the first output."""
    from .stats import _interval
    n = len(y)
    if isinstance(values, float) or isinstance(ref_values, float):
        arg = lambda o, rows: o[0][rows] if len(o) == 1 else tuple(v[rows] for v in o)  # noqa: E731
        boot = np.array([float(np.mean(fn(arg(out, r), y[r]))) for r in idx])
        boot_ref = boot if is_reference else np.array([float(np.mean(fn(arg(ref_out, r), y[r]))) for r in idx])
        value = float(np.mean(values))
        ref_value = float(np.mean(ref_values))
    else:
        boot = values[idx].mean(axis=1)
        boot_ref = ref_values[idx].mean(axis=1)
        value, ref_value = float(values.mean()), float(ref_values.mean())
    low, high = _interval(boot, confidence)
    if is_reference:
        drop = dlow = dhigh = 0.0
    else:
        drop = (ref_value - value) * 100.0
        dlow, dhigh = _interval((boot_ref - boot) * 100.0, confidence)
    a, b = ref_out[0], out[0]
    if kinds[0] == "class_scores" and a.shape[1] > 1:
        agreement = float(np.mean(a.argmax(axis=1) == b.argmax(axis=1)))
    else:
        norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
        agreement = float(np.mean(np.where(norms > 0, np.sum(a * b, axis=1) / np.where(norms > 0, norms, 1), 1.0)))
    correct = int(round(float(np.sum(values)))) if not isinstance(values, float) else int(round(value * n))
    return AccuracyRow(condition=cond, model=name, n=int(n), correct=correct, accuracy=value, ci_low=low,
                       ci_high=high, drop_pp=drop, drop_ci_low=dlow, drop_ci_high=dhigh, agreement=agreement,
                       is_reference=is_reference)
