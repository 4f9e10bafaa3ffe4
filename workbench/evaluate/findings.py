"""Findings of the accuracy stage, computed from an :class:`AccuracyReport`.

- ``accuracy.output-collapsed``: an INT8 output with SQNR under 10 dB or cosine under 0.9 on a condition;
- ``model.input-contract``: the FP32 reference is near chance on every condition, which says the
  images do not match what the model was trained on (scale, channel order, normalisation); or the
  contract guards (``evaluate/guards.py``, run on every condition) found another common contract that
  scores far better than the card's on some condition, or FP32 near chance on the reference condition.
"""

from __future__ import annotations

from typing import Any

from ..findings import Finding, make

#: FP32 below ``min(NEAR_CHANCE_CAP, chance * NEAR_CHANCE_FACTOR)`` on every condition is "near chance"
#: (the rule of ``evaluate/guards.py``: a binary classifier is near chance below 50%, never at 88.8%)
NEAR_CHANCE_FACTOR = 2.0
NEAR_CHANCE_CAP = 0.5


def near_chance_threshold(n_classes: int) -> float:
    """Top-1 below which an FP32 model is "near chance" for ``n_classes`` classes."""
    return min(NEAR_CHANCE_CAP, NEAR_CHANCE_FACTOR / max(n_classes, 1))


#: an INT8 output below either is noise (``accuracy.output-collapsed``)
COLLAPSED_SQNR_DB = 10.0
COLLAPSED_COSINE = 0.9


def _range_hint(quantized: Any) -> str:
    """What the quantized file's manifest says of its calibrated ranges (ranges.py), as a sentence to append:
    the tensors whose range clips the data or is far wider than it, and the calibrator that sets them."""
    from .._io import read_json
    try:
        ranges = read_json(quantized.manifest_path).get("ranges") or {}
    except (AttributeError, OSError, TypeError, ValueError):
        return ""
    if ranges.get("calibrator") != "minmax":
        return ""
    parts = []
    for key, what in (("clipped", "narrower than"), ("outliers", "far wider than")):
        rows = ranges.get(key) or []
        if rows:
            r = rows[0]
            parts.append(f"{ranges.get('n_' + key, len(rows))} tensor(s) calibrated {what} the data's 0.1..99.9th "
                         f"percentiles (e.g. {r['tensor']!r} [{r['calibrated'][0]:.4g}, {r['calibrated'][1]:.4g}] "
                         f"vs [{r['p0.1']:.4g}, {r['p99.9']:.4g}])")
    return f"; {' and '.join(parts)}: try --calibrator percentile" if parts else ""


def collapsed_outputs(report: Any, *, target: str = "", quantized: Any = None) -> list[Finding]:
    """One ``accuracy.output-collapsed`` per candidate and output whose SQNR is under
    :data:`COLLAPSED_SQNR_DB` or cosine under :data:`COLLAPSED_COSINE` on some condition, naming them, and the
    calibrated ranges of ``quantized`` (its manifest) that clip the data or are far wider than it."""
    bad: dict[tuple[str, str], list[Any]] = {}
    for r in getattr(report, "fidelity", ()) or ():
        low_sqnr = r.sqnr_db is not None and r.sqnr_db < COLLAPSED_SQNR_DB
        low_cos = r.cosine is not None and r.cosine < COLLAPSED_COSINE
        if low_sqnr or low_cos:
            bad.setdefault((r.model, r.output), []).append(r)
    out = []
    hint = _range_hint(quantized) if bad and quantized is not None else ""
    for (model, output), rows in bad.items():
        listed = ", ".join(f"{r.condition} SQNR " + ("n/a" if r.sqnr_db is None else f"{r.sqnr_db:.1f} dB")
                           + ("" if r.cosine is None else f" cosine {r.cosine:.3f}") for r in rows)
        out.append(make("accuracy.output-collapsed",
                        f"{model}: output {output!r} is mostly quantization error on {len(rows)} condition(s) "
                        f"(SQNR < {COLLAPSED_SQNR_DB:g} dB or cosine < {COLLAPSED_COSINE:g}): {listed}{hint}",
                        target=target,
                        evidence={"model": model, "output": output, "sqnr_threshold_db": COLLAPSED_SQNR_DB,
                                  "cosine_threshold": COLLAPSED_COSINE,
                                  "conditions": {r.condition: {"sqnr_db": r.sqnr_db, "cosine": r.cosine, "n": r.n}
                                                 for r in rows}}))
    return out


def findings(report: Any, *, target: str = "", **context: Any) -> list[Finding]:
    out = _near_chance_everywhere(report, target=target)
    out += contract_findings(report, target=target, skip_near_chance=bool(out))
    if not out:     # a wrong card explains the drops: they are not quantization's
        out += drop_findings(report, target=target, quantized=context.get("quantized"),
                             max_drop_pp=(context["gate"] if context.get("gate") is not None
                                          else context.get("max_drop_pp")))
    return collapsed_outputs(report, target=target, quantized=context.get("quantized")) + out


def suspected_cause(quantized: Any, *, target: str = "") -> dict[str, Any] | None:
    """What the quantized model's own data says about a drop: per-tensor weight collapse (named layers), or
    per-channel weights whose ranges spread by orders of magnitude, whose outputs then share one per-tensor
    activation scale.  None when the model says nothing (or is not given)."""
    if quantized is None:
        return None
    from ..findings import findings_for
    try:
        found = findings_for(quantized, target=target)
    except Exception:  # noqa: BLE001 - a model file that cannot be read gives no cause, not a failed view
        return None
    for f in found:
        if f.code == "quantize.per-tensor-collapse":
            return {"kind": "per-tensor weight collapse", "layers": _layer_names(f.evidence.get("layers")),
                    "because": "per-tensor weights leave some channels a handful of INT8 levels"}
    for f in found:
        if f.code == "quantize.channel-range-spread":
            return {"kind": "per-channel activation-range spread behind a per-tensor activation scale",
                    "layers": _layer_names(f.evidence.get("layers")),
                    "because": "per-channel weight ranges of these layers span orders of magnitude; their output "
                               "channels share one per-tensor activation scale, so the small ones collapse"}
    return None


def _layer_names(layers: Any) -> list[str]:
    out = []
    for layer in layers or []:
        name = _short_name(str(layer.get("name") or layer.get("tensor") or ""))
        out.append(f"{layer.get('op', '?')} #{layer.get('index', '?')}" + (f" {name}" if name else ""))
    return out


def _short_name(name: str) -> str:
    """A TFLite fused tensor name (``a/dw1_relu/Relu;a/dw1_bn/...;a/dw1/depthwise``) cut to the part naming the
    convolution (or the first part)."""
    parts = [p for p in name.split(";") if p]
    pick = next((p for p in parts if any(k in p.lower() for k in ("depthwise", "conv", "matmul"))),
                parts[0] if parts else "")
    return pick


def drop_findings(report: Any, *, target: str = "", quantized: Any = None,
                  max_drop_pp: Any = None) -> list[Finding]:
    """``accuracy.drop`` per candidate and condition whose drop passes the threshold with its CI above zero,
    with the suspected cause and the recipes measured against it (``report.fix_trials``).  A warning when the
    whole CI lies past the threshold; info when the CI reaches below it (past the threshold, not surely).

    ``max_drop_pp``: the threshold in pp, or the gate the run uses (its ``max_drop_pp`` and per-condition
    overrides, :func:`~workbench.evaluate.drops.drop_limit`); None: 1 pp."""
    from .drops import drop_limit, drops_beyond
    bad = drops_beyond(report, max_drop_pp)
    if not bad:
        return []
    cause = suspected_cause(quantized, target=target)
    trials = [t for t in getattr(report, "fix_trials", ()) or ()]
    out = []
    for row in bad:
        limit = drop_limit(max_drop_pp, row.condition)
        fp32 = report.row(row.condition, report.reference).accuracy
        tried = [t for t in trials if t.condition == row.condition]
        measured = "; ".join(f"{t.recipe} {_drop_text(t)}" for t in tried)
        fixed = [t for t in tried if not t.error and t.drop_pp is not None and t.drop_ci_low is not None
                 and (t.drop_pp <= limit or t.drop_ci_low <= 0)]
        # a recipe that keeps every layer integer before one that leaves layers in float (off the NPU)
        best = min(fixed, key=lambda t: (bool(getattr(t, "exclude", ())), t.drop_pp), default=None)
        message = (f"{row.model} drops {row.drop_pp:.1f} pp on {row.condition} ({fp32:.1%} -> {row.accuracy:.1%}, "
                   f"95% CI [{row.drop_ci_low:.1f}, {row.drop_ci_high:.1f}] pp, threshold {limit:g} pp)")
        if cause:
            message += f"; suspected: {cause['kind']}" + (f" in {', '.join(cause['layers'][:3])}"
                                                           if cause["layers"] else "")
        if measured:
            message += f"; measured on the spot: {measured}"
        next_step = (f"Quantize with {best.recipe}: measured drop {best.drop_pp:+.1f} pp on {row.condition} "
                     f"(CI [{best.drop_ci_low:+.1f}, {best.drop_ci_high:+.1f}]) instead of {row.drop_pp:+.1f} pp."
                     if best is not None else None)
        if best is not None and best.exclude:
            next_step = (f"{next_step} The excluded layers compute in float (on the CPU of an NPU target): quantize "
                         f"with --exclude and the names in this finding's evidence (fix_trials[].exclude), then "
                         "check the placement.")
        clear = row.drop_ci_low > limit      # the whole CI past the threshold: warning; else info
        if not clear:
            message += f"; its CI reaches below the {limit:g} pp threshold"
        out.append(make("accuracy.drop", message, target=target, next_step=next_step,
                        severity=None if clear else "info", evidence={
            "model": row.model, "condition": row.condition, "n": row.n, "fp32": fp32, "int8": row.accuracy,
            "drop_pp": row.drop_pp, "drop_ci": [row.drop_ci_low, row.drop_ci_high], "threshold_pp": limit,
            "cause": cause, "fix_trials": [t.to_dict() for t in tried],
            "fix": best.recipe if best is not None else None}))
    return out


def _drop_text(t: Any) -> str:
    if t.error or t.drop_pp is None:
        return f"not measured ({t.error or 'no result'})"
    return f"{t.drop_pp:+.1f} pp [{t.drop_ci_low:+.1f}, {t.drop_ci_high:+.1f}]"


#: the guards' issue codes that say the input contract (the model card) is wrong
CONTRACT_ISSUES = ("contract-probably-wrong", "baseline-near-chance")


def contract_findings(report: Any, *, target: str = "", skip_near_chance: bool = False) -> list[Finding]:
    """``model.input-contract`` from the guards' issues saved in the report, one finding per kind of issue
    naming every condition where it was seen (an older report without issues gives none)."""
    out = []
    for code in CONTRACT_ISSUES:
        if code == "baseline-near-chance" and skip_near_chance:
            continue
        seen = [i for i in getattr(report, "issues", ()) or () if i.code == code]
        if not seen:
            continue
        conds = [str(i.evidence.get("condition", "?")) for i in seen]
        if code == "contract-probably-wrong":
            parts = []
            for i in seen:
                e = i.evidence
                probe = e.get("probe_top1") or {}
                own = next(iter(probe.values()), e.get("accuracy"))
                best = e.get("best_alternative")
                alt = next((v for k, v in probe.items() if best and k.startswith(best)), None)
                parts.append(f"{e.get('condition')}: {_pct(own)} with the card, {_pct(alt)} with {best}")
            message = (f"the input contract of {report.reference} is probably wrong on {len(seen)} of "
                       f"{len(report.conditions)} condition(s) ({'; '.join(parts)}): its drops measure the card, "
                       "not quantization")
        else:
            message = (f"FP32 {report.reference} is near chance on {', '.join(conds)}: the input contract is "
                       "probably wrong")
        first = seen[0].evidence
        out.append(make("model.input-contract", message, target=target, evidence={
            "issue": code, "model": report.reference, "conditions": conds,
            "contract": first.get("contract"), "contract_source": first.get("contract_source"),
            "per_condition": [{"condition": i.evidence.get("condition"), "n": i.evidence.get("n"),
                               "accuracy": i.evidence.get("accuracy"),
                               "best_alternative": i.evidence.get("best_alternative"),
                               "probe_top1": i.evidence.get("probe_top1")} for i in seen]},
            next_step=(f"{first['fix']} Check the card on every condition before reading any drop."
                       if first.get("fix") else None)))
    return out


def _pct(v: Any) -> str:
    return "?" if not isinstance(v, (int, float)) else f"{v:.1%}"


def _near_chance_everywhere(report: Any, *, target: str = "") -> list[Finding]:
    n_classes = len(report.classes)
    if n_classes < 2:
        return []
    chance = 1.0 / n_classes
    fp32 = {r.condition: r for r in report.rows if r.is_reference}
    if not fp32:
        return []
    best = max(r.accuracy for r in fp32.values())
    threshold = near_chance_threshold(n_classes)
    if best >= threshold:
        return []
    listed = ", ".join(f"{c} {r.accuracy:.1%}" for c, r in fp32.items())
    return [make("model.input-contract",
                 f"FP32 {report.reference} is near chance ({chance:.1%} for {n_classes} classes) on every "
                 f"condition: {listed}", target=target,
                 evidence={"model": report.reference, "chance": round(chance, 6), "n_classes": n_classes,
                           "threshold": round(threshold, 6), "dataset": report.dataset,
                           "fp32_accuracy": {c: r.accuracy for c, r in fp32.items()},
                           "n": {c: r.n for c, r in fp32.items()}})]
