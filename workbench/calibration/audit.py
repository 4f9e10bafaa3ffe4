"""``audit_coverage``: does the calibration set cover what each deployment condition produces?

MinMax calibration fixes one range ``[lo, hi]`` per quantized tensor from the
calibration samples (widened to include 0, as the INT8 grid must hold zero
exactly).  At run time anything outside that range saturates.  For every
deployment condition's held-out data (``test`` split by default) the audit runs
the FP32 model and reports, per quantized tensor (see
:func:`~workbench.calibration.activations.quantized_layers`):

- ``clip_rate``: the share of activation values that fall outside the calibrated
  range by more than half a quantization step (``(hi - lo) / (2**bits - 1) / 2``:
  closer than that, rounding error dominates, so such values are not counted);
- ``utilisation``: the share of the calibrated range the condition's values span
  (low utilisation means that condition gets few of the 256 levels);
- the condition's own ``[observed_min, observed_max]``.

A (layer, condition) pair is *at risk* when its clip rate exceeds
``clip_threshold``; the conditions at risk, worst first, are the ones the
calibration set should add.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._io import (
    cache_dir,
    damaged_cache_entry,
    entry_lock,
    read_sealed_json,
    sha256_file,
    stable_hash,
    write_sealed_json,
)
from .._results import Result
from .._validation import check_choice, check_range
from ..errors import CalibrationError

LOW_UTILISATION = 0.25


@dataclass(frozen=True)
class AuditRow(Result):
    """One quantized tensor under one condition."""

    layer: str
    condition: str
    n_samples: int
    clip_rate: float
    clip_low_rate: float
    clip_high_rate: float
    utilisation: float
    observed_min: float
    observed_max: float
    at_risk: bool


@dataclass(frozen=True)
class CoverageAudit(Result):
    """Clipping and range utilisation per quantized layer and deployment condition."""

    calibration_id: str
    calibration_hash: str
    calibration_conditions: dict[str, int]
    model: str
    dataset: str
    split: str
    layers: tuple[str, ...]
    conditions: tuple[str, ...]
    calibrated_ranges: dict[str, tuple[float, float]]
    rows: tuple[AuditRow, ...]
    clip_threshold: float
    activation_bits: int
    add_conditions: tuple[str, ...]
    findings: tuple[str, ...]
    #: calibration samples whose pixels are test images under other ids (calibration/leakage.py)
    test_copies: tuple[dict[str, str], ...] = ()

    # -- lookups ----------------------------------------------------------------------------
    def row(self, layer: str, condition: str) -> AuditRow:
        for r in self.rows:
            if r.layer == layer and r.condition == condition:
                return r
        check_choice("layer", layer, self.layers, error=CalibrationError)
        check_choice("condition", condition, self.conditions, error=CalibrationError)
        raise CalibrationError(f"no audit row for layer {layer!r} under condition {condition!r}.")

    def clip_rate(self, layer: str, condition: str) -> float:
        return self.row(layer, condition).clip_rate

    def matrix(self, field: str = "clip_rate") -> np.ndarray:
        """``(len(layers), len(conditions))`` array of one row field."""
        out = np.zeros((len(self.layers), len(self.conditions)))
        li = {name: i for i, name in enumerate(self.layers)}
        ci = {name: j for j, name in enumerate(self.conditions)}
        for r in self.rows:
            out[li[r.layer], ci[r.condition]] = getattr(r, field)
        return out

    def at_risk(self) -> tuple[AuditRow, ...]:
        return tuple(r for r in self.rows if r.at_risk)

    def worst_by_condition(self) -> dict[str, AuditRow]:
        """The layer with the highest clip rate, per condition."""
        out: dict[str, AuditRow] = {}
        for r in self.rows:
            if r.condition not in out or r.clip_rate > out[r.condition].clip_rate:
                out[r.condition] = r
        return out

    # -- display ----------------------------------------------------------------------------
    def summary(self) -> str:
        if not self.add_conditions:
            return (f"coverage audit of {self.calibration_id}: no layer clips more than "
                    f"{self.clip_threshold:.2%} under any of {len(self.conditions)} conditions ({self.split}).")
        worst = self.worst_by_condition()
        detail = ", ".join(f"{c} (up to {worst[c].clip_rate:.2%} at {worst[c].layer})" for c in self.add_conditions)
        return (f"coverage audit of {self.calibration_id}: {len(self.at_risk())} layer/condition pair(s) at risk; "
                f"add {detail}.")

    def plot(self, ax: Any = None, *, vmax: float | None = None) -> Any:
        """Heatmap: clip rate per layer (rows) and condition (columns).

        ``vmax`` (percent) fixes the colour scale so that two pictures compare (the explorer uses
        10%); rates above it take the darkest colour.  Default: the largest rate or the threshold.
        Cells at or above ``clip_threshold`` (at risk) are outlined in black and the threshold is
        marked on the colour bar.
        """
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
        if ax is None:
            _, ax = plt.subplots(figsize=(1.4 * len(self.conditions) + 2.5, 0.45 * len(self.layers) + 1.5))
        data = self.matrix("clip_rate") * 100
        threshold = self.clip_threshold * 100
        top = vmax if vmax is not None else max(float(data.max()), threshold, 1e-9)
        image = ax.imshow(data, cmap="Reds", vmin=0, vmax=top, aspect="auto")
        ax.set_xticks(range(len(self.conditions)), self.conditions, rotation=25, ha="right")
        ax.set_yticks(range(len(self.layers)), self.layers)
        for i in range(data.shape[0]):
            for j in range(data.shape[1]):
                ax.text(j, i, f"{data[i, j]:.2f}", ha="center", va="center", fontsize=10,
                        color="white" if data[i, j] > 0.6 * top else "black")
                if data[i, j] >= threshold:
                    ax.add_patch(Rectangle((j - 0.48, i - 0.46), 0.96, 0.92, fill=False, edgecolor="black",
                                           linewidth=1.5))
        ax.set_title(f"clip rate % ({self.calibration_id}); outlined: at risk (>= {threshold:g}%)", fontsize=10)
        bar = ax.figure.colorbar(image, ax=ax, fraction=0.04, pad=0.02,
                                 extend="max" if vmax is not None and float(data.max()) > vmax else "neither")
        bar.ax.axhline(threshold, color="black", linewidth=1.5)
        bar.ax.text(1.6, threshold, "at risk", transform=bar.ax.get_yaxis_transform(), fontsize=10, va="center")
        return ax

    def plot_ranges(self, ax: Any = None) -> Any:
        """Per layer: the calibrated range (grey band) and each condition's observed range (bars),
        in units of the calibrated range's width."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 0.6 * len(self.layers) + 1.5))
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        k = len(self.conditions)
        for i, layer in enumerate(self.layers):
            lo, hi = self.calibrated_ranges[layer]
            width = (hi - lo) or 1.0
            ax.add_patch(plt.Rectangle((lo / width, i - 0.42), 1.0, 0.84, color="0.88", zorder=0))
            for j, cond in enumerate(self.conditions):
                r = self.row(layer, cond)
                y = i - 0.35 + 0.7 * (j + 0.5) / k
                ax.plot([r.observed_min / width, r.observed_max / width], [y, y], lw=3,
                        color=colors[j % len(colors)], label=cond if i == 0 else None,
                        solid_capstyle="butt")
        ax.set_yticks(range(len(self.layers)), self.layers)
        ax.invert_yaxis()
        ax.set_xlabel("activation / calibrated range width (grey: calibrated range)")
        ax.set_title("observed range per condition", fontsize=10)
        ax.legend(fontsize=10, loc="lower right")
        ax.autoscale_view()
        return ax

    def figure(self) -> Any:
        """Heatmap and range bars side by side."""
        import matplotlib.pyplot as plt
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.5 * len(self.layers) + 2))
        self.plot(left)
        self.plot_ranges(right)
        fig.tight_layout()
        return fig

    def _repr_html_(self) -> str:
        import matplotlib.pyplot as plt

        from .. import display
        fig = self.figure()
        picture = display.figure_html(fig, alt="coverage audit")
        plt.close(fig)
        data = self.matrix("clip_rate")
        rows = [(layer, *[f"{v:.3%}" for v in data[i]]) for i, layer in enumerate(self.layers)]
        styles = [display.BAD_STYLE if (data[i] > self.clip_threshold).any() else "" for i in range(len(self.layers))]
        return (display.heading("Calibration coverage audit") + display.paragraph(self.summary())
                + "".join(display.paragraph(f) for f in self.findings) + picture
                + display.table(("layer", *self.conditions), rows, row_styles=styles,
                                caption=f"clip rate ({self.split} split)"))


def audit_coverage(model: Any, calibration: Any, *, dataset: Any, split: str = "test",
                   conditions: Sequence[str] | None = None, clip_threshold: float = 0.001,
                   activation_bits: int = 8, batch_size: int = 256, cache: bool = True,
                   input_spec: Any = None) -> CoverageAudit:
    """Compare per-layer activations under each condition with the calibrated ranges.

    Parameters
    ----------
    model : the FP32 model: a ``.keras``/``.h5`` path, ``ReferenceModel`` or ``keras.Model``, or an
        ``.onnx`` (ONNX Runtime), FP32 ``.tflite`` or SavedModel folder (LiteRT) read as a graph.
    calibration : a :class:`CalibrationSet` (ids into ``dataset``) or a ``Dataset`` whose
        samples all calibrate.
    dataset : the ``Dataset`` (or name) holding the calibration samples and the held-out data.
    split : the held-out split audited per condition (default ``"test"``).
    conditions : the conditions to audit (default: all in ``split``).
    clip_threshold : a layer/condition pair whose clip rate exceeds this is at risk.
    activation_bits : activation bit width (8 or 16); sets the rounding tolerance.
    cache : reuse an identical earlier audit (same model file bytes, calibration set, dataset,
        split, conditions and thresholds, same audit code) from ``$NPU_WORKBENCH_CACHE/audit``.
    input_spec : the model's input contract (an ``InputContract``, a card mapping or a YAML path);
        default the card beside ``model``.  Calibration and held-out pixels go through its ``apply``
        as they do for quantization; without either they are fed as they are.
    """
    from ..data.loaders import load_dataset
    from .activations import INPUT, load_activation_model, model_label, quantized_layers
    data = load_dataset(dataset)
    check_range("clip_threshold", clip_threshold, 0.0, 1.0, error=CalibrationError)
    check_choice("activation_bits", activation_bits, (8, 16), error=CalibrationError)
    check_choice("split", split, data.splits, error=CalibrationError)
    cal_data, cal_id, cal_hash, cal_conds = _calibration_samples(calibration, data)
    held_out = data.select(split=split)
    conds = tuple(held_out.conditions) if conditions is None else tuple(conditions)
    for c in conds:
        check_choice("conditions", c, held_out.conditions, error=CalibrationError)

    from .curate import contract_inputs, model_contract
    contract = model_contract(model, input_spec)
    key_hash = cal_hash if contract is None else stable_hash({"calibration": cal_hash,
                                                              "contract": contract.to_params()})
    cache_file = _cache_file(model, data, key_hash, split, conds, clip_threshold, activation_bits) \
        if cache else None
    # one process computes an entry that another needs at the same time (two targets of a batch): the other
    # waits for it, then reads it
    with entry_lock(cache_file) if cache_file is not None else contextlib.nullcontext():
        cached = read_sealed_json(cache_file) if cache_file is not None else None
        if cache_file is not None and cached is not None:   # a damaged entry warns, is removed and recomputed
            try:
                return CoverageAudit.from_dict(cached)
            except (ValueError, TypeError, KeyError) as exc:
                damaged_cache_entry(cache_file, f"{type(exc).__name__}: {exc}")

        keras_model = load_activation_model(model)   # a keras.Model, or graph taps of an ONNX/TFLite/SavedModel
        layers = quantized_layers(keras_model)
        calibrated = _ranges(keras_model, contract_inputs(contract, cal_data, "coverage audit"), layers, batch_size)
        levels = 2 ** activation_bits - 1
        rows: list[AuditRow] = []
        for cond in conds:
            subset = held_out.select(condition=cond)
            stats = _clip_stats(keras_model, contract_inputs(contract, subset, "coverage audit"), layers, calibrated,
                                levels, batch_size)
            for layer in layers:
                low, high, total, omin, omax = stats[layer]
                lo, hi = calibrated[layer]
                width = hi - lo
                covered = max(0.0, min(omax, hi) - max(omin, lo))
                rate = (low + high) / total
                rows.append(AuditRow(layer=layer, condition=cond, n_samples=len(subset), clip_rate=rate,
                                     clip_low_rate=low / total, clip_high_rate=high / total,
                                     utilisation=covered / width if width > 0 else 1.0,
                                     observed_min=omin, observed_max=omax, at_risk=rate > clip_threshold))
        add, findings = _findings(rows, conds, cal_conds, clip_threshold, INPUT, calibrated)
        copies: tuple[dict[str, str], ...] = ()
        if hasattr(calibration, "sample_ids") and "test" in data.splits:
            from .leakage import content_leaks
            copies = tuple(content_leaks(calibration.sample_ids, data,
                                         size=getattr(contract, "size", None) if contract is not None else None))
        audit = CoverageAudit(
            calibration_id=cal_id, calibration_hash=cal_hash, calibration_conditions=cal_conds,
            model=model_label(model), dataset=data.name, split=split, layers=layers, conditions=conds,
            calibrated_ranges=calibrated, rows=tuple(rows), clip_threshold=float(clip_threshold),
            activation_bits=activation_bits, add_conditions=add, findings=findings, test_copies=copies)
        if cache_file is not None:
            write_sealed_json(cache_file, audit.to_dict())
        return audit


# The modules an audit's numbers come from: this one and the activation taps (Keras in activations.py,
# ONNX Runtime / LiteRT / SavedModel in graph_taps.py); a change to any of them invalidates cached audits.
AUDIT_CODE = ("audit.py", "activations.py", "graph_taps.py")


def _cache_file(model: Any, data: Any, cal_hash: str, split: str, conds: tuple[str, ...],
                clip_threshold: float, activation_bits: int) -> Path | None:
    """Where an audit of a model *file* is cached; None for an in-memory Keras model."""
    path = getattr(model, "keras", model)
    if not isinstance(path, (str, os.PathLike)) or not Path(path).exists():
        return None
    here = Path(__file__).parent
    key = stable_hash({"model": sha256_file(path), "calibration": cal_hash, "dataset": data.hash,
                       "split": split, "conditions": list(conds), "clip_threshold": float(clip_threshold),
                       "bits": activation_bits, "code": [sha256_file(here / name) for name in AUDIT_CODE]})
    return cache_dir("audit") / f"{key[:32]}.json"


# -- steps ------------------------------------------------------------------------------------------
def _calibration_samples(calibration: Any, data: Any) -> tuple[Any, str, str, dict[str, int]]:
    if hasattr(calibration, "sample_ids") and hasattr(calibration, "hash"):
        if hasattr(calibration, "images"):
            cal_data = calibration.images(data)
        else:
            cal_data = data.take(calibration.sample_ids)
        cid = str(getattr(calibration, "id", calibration.hash[:12]))
        chash = str(calibration.hash)
    elif hasattr(calibration, "x") and hasattr(calibration, "ids"):
        cal_data, cid, chash = calibration, f"dataset:{calibration.name}", str(calibration.hash)
    else:
        raise CalibrationError(f"`calibration` must be a CalibrationSet or a Dataset. "
                               f"Got {type(calibration).__name__} instead.")
    if len(cal_data) == 0:
        raise CalibrationError(f"calibration {cid!r} has zero samples; nothing to calibrate the ranges with.")
    conds = {c: int(np.sum(cal_data.condition == c)) for c in cal_data.conditions}
    return cal_data, cid, chash, conds


def _ranges(keras_model: Any, x: np.ndarray, layers: tuple[str, ...],
            batch_size: int) -> dict[str, tuple[float, float]]:
    from .activations import activation_ranges
    raw = activation_ranges(keras_model, x, layers=layers, batch_size=batch_size)
    # the INT8 grid holds 0 exactly, so the calibrated range always includes it
    return {name: (min(lo, 0.0), max(hi, 0.0)) for name, (lo, hi) in raw.items()}


def _clip_stats(keras_model: Any, x: np.ndarray, layers: tuple[str, ...], calibrated: dict[str, tuple[float, float]],
                levels: int, batch_size: int) -> dict[str, list[float]]:
    from .activations import iter_activations
    stats = {name: [0, 0, 0, np.inf, -np.inf] for name in layers}
    for batch in iter_activations(keras_model, x, layers=layers, batch_size=batch_size):
        for name, v in batch.items():
            lo, hi = calibrated[name]
            tol = (hi - lo) / levels / 2
            s = stats[name]
            s[0] += int(np.count_nonzero(v < lo - tol))
            s[1] += int(np.count_nonzero(v > hi + tol))
            s[2] += v.size
            s[3] = min(s[3], float(v.min()))
            s[4] = max(s[4], float(v.max()))
    return stats


def _findings(rows: list[AuditRow], conds: tuple[str, ...], cal_conds: dict[str, int], threshold: float,
              input_name: str, calibrated: dict[str, tuple[float, float]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    by_cond: dict[str, list[AuditRow]] = {c: [r for r in rows if r.condition == c] for c in conds}
    risky = {c: [r for r in rs if r.at_risk] for c, rs in by_cond.items()}
    order = sorted((c for c in conds if risky[c]), key=lambda c: -max(r.clip_rate for r in risky[c]))
    findings = []
    for c in order:
        worst = max(risky[c], key=lambda r: r.clip_rate)
        have = cal_conds.get(c, 0)
        findings.append(
            f"{c}: {len(risky[c])} of {len(by_cond[c])} layers clip more than {threshold:.2%} "
            f"(worst {worst.layer}: {worst.clip_rate:.2%}; observed [{worst.observed_min:.3g}, "
            f"{worst.observed_max:.3g}] vs calibrated [{calibrated[worst.layer][0]:.3g}, "
            f"{calibrated[worst.layer][1]:.3g}]); the calibration set holds "
            f"{have} {c} sample(s): add {c} samples.")
    for c in conds:
        low = [r for r in by_cond[c] if r.layer != input_name and r.utilisation < LOW_UTILISATION]
        if low:
            findings.append(f"{c}: uses under {LOW_UTILISATION:.0%} of the calibrated range in "
                            f"{', '.join(r.layer for r in low)} (few INT8 levels; expect coarser activations).")
    return tuple(order), tuple(findings)
