"""The pipeline: one resolved :class:`RunSpec`, one :class:`Store`, and
``Pipeline(spec, store)`` with ``calibrate -> quantize -> evaluate -> place -> time``.

::

    spec = RunSpec("model.keras", "digits-conditions", target="imx93", input_spec="model.card.yaml")
    pipe = Pipeline(spec, RunFolderStore(RunFolder("runs/x", target="imx93")))
    placement = pipe.place()          # calibrates and quantizes first, or loads what still fits
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core import Pipeline, accuracy_fits, timing_fits
    from .options import CalibrationOptions, EvaluationOptions, PlacementOptions, TimingSettings
    from .spec import OPTION_PARAMETERS, RunSpec, parameter_names
    from .store import CellStore, MemoStore, RunFolderStore, Store

#: name -> its module; imported on first use (like ``workbench/__init__.py``): the CLI reads the spec's
#: parameters (``spec``, ``options``: no stage imported) to build its flags, ``workbench --help`` stays fast
_LAZY = {"Pipeline": "core", "accuracy_fits": "core", "timing_fits": "core",
         "CalibrationOptions": "options", "EvaluationOptions": "options", "PlacementOptions": "options",
         "TimingSettings": "options", "OPTION_PARAMETERS": "spec", "RunSpec": "spec", "parameter_names": "spec",
         "CellStore": "store", "MemoStore": "store", "RunFolderStore": "store", "Store": "store"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["CalibrationOptions", "CellStore", "EvaluationOptions", "MemoStore", "OPTION_PARAMETERS", "Pipeline",
           "PlacementOptions", "RunFolderStore", "RunSpec", "Store", "TimingSettings", "accuracy_fits",
           "parameter_names", "timing_fits"]
