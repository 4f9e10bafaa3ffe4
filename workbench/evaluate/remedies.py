"""Remedies measured on the spot: when a quantized model drops beyond noise and the threshold on some
condition, quantize it again with the recipes that address the usual causes and measure each on those
conditions (the same test images, the same paired bootstrap).

- per-tensor weights (``a8w8_pt``): per-channel weights (``a8w8_pc``) and cross-layer equalisation
  (``a8w8_pt+cle``);
- per-channel weights (``a8w8_pc``) whose drop remains: the activations are still per tensor; cross-layer
  equalisation (``a8w8_pc+cle``, ``a8w8_pt+cle``) evens out per-channel activation ranges;
- exclusion (:func:`exclusion`): the layers the quantized model's own findings name kept in float, as
  ``<recipe> excluding <op> #<index>, ...``: for a per-channel weight-range spread the layer and the ops that read
  its output (the spread activation is their input: it stays float only when they do), for per-tensor weight
  collapse the layer.  Float, not 16-bit: the TFLite converter's 16x8 mode applies to the whole model
  (``a16w8_pc``) and refuses excluded ops, so one layer can be kept in float only.

The trials are saved in the :class:`~workbench.evaluate.accuracy.AccuracyReport` (``fix_trials``) so the
accuracy finding (``accuracy.drop``) can say what each recipe gave, in every view.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .drops import DEFAULT_MAX_DROP_PP, drops_beyond  # noqa: F401 - also read from here


def remedy_recipes(recipe: str) -> list[str]:
    """The recipes to try against a drop of ``recipe`` (see the module docstring)."""
    from ..quantize.recipe import get_recipe
    base = get_recipe(recipe)
    if "cle" in base.transforms:
        return ["a8w8_pc"] if not base.per_channel else []
    return ["a8w8_pt+cle", "a8w8_pc"] if not base.per_channel else ["a8w8_pc+cle", "a8w8_pt+cle"]


#: the quantized model's findings whose layers an exclusion keeps in float, most specific first
EXCLUSION_CAUSES = ("quantize.channel-range-spread", "quantize.per-tensor-collapse")


def exclusion(model_path: Any, *, target: str = "") -> tuple[str, tuple[str, ...]] | None:
    """What to keep in float against the cause the quantized ``.tflite`` at ``model_path`` names about itself:
    ``(label, node names)`` with ``label`` like ``"excluding DEPTHWISE_CONV_2D #1, CONV_2D #2"`` and the ops'
    output tensor names (what the converter's ``exclude`` takes).  ``quantize.channel-range-spread``: each layer
    and the ops that read its output (its spread activation stays float only when they are float);
    ``quantize.per-tensor-collapse``: each layer.  None when the file names no layer (or is not a TFLite file)."""
    from pathlib import Path

    from ..errors import WorkbenchError
    from ..findings import findings_for
    from ..models.tflite_graph import read_tflite
    from ..quantize.inspect import inspect_model
    path = Path(str(model_path))
    if path.suffix.lower() != ".tflite" or not path.is_file():
        return None
    try:
        found = findings_for(inspect_model(path), target=target)
        graph = read_tflite(path)
    except (WorkbenchError, ValueError, OSError):
        return None
    for code in EXCLUSION_CAUSES:
        indices = [layer.get("index") for f in found.with_code(code) for layer in f.evidence.get("layers") or ()]
        ops = {i: graph.ops[i] for i in indices if isinstance(i, int) and 0 <= i < len(graph.ops)}
        if not ops:
            continue
        if code == "quantize.channel-range-spread":
            outputs = {t for op in ops.values() for t in op.outputs}
            ops.update({op.index: op for op in graph.ops if outputs & set(op.inputs)})
        chosen = [ops[i] for i in sorted(ops)]
        return ("excluding " + ", ".join(f"{op.type} #{op.index}" for op in chosen),
                tuple(op.name for op in chosen))
    return None


def try_fixes(report: Any, *, source_model: Any, calibration: Any, dataset: Any, recipe: str,
              fp32_model: Any = None, input_spec: Any = None, recipes: list[str] | None = None,
              max_drop_pp: Any = DEFAULT_MAX_DROP_PP, n_bootstrap: int = 200, exclude: bool = True,
              target: str = "") -> Any:
    """``report`` with ``fix_trials``: each remedy recipe quantized from ``source_model`` with ``calibration``
    and measured on the conditions that dropped (no drop: ``report`` unchanged).  A recipe that cannot be
    built is recorded with its error, never raised: the report of the model that ran stays valid.
    ``max_drop_pp``: the threshold in pp, or the run's gate (its limit per condition; None: 1 pp).
    ``exclude``: also ``recipe`` with the layers the dropped model's findings name kept in float
    (:func:`exclusion`, read from the quantized file in ``report.model_paths``)."""
    import warnings

    from ..errors import WorkbenchError
    from ..quantize.engine import quantize
    from .accuracy import FixTrial, compare_accuracy
    bad = drops_beyond(report, max_drop_pp)
    if not bad:
        return report
    conditions = list(dict.fromkeys(r.condition for r in bad))
    fp32 = fp32_model if fp32_model is not None else report.model_paths[report.reference]
    plans: list[tuple[str, str, tuple[str, ...]]] = [
        (name, name, ()) for name in (recipes if recipes is not None else remedy_recipes(recipe))]
    if exclude:
        excluded = exclusion((report.model_paths or {}).get(bad[0].model, ""), target=target)
        if excluded is not None:
            plans.append((f"{recipe} {excluded[0]}", recipe, excluded[1]))
    trials: list[FixTrial] = []
    for label, name, names in plans:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                q = quantize(source_model, name, calibration, dataset=dataset, input_spec=input_spec, exclude=names)
                rep = compare_accuracy(fp32, {label: q.path}, dataset, conditions=conditions, input_spec=input_spec,
                                       n_bootstrap=n_bootstrap, fidelity=False, check_contract=False)
        except (WorkbenchError, ValueError, RuntimeError, OSError) as exc:
            trials += [FixTrial(recipe=label, condition=c, drop_pp=None, drop_ci_low=None, drop_ci_high=None,
                                accuracy=None, error=f"{type(exc).__name__}: {exc}"[:300], exclude=names)
                       for c in conditions]
            continue
        for c in conditions:
            row = rep.row(c, label)
            trials.append(FixTrial(recipe=label, condition=c, drop_pp=row.drop_pp, drop_ci_low=row.drop_ci_low,
                                   drop_ci_high=row.drop_ci_high, accuracy=row.accuracy, exclude=names))
    return dataclasses.replace(report, fix_trials=tuple(trials))
