"""The explorer's compute path, without widgets: settings in, :class:`Exploration` out.

:class:`ExplorerEngine` validates a setting against the dataset, runs calibration, quantization,
audit, accuracy and placement through the stage chain, and keeps what it computed in a memo."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .._validation import check_choice, check_positive_int
from ..calibration.audit import CoverageAudit
from ..calibration.curate import STRATEGIES, CalibrationSet
from ..chain import StageChain
from ..errors import (
    CalibrationError,
    DataError,
    ModelError,
    PlacementError,
    QuantizationError,
    TargetError,
    WorkbenchWarning,
    missing_file,
)
from ..evaluate.accuracy import AccuracyReport
from ..pipeline.core import Pipeline
from ..pipeline.store import MemoStore
from ..placement.analyze import PlacementReport
from ..quantize.engine import QuantizedModel
from ..quantize.recipe import BACKENDS, CALIBRATORS, RECIPES
from ..targets import TARGET_IDS
from .capture import _Captured, _captured_output
from .results import AUTO, BUILT_IN_SEVERITY, SEVERITIES, SPLIT, Exploration, ExplorerSettings, HistoryEntry


@dataclass
class _Run:
    """What one compute collects on the way: seconds per step and warnings."""

    seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)



class ExplorerEngine:
    """The compute path of the explorer: ``check``, ``compute``, ``chain``, ``data`` and the steps."""

    #: the :class:`~workbench.pipeline.RunSpec` every setting starts from (None: the defaults): the widgets
    #: replace its model, dataset, target, recipe and the options they show; every other option is taken whole
    template: Any = None

    def __init__(self, model: Any, dataset: Any) -> None:
        self.model = model
        self.dataset = dataset
        self.keras_path = _keras_path(model)
        self.pool_size = len(dataset.select(split="calibration"))
        self.test_conditions = dataset.select(split=SPLIT).conditions
        from ..data.loaders import BUILTIN
        self.graded = dataset.name in BUILTIN      # synthetic conditions with a severity (recorded ones have none)
        self._datasets: dict[int, Any] = {}        # the dataset at each severity shown (built once each)
        self._memo: dict[tuple, Any] = {}
        # the pipeline's results (quantizations: the quantize cache, which reports its hits); _memo keeps each
        # step's warnings beside
        self._store = MemoStore(stages=("calibration", "accuracy", "placement"))
        self.history: list[HistoryEntry] = []
        self.tool_output = ""          # converter/absl text the last update captured (kept out of the cell)

    @property
    def settings(self) -> ExplorerSettings:      # the widgets' settings (Explorer overrides it)
        raise NotImplementedError

    #: the steps of one compute, in order (the progress line counts them)
    STEPS = ("calibration", "quantize", "audit", "accuracy", "placement")

    def on_step(self, name: str, number: int, started: float) -> None:
        """Called when a step starts (``number`` of ``len(STEPS)``; ``started``: ``time.perf_counter()``).
        The widgets show it; here it does nothing."""

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

    # -- steps ------------------------------------------------------------------------------
    def _step(self, run: _Run, name: str, key: tuple | None, fn: Any) -> Any:
        """Run one step (or take it from the in-memory memo under ``key``), timing it and keeping
        the warnings it raised: they are re-issued and listed in the result every time."""
        start = time.perf_counter()
        self.on_step(name, len(run.seconds) + 1, start)
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
            from ..data.loaders import load_dataset
            graded = load_dataset(self.dataset.name, severity=s.severity)
            pool = "calibration"
            if graded.select(split=pool).hash != self.dataset.select(split=pool).hash:
                raise DataError(f"dataset {self.dataset.name!r} given to the explorer is not the built-in one as "
                                f"load_dataset({self.dataset.name!r}) builds it (another seed?); the severity knob "
                                "rebuilds that one. Pass the dataset by name.")
            self._datasets[s.severity] = graded
        return self._datasets[s.severity]

    def pipeline(self, settings: ExplorerSettings | None = None) -> Pipeline:
        """The :class:`~workbench.pipeline.Pipeline` of ``settings`` (default: what the widgets show), its
        results kept in the explorer's in-memory store (a setting seen before is a look-up)."""
        from ..pipeline import RunSpec
        s = settings if settings is not None else self.settings
        template = self.template if self.template is not None else RunSpec(resolve=False)
        spec = template.replace(model=self.keras_path, dataset=self.data(s), target=s.target, recipe=s.quant_recipe(),
                                calibration=dict(n=s.calibration_size, strategy=s.calibration_strategy, seed=s.seed),
                                evaluation=dict(split=SPLIT, conditions=tuple(s.conditions), seed=s.bootstrap_seed),
                                resolve=True)
        return Pipeline(spec, self._store)

    def _calibration(self, s: ExplorerSettings) -> CalibrationSet:
        return self.pipeline(s).calibrate()

    def _quantize(self, s: ExplorerSettings, calibration: CalibrationSet) -> QuantizedModel:
        return self.pipeline(s).quantize(calibration)

    def _audit(self, s: ExplorerSettings, calibration: CalibrationSet, bits: int) -> CoverageAudit:
        from ..calibration.audit import audit_coverage
        return audit_coverage(self.keras_path, calibration, dataset=self.data(s), split=SPLIT,
                              conditions=s.conditions, activation_bits=bits)

    def _accuracy(self, s: ExplorerSettings, quantized: QuantizedModel) -> AccuracyReport:
        return self.pipeline(s).evaluate(quantized)

    def _placement(self, s: ExplorerSettings, quantized: QuantizedModel) -> PlacementReport:
        return self.pipeline(s).place(quantized)


def _keras_path(model: Any) -> str:
    path = getattr(model, "keras", model)
    if not isinstance(path, (str, Path)):
        raise ModelError(f"`model` must be a built-in model's name or result (`reference`, ...) or the path of an "
                         f"FP32 Keras model (.keras/.h5). Got {type(model).__name__} instead.")
    path = Path(path)
    if path.suffix.lower() not in (".keras", ".h5", ".hdf5"):
        raise ModelError(f"{path}: the explorer quantizes and audits an FP32 Keras model (.keras or .h5); got "
                         f"{path.name!r}. Pass the .keras file (reference_model().keras).")
    if not path.is_file():
        raise missing_file("model file", path, "train it first or pass model='reference'", ModelError)
    return str(path)

