"""What :func:`~workbench.evaluate.accuracy.compare_accuracy` compares and the outputs it scores: the
conditions, the models and their names, the task metric, the labels as the metric sees them, each model's
output layout, and every model's outputs per condition (from the cache, or by running it once)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._io import sha256_file
from ..errors import DataError, EvaluationError, ModelError, missing_file
from ..models.contract import InputContract


def resolve_task_metric(metric: Any, data: Any, contract: InputContract) -> tuple[str, Any]:
    from .metrics import resolve_metric
    if metric is None:
        if data.is_classification and contract.task == "classification":
            metric = "top1"
        elif contract.task == "keypoints" and not data.is_classification:
            metric = "pck"
        else:
            return "", None
    name, fn = resolve_metric(metric)
    if name == "top1" and not data.is_classification:
        raise EvaluationError(f"metric 'top1' needs class labels but dataset {data.name!r} has labels of shape "
                              f"{tuple(np.asarray(data.y).shape[1:])} per sample; pass metric='module:function' "
                              "for this task (see workbench.evaluate.metrics), or metric=None for fidelity only.")
    return name, fn


def model_output_layouts(models, data: Any, contract: InputContract) -> dict[str, Any]:
    """Each model's output names and per-sample shapes (:func:`~.fidelity.output_layouts`), so that
    fidelity compares a converted NHWC output with the FP32 model's NCHW one in the same layout."""
    from .fidelity import output_layouts
    shape = tuple(data.input_shape)
    if contract.size is not None:
        shape = (*contract.size, contract.channels)
    layouts = {}
    for name, path in models:
        layout = output_layouts(path, shape)
        if layout is not None:
            layouts[name] = _Layout(layout, path)
    return layouts


class _Layout(list):
    """An output layout (``[(name, shape)]``) that remembers the model file it was read from."""

    def __init__(self, items, path):
        super().__init__(items)
        self.path = path


def label_mapper(data: Any, held_out: Any, contract: InputContract, ref_outputs: list[np.ndarray], models,
                 metric_name: str):
    """Labels as the metric sees them.  For top-1: the dataset's class indices, mapped onto the model's
    class order when the card names the model's classes; outputs that do not match the dataset's
    classes are an error (a 1000-class model on a 10-class dataset)."""
    if metric_name != "top1":
        return lambda y: np.asarray(y)
    width = int(ref_outputs[0].shape[1])
    name, path = models[0]
    if contract.classes:
        if len(contract.classes) != width:
            raise EvaluationError(f"the input contract ({contract.source}) names {len(contract.classes)} classes but "
                                  f"model {name!r} ({path}) gives {width} class scores; fix the card's classes.")
        position = {c: i for i, c in enumerate(contract.classes)}
        missing = [c for c in data.classes if c not in position]
        if missing:
            raise EvaluationError(f"dataset {data.name!r} has class(es) {', '.join(map(repr, missing[:8]))} that the "
                                  f"model's card ({contract.source}) does not name; its classes are "
                                  f"{', '.join(contract.classes[:12])}{' ...' if len(contract.classes) > 12 else ''}.")
        table = np.array([position[c] for c in data.classes], np.int64)
        return lambda y: table[np.asarray(y, np.int64)]
    if width != len(data.classes):
        labels = np.unique(np.asarray(held_out.y))
        outside = labels[(labels < 0) | (labels >= width)]
        if len(outside):
            _check_labels(name, path, width, held_out)
        raise EvaluationError(f"model {name!r} ({path}) gives {width} class scores but dataset {data.name!r} has "
                              f"{len(data.classes)} classes ({', '.join(data.classes[:10])}"
                              f"{' ...' if len(data.classes) > 10 else ''}); top-1 would compare unrelated indices. "
                              "Evaluate on the model's own classes, or name the model's classes in its card "
                              "(classes: or classes_file:) so the dataset's classes map onto them.")
    return lambda y: np.asarray(y, np.int64)


def resolve_conditions(held_out: Any, conditions: Sequence[str] | str | None) -> tuple[str, ...]:
    if conditions is None:
        return tuple(held_out.conditions)
    wanted = [c.strip() for c in conditions.split(",")] if isinstance(conditions, str) else list(conditions)
    wanted = [c for c in wanted if c]
    if not wanted:
        raise DataError(f"`conditions` is empty; conditions present in {held_out.name}: "
                        f"{', '.join(held_out.conditions)}.")
    held_out.select(condition=wanted)  # raises DataError naming what exists
    return tuple(dict.fromkeys(wanted))


def _default_name(model: Any, path: str) -> str:
    recipe = getattr(model, "recipe", None)
    recipe_name = getattr(recipe, "name", recipe if isinstance(recipe, str) else None)
    if recipe_name:
        return str(recipe_name)
    p = Path(path)
    return p.name if p.is_dir() else p.stem


def resolve_models(fp32_model: Any, candidates: Any, names: Sequence[str] | None,
                   reference_name: str) -> list[tuple[str, str]]:
    from ..models.predict import resolve_model_path
    if isinstance(candidates, Mapping):
        if names is not None:
            raise EvaluationError("`names` cannot be combined with a dict of candidates (the keys are the names).")
        items = [(str(k), v) for k, v in candidates.items()]
    else:
        seq = [candidates] if isinstance(candidates, (str, os.PathLike)) or hasattr(candidates, "path") \
            else list(candidates)
        if names is not None:
            names = list(names)
            if len(names) != len(seq):
                raise EvaluationError(f"`names` has {len(names)} entries for {len(seq)} candidate model(s); "
                                      "give one name per candidate.")
            items = list(zip(map(str, names), seq))
        else:
            items = []
            for model in seq:
                base = _default_name(model, resolve_model_path(model))
                name, k = base, 2
                while name in {n for n, _ in items} or name == reference_name:
                    name, k = f"{base}_{k}", k + 1
                items.append((name, model))
    out = [(reference_name, resolve_model_path(fp32_model))]
    for name, model in items:
        if name in {n for n, _ in out}:
            raise EvaluationError(f"model name {name!r} is used twice (the FP32 model is {reference_name!r}); "
                                  "give every candidate its own name.")
        out.append((name, resolve_model_path(model)))
    for name, path in out:
        if not Path(path).exists():
            raise missing_file(f"model file or folder of {name!r}", path,
                               "check the path (a .keras/.h5 file, SavedModel folder, .tflite or .onnx)", ModelError)
    return out


def model_outputs(models, data, held_out, split, conds, *, cache, batch_size, num_threads, contract):
    from ..models.predict import load_predictor
    from . import cache as eval_cache
    outputs: dict[tuple[str, str], list[np.ndarray]] = {}
    modes: dict[str, str] = {}
    sha: dict[str, str] = {}
    hits = 0
    subsets = {c: held_out.select(condition=c) for c in conds}
    params = contract.to_params()
    for name, path in models:
        sha[name] = sha256_file(path)
        predictor = None
        for cond in conds:
            subset = subsets[cond]
            key = eval_cache.cache_key(sha[name], data.hash, split, cond, contract=params)
            cached = eval_cache.load_outputs(key, subset.ids) if cache else None
            if cached is not None:
                hits += 1
                outputs[(name, cond)] = cached
                continue
            if predictor is None:
                predictor = load_predictor(path, batch_size=batch_size, num_threads=num_threads, contract=contract)
                _check_fits(name, predictor, data, contract)
            out = predictor.predict_outputs(subset.x, ids=subset.ids)
            eval_cache.save_outputs(key, subset.ids, out)
            outputs[(name, cond)] = out
        modes[name] = predictor.mode if predictor is not None else "cached"
    return outputs, modes, hits, sha


def _check_fits(name: str, predictor: Any, data: Any, contract: InputContract) -> None:
    got = tuple(data.input_shape)
    if len(got) == 3:                       # the contract converts channels, and resizes when told how
        size = contract.size if contract.size is not None and "resize" not in contract.inferred else got[:2]
        got = (*size, contract.channels)
    if hasattr(predictor, "adapt_layout"):
        predictor.adapt_layout(got)
    want = predictor.input_shape
    if len(want) != len(got) or any(w is not None and w != g for w, g in zip(want, got)):
        shown = tuple("?" if d is None else d for d in want)
        raise ModelError(f"model {name!r} ({predictor.path}) takes images of shape {shown} but dataset "
                         f"{data.name!r} has {got}; evaluate it on data of its own input shape or load the "
                         "dataset with load_dataset(..., resize=(height, width)).")


def _check_labels(name: str, path: str, n_outputs: int, held_out: Any) -> None:
    labels = np.unique(held_out.y)
    outside = labels[(labels < 0) | (labels >= n_outputs)]
    if len(outside):
        shown = ", ".join(f"{int(v)} ({held_out.classes[int(v)]!r})" if 0 <= v < len(held_out.classes) else str(int(v))
                          for v in outside[:8])
        raise EvaluationError(f"labels {shown} of dataset {held_out.name!r} are outside the "
                              f"{n_outputs} output classes (0..{n_outputs - 1}) of model {name!r} ({path}); is the "
                              "model trained for another class list?")
