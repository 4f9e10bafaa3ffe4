"""The explorer's widgets: knobs that collect a setting, panels that show what it gave."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

from ..calibration.curate import STRATEGIES
from ..errors import WorkbenchError, WorkbenchWarning
from ..quantize.recipe import BACKENDS, RECIPES
from ..targets import TARGET_IDS
from .capture import _captured_output, _running_loop
from .compute import ExplorerEngine
from .rendering import STYLE, cli_html, error_html, history_html, render_panels
from .results import (
    AUTO,
    BACKEND_LABELS,
    BUILT_IN_SEVERITY,
    CALIBRATOR_LABELS,
    PANEL_WIDTH,
    RECIPE_LABELS,
    SEVERITIES,
    SPLIT,
    Exploration,
    ExplorerSettings,
    HistoryEntry,
    calibrators_for,
)


class Explorer(ExplorerEngine):
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
        super().__init__(model, dataset)
        self._syncing = 0
        settings = self.check(settings)
        self.auto_update = auto_update
        self.debounce = float(debounce)
        self.result: Exploration | None = None
        self.error: WorkbenchError | None = None
        self.updates = 0
        self.baseline: HistoryEntry | None = None
        self._held = 0
        self._pending = False
        self._panel_cache: dict[tuple, tuple[str, str, str, str]] = {}
        self._updating = False
        self.first_view_pending = False
        self._timer: Any = None

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
        self.status = w.HTML(value="<p style=\"font-size:12px\">starting: the first view computes when shown</p>")
        self.cli_copy = w.HTML()
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
            self.cli_copy,
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

    def update(self) -> Exploration:
        """Compute the widgets' settings and redraw the panels.  Errors propagate (and show in ``status``).

        While it runs the controls are disabled and the panels marked stale (a busy overlay); the
        warnings a step raises are shown in ``status`` rather than printed into the cell, and tool
        output (converter, absl) is captured into ``tool_output``.
        """
        from .. import display
        self._busy(True)
        self.status.value = display.paragraph(f"computing {self.settings.summary()} ...")
        self._updating = True                     # on_step writes the status line while this runs
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", WorkbenchWarning)   # listed in the status line instead
                result = self.compute()
        except WorkbenchError as exc:
            self.error = exc
            self.status.value = error_html(exc)    # panels stay marked stale: they show the previous setting
            self._busy(False, stale=True)
            raise
        finally:
            self._updating = False
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
        from ..models.builtin import is_builtin
        name = getattr(self.model, "name", None)
        return str(name) if is_builtin(name) else self.keras_path

    def _cli_text(self) -> str:
        try:
            s = self.check(self.settings)
        except WorkbenchError as exc:
            return f"# no command: {exc}"
        return s.cli_commands(model=self._cli_model(), dataset=self.dataset.name)

    # -- drawing ---------------------------------------------------------------------------
    def _render(self, result: Exploration) -> None:
        from .. import display
        self.status.value = (display.paragraph(result.summary() + self._timing_text(result))
                             + "".join(display.paragraph(f"warning: {w}") for w in result.warnings))
        self.message.value = (display.alert(f"same activation ranges as {result.same_model_as}: identical model "
                                            f"(sha256 {result.quantized.sha256[:12]}); this knob changed nothing")
                              if result.same_model_as else "")
        base = self.baseline
        key = (result.settings, result.quantized.sha256, base.settings if base is not None else None)
        panels = self._panel_cache.get(key)
        if panels is None:                    # a seen setting redraws from here, without matplotlib
            fp32 = getattr(self.model, "tflite", None)      # the reference model's FP32 .tflite, if any
            samples = self.data(result.settings).select(split=SPLIT).x if fp32 else None
            with _captured_output():           # the interpreter's "Created TensorFlow Lite XNNPACK delegate" line
                panels = render_panels(result, base, fp32_tflite=str(fp32) if fp32 else None, samples=samples)
            self._panel_cache[key] = panels
        (self.findings_panel.value, self.accuracy_panel.value, self.audit_panel.value,
         self.placement_panel.value) = panels
        self.history_panel.value = history_html(self.history, self.baseline)
        text = result.settings.cli_commands(model=self._cli_model(), dataset=self.dataset.name)
        self.cli.value = text
        self.cli_copy.value = cli_html(text, result.quantized.sha256)

    def _timing_text(self, result: Exploration) -> str:
        total = sum(result.seconds.values())
        return f" ({total:.1f} s: " + ", ".join(f"{k} {v:.1f}" for k, v in result.seconds.items()) + ")"

    def on_step(self, name: str, number: int, started: float) -> None:
        """The status line while a setting computes: which step of how many, and the time since the start."""
        import time

        from .. import display
        if not self._updating:             # compute() alone writes no widget
            return
        if number == 1:
            self._compute_started = started
        elapsed = time.perf_counter() - getattr(self, "_compute_started", started)
        self.status.value = display.paragraph(f"computing: step {number}/{len(self.STEPS)} {name} ... "
                                              f"{elapsed:.1f} s so far")

    def _ipython_display_(self) -> None:
        from IPython.display import display
        display(self.widget)
        if self.first_view_pending:           # shown first, computed next: the status line says what runs
            self.first_view_pending = False
            with contextlib.suppress(WorkbenchError):
                self.update()

    def __repr__(self) -> str:
        return f"Explorer({self.settings.summary()}; {self.updates} update(s))"


# --------------------------------------------------------------------------- the verb


def _target_name(target_id: str) -> str:
    from ..targets import get_target
    return get_target(target_id).name



def _wrap() -> Any:
    import ipywidgets as w
    return w.Layout(flex_flow="row wrap", max_width="100%")


def _calibrator_options(backend: str) -> list[tuple[str, str]]:
    return [(CALIBRATOR_LABELS[c] + (" (the TFLite converter's only one)" if backend == "tflite" else ""), c)
            for c in calibrators_for(backend)]


def _recipe_label(recipe: str) -> str:
    if recipe != AUTO:
        return RECIPE_LABELS.get(recipe, recipe)
    from ..targets import get_target
    defaults = ", ".join(f"{t} {get_target(t).recipe}" for t in TARGET_IDS)
    return f"auto: the target's default ({defaults})"

