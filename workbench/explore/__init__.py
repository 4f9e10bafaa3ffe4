"""The explorer: one model, every knob, and what each knob does to accuracy, clipping and placement.

:func:`explorer` builds an :class:`Explorer`: ipywidgets for the target, the
quantization recipe (per-channel or per-tensor weights, 8- or 16-bit
activations), the calibration strategy and size, and the deployment conditions
shown.  Changing any of them runs the pipeline again and redraws three panels:

- accuracy per condition, FP32 against INT8 (:func:`~workbench.evaluate.accuracy.compare_accuracy`);
- the calibration coverage audit's clipping heatmap (:func:`~workbench.calibration.audit.audit_coverage`);
- the op placement strip on the target (:func:`~workbench.placement.analyze.analyze_placement`).

The widgets only collect settings.  The work is :meth:`Explorer.compute`, a plain
method that takes :class:`ExplorerSettings` and returns an :class:`Exploration`
(a frozen result holding the calibration set, the quantized model, the accuracy
report, the audit and the placement report), so tests and scripts assert on data.
Repeated settings are cheap: quantization and evaluation are content-addressed in
the workbench cache, and the explorer keeps calibration sets, audits, accuracy
reports and placements it has already computed in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import DataError
from ..run_summary import ConditionAccuracy
from .capture import _captured_output
from .compute import ExplorerEngine
from .rendering import STYLE, accuracy_html, history_html, placement_html, plot_strip
from .results import (
    AUTO,
    HEATMAP_VMAX,
    SPLIT,
    Exploration,
    ExplorerSettings,
    HistoryEntry,
    _drop_phrase,
    accuracy_rows,
    calibrators_for,
)
from .widgets import Explorer

__all__ = ["AUTO", "HEATMAP_VMAX", "STYLE", "ConditionAccuracy", "Exploration", "Explorer", "ExplorerEngine",
           "ExplorerSettings", "HistoryEntry", "_captured_output", "_drop_phrase", "accuracy_html", "accuracy_rows",
           "calibrators_for", "explorer", "history_html", "placement_html", "plot_strip"]


def explorer(*, model: Any = "reference", dataset: Any = "digits-conditions", target: str = "imx8mp",
             recipe: str = AUTO, calibration_strategy: str = "stratified", calibration_size: int = 200,
             conditions: Sequence[str] | None = None, seed: int = 0, auto_update: bool = True,
             compute: bool = True, debounce: float = 0.3, backend: str = "tflite", calibrator: str = "minmax",
             severity: int | None = None, bootstrap_seed: int = 0, spec: Any = None) -> Explorer:
    """Build the explorer widgets for ``model`` on ``dataset`` and (by default) compute the first view.

    Parameters
    ----------
    model : ``"reference"`` (the built-in reference CNN, trained or taken from the cache), a
        ``ReferenceModel``, or the path of an FP32 Keras model (``.keras``/``.h5``).
    dataset : a ``Dataset`` or a name/path ``load_dataset`` takes; needs ``calibration``
        and ``test`` splits.
    target : ``"imx8mp"``, ``"imx93"`` or ``"imx95"``.
    recipe : ``"auto"`` (the target's default: ``a8w8_pt`` on imx8mp, ``a8w8_pc`` elsewhere, as the
        batch uses), ``"a8w8_pc"``, ``"a8w8_pt"`` or ``"a16w8_pc"``.
    calibration_strategy : ``"random"``, ``"stratified"`` or ``"coverage"``.
    calibration_size : calibration samples (at most the calibration pool's size).
    conditions : deployment conditions shown, a list or a comma string (None, "" or "all":
        every condition of the ``test`` split).
    seed : the calibration draw's seed.
    backend : ``"tflite"`` (the TFLite converter: the ``.tflite`` the NPUs run) or ``"onnx"`` (ONNX
        Runtime: a QDQ ``.onnx`` that runs on the CPU only, so it is not placed on a target).
    calibrator : ``"minmax"`` (the TFLite converter's only calibrator); with ``backend="onnx"`` also
        ``"percentile"`` and ``"entropy"``.
    severity : 1 (mild) .. 5 (harsh): the built-in dataset's test conditions rendered at that severity
        (None: as built, 3; the calibration pool is the same at every severity).  Recorded datasets
        have no severity.
    bootstrap_seed : the seed of the paired bootstrap behind the accuracy CIs.
    spec : a :class:`~workbench.pipeline.RunSpec` (``resolve=False`` is enough) whose stage options and input
        contract every view starts from: the widgets set the model, dataset, target, recipe, calibration
        strategy, size and seed, conditions and bootstrap seed; any other option is taken as given.
    auto_update : recompute when a widget changes (False: call ``update()`` yourself).
    compute : compute the first view: now, or in a Jupyter kernel when the explorer is displayed (the
        widgets appear at once and the status line shows each step and the time it has taken).
    debounce : seconds a knob must rest before a kernel recomputes (a burst of changes computes once).
    """
    from ..data.loaders import load_dataset
    note = _progress_note("explorer: loading the dataset and the model (the widgets follow) ...")
    data = load_dataset(dataset)
    for split in ("calibration", SPLIT):
        if split not in data.splits:
            raise DataError(f"dataset {data.name!r} has no {split!r} split (splits: {', '.join(data.splits)}); "
                            "the explorer calibrates from 'calibration' and measures on 'test'.")
    from ..models.builtin import builtin_model, is_builtin
    if is_builtin(model):
        model = builtin_model(model, data)
    if isinstance(conditions, str):
        conditions = [c.strip() for c in conditions.split(",") if c.strip() and c.strip() != "all"]
    if not conditions:
        conditions = data.select(split=SPLIT).conditions
    settings = ExplorerSettings(target=target, recipe=recipe, calibration_strategy=calibration_strategy,
                                calibration_size=calibration_size, conditions=tuple(conditions), seed=seed,
                                backend=backend, calibrator=calibrator, severity=severity,
                                bootstrap_seed=bootstrap_seed)
    ex = Explorer(model, data, settings, auto_update=auto_update, debounce=debounce)
    ex.template = spec
    if note is not None:
        note.update(_html(""))             # the widgets take over from here
    if compute and _in_kernel():
        ex.first_view_pending = True       # computed when displayed, with its progress on screen
    elif compute:
        ex.update()
    return ex


def _html(text: str) -> Any:
    from IPython.display import HTML
    return HTML(text)


def _progress_note(text: str) -> Any:
    """In a kernel, a line shown at once (the dataset and the model load before the widgets exist);
    its display handle, or None outside a kernel."""
    if not _in_kernel():
        return None
    from IPython.display import display
    return display(_html(f'<p style="font-size:12px">{text}</p>'), display_id=True)


def _in_kernel() -> bool:
    """True in a Jupyter kernel (where showing the widgets first lets the first view report its progress)."""
    import sys
    if "ipykernel" not in sys.modules:
        return False
    from IPython import get_ipython
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None

