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

import contextlib
import os
import shlex
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ._results import Result
from ._validation import check_choice, check_positive_int
from .calibration.audit import CoverageAudit
from .calibration.curate import STRATEGIES, CalibrationSet
from .chain import CalibrationOptions, StageChain, resolve_recipe
from .errors import (
    CalibrationError,
    DataError,
    ModelError,
    PlacementError,
    QuantizationError,
    TargetError,
    WorkbenchError,
    WorkbenchWarning,
    missing_file,
)
from .evaluate.accuracy import AccuracyReport
from .placement.analyze import PlacementReport
from .quantize.engine import QuantizedModel
from .quantize.recipe import BACKENDS, CALIBRATORS, RECIPES, TFLITE_CALIBRATORS, QuantRecipe, get_recipe
from .runs import ConditionAccuracy  # the one per-condition accuracy row (run summaries use it too)
from .targets import TARGET_IDS
from .vocab import Recipe

AUTO = "auto"
HEATMAP_VMAX = 10.0     # percent: one colour scale for every redraw (rates above it take the darkest red)
PANEL_WIDTH = "1180px"  # a JupyterLab notebook column at a 1200 px window
FIGURE_WIDTH = 10.5     # inches at 100 dpi: fits PANEL_WIDTH with the colour bar
RECIPE_LABELS = {
    AUTO: "auto: the target's default recipe",
    Recipe.A8W8_PC.value: "a8w8_pc: per-channel weights, 8-bit activations",
    Recipe.A8W8_PT.value: "a8w8_pt: per-tensor weights, 8-bit activations",
    Recipe.A16W8_PC.value: "a16w8_pc: per-channel weights, 16-bit activations",
}
SPLIT = "test"
BACKEND_LABELS = {
    "tflite": "TFLite converter (.tflite: what the NPUs run)",
    "onnx": "ONNX Runtime (QDQ .onnx: CPU only, not placed on an NPU)",
}
CALIBRATOR_LABELS = {
    "minmax": "minmax: the calibration set's min/max",
    "percentile": "percentile: clip at the 99.999th percentile",
    "entropy": "entropy: the range that keeps the most information (KL)",
}
SEVERITIES = (1, 2, 3, 4, 5)
BUILT_IN_SEVERITY = 3      # workbench.data.loaders.DIGITS_SEVERITY: the built-in dataset as built


def calibrators_for(backend: str) -> tuple[str, ...]:
    """The calibrators ``backend`` has: the TFLite converter min/max only, ONNX Runtime all three."""
    return TFLITE_CALIBRATORS if backend == "tflite" else CALIBRATORS


# --------------------------------------------------------------------------- results

@dataclass(frozen=True)
class ExplorerSettings(Result):
    """One position of every knob.  Validated against the dataset by :meth:`Explorer.check`."""

    target: str = "imx8mp"
    recipe: str = AUTO
    calibration_strategy: str = "stratified"
    calibration_size: int = 200
    conditions: tuple[str, ...] = ()
    seed: int = 0
    backend: str = "tflite"
    calibrator: str = "minmax"
    severity: int | None = None      # the built-in dataset's test conditions (1..5); None: a recorded dataset
    bootstrap_seed: int = 0          # the seed of the accuracy CIs' paired bootstrap

    @property
    def effective_recipe(self) -> str:
        """The recipe quantized: ``auto`` is the target's default (imx8mp a8w8_pt, others a8w8_pc)."""
        return str(resolve_recipe(self.recipe, self.target))

    def quant_recipe(self) -> QuantRecipe:
        """The recipe with this setting's backend and calibrator (validated: TFLite calibrates with min/max only)."""
        return get_recipe(self.effective_recipe, backend=self.backend, calibrator=self.calibrator)

    @property
    def model_key(self) -> tuple:
        """The knobs that make the quantized model (target and recipe only through the effective recipe;
        the severity changes the held-out images, not the calibration pool)."""
        return (self.effective_recipe, self.backend, self.calibrator, self.calibration_strategy,
                self.calibration_size, self.seed)

    def label(self) -> str:
        """A short name for the history table and the same-model message."""
        return (f"{self.target} {self.effective_recipe} {self.backend}/{self.calibrator} {self.calibration_strategy} "
                f"n={self.calibration_size} seed={self.seed}"
                + (f" sev={self.severity}" if self.severity is not None else "") + f" ci-seed={self.bootstrap_seed}")

    def cli_commands(self, *, model: str = "reference", dataset: str = "digits-conditions") -> str:
        """The ``workbench`` commands that compute this setting from a shell, one per line."""
        q = shlex.quote
        data = "" if dataset == "digits-conditions" else f" --data {q(dataset)}"
        cal_model = f" --model {q(model)}" if self.calibration_strategy == "coverage" else ""
        stem = f"{self.target}_{self.effective_recipe}" + ("" if self.backend == "tflite" else f"_{self.calibrator}")
        ext = ".tflite" if self.backend == "tflite" else ".onnx"
        severity = f" --severity {self.severity}" if self.severity not in (None, BUILT_IN_SEVERITY) else ""
        place = (f"workbench placement {stem}{ext} --target {self.target}" if self.backend == "tflite" else
                 f"# no placement on {self.target}: an ONNX QDQ model runs on ONNX Runtime on the CPU only "
                 "(backend tflite gives the .tflite the NPUs take)")
        return "\n".join((
            f"workbench calibrate --strategy {self.calibration_strategy} -n {self.calibration_size} "
            f"--seed {self.seed}{data}{cal_model} -o calibration.json",
            f"workbench quantize {q(model)} --recipe {self.effective_recipe} --backend {self.backend} "
            f"--calibrator {self.calibrator} --calibration calibration.json{data} -o {stem}{ext}",
            f"workbench evaluate {q(model)} {stem}{ext}{data}{severity} --split {SPLIT} "
            f"--conditions {','.join(self.conditions)} --seed {self.bootstrap_seed}",
            place,
        ))

    def summary(self) -> str:
        return (f"{self.effective_recipe} ({self.backend}, {self.calibrator}) on {self.target}, "
                f"{self.calibration_strategy} calibration of {self.calibration_size} (seed {self.seed}), conditions "
                f"{', '.join(self.conditions)}" + (f" at severity {self.severity}" if self.severity is not None else "")
                + f", CI seed {self.bootstrap_seed}")


@dataclass(frozen=True)
class Exploration(Result):
    """Everything one setting of the explorer produced."""

    settings: ExplorerSettings
    model: str
    dataset: str
    dataset_hash: str
    calibration: CalibrationSet
    quantized: QuantizedModel
    accuracy: AccuracyReport
    audit: CoverageAudit
    placement: PlacementReport | None
    placement_error: str = ""
    warnings: tuple[str, ...] = ()
    seconds: dict[str, float] = field(default_factory=dict)
    same_model_as: str = ""   # an earlier setting of the explorer that gave this very model (sha256)

    def findings(self) -> Any:
        """The findings of this setting (calibration, quantized file, audit, accuracy, placement), from its data."""
        from .findings import collect, findings_for
        results = (self.calibration, self.quantized, self.audit, self.accuracy, self.placement)
        return collect(*(findings_for(r, target=self.settings.target) for r in results if r is not None))

    def accuracy_table(self) -> tuple[ConditionAccuracy, ...]:
        """Per condition: sample count, FP32 and INT8 accuracy, drop in percentage points."""
        return accuracy_rows(self.accuracy, self.settings.effective_recipe)

    def summary(self) -> str:
        rows = self.accuracy_table()
        worst = max(rows, key=lambda r: r.drop_pp or 0.0) if rows else None
        drop = _drop_phrase(worst) if worst else "no accuracy rows"
        p = self.placement
        where = (f"{p.npu_ops}/{len(p.ops)} ops on the NPU, {p.n_cpu_islands} CPU island(s)" if p is not None
                 else f"no placement on {self.settings.target}")
        return (f"{self.settings.effective_recipe} on {self.settings.target} with {self.calibration.id}: {drop}; "
                f"{len(self.audit.at_risk())} clipping layer/condition pair(s); {where}; "
                f"model sha256 {self.quantized.sha256[:12]}" + (" (cache hit)" if self.quantized.cache_hit else ""))

    # -- pictures -------------------------------------------------------------------------
    def plot_accuracy(self, ax: Any = None) -> Any:
        """Bars: FP32 and INT8 top-1 accuracy per condition with confidence whiskers."""
        return self.accuracy.plot(ax=ax)

    def figure(self) -> Any:
        """Accuracy bars, clipping heatmap and placement strip stacked (one column, ~1050 px wide)."""
        import matplotlib.pyplot as plt
        strip = self.placement is not None
        heat = 0.4 * len(self.audit.layers) + 1.5
        heights = (3.4, heat) + ((1.6,) if strip else ())
        fig = plt.figure(figsize=(FIGURE_WIDTH, sum(heights) + 1.5))
        grid = fig.add_gridspec(len(heights), 1, height_ratios=heights, hspace=0.7)
        self.plot_accuracy(fig.add_subplot(grid[0]))
        self.audit.plot(fig.add_subplot(grid[1]), vmax=HEATMAP_VMAX)
        if self.placement is not None:
            plot_strip(self.placement, fig.add_subplot(grid[2]))
        return fig

    def _repr_html_(self) -> str:
        import matplotlib.pyplot as plt

        from . import display
        from .findings import findings_html
        fig = self.figure()
        picture = display.figure_html(fig, alt="exploration")
        plt.close(fig)
        return (display.heading("Exploration") + display.paragraph(self.summary())
                + findings_html(self.findings(), title=f"Findings on {self.settings.target}")
                + (display.alert(self.placement_error) if self.placement_error else "")
                + "".join(display.paragraph(f"warning: {w}") for w in self.warnings) + picture
                + accuracy_html(self) + placement_html(self) + settings_html(self))


# --------------------------------------------------------------------------- the widget

@dataclass
class _Run:
    """What one compute collects on the way: seconds per step and warnings."""

    seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class Explorer:
    """Widgets, the compute path behind them, and the panels they redraw.

    Attributes: ``target``, ``recipe``, ``calibration_strategy`` (ToggleButtons/Dropdown),
    ``calibration_size`` (IntSlider), ``conditions`` (SelectMultiple), ``status``,
    ``accuracy_panel``, ``audit_panel``, ``placement_panel`` (HTML), ``widget`` (the box
    to display), ``result`` (the last :class:`Exploration`), ``error`` (the last error
    an update raised, shown in ``status``).
    """

    def __init__(self, model: Any, dataset: Any, settings: ExplorerSettings, *, auto_update: bool = True,
                 debounce: float = 0.3) -> None:
        import ipywidgets as w
        self.model = model
        self.dataset = dataset
        self.keras_path = _keras_path(model)
        self.pool_size = len(dataset.select(split="calibration"))
        self.test_conditions = dataset.select(split=SPLIT).conditions
        from .data.loaders import BUILTIN
        self.graded = dataset.name in BUILTIN      # synthetic conditions with a severity (recorded ones have none)
        self._datasets: dict[int, Any] = {}        # the dataset at each severity shown (built once each)
        self._syncing = 0
        settings = self.check(settings)
        self.auto_update = auto_update
        self.debounce = float(debounce)
        self.result: Exploration | None = None
        self.error: WorkbenchError | None = None
        self.updates = 0
        self.history: list[HistoryEntry] = []
        self.baseline: HistoryEntry | None = None
        self.tool_output = ""          # converter/absl text the last update captured (kept out of the cell)
        self._held = 0
        self._pending = False
        self._timer: Any = None
        self._memo: dict[tuple, Any] = {}

        self.target = w.ToggleButtons(options=TARGET_IDS, value=settings.target, description="target",
                                      tooltips=[_target_name(t) for t in TARGET_IDS])
        recipes = (AUTO, *RECIPES)
        self.recipe = w.Dropdown(options=[(_recipe_label(r), r) for r in recipes], value=settings.recipe,
                                 description="recipe", layout=w.Layout(width="460px"))
        self.calibration_strategy = w.ToggleButtons(options=STRATEGIES, value=settings.calibration_strategy,
                                                    description="calibration")
        self.calibration_size = w.IntSlider(value=settings.calibration_size, min=1, max=self.pool_size, step=1,
                                            description="samples", continuous_update=False)
        self.seed_widget = w.BoundedIntText(value=settings.seed, min=0, max=2**31 - 1, description="seed",
                                            tooltip="the calibration draw's seed", layout=w.Layout(width="180px"))
        self.backend = w.ToggleButtons(options=BACKENDS, value=settings.backend, description="backend",
                                       tooltips=[BACKEND_LABELS[b] for b in BACKENDS])
        self.calibrator = w.Dropdown(options=_calibrator_options(settings.backend), value=settings.calibrator,
                                     description="calibrator", layout=w.Layout(width="460px"))
        self.severity = w.ToggleButtons(options=SEVERITIES,
                                        value=settings.severity if settings.severity is not None else BUILT_IN_SEVERITY,
                                        description="severity", style={"button_width": "42px"},
                                        tooltips=[f"test conditions at severity {v} (1 mild .. 5 harsh; built at "
                                                  f"{BUILT_IN_SEVERITY})" for v in SEVERITIES],
                                        layout=w.Layout(display=None if self.graded else "none"))
        self.bootstrap_seed = w.BoundedIntText(value=settings.bootstrap_seed, min=0, max=2**31 - 1,
                                               description="CI seed", tooltip="the accuracy CIs' bootstrap seed",
                                               layout=w.Layout(width="180px"))
        self.conditions = w.SelectMultiple(options=self.test_conditions, value=settings.conditions,
                                           description="conditions", rows=min(len(self.test_conditions), 6))
        self.pin = w.Button(description="pin as baseline", tooltip="compare every later setting with this one",
                            icon="thumb-tack")
        self.pin.on_click(lambda _: self.pin_baseline())
        self.cli = w.Textarea(description="CLI", disabled=False, rows=4,
                              layout=w.Layout(width="99%"),     # 100% plus the widget's margin scrolls sideways
                              tooltip="the same setting from a shell: select all and copy")
        self.status = w.HTML()
        self.message = w.HTML()
        self.findings_panel = w.HTML()
        self.accuracy_panel = w.HTML()
        self.audit_panel = w.HTML()
        self.placement_panel = w.HTML()
        self.history_panel = w.HTML()
        self.backend.observe(self._on_backend, names="value")    # before the update: the calibrator follows
        for control in self.controls:
            control.observe(self._on_change, names="value")
        panels = (self.findings_panel, self.accuracy_panel, self.audit_panel, self.placement_panel)
        for panel in panels:
            panel.add_class("wb-panel")
        column = w.Layout(max_width=PANEL_WIDTH, overflow="hidden")
        self.widget = w.VBox([
            w.HTML(STYLE),
            # rows wrap in a narrow column (JupyterLab at 1200 px with its file browser open: ~750 px)
            w.HBox([w.VBox([self.target, self.recipe, self.backend, self.calibrator, self.calibration_strategy,
                            self.calibration_size, self.severity,
                            w.HBox([self.seed_widget, self.bootstrap_seed, self.pin], layout=_wrap())]),
                    self.conditions], layout=_wrap()),
            self.status,
            self.message,
            self.findings_panel,
            self.accuracy_panel,
            self.audit_panel,
            self.placement_panel,
            self.history_panel,
            self.cli,
        ], layout=column)
        self.widget.add_class("wb-explorer")
        self.cli.value = settings.cli_commands(model=self._cli_model(), dataset=self.dataset.name)

    # -- settings ---------------------------------------------------------------------------
    @property
    def controls(self) -> tuple[Any, ...]:
        return (self.target, self.recipe, self.backend, self.calibrator, self.calibration_strategy,
                self.calibration_size, self.seed_widget, self.bootstrap_seed, self.conditions) \
            + ((self.severity,) if self.graded else ())

    @property
    def settings(self) -> ExplorerSettings:
        """The settings the widgets show now."""
        return ExplorerSettings(target=self.target.value, recipe=self.recipe.value,
                                calibration_strategy=self.calibration_strategy.value,
                                calibration_size=int(self.calibration_size.value),
                                conditions=tuple(self.conditions.value), seed=int(self.seed_widget.value),
                                backend=self.backend.value, calibrator=self.calibrator.value,
                                severity=int(self.severity.value) if self.graded else None,
                                bootstrap_seed=int(self.bootstrap_seed.value))

    @property
    def seed(self) -> int:
        return int(self.seed_widget.value)

    @seed.setter
    def seed(self, value: int) -> None:
        self.seed_widget.value = value

    def check(self, settings: ExplorerSettings) -> ExplorerSettings:
        """Validate ``settings`` against the targets, recipes and this dataset."""
        check_choice("target", settings.target, TARGET_IDS, error=TargetError)
        check_choice("recipe", settings.recipe, (AUTO, *RECIPES), error=QuantizationError)
        check_choice("calibration_strategy", settings.calibration_strategy, STRATEGIES, error=CalibrationError)
        check_positive_int("calibration_size", settings.calibration_size, error=CalibrationError)
        if settings.calibration_size > self.pool_size:
            raise CalibrationError(
                f"`calibration_size` must be at most {self.pool_size}, the size of the calibration pool of "
                f"dataset {self.dataset.name!r}. Got {settings.calibration_size} instead.")
        if isinstance(settings.seed, bool) or not isinstance(settings.seed, int):
            raise CalibrationError(f"`seed` must be an integer. Got {settings.seed!r} instead.")
        if isinstance(settings.bootstrap_seed, bool) or not isinstance(settings.bootstrap_seed, int):
            raise DataError(f"`bootstrap_seed` must be an integer. Got {settings.bootstrap_seed!r} instead.")
        check_choice("backend", settings.backend, BACKENDS, error=QuantizationError)
        check_choice("calibrator", settings.calibrator, CALIBRATORS, error=QuantizationError)
        settings.quant_recipe()          # a16w8 with the ONNX Runtime backend: refused, saying why
        severity = settings.severity
        if not self.graded:
            if severity not in (None, BUILT_IN_SEVERITY):
                raise DataError(f"`severity` grades the synthetic conditions of the built-in datasets; dataset "
                                f"{self.dataset.name!r} holds recorded images, whose conditions have no severity. "
                                "Leave the severity out.")
            settings = replace(settings, severity=None)
        else:
            settings = replace(settings, severity=BUILT_IN_SEVERITY if severity is None else severity)
            check_choice("severity", settings.severity, SEVERITIES, error=DataError)
        conditions = (settings.conditions,) if isinstance(settings.conditions, str) else tuple(settings.conditions)
        if not conditions:
            raise DataError(f"no deployment condition selected; select at least one of "
                            f"{', '.join(map(repr, self.test_conditions))}.")
        for c in conditions:
            check_choice("conditions", c, self.test_conditions, error=DataError)
        return replace(settings, conditions=conditions)

    @contextlib.contextmanager
    def hold(self) -> Iterator[Explorer]:
        """Change several widgets with one update at the end (``with ex.hold(): ...``)."""
        self._held += 1
        try:
            yield self
        finally:
            self._held -= 1
        if self._held == 0 and self._pending:
            self._pending = False
            self._observed_update()

    # -- compute ---------------------------------------------------------------------------
    def compute(self, settings: ExplorerSettings | None = None) -> Exploration:
        """Run calibration, quantization, audit, accuracy and placement for ``settings``.

        Plain data in, plain data out: no widget is read or written.  ``settings`` defaults
        to what the widgets show.
        """
        s = self.check(settings if settings is not None else self.settings)
        captured = _Captured()
        try:
            with _captured_output() as captured:
                return self._compute(s)
        finally:
            self.tool_output = captured.text   # filled when the capture ends

    def _compute(self, s: ExplorerSettings) -> Exploration:
        run = _Run()
        calibration = self._step(run, "calibration", ("calibration", s.calibration_strategy, s.calibration_size,
                                                      s.seed, s.severity), lambda: self._calibration(s))
        quantized = self._step(run, "quantize", None, lambda: self._quantize(s, calibration))
        bits = quantized.recipe.activation_bits
        audit = self._step(run, "audit", ("audit", calibration.hash, s.conditions, bits),
                           lambda: self._audit(s, calibration, bits))
        accuracy = self._step(run, "accuracy", ("accuracy", quantized.sha256, s.effective_recipe, s.conditions,
                                                s.severity, s.bootstrap_seed), lambda: self._accuracy(s, quantized))
        placement, placement_error = None, ""
        try:
            placement = self._step(run, "placement", ("placement", quantized.sha256, s.target),
                                   lambda: self._placement(s, quantized))
        except (TargetError, PlacementError, ModelError) as exc:
            # The target cannot take this model (a16w8 on an INT8-only NPU; an ONNX QDQ model, which runs
            # on ONNX Runtime on the CPU only): the accuracy and the audit still stand, so the reason
            # becomes part of the result instead of hiding them.
            placement_error = f"placement on {s.target}: {exc}"
        # a knob that makes the model moved, yet the model is byte-identical to an earlier one
        same = next((h.settings.label() for h in self.history
                     if h.sha256 == quantized.sha256 and h.settings.model_key != s.model_key), "")
        return Exploration(settings=s, model=self.keras_path, dataset=self.dataset.name,
                           dataset_hash=self.data(s).hash, calibration=calibration, quantized=quantized,
                           accuracy=accuracy, audit=audit, placement=placement, placement_error=placement_error,
                           warnings=tuple(dict.fromkeys(run.warnings)), seconds=run.seconds, same_model_as=same)

    def update(self) -> Exploration:
        """Compute the widgets' settings and redraw the panels.  Errors propagate (and show in ``status``).

        While it runs the controls are disabled and the panels marked stale (a busy overlay); the
        warnings a step raises are shown in ``status`` rather than printed into the cell, and tool
        output (converter, absl) is captured into ``tool_output``.
        """
        from . import display
        self._busy(True)
        self.status.value = display.paragraph(f"computing {self.settings.summary()} ...")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", WorkbenchWarning)   # listed in the status line instead
                result = self.compute()
        except WorkbenchError as exc:
            self.error = exc
            self.status.value = error_html(exc)    # panels stay marked stale: they show the previous setting
            self._busy(False, stale=True)
            raise
        self.error = None
        self.result = result
        self.updates += 1
        self._remember(result)
        self._render(result)
        self._busy(False)
        return result

    def pin_baseline(self) -> HistoryEntry | None:
        """Compare every later setting with the current one (the first view is the baseline until then)."""
        if self.history:
            self.baseline = self.history[-1]
            self.history_panel.value = history_html(self.history, self.baseline)
        return self.baseline

    def _remember(self, result: Exploration) -> None:
        entry = HistoryEntry.of(result)
        if not self.history or self.history[-1].settings != entry.settings:
            self.history.append(entry)
        if self.baseline is None:
            self.baseline = entry

    def _busy(self, busy: bool, *, stale: bool = False) -> None:
        for control in (*self.controls, self.pin):
            control.disabled = busy
        for panel in (self.findings_panel, self.accuracy_panel, self.audit_panel, self.placement_panel):
            if busy or stale:
                panel.add_class("wb-stale")
            else:
                panel.remove_class("wb-stale")

    def _on_backend(self, change: dict[str, Any]) -> None:
        """The calibrator offers what the new backend has (TFLite: min/max only); one update follows."""
        kept = self.calibrator.value
        self._syncing += 1
        try:
            self.calibrator.options = _calibrator_options(change["new"])
            self.calibrator.value = kept if kept in calibrators_for(change["new"]) else "minmax"
        finally:
            self._syncing -= 1

    def _on_change(self, change: dict[str, Any]) -> None:
        if self._syncing:
            return
        self.cli.value = self._cli_text()
        if not self.auto_update:
            return
        if self._held:
            self._pending = True
            return
        loop = _running_loop()
        if self.debounce > 0 and loop is not None:
            # In a kernel: wait until the knobs rest, so a burst of changes computes once.
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_later(self.debounce, self._observed_update)
            return
        self._observed_update()

    def _observed_update(self) -> None:
        # A widget callback has nobody to raise to: the error is kept in `error` and shown in `status`.
        self._timer = None
        with contextlib.suppress(WorkbenchError):
            self.update()

    def _cli_model(self) -> str:
        from .models.reference import ReferenceModel
        return "reference" if isinstance(self.model, ReferenceModel) else self.keras_path

    def _cli_text(self) -> str:
        try:
            s = self.check(self.settings)
        except WorkbenchError as exc:
            return f"# no command: {exc}"
        return s.cli_commands(model=self._cli_model(), dataset=self.dataset.name)

    # -- steps ------------------------------------------------------------------------------
    def _step(self, run: _Run, name: str, key: tuple | None, fn: Any) -> Any:
        """Run one step (or take it from the in-memory memo under ``key``), timing it and keeping
        the warnings it raised: they are re-issued and listed in the result every time."""
        start = time.perf_counter()
        if key is not None and key in self._memo:
            value, caught = self._memo[key]
        else:
            with warnings.catch_warnings(record=True) as records:
                warnings.simplefilter("always")
                value = fn()
            caught = tuple(records)
            if key is not None:
                self._memo[key] = (value, caught)
        for record in caught:
            if issubclass(record.category, WorkbenchWarning):
                run.warnings.append(f"{name}: {record.message}")
            warnings.warn_explicit(record.message, record.category, record.filename, record.lineno)
        run.seconds[name] = round(time.perf_counter() - start, 3)
        return value

    def chain(self, settings: ExplorerSettings | None = None) -> StageChain:
        """The calibrate -> quantize -> place chain of ``settings`` (default: what the widgets show)."""
        s = settings if settings is not None else self.settings
        return StageChain(self.keras_path, self.data(s), target=s.target, recipe=s.quant_recipe())

    def data(self, settings: ExplorerSettings | None = None) -> Any:
        """The dataset ``settings`` measures on: the built-in one with its test conditions at the setting's
        severity (built once per severity and kept; the calibration pool is the same at every severity)."""
        s = self.check(settings if settings is not None else self.settings)
        if s.severity in (None, BUILT_IN_SEVERITY):
            return self.dataset
        if s.severity not in self._datasets:
            from .data.loaders import load_dataset
            graded = load_dataset(self.dataset.name, severity=s.severity)
            pool = "calibration"
            if graded.select(split=pool).hash != self.dataset.select(split=pool).hash:
                raise DataError(f"dataset {self.dataset.name!r} given to the explorer is not the built-in one as "
                                f"load_dataset({self.dataset.name!r}) builds it (another seed?); the severity knob "
                                "rebuilds that one. Pass the dataset by name.")
            self._datasets[s.severity] = graded
        return self._datasets[s.severity]

    def _calibration(self, s: ExplorerSettings) -> CalibrationSet:
        return self.chain(s).calibrate(CalibrationOptions(n=s.calibration_size, strategy=s.calibration_strategy,
                                                          seed=s.seed))

    def _quantize(self, s: ExplorerSettings, calibration: CalibrationSet) -> QuantizedModel:
        # not memoized here: the quantize cache is content-addressed and reports its own hits
        return self.chain(s).quantize(calibration)

    def _audit(self, s: ExplorerSettings, calibration: CalibrationSet, bits: int) -> CoverageAudit:
        from .calibration.audit import audit_coverage
        return audit_coverage(self.keras_path, calibration, dataset=self.data(s), split=SPLIT,
                              conditions=s.conditions, activation_bits=bits)

    def _accuracy(self, s: ExplorerSettings, quantized: QuantizedModel) -> AccuracyReport:
        from .evaluate.accuracy import compare_accuracy
        return compare_accuracy(self.keras_path, [quantized.path], self.data(s), conditions=list(s.conditions),
                                split=SPLIT, names=[s.effective_recipe], seed=s.bootstrap_seed)

    def _placement(self, s: ExplorerSettings, quantized: QuantizedModel) -> PlacementReport:
        return self.chain(s).place(quantized)

    # -- drawing ---------------------------------------------------------------------------
    def _render(self, result: Exploration) -> None:
        import matplotlib.pyplot as plt

        from . import display
        from .findings import findings_html
        self.status.value = (display.paragraph(result.summary())
                             + "".join(display.paragraph(f"warning: {w}") for w in result.warnings))
        self.message.value = (display.alert(f"same activation ranges as {result.same_model_as}: identical model "
                                            f"(sha256 {result.quantized.sha256[:12]}); this knob changed nothing")
                              if result.same_model_as else "")
        self.findings_panel.value = findings_html(result.findings(), title=f"Findings on {result.settings.target}")
        fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.4))
        result.plot_accuracy(ax)
        self.accuracy_panel.value = display.figure_html(fig, alt="accuracy per condition") + accuracy_html(result)
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 0.4 * len(result.audit.layers) + 1.8))
        result.audit.plot(ax, vmax=HEATMAP_VMAX)
        self.audit_panel.value = display.figure_html(fig, alt="clipping heatmap") + audit_note(result)
        plt.close(fig)
        if result.placement is not None:
            fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 1.9))
            plot_strip(result.placement, ax)
            self.placement_panel.value = display.figure_html(fig, alt="placement strip") + placement_html(result)
            plt.close(fig)
        else:
            self.placement_panel.value = display.alert(result.placement_error)
        self.history_panel.value = history_html(self.history, self.baseline)
        self.cli.value = result.settings.cli_commands(model=self._cli_model(), dataset=self.dataset.name)

    def _ipython_display_(self) -> None:
        from IPython.display import display
        display(self.widget)

    def __repr__(self) -> str:
        return f"Explorer({self.settings.summary()}; {self.updates} update(s))"


# --------------------------------------------------------------------------- the verb

def explorer(*, model: Any = "reference", dataset: Any = "digits-conditions", target: str = "imx8mp",
             recipe: str = AUTO, calibration_strategy: str = "stratified", calibration_size: int = 200,
             conditions: Sequence[str] | None = None, seed: int = 0, auto_update: bool = True,
             compute: bool = True, debounce: float = 0.3, backend: str = "tflite", calibrator: str = "minmax",
             severity: int | None = None, bootstrap_seed: int = 0) -> Explorer:
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
    auto_update : recompute when a widget changes (False: call ``update()`` yourself).
    compute : compute the first view now, so the panels are filled when displayed.
    debounce : seconds a knob must rest before a kernel recomputes (a burst of changes computes once).
    """
    from .data.loaders import load_dataset
    data = load_dataset(dataset)
    for split in ("calibration", SPLIT):
        if split not in data.splits:
            raise DataError(f"dataset {data.name!r} has no {split!r} split (splits: {', '.join(data.splits)}); "
                            "the explorer calibrates from 'calibration' and measures on 'test'.")
    if isinstance(model, str) and model == "reference":
        from .models.reference import reference_model
        model = reference_model(dataset=data)
    if isinstance(conditions, str):
        conditions = [c.strip() for c in conditions.split(",") if c.strip() and c.strip() != "all"]
    if not conditions:
        conditions = data.select(split=SPLIT).conditions
    settings = ExplorerSettings(target=target, recipe=recipe, calibration_strategy=calibration_strategy,
                                calibration_size=calibration_size, conditions=tuple(conditions), seed=seed,
                                backend=backend, calibrator=calibrator, severity=severity,
                                bootstrap_seed=bootstrap_seed)
    ex = Explorer(model, data, settings, auto_update=auto_update, debounce=debounce)
    if compute:
        ex.update()
    return ex


# --------------------------------------------------------------------------- helpers

def _keras_path(model: Any) -> str:
    path = getattr(model, "keras", model)
    if not isinstance(path, (str, Path)):
        raise ModelError(f"`model` must be 'reference', a ReferenceModel or the path of an FP32 Keras model "
                         f"(.keras/.h5). Got {type(model).__name__} instead.")
    path = Path(path)
    if path.suffix.lower() not in (".keras", ".h5", ".hdf5"):
        raise ModelError(f"{path}: the explorer quantizes and audits an FP32 Keras model (.keras or .h5); got "
                         f"{path.name!r}. Pass the .keras file (reference_model().keras).")
    if not path.is_file():
        raise missing_file("model file", path, "train it first or pass model='reference'", ModelError)
    return str(path)


def _target_name(target_id: str) -> str:
    from .targets import get_target
    return get_target(target_id).name


def accuracy_rows(report: AccuracyReport, name: str) -> tuple[ConditionAccuracy, ...]:
    """FP32/INT8 pairs per condition from a report whose INT8 candidate is called ``name``."""
    return tuple(ConditionAccuracy.from_report(report, cond, name) for cond in report.conditions)


def accuracy_html(result: Exploration) -> str:
    from . import display
    rows = result.accuracy_table()
    conf = result.accuracy.confidence
    styles = [display.BAD_STYLE if r.worse_beyond_noise else "" for r in rows]
    label = display.quantized_label(result.settings.effective_recipe)
    return display.table(("condition", "n", "FP32", label, f"drop pp [{conf:.0%} CI]"),
                         [(r.condition, r.n, f"{r.fp32:.2%}", f"{r.int8:.2%}",
                           display.drop_text(r.drop_pp, r.drop_ci_low, r.drop_ci_high)) for r in rows],
                         row_styles=styles, caption=f"Top-1 accuracy ({SPLIT} split; {display.DROP_CONVENTION}; "
                                                    "red: the drop's CI lies above 0)")


def audit_note(result: Exploration) -> str:
    """What the heatmap's ranges are when the calibrator is not min/max (the audit measures min/max ranges)."""
    from . import display
    s = result.settings
    if s.calibrator == "minmax":
        return ""
    return display.paragraph(f"The heatmap measures clipping against the calibration set's min/max ranges; the "
                             f"{s.calibrator} calibrator of ONNX Runtime may choose narrower ranges, so the "
                             "quantized model clips at least this much.")


def settings_html(result: Exploration) -> str:
    from . import display
    s, q = result.settings, result.quantized
    rows = [("target", s.target), ("recipe", q.recipe.summary()), ("calibration", result.calibration.summary()),
            ("conditions", ", ".join(s.conditions) + (f" at severity {s.severity}" if s.severity is not None else "")
             + f"; CI bootstrap seed {s.bootstrap_seed}"),
            ("model", Path(result.model).name), (f"{display.quantized_label(q.recipe.name)} sha256", q.sha256),
            ("quantization", ("cache hit" if q.cache_hit else "quantized now")
             + (f"; the same model as {result.same_model_as}" if result.same_model_as else "")),
            ("placement", result.placement.summary() if result.placement is not None else result.placement_error),
            ("seconds", ", ".join(f"{k} {v:.2f}" for k, v in result.seconds.items()))]
    return display.table(("", ""), rows, caption="Settings")


def error_html(exc: BaseException) -> str:
    from . import display
    return display.alert(f"{type(exc).__name__}: {exc}")


# --------------------------------------------------------------------------- history, strip, capture

STYLE = ("<style>.wb-stale{opacity:.35;pointer-events:none;transition:opacity .2s}"
         ".wb-explorer img{max-width:100%;height:auto}"
         ".wb-explorer td{overflow-wrap:anywhere}</style>")   # long ids break instead of squeezing other columns


@dataclass(frozen=True)
class HistoryEntry(Result):
    """One setting the explorer computed and what it gave (for the history table and the baseline)."""

    settings: ExplorerSettings
    sha256: str
    drops: tuple[ConditionAccuracy, ...]
    at_risk: int
    placement: str

    @classmethod
    def of(cls, result: Exploration) -> HistoryEntry:
        p = result.placement
        where = f"{p.npu_ops}/{len(p.ops)} NPU" if p is not None else "not placed"
        return cls(settings=result.settings, sha256=result.quantized.sha256, drops=result.accuracy_table(),
                   at_risk=len(result.audit.at_risk()), placement=where)

    @property
    def worst(self) -> ConditionAccuracy | None:
        return max(self.drops, key=lambda r: r.drop_pp or 0.0) if self.drops else None

    def summary(self) -> str:
        worst = self.worst
        return f"{self.settings.label()}: " + (_drop_phrase(worst) if worst else "no accuracy rows")


def history_html(history: Sequence[HistoryEntry], baseline: HistoryEntry | None) -> str:
    """Every setting tried, newest last, with its worst drop and the change against the pinned baseline."""
    from . import display
    if not history:
        return ""
    base = baseline.worst if baseline is not None else None
    rows, styles = [], []
    for i, h in enumerate(history, 1):
        worst = h.worst
        delta = (f"{worst.drop_pp - base.drop_pp:+.2f}" if worst is not None and base is not None
                 and worst.drop_pp is not None and base.drop_pp is not None else "")
        same = next((f"#{j}" for j, e in enumerate(history[:i - 1], 1) if e.sha256 == h.sha256), "")
        rows.append((f"#{i}" + (" (baseline)" if h is baseline else ""), h.settings.label(), h.sha256[:12]
                     + (f" = {same}" if same else ""),
                     f"{worst.drop_pp:+.2f} [{worst.drop_ci_low:+.2f}, {worst.drop_ci_high:+.2f}] "
                     f"({worst.condition})" if worst else "", delta, h.at_risk, h.placement))
        styles.append(display.GOOD_STYLE if h is baseline else "")
    return display.table(("", "setting", "model sha256", "worst drop pp [95% CI]", "vs baseline pp",
                          "clipping at risk", "placement"), rows, row_styles=styles,
                         caption="Settings tried (drop = FP32 - quantized, positive = quantized worse; "
                                 "'= #k': the same model as setting k)")


def plot_strip(report: PlacementReport, ax: Any) -> Any:
    """The placement strip with a legend and each CPU op's index and type under its cell."""
    from matplotlib.patches import Patch

    from .placement.analyze import PLACEMENT_COLORS
    report.plot(ax)
    cpu = [o for o in report.ops if o.placement != "NPU"]
    marked = list(report.ops) if len(report.ops) <= 30 else cpu
    ax.set_xticks([o.index for o in marked], [f"{o.index} {o.type}" for o in marked], rotation=90, fontsize=7)
    ax.set_xlabel("")
    ax.legend(handles=[Patch(color=c, label=f"{k} ({sum(o.placement == k for o in report.ops)})")
                       for k, c in PLACEMENT_COLORS.items()],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    return ax


def placement_html(result: Exploration) -> str:
    """Every op that falls back to the CPU, with the constraints it violates (the strip's why)."""
    from . import display
    p = result.placement
    if p is None:
        return ""
    cpu = [o for o in p.ops if o.placement != "NPU"]
    if not cpu:
        return display.paragraph(f"every op of the model runs on the NPU of {p.target}.")
    rows = [(o.index, o.type, display.short_name(o.name, 40),
             "; ".join(f"{r.constraint}: {r.detail}" for r in o.reasons) or "; ".join(o.notes) or "(no rule named)")
            for o in cpu]
    return display.table(("#", "op", "name", "why it runs on the CPU"), rows,
                         caption=f"CPU fallback on {p.target} ({len(cpu)} of {len(p.ops)} ops)")


def _wrap() -> Any:
    import ipywidgets as w
    return w.Layout(flex_flow="row wrap", max_width="100%")


def _calibrator_options(backend: str) -> list[tuple[str, str]]:
    return [(CALIBRATOR_LABELS[c] + (" (the TFLite converter's only one)" if backend == "tflite" else ""), c)
            for c in calibrators_for(backend)]


def _recipe_label(recipe: str) -> str:
    if recipe != AUTO:
        return RECIPE_LABELS.get(recipe, recipe)
    from .targets import get_target
    defaults = ", ".join(f"{t} {get_target(t).recipe}" for t in TARGET_IDS)
    return f"auto: the target's default ({defaults})"


def _drop_phrase(row: ConditionAccuracy) -> str:
    """The worst drop, saying so when its confidence interval includes zero."""
    if row.drop_pp is None:
        return f"no drop measured ({row.condition}: no quantized accuracy)"
    noise = row.within_noise
    return (f"worst drop {row.drop_pp:+.1f} pp ({row.condition}"
            + (", within noise: its CI includes 0)" if noise else ")"))


def _running_loop() -> Any:
    import asyncio
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


@dataclass
class _Captured:
    text: str = ""


@contextlib.contextmanager
def _captured_output() -> Iterator[_Captured]:
    """Send what tools print (Python and C-level stdout/stderr: the TFLite converter, absl) to a
    buffer instead of the notebook cell; the text is kept for ``Explorer.tool_output``."""
    import sys
    out = _Captured()
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = []
        sinks: tuple[_TextSink, ...] = ()
        try:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            for fd in (1, 2):
                saved.append((fd, os.dup(fd)))
                os.dup2(sink.fileno(), fd)
        except OSError:
            pass
        try:
            sinks = (_TextSink(sink, sys.stdout), _TextSink(sink, sys.stderr))
            with contextlib.redirect_stdout(sinks[0]), contextlib.redirect_stderr(sinks[1]):
                yield out
        finally:
            for text_sink in sinks:
                text_sink.release()
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            out.text = sink.read().decode("utf-8", "replace")


class _TextSink:
    """A text stream writing into a binary file (the Python half of :func:`_captured_output`).

    A logging handler created during the capture (absl's) keeps this object as its stream: after
    the capture it writes to the stream it replaced, and closing it is a no-op."""

    def __init__(self, sink: Any, original: Any) -> None:
        self.sink: Any = sink
        self.original = original

    def release(self) -> None:
        self.sink = None

    def write(self, text: str) -> int:
        if self.sink is None:
            return self.original.write(text)
        self.sink.write(text.encode("utf-8", "replace"))
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            (self.original if self.sink is None else self.sink).flush()

    def close(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True
