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

Layout: this module holds the results (:class:`AccuracyReport`, :class:`FixTrial`) and the verb;
:mod:`~workbench.evaluate.model_outputs` what is compared and the outputs, :mod:`~workbench.evaluate.scoring`
the rows (:class:`AccuracyRow`) scored from them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._results import Result
from .._validation import check_positive_int, check_range
from ..errors import EvaluationError
from ..models.contract import ContractIssue, InputContract
from .fidelity import FidelityRow
from .model_outputs import (
    label_mapper,
    model_output_layouts,
    model_outputs,
    resolve_conditions,
    resolve_models,
    resolve_task_metric,
)
from .scoring import AccuracyRow, condition_indices, fidelity_of, metric_row, task_metric_values, top1_row

__all__ = ["REFERENCE_NAME", "AccuracyReport", "AccuracyRow", "FixTrial", "compare_accuracy"]

REFERENCE_NAME = "fp32"

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
    exclude: tuple[str, ...] = ()    # the layers (output tensor names) ``recipe`` kept in float

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
    conds = resolve_conditions(held_out, conditions)
    models = resolve_models(fp32_model, candidates, names, reference_name)
    contract = resolve_contract(models[0][1], input_spec)
    metric_name, metric_fn = resolve_task_metric(metric, data, contract)
    issues = guards.check_model_roles(models, reference_name) if check_contract else []
    outputs, modes, hits, sha = model_outputs(models, data, held_out, split, conds, cache=cache,
                                              batch_size=batch_size, num_threads=num_threads, contract=contract)
    labels_of = label_mapper(data, held_out, contract, outputs[(reference_name, conds[0])], models, metric_name)
    n_outputs = len(outputs[(reference_name, conds[0])])
    layouts = model_output_layouts(models, data, contract) if fidelity else {}
    own = layouts.get(reference_name)
    # the card's names, else the FP32 model's own (an ONNX model's `heatmaps`), else output_<k>
    out_names = tuple(contract.output_name(k) if k < len(contract.outputs) or not own or len(own) != n_outputs
                      else own[k][0] for k in range(n_outputs))
    kinds = tuple(contract.output_kind(k, n_outputs) for k in range(n_outputs))
    rows, fid_rows = [], []
    for cond in conds:
        subset = held_out.select(condition=cond)
        y = labels_of(subset.y)
        idx = condition_indices(len(subset), n_bootstrap, seed, cond)
        ref_out = outputs[(reference_name, cond)]
        if metric_fn is not None:
            ref_values = task_metric_values(metric_name, metric_fn, ref_out, y, reference_name, cond)
            for name, _ in models:
                out = outputs[(name, cond)]
                if metric_name == "top1":
                    rows.append(top1_row(name, cond, y, out[0].argmax(axis=1), ref_out[0].argmax(axis=1), idx,
                                         len(data.classes), confidence, is_reference=name == reference_name))
                else:
                    values = ref_values if name == reference_name else task_metric_values(metric_name, metric_fn, out,
                                                                                           y, name, cond)
                    rows.append(metric_row(name, cond, values, ref_values, idx, confidence, out, ref_out, y, kinds,
                                           metric_fn, is_reference=name == reference_name))
        if fidelity:
            for name, _ in models[1:]:
                fid_rows += fidelity_of(cond, name, ref_out, outputs[(name, cond)], idx, out_names, kinds, confidence,
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
