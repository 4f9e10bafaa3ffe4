"""The built-in models, one registry: ``reference``, ``tradeoff`` and ``keypoints`` as entries of one shape.

Each :class:`BuiltinModel` names the function that builds (or loads from the shipped weights) the
model, the dataset it belongs to and whether it takes another one.  :func:`builtin_model` builds one;
:func:`is_builtin` tells a built-in name from a model path.  Every place that accepts ``"reference"``
instead of a path (run folders, the pipeline's :class:`~workbench.pipeline.RunSpec`, the sweep) reads
this table, so a fourth built-in model is one entry here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ..errors import ModelError

__all__ = ["BUILTIN_MODELS", "BuiltinModel", "builtin_model", "is_builtin"]


@dataclass(frozen=True)
class BuiltinModel:
    """One built-in model: ``build`` (``module:function``) returns a result with ``.keras`` (the FP32
    source quantization starts from) and ``.tflite`` (the FP32 baseline accuracy is measured against)."""

    name: str
    build: str
    dataset: str
    takes_dataset: bool = True
    description: str = ""

    def __call__(self, dataset: str | None = None) -> Any:
        module, _, function = self.build.partition(":")
        fn = getattr(importlib.import_module(module), function)
        if self.takes_dataset:
            return fn(dataset=dataset or self.dataset)
        if dataset not in (None, "", self.dataset):
            raise ModelError(f"the built-in model {self.name!r} is trained on {self.dataset!r} only; got dataset "
                             f"{dataset!r}. Next: use dataset={self.dataset!r} or give a model file.")
        return fn()


BUILTIN_MODELS: dict[str, BuiltinModel] = {m.name: m for m in (
    BuiltinModel("reference", "workbench.models.reference:reference_model", "digits-conditions",
                 description="small CNN every target runs (conv, depthwise, pooling, ReLU)"),
    BuiltinModel("tradeoff", "workbench.models.tradeoff:tradeoff_model", "digits-conditions",
                 description="a CNN whose recipes trade accuracy against NPU placement (the sweep's default)"),
    BuiltinModel("keypoints", "workbench.models.keypoints:keypoint_model", "digits-keypoints", takes_dataset=False,
                 description="keypoint regression (PCK metric), with a model card"),
)}


def is_builtin(model: Any) -> bool:
    """``model`` names a built-in model (not a path)."""
    return isinstance(model, str) and model in BUILTIN_MODELS


def builtin_model(name: str, dataset: str | None = None) -> Any:
    """The built-in model ``name`` on ``dataset`` (default: its own), built or loaded from the cache."""
    if name not in BUILTIN_MODELS:
        raise ModelError(f"{name!r} is not a built-in model; the built-in ones are "
                         f"{', '.join(map(repr, BUILTIN_MODELS))}. Next: give one of them or a model path.")
    return BUILTIN_MODELS[name](dataset)
