"""Guards against a wrong input contract or swapped models, returned as data.

Each check returns :class:`~workbench.models.contract.ContractIssue` objects (``code``,
``message``, ``severity``, ``evidence``: what was checked, plain data) that
``compare_accuracy`` puts in ``report.issues`` (and warns about), so a report or the
findings catalogue can show them at the top.  Data that breaks the contract outright
(pixels out of range, uint16, NaN) is an error raised by the contract itself.

- ``candidate-is-float``: a candidate meant as INT8 has no quantized tensor;
- ``baseline-is-quantized``: the FP32 baseline holds quantized tensors;
- ``baseline-near-chance``: FP32 top-1 on the reference condition is near chance;
- ``contract-probably-wrong``: FP32 top-1 on the reference condition is much higher under
  another common input contract ([-1, 1], [0, 255], ImageNet mean/std, BGR) than under the
  model's card, on the same samples.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ..models.contract import ContractIssue, InputContract
from .findings import near_chance_threshold

PROBE_SAMPLES = 256
SCREEN_SAMPLES = 64      # every alternative runs on this many; one that gains SCREEN_GAIN on them gets all
SCREEN_GAIN = 0.05
MIN_GAIN = 0.10          # an alternative must beat the card by 10 points ...
MIN_Z = 3.0              # ... and by 3 standard errors of the paired difference
#: off the reference condition, an alternative counts only if it does not lose more than this on the reference
#: condition (a wrong normalisation can "help" an overexposed image; a right card for the model cannot lose there)
REFERENCE_TOLERANCE = 0.02
_QUANT_DTYPES = ("int8", "uint8", "int16")
_QUANT_ONNX_OPS = {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger",
                   "MatMulInteger", "QLinearAdd", "QLinearMul"}


def model_precision(path: str) -> str:
    """``"quantized"`` if the model holds quantized (int8/uint8/int16) tensors or ops, ``"float"`` if not,
    ``"unknown"`` if it cannot be read."""
    from ..models.formats import model_format
    try:
        fmt = model_format(path)
        if fmt == "tflite":
            from ai_edge_litert.interpreter import Interpreter
            details = Interpreter(model_path=str(path)).get_tensor_details()
            quantized = any(np.dtype(d["dtype"]).name in _QUANT_DTYPES and d["quantization"][0] for d in details)
            return "quantized" if quantized else "float"
        if fmt == "onnx":
            import onnx
            graph = onnx.load(str(path), load_external_data=False).graph
            return "quantized" if any(n.op_type in _QUANT_ONNX_OPS for n in graph.node) else "float"
        return "float"                  # Keras and SavedModel files hold float graphs
    except Exception:  # noqa: BLE001 - a model that cannot be read fails later with its own error
        return "unknown"


def check_model_roles(models: list[tuple[str, str]], reference_name: str) -> list[ContractIssue]:
    """A float model given as a candidate, or a quantized model given as the FP32 baseline."""
    issues = []
    ref_name, ref_path = models[0]
    if model_precision(ref_path) == "quantized":
        issues.append(ContractIssue(
            "baseline-is-quantized",
            f"the FP32 baseline {ref_name!r} ({ref_path}) holds quantized tensors: drops measured against it are "
            "INT8 against INT8. Give the float model as the baseline (the .keras/.onnx/FP32 .tflite you quantized).",
            severity="warning", evidence={"model": ref_name, "path": str(ref_path), "precision": "quantized"}))
    for name, path in models[1:]:
        if model_precision(path) == "float":
            issues.append(ContractIssue(
                "candidate-is-float",
                f"candidate {name!r} ({path}) holds no quantized tensor: it is a float model, not an INT8 "
                "candidate, so its 'drop' says nothing about quantization. Pass the quantized .tflite/.onnx.",
                severity="warning", evidence={"model": name, "path": str(path), "precision": "float"}))
    return issues


def reference_condition(conds: tuple[str, ...]) -> str:
    return "daylight" if "daylight" in conds else conds[0]


def _alternatives(contract: InputContract) -> list[tuple[str, InputContract]]:
    base = dict(range=None, mean=None, std=None, scale=None, offset=None, pixel_max=1.0, source="guard probe",
                inferred=tuple(i for i in contract.inferred if i != "range"))
    options: list[tuple[str, dict[str, Any]]] = [("range [0, 1]", {"range": (0.0, 1.0)}),
                                                 ("range [-1, 1]", {"range": (-1.0, 1.0)}),
                                                 ("range [0, 255]", {"range": (0.0, 255.0)})]
    if contract.channels == 3:
        options.append(("ImageNet mean/std", {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}))
    out = []
    own = contract.to_params()
    for label, change in options:
        alt = dataclasses.replace(contract, **{**base, **change})
        if alt.to_params() != own:
            out.append((label, alt))
    if contract.channels == 3:
        swapped = "bgr" if contract.color == "rgb" else "rgb"
        out.append((f"{swapped.upper()} with the card's {contract.normalization()}",
                    dataclasses.replace(contract, color=swapped, source="guard probe")))
    return out


def check_baseline(fp32_path: str, data: Any, held_out: Any, conds: tuple[str, ...], rows: list[Any],
                   contract: InputContract, reference_name: str, *, batch_size: int = 128,
                   num_threads: int | None = None, cache: bool = True, label_map: Any = None,
                   reference_outputs: Any = None, every_condition: bool = True) -> list[ContractIssue]:
    """Near-chance FP32 top-1, and a probe of common alternative contracts on up to ``PROBE_SAMPLES``
    samples, on every condition (the reference condition first; ``every_condition=False``: that one only):
    a wrong card may pass on daylight and show up elsewhere as a "quantization drop".  Every alternative
    runs on the first ``SCREEN_SAMPLES``; only one that gains on those runs on the rest.
    ``reference_outputs``: the FP32 model's outputs already computed, by condition (a dict) or on the
    reference condition (the contract's own predictions are not redone)."""
    first = reference_condition(conds)
    order = [first] + ([c for c in conds if c != first] if every_condition else [])
    issues: list[ContractIssue] = []
    on_reference: dict[str, tuple[float, float]] = {}
    for cond in order:
        outs = reference_outputs.get(cond) if isinstance(reference_outputs, dict) else (
            reference_outputs if cond == first else None)
        allowed = None if cond == first else {label for label, (alt, own) in on_reference.items()
                                              if alt >= own - REFERENCE_TOLERANCE}
        issues += _check_condition(cond, fp32_path, data, held_out, rows, contract, reference_name,
                                   batch_size=batch_size, num_threads=num_threads, cache=cache, label_map=label_map,
                                   reference_outputs=outs, near_chance=cond == first, allowed=allowed,
                                   scores=on_reference if cond == first else None)
    return issues


def _check_condition(cond: str, fp32_path: str, data: Any, held_out: Any, rows: list[Any],
                     contract: InputContract, reference_name: str, *, batch_size: int, num_threads: int | None,
                     cache: bool, label_map: Any, reference_outputs: Any,
                     near_chance: bool = True, allowed: set[str] | None = None,
                     scores: dict[str, tuple[float, float]] | None = None) -> list[ContractIssue]:
    """The guards of :func:`check_baseline` on one condition (``near_chance``: also the near-chance check,
    done on the reference condition only: a hard condition may be near chance with a right card).
    ``allowed``: the alternatives to probe (None: all); ``scores``: filled with each alternative's top-1 and the
    card's on the same samples."""
    row = next((r for r in rows if r.condition == cond and r.model == reference_name), None)
    if row is None:
        return []
    n_classes = len(data.classes)
    chance = 1.0 / max(n_classes, 1)
    subset = held_out.select(condition=cond)
    n = min(PROBE_SAMPLES, len(subset))
    probe = subset.take(subset.ids[:n]) if n < len(subset) else subset
    y = np.asarray(probe.y, np.int64) if label_map is None else label_map(probe.y)
    if reference_outputs is not None:
        own = np.asarray(reference_outputs[0])[:n].argmax(axis=1)
    else:
        own = _probe_correct(fp32_path, probe, contract, data.hash, batch_size, num_threads, cache)
    own_hit = (own == y).astype(float)
    own_label = f"contract: {contract.normalization()}" + ("" if contract.channels == 1 else f", {contract.color}")
    results = {own_label: float(own_hit.mean())}
    screen = min(SCREEN_SAMPLES, n)
    head = probe.take(probe.ids[:screen]) if screen < n else probe
    tail = probe.take(probe.ids[screen:]) if screen < n else None
    best_label, best_gain, best_acc, best_z = None, 0.0, 0.0, 0.0
    for label, alt in _alternatives(contract):
        if allowed is not None and label not in allowed:
            continue
        try:
            pred = _probe_correct(fp32_path, head, alt, data.hash, batch_size, num_threads, cache)
            if tail is not None and float(np.mean(pred == y[:screen]) - own_hit[:screen].mean()) >= SCREEN_GAIN:
                pred = np.concatenate([pred, _probe_correct(fp32_path, tail, alt, data.hash, batch_size,
                                                            num_threads, cache)])
        except Exception:  # noqa: BLE001 - an alternative the model cannot take is simply not better
            continue
        m = len(pred)
        acc = float(np.mean(pred == y[:m]))
        results[label + ("" if m == n else f" (first {m})")] = acc
        diff = (pred == y[:m]).astype(float) - own_hit[:m]
        se = float(np.std(diff, ddof=1) / math.sqrt(m)) if m > 1 else 0.0
        gain = float(diff.mean())
        if scores is not None:
            scores[label] = (acc, float(own_hit[:m].mean()))
        z = gain / se if se > 0 else (float("inf") if gain > 0 else 0.0)
        if m == n and gain > best_gain:
            best_label, best_gain, best_acc, best_z = label, gain, acc, z
    checked = "; ".join(f"{k} {v:.1%}" for k, v in results.items())
    evidence = {"condition": cond, "n": int(n), "accuracy": row.accuracy, "ci": [row.ci_low, row.ci_high],
                "chance": chance, "contract": contract.to_params(), "contract_source": contract.source,
                "probe_top1": results}
    issues = []
    if contract.source.endswith((".yaml", ".yml")):
        fix = f"Fix the model card / input spec ({contract.source})."
    elif contract.source == "input_spec":
        fix = "Fix the input_spec given."
    else:
        fix = "Write a model card beside the model (<model>.card.yaml) or pass --input-spec / input_spec=."
    evidence["fix"] = fix
    if best_label is not None and best_gain >= MIN_GAIN and best_z >= MIN_Z:
        issues.append(ContractIssue(
            "contract-probably-wrong",
            f"the input contract is probably wrong: FP32 top-1 on {cond!r} is {results[next(iter(results))]:.1%} "
            f"with the contract ({contract.normalization()}, {contract.color}) but {best_acc:.1%} with "
            f"{best_label}, on the same {n} samples (checked: {checked}). {fix}",
            severity="warning", evidence={**evidence, "best_alternative": best_label}))
    if near_chance and row.ci_high < near_chance_threshold(n_classes):
        issues.append(ContractIssue(
            "baseline-near-chance",
            f"the FP32 baseline is near chance on {cond!r}: top-1 {row.accuracy:.1%} (95% CI {row.ci_low:.1%}.."
            f"{row.ci_high:.1%}) for {n_classes} classes (chance {chance:.1%}); the input contract is probably wrong "
            f"(contract: {contract.summary()}; checked on {n} samples: {checked}). {fix}",
            severity="warning", evidence=evidence))
    return issues


def _probe_correct(path: str, probe: Any, contract: InputContract, data_hash: str, batch_size: int,
                   num_threads: int | None, cache: bool) -> np.ndarray:
    """The FP32 model's argmax on the probe samples under ``contract`` (cached like evaluation outputs)."""
    from .._io import sha256_file
    from ..models.predict import load_predictor
    from . import cache as eval_cache
    key = eval_cache.cache_key(sha256_file(path), data_hash, "probe",
                               "|".join(probe.ids[:1].tolist()) + str(len(probe)), contract=contract.to_params())
    out = eval_cache.load_outputs(key, probe.ids) if cache else None
    if out is None:
        predictor = load_predictor(path, batch_size=batch_size, num_threads=num_threads, contract=contract)
        if hasattr(predictor, "adapt_layout"):
            predictor.adapt_layout((*(contract.size or probe.input_shape[:2]), contract.channels))
        out = predictor.predict_outputs(probe.x, ids=probe.ids)
        eval_cache.save_outputs(key, probe.ids, out)
    return out[0].argmax(axis=1)
