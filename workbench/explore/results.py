"""The explorer's results: one setting of every knob (:class:`ExplorerSettings`), what it produced
(:class:`Exploration`) and the history of settings tried (:class:`HistoryEntry`)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from .._results import Result
from ..calibration.audit import CoverageAudit
from ..calibration.curate import CalibrationSet
from ..chain import resolve_recipe
from ..evaluate.accuracy import AccuracyReport
from ..placement.analyze import PlacementReport
from ..quantize.engine import QuantizedModel
from ..quantize.recipe import CALIBRATORS, TFLITE_CALIBRATORS, QuantRecipe, get_recipe
from ..run_summary import ConditionAccuracy
from ..vocab import Recipe
from .constants import HEATMAP_VMAX, SPLIT  # noqa: F401 - also read from here  # the one per-condition accuracy row (run summaries use it too)

AUTO = "auto"
PANEL_WIDTH = "1180px"  # a JupyterLab notebook column at a 1200 px window
FIGURE_WIDTH = 10.5     # inches at 100 dpi: fits PANEL_WIDTH with the colour bar
RECIPE_LABELS = {
    AUTO: "auto: the target's default recipe",
    Recipe.A8W8_PC.value: "a8w8_pc: per-channel weights, 8-bit activations",
    Recipe.A8W8_PT.value: "a8w8_pt: per-tensor weights, 8-bit activations",
    Recipe.A16W8_PC.value: "a16w8_pc: per-channel weights, 16-bit activations",
}
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
    """The calibrators ``backend`` has: TFLite min/max and percentile, ONNX Runtime min/max, percentile, entropy."""
    names = TFLITE_CALIBRATORS if backend == "tflite" else CALIBRATORS
    # the explorer quantizes a Keras or ONNX model, whose min/max is already global: minmax-global is minmax
    return tuple(c for c in names if c != "minmax-global")


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
        """The recipe with this setting's backend and calibrator (validated: TFLite has no entropy calibrator)."""
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

    def tokens(self) -> dict[str, str]:
        """The knobs of :meth:`label` one by one (``{"target": "imx95", "seed": "seed=1", ...}``)."""
        return {"target": self.target, "recipe": self.effective_recipe, "backend": f"{self.backend}/{self.calibrator}",
                "strategy": self.calibration_strategy, "size": f"n={self.calibration_size}",
                "seed": f"seed={self.seed}",
                "conditions": "conditions=" + ",".join(self.conditions),
                "severity": "" if self.severity is None else f"sev={self.severity}",
                "bootstrap_seed": f"ci-seed={self.bootstrap_seed}"}

    def short_label(self, against: ExplorerSettings | None = None) -> str:
        """The compact history's name: only the knobs that differ from ``against`` (the pinned baseline);
        the baseline itself (or no baseline) by target and recipe."""
        mine = self.tokens()
        if against is None or against is self:
            return f"{mine['target']} {mine['recipe']}"
        theirs = against.tokens()
        changed = [v for k, v in mine.items() if v != theirs[k] and v]
        return " ".join(changed) if changed else "same knobs"

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
        from ..findings import collect, findings_for
        results = (self.calibration, self.quantized, self.audit, self.placement)
        return collect(*(findings_for(r, target=self.settings.target) for r in results if r is not None),
                       findings_for(self.accuracy, target=self.settings.target, quantized=self.quantized))

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
            from .rendering import plot_strip
            plot_strip(self.placement, fig.add_subplot(grid[2]))
        return fig

    def _repr_html_(self) -> str:
        import matplotlib.pyplot as plt

        from .. import display
        from ..findings_html import findings_html
        from .rendering import accuracy_html, placement_html, settings_html
        fig = self.figure()
        picture = display.figure_html(fig, alt="exploration")
        plt.close(fig)
        return (display.heading("Exploration") + display.paragraph(self.summary())
                + findings_html(self.findings(), title=f"Findings on {self.settings.target}")
                + (display.alert(self.placement_error) if self.placement_error else "")
                + "".join(display.paragraph(f"warning: {w}") for w in self.warnings) + picture
                + accuracy_html(self) + placement_html(self) + settings_html(self))




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



def accuracy_rows(report: AccuracyReport, name: str) -> tuple[ConditionAccuracy, ...]:
    """FP32/INT8 pairs per condition from a report whose INT8 candidate is called ``name``."""
    return tuple(ConditionAccuracy.from_report(report, cond, name) for cond in report.conditions)



def _drop_phrase(row: ConditionAccuracy) -> str:
    """The worst drop, saying so when its confidence interval includes zero."""
    if row.drop_pp is None:
        return f"no drop measured ({row.condition}: no quantized accuracy)"
    noise = row.within_noise
    return (f"worst drop {row.drop_pp:+.1f} pp ({row.condition}"
            + (", within noise: its CI includes 0)" if noise else ")"))

