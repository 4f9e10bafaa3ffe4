"""The pipeline: one resolved :class:`RunSpec`, one :class:`Store`, and
``Pipeline(spec, store)`` with ``calibrate -> quantize -> evaluate -> place -> time``.

::

    spec = RunSpec("model.keras", "digits-conditions", target="imx93", input_spec="model.card.yaml")
    pipe = Pipeline(spec, RunFolderStore(RunFolder("runs/x", target="imx93")))
    placement = pipe.place()          # calibrates and quantizes first, or loads what still fits
"""

from __future__ import annotations

from .core import Pipeline, accuracy_fits, timing_fits
from .options import CalibrationOptions, EvaluationOptions, PlacementOptions, TimingSettings
from .spec import OPTION_PARAMETERS, RunSpec, parameter_names
from .store import CellStore, MemoStore, RunFolderStore, Store

__all__ = ["CalibrationOptions", "CellStore", "EvaluationOptions", "MemoStore", "OPTION_PARAMETERS", "Pipeline",
           "PlacementOptions", "RunFolderStore", "RunSpec", "Store", "TimingSettings", "accuracy_fits",
           "parameter_names", "timing_fits"]
