"""The built-in models, one registry: ``reference``, ``tradeoff`` and ``keypoints`` as entries of one shape.

A :class:`BuiltinModel` is data: the architecture and augmentation (``module:function`` or the function),
the dataset its weights are shipped for, its task (which decides the labels it trains on, its loss
family and the metric it is scored with: top-1 or PCK), its recipe, its exports and its model card.
:func:`builtin_model` is the one path that builds any of them: plan the weights (the shipped ones, or
training), look the exports up in the cache under a content key, else load or train, export, write the
card, score per condition and seal the folder; the ``.onnx`` only when first asked for (:data:`LAZY_EXPORTS`:
tf2onnx took ~10 s of a cold batch that never reads it).  Every place that takes ``"reference"`` instead of a
path (the CLI's commands, run folders, :class:`~workbench.pipeline.RunSpec`, the batch, the sweep, the
explorer) asks :func:`is_builtin` / :func:`builtin_model`, and ``workbench model NAME`` has one
sub-command per entry, so a fourth built-in model is one :func:`register_builtin` call.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .._io import (
    atomic_path,
    atomic_write_json,
    cache_dir,
    check_folder_seal,
    damaged_cache_entry,
    read_json,
    seal_folder,
    sha256_file,
    stable_hash,
)
from .._results import Result
from ..errors import ModelError
from .export import EXPORTS, add_sealed_exports, export_model, export_paths

__all__ = ["BUILTIN_MODELS", "BuiltinModel", "ClassifierModel", "KeypointModel", "ReferenceModel",
           "TradeoffModel", "builtin_model", "builtin_names", "builtin_path", "is_builtin", "register_builtin"]

#: where the built-in models' weights are shipped (``<name>.npz`` and ``<name>.json``)
SHIPPED_DIR = Path(__file__).resolve().parent / "weights"
#: the loss each ``loss`` name trains with
LOSSES = ("logits", "probabilities", "mse")
TASKS = {"classification": "accuracy", "keypoints": "pck"}     # task -> the metric it is scored with
#: exports made only when asked for (``builtin_model(..., exports=...)``, ``builtin_path(..., export=...)``),
#: then added to the sealed cache folder: the batch, the notebooks and the TFLite recipes never read them
LAZY_EXPORTS = ("onnx",)


# -- what building one gives -------------------------------------------------------------------
class _BuiltinResult(Result):
    """What every built-in model's result shows: its exports, its metric per condition, where the weights
    come from and, after a retrain, how far they are from the shipped ones."""

    TITLE: ClassVar[str] = "built-in model"
    METRIC: ClassVar[str] = "accuracy"            # the field holding the metric per condition
    LABEL: ClassVar[str] = "FP32 top-1"
    # what every subclass has (its dataclass fields)
    keras: str
    saved_model: str
    tflite: str
    cache_hit: bool
    origin: str
    weights_sha256: str | None
    name: str

    @property
    def values(self) -> dict[str, float]:
        return getattr(self, self.METRIC)

    @property
    def shipped_values(self) -> dict[str, float] | None:
        return getattr(self, "shipped_" + self.METRIC)

    def summary(self) -> str:
        values = ", ".join(f"{c} {v:.1%}" for c, v in self.values.items())
        how = {"shipped": "shipped weights", "retrained": "retrained"}.get(self.origin, "trained")
        text = f"{self.TITLE} ({how}{', cached' if self.cache_hit else ''}): {self.LABEL} {values}"
        if self.origin == "retrained" and self.shipped_values:
            text += f"; vs shipped: {self.distance_from_shipped()}"
        return text

    def distance_from_shipped(self) -> str:
        """Per condition, retrained minus shipped metric in percentage points."""
        from .training import distance
        return distance(self.values, self.shipped_values)

    def _repr_html_(self) -> str:
        from .. import display
        return (display.heading(self.TITLE[0].upper() + self.TITLE[1:]) + display.paragraph(self.summary())
                + display.table(("condition", self.LABEL), [(c, f"{v:.2%}") for c, v in self.values.items()]))


@dataclass(frozen=True)
class ClassifierModel(_BuiltinResult):
    """Paths of the exports (``.keras``, SavedModel, ``.tflite``, and ``.onnx`` once asked for) and the FP32
    top-1 accuracy per condition on ``test``."""

    TITLE: ClassVar[str] = "built-in classifier"

    keras: str
    saved_model: str
    tflite: str
    accuracy: dict[str, float]
    key: str
    dataset: str
    dataset_hash: str
    seed: int
    epochs: int
    train_seconds: float
    cache_hit: bool = False
    origin: str = "trained"                 # shipped | retrained | trained (another dataset or recipe)
    weights_sha256: str | None = None
    shipped_accuracy: dict[str, float] | None = None
    name: str = ""                          # the registry's name of the model
    onnx: str | None = None                 # None: not made yet (ask with exports=("onnx",)), or not an export


@dataclass(frozen=True)
class ReferenceModel(ClassifierModel):
    """The reference CNN: paths of the four exports and the FP32 top-1 accuracy per condition on ``test``."""

    TITLE: ClassVar[str] = "reference CNN"


@dataclass(frozen=True)
class TradeoffModel(ClassifierModel):
    """The trade-off model: paths of the four exports and the FP32 top-1 accuracy per condition on ``test``."""

    TITLE: ClassVar[str] = "trade-off model"


@dataclass(frozen=True)
class KeypointModel(_BuiltinResult):
    """Paths of the exports (each with a ``.card.yaml`` beside it) and FP32 PCK per condition on ``test``."""

    TITLE: ClassVar[str] = "keypoint CNN"
    METRIC: ClassVar[str] = "pck"
    LABEL: ClassVar[str] = "FP32 PCK@0.05"

    keras: str
    saved_model: str
    tflite: str
    pck: dict[str, float]
    key: str
    dataset_hash: str
    seed: int
    epochs: int
    train_seconds: float
    cache_hit: bool = False
    origin: str = "trained"                 # shipped | retrained | trained (another seed or epoch count)
    weights_sha256: str | None = None
    shipped_pck: dict[str, float] | None = None
    name: str = ""


# -- the entries -------------------------------------------------------------------------------
@dataclass(frozen=True)
class BuiltinModel:
    """One built-in model.

    ``architecture(input_shape, n_outputs, *, batch_size)`` returns the Keras model (``batch_size``
    None to train, 1 to export); ``augment(x, rng)`` a new augmented copy of the daylight training
    images each epoch; both are functions or ``"module:function"`` (imported when first used).
    ``task`` decides the labels (class indices, or keypoints flattened to floats) and the metric
    (top-1, PCK); ``loss`` is ``logits``/``probabilities`` (sparse cross-entropy) or ``mse``.
    ``own_dataset_only``: trained on ``dataset`` only, loaded with the model's seed (the keypoints).
    ``recipe`` says the augmentation and loss in words (recorded beside the shipped weights).
    """

    name: str
    architecture: str | Callable[..., Any]
    augment: str | Callable[..., Any]
    result: type[_BuiltinResult] = ClassifierModel
    task: str = "classification"
    loss: str = "logits"
    dataset: str = "digits-conditions"
    own_dataset_only: bool = False
    epochs: int = 20
    batch_size: int = 32
    exports: tuple[str, ...] = EXPORTS
    card: dict[str, Any] | None = None
    recipe: dict[str, str] = field(default_factory=dict)
    description: str = ""
    weights: Path = SHIPPED_DIR             # where ``<name>.npz`` / ``<name>.json`` are shipped

    def __post_init__(self) -> None:
        if self.task not in TASKS or self.loss not in LOSSES or not set(self.exports) <= set(EXPORTS):
            raise ModelError(f"built-in model {self.name!r}: task must be one of {list(TASKS)}, loss one of "
                             f"{list(LOSSES)}, exports among {list(EXPORTS)}; got {self.task!r}, {self.loss!r}, "
                             f"{list(self.exports)}.")

    @property
    def metric(self) -> str:
        return TASKS[self.task]

    def function(self, which: str) -> Callable[..., Any]:
        """``architecture`` or ``augment`` as a function."""
        ref = getattr(self, which)
        if callable(ref):
            return ref
        module, _, name = ref.partition(":")
        return getattr(importlib.import_module(module), name)

    def network(self, data: Any, batch_size: int | None) -> Any:
        """The architecture for ``data`` (its input shape and number of outputs)."""
        import numpy as np
        n = len(data.classes) if self.task == "classification" else int(np.prod(data.y.shape[1:]))
        return self.function("architecture")(data.input_shape, n, batch_size=batch_size)

    def code_files(self) -> list[str]:
        """The source files whose content is part of the cache key: this path, the export and the entry's."""
        import inspect
        files = {__file__, inspect.getfile(export_model)}
        for which in ("architecture", "augment"):
            files.add(inspect.getfile(self.function(which)))
        return sorted(files)


#: the registry: name -> entry (read it through :func:`builtin_names` / :func:`builtin_entry`)
BUILTIN_MODELS: dict[str, BuiltinModel] = {}


def register_builtin(entry: BuiltinModel) -> BuiltinModel:
    """Add (or replace) a built-in model; every client that takes a built-in name then takes it."""
    BUILTIN_MODELS[entry.name] = entry
    return entry


def builtin_names() -> tuple[str, ...]:
    return tuple(BUILTIN_MODELS)


def is_builtin(model: Any) -> bool:
    """``model`` names a built-in model (not a path)."""
    return isinstance(model, str) and model in BUILTIN_MODELS


def builtin_path(model: Any, *, dataset: Any = None, export: str = "keras") -> Any:
    """``model`` itself, or for a built-in model's name the file of its ``export`` (built or from the cache)."""
    if not is_builtin(model):
        return model
    return getattr(builtin_model(model, dataset, exports=(export,)), export)


def builtin_entry(name: str) -> BuiltinModel:
    if name not in BUILTIN_MODELS:
        raise ModelError(f"{name!r} is not a built-in model; the built-in ones are "
                         f"{', '.join(map(repr, BUILTIN_MODELS))}. Next: give one of them or a model path.")
    return BUILTIN_MODELS[name]


# -- the one path ------------------------------------------------------------------------------
def load_data(entry: BuiltinModel, dataset: Any = None, *, seed: int = 0) -> Any:
    """The dataset ``entry`` trains and is scored on (``dataset``, or its own)."""
    from ..data.loaders import load_dataset
    if entry.own_dataset_only:
        if getattr(dataset, "name", dataset) not in (None, "", entry.dataset):
            raise ModelError(f"the built-in model {entry.name!r} is trained on {entry.dataset!r} only; got dataset "
                             f"{dataset!r}. Next: use dataset={entry.dataset!r} or give a model file.")
        return load_dataset(entry.dataset, seed=seed)
    return load_dataset(dataset if dataset not in (None, "") else entry.dataset)


def train(entry: BuiltinModel, data: Any, *, seed: int = 0, epochs: int | None = None,
          train_limit: int | None = None) -> Any:
    """Train ``entry`` on the daylight training split of ``data``; returns a batch-1 Keras model."""
    import keras
    import numpy as np

    from . import training
    train_set = data.select(split="train", condition="daylight")
    x, y = np.asarray(train_set.x), np.asarray(train_set.y)
    if entry.task != "classification":
        y = y.astype(np.float32).reshape(len(train_set), -1)
    if train_limit is not None:
        x, y = x[:train_limit], y[:train_limit]
    loss = {"logits": lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "probabilities": lambda: keras.losses.SparseCategoricalCrossentropy(), "mse": lambda: "mse"}[entry.loss]()
    return training.train(build=lambda batch_size: entry.network(data, batch_size), x=x, y=y, loss=loss,
                          augment=entry.function("augment"), seed=seed,
                          epochs=entry.epochs if epochs is None else epochs, batch_size=entry.batch_size,
                          metrics=["accuracy"] if entry.task == "classification" else None)


def score(entry: BuiltinModel, model: Any, data: Any, split: str = "test") -> dict[str, float]:
    """The FP32 metric (top-1 or PCK) of a Keras model per condition (batched through a batch-free twin)."""
    import numpy as np

    from ..evaluate.metrics import pck, top1
    metric = top1 if entry.task == "classification" else pck
    free = entry.network(data, None)
    free.set_weights(model.get_weights())
    out = {}
    for cond in data.select(split=split).conditions:
        subset = data.select(split=split, condition=cond)
        out[cond] = float(np.mean(metric(free.predict(np.asarray(subset.x), batch_size=256, verbose=0), subset.y)))
    return out


def shipped_weights(name: str, *, strict: bool = True) -> dict | None:
    """The record of ``name``'s shipped weights (``weights/<name>.json``), checked against the ``.npz``."""
    from .training import shipped_record
    entry = builtin_entry(name)
    return shipped_record(entry.name, directory=entry.weights, strict=strict)


def load_shipped(entry: BuiltinModel, data: Any) -> Any:
    """The architecture (batch 1) with the shipped weights."""
    from .training import load_shipped as load
    return load(entry.name, entry.network(data, 1), directory=entry.weights)


def write_card(entry: BuiltinModel, folder: Path) -> None:
    """The model card beside each export (``model.card.yaml``, ``model_fp32.card.yaml``, ``saved_model/card.yaml``)."""
    from .contract import CARD_SUFFIX, contract_from_mapping
    from .contract import write_card as write
    contract = contract_from_mapping(entry.card or {}, source=f"built-in {entry.name} card")
    if {"keras", "onnx"} & set(entry.exports):
        write(contract, folder / ("model" + CARD_SUFFIX))
    if "tflite" in entry.exports:
        write(contract, folder / ("model_fp32" + CARD_SUFFIX))
    if {"saved_model", "tflite", "onnx"} & set(entry.exports):
        write(contract, folder / "saved_model" / "card.yaml")


def builtin_model(name: str, dataset: Any = None, *, seed: int = 0, epochs: int | None = None, cache: bool = True,
                  cache_root: Any = None, retrain: bool = False, exports: Any = ()) -> _BuiltinResult:
    """The built-in model ``name`` exported, from its shipped weights or trained, cached under a content key.

    On its own dataset with the shipped recipe (seed 0, the entry's epochs) the weights shipped with the
    package are used, so every machine gets the same model and numbers; ``retrain=True``, another dataset,
    seed or epoch count trains from scratch, and a retrain compares its metric with the shipped one.
    The entry's exports are made but :data:`LAZY_EXPORTS` (the ``.onnx``): those in ``exports`` are
    added to the cached folder when missing, and a lazy export made earlier is returned too.
    """
    from .training import plan_weights, weights_sha256
    entry = builtin_entry(name)
    missing = [kind for kind in exports if kind not in entry.exports]
    if missing:
        raise ModelError(f"the built-in model {name!r} has no {', '.join(missing)} export (it has "
                         f"{', '.join(entry.exports)}). Next: give the model as a file of that format.")
    eager = tuple(kind for kind in entry.exports if kind not in LAZY_EXPORTS or kind in exports)
    epochs = entry.epochs if epochs is None else epochs
    data = load_data(entry, dataset, seed=seed)
    plan = plan_weights(entry.name, directory=entry.weights, dataset_name=data.name, shipped_dataset=entry.dataset,
                        seed=seed, epochs=epochs, retrain=retrain, metric=entry.metric)
    code = stable_hash([sha256_file(f) for f in entry.code_files()])
    key = stable_hash({"dataset": data.hash, "code": code, **plan.source,
                       **({"card": entry.card} if entry.card else {})})[:16]
    folder = (Path(cache_root) if cache_root else cache_dir(entry.name)) / key
    extra = {"origin": plan.origin, f"shipped_{entry.metric}": plan.shipped_metric, "name": entry.name}
    record = folder / f"{entry.name}.json"
    if cache and record.is_file():
        damage = check_folder_seal(folder)      # every export as written, or the entry is redone
        if damage is None:
            made = add_sealed_exports(folder, [kind for kind in eager if kind in LAZY_EXPORTS])
            return entry.result.from_dict({**read_json(record), **extra,
                                           **export_paths(folder, [k for k in entry.exports if k in made]),
                                           "cache_hit": True})
        damaged_cache_entry(folder, damage)
    start = time.perf_counter()
    model = load_shipped(entry, data) if plan.use_shipped else train(entry, data, seed=seed, epochs=epochs)
    seconds = time.perf_counter() - start
    extra.update(export_paths(folder, eager))
    with atomic_path(folder, replace_folder=True) as tmp:
        export_model(model, tmp, eager)
        if entry.card:
            write_card(entry, tmp)
        info = {entry.metric: score(entry, model, data), "key": key, "dataset": data.name, "dataset_hash": data.hash,
                "seed": seed, "epochs": epochs, "train_seconds": round(seconds, 2),
                "weights_sha256": weights_sha256(model)}
        atomic_write_json(tmp / record.name, info)
        seal_folder(tmp)
    return entry.result.from_dict({**info, **extra, "cache_hit": False})


def ship(name: str, *, seed: int = 0, epochs: int | None = None) -> dict:
    """Train ``name`` with its recipe and write ``weights/<name>.npz`` + ``.json`` (maintainers only):
    ``python -m workbench.models.builtin --ship NAME``, then commit both files."""
    from .training import recipe, write_shipped
    entry = builtin_entry(name)
    epochs = entry.epochs if epochs is None else epochs
    data = load_data(entry, seed=seed)
    start = time.perf_counter()
    model = train(entry, data, seed=seed, epochs=epochs)
    seconds = time.perf_counter() - start
    info = {"dataset": data.name, "training": recipe(augment=entry.recipe["augment"], loss=entry.recipe["loss"],
                                                      batch_size=entry.batch_size),
            **{k: v for k, v in entry.recipe.items() if k not in ("augment", "loss")},
            "seed": seed, "epochs": epochs, "train_seconds": round(seconds, 1), entry.metric: score(entry, model, data)}
    return write_shipped(entry.name, model, info, directory=entry.weights)


for _entry in (
    BuiltinModel("reference", "workbench.models.reference:build_model", "workbench.models.reference:augment",
                 result=ReferenceModel, loss="logits",
                 recipe={"augment": "shifts <= 2 px, gain 0.45-1.1", "loss": "sparse categorical cross-entropy"},
                 description="the reference CNN: conv, depthwise, pooling and ReLU, which every target runs"),
    BuiltinModel("tradeoff", "workbench.models.tradeoff:build_model", "workbench.models.reference:augment",
                 result=TradeoffModel, loss="probabilities",
                 recipe={"augment": "shifts <= 2 px, gain 0.45-1.1 (the reference model's)",
                         "loss": "sparse categorical cross-entropy on the softmax"},
                 description="the trade-off demo model of `workbench sweep`: recipes trade accuracy against "
                             "NPU placement"),
    BuiltinModel("keypoints", "workbench.models.keypoints:build_model", "workbench.models.keypoints:augment",
                 result=KeypointModel, task="keypoints", loss="mse", dataset="digits-keypoints",
                 own_dataset_only=True, epochs=40, exports=("keras", "saved_model", "tflite"),
                 card={"layout": "NHWC", "color": "grayscale", "size": [32, 32], "resize": "stretch",
                       "range": [0.0, 1.0], "task": "keypoints",
                       "outputs": [{"name": "keypoints", "kind": "keypoints",
                                    "meaning": "(y, x) in [0, 1] of the ink centroid, bounding-box top-left and "
                                               "bottom-right"}]},
                 recipe={"augment": "gain 0.45-1.1, Gaussian noise sigma 0.03", "loss": "mean squared error",
                         "head": "dense"},
                 description="the keypoint regression model on digits-keypoints (PCK metric, with a model card)"),
):
    register_builtin(_entry)


if __name__ == "__main__":  # pragma: no cover - maintainers: python -m workbench.models.builtin --ship NAME
    import json
    import sys
    if len(sys.argv) != 3 or sys.argv[1] != "--ship":
        sys.exit(f"usage: python -m workbench.models.builtin --ship {{{','.join(BUILTIN_MODELS)}}}")
    print(json.dumps(ship(sys.argv[2]), indent=2))
