"""Remedies measured on the spot: when a quantized model drops beyond noise and the threshold on some
condition, quantize it again with the recipes that address the usual causes and measure each on those
conditions (the same test images, the same paired bootstrap).

- per-tensor weights (``a8w8_pt``): per-channel weights (``a8w8_pc``) and cross-layer equalisation
  (``a8w8_pt+cle``);
- per-channel weights (``a8w8_pc``) whose drop remains: the activations are still per tensor; cross-layer
  equalisation (``a8w8_pc+cle``, ``a8w8_pt+cle``) evens out per-channel activation ranges;
- ``exclude``: layers to keep in float (the layer a finding names), as ``<recipe> excluding <op>``.

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


def try_fixes(report: Any, *, source_model: Any, calibration: Any, dataset: Any, recipe: str,
              fp32_model: Any = None, input_spec: Any = None, recipes: list[str] | None = None,
              max_drop_pp: Any = DEFAULT_MAX_DROP_PP, n_bootstrap: int = 200) -> Any:
    """``report`` with ``fix_trials``: each remedy recipe quantized from ``source_model`` with ``calibration``
    and measured on the conditions that dropped (no drop: ``report`` unchanged).  A recipe that cannot be
    built is recorded with its error, never raised: the report of the model that ran stays valid.
    ``max_drop_pp``: the threshold in pp, or the run's gate (its limit per condition; None: 1 pp)."""
    import warnings

    from ..errors import WorkbenchError
    from ..quantize.engine import quantize
    from .accuracy import FixTrial, compare_accuracy
    bad = drops_beyond(report, max_drop_pp)
    if not bad:
        return report
    conditions = list(dict.fromkeys(r.condition for r in bad))
    fp32 = fp32_model if fp32_model is not None else report.model_paths[report.reference]
    trials: list[FixTrial] = []
    for name in recipes if recipes is not None else remedy_recipes(recipe):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                q = quantize(source_model, name, calibration, dataset=dataset, input_spec=input_spec)
                rep = compare_accuracy(fp32, {name: q.path}, dataset, conditions=conditions, input_spec=input_spec,
                                       n_bootstrap=n_bootstrap, fidelity=False, check_contract=False)
        except (WorkbenchError, ValueError, RuntimeError, OSError) as exc:
            trials += [FixTrial(recipe=name, condition=c, drop_pp=None, drop_ci_low=None, drop_ci_high=None,
                                accuracy=None, error=f"{type(exc).__name__}: {exc}"[:300]) for c in conditions]
            continue
        for c in conditions:
            row = rep.row(c, name)
            trials.append(FixTrial(recipe=name, condition=c, drop_pp=row.drop_pp, drop_ci_low=row.drop_ci_low,
                                   drop_ci_high=row.drop_ci_high, accuracy=row.accuracy))
    return dataclasses.replace(report, fix_trials=tuple(trials))
