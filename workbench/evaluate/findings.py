"""Findings of the accuracy stage, computed from an :class:`AccuracyReport`.

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


def findings(report: Any, *, target: str = "", **context: Any) -> list[Finding]:
    out = _near_chance_everywhere(report, target=target)
    out += contract_findings(report, target=target, skip_near_chance=bool(out))
    return out


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
