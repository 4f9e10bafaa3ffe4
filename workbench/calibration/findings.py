"""Findings of the calibration stage, computed from a :class:`CalibrationSet`, a calibration file or a
:class:`CoverageAudit`.

- ``calibration.condition-missing`` / ``calibration.condition-under-represented``: the set against
  its deployment mix (``target_shares``);
- ``calibration.too-small``: fewer than ``RECOMMENDED_MIN`` samples;
- ``calibration.test-ids``: ids of the dataset's ``test`` split in the set (needs the dataset, or
  ids spelled ``test-...`` as the built-in data spells them);
- ``calibration.duplicates``: an id listed twice;
- ``calibration.test-content``: calibration samples whose pixels are test images under other ids
  (pixel hashes, exact and after the contract's resize: ``calibration/leakage.py``; needs the dataset);
- ``calibration.hash-mismatch``: a file whose stored hash is not the hash of its ids;
- ``calibration.clipping``: the coverage audit's layers that clip beyond its threshold.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from ..findings import Finding, make
from .audit import CoverageAudit
from .curate import RECOMMENDED_MIN, UNDER_REPRESENTED, CalibrationSet, content_hash

MAX_LISTED = 8


def findings(result: Any, *, target: str = "", dataset: Any = None,
             calibration_file: str | os.PathLike | None = None, input_size: Any = None, **_: Any) -> list[Finding]:
    if isinstance(result, CoverageAudit):
        return audit_findings(result, target=target)
    out = set_findings(result, target=target, dataset=dataset, input_size=input_size)
    if calibration_file is not None:
        out += file_findings(calibration_file, target=target)
    return out


def set_findings(cal: CalibrationSet, *, target: str = "", dataset: Any = None,
                 input_size: Any = None) -> list[Finding]:
    """What the set covers, what it should not hold."""
    out: list[Finding] = []
    shares = cal.shares()
    missing = [c for c, t in cal.target_shares.items() if t > 0 and cal.conditions.get(c, 0) == 0]
    under = [c for c, t in cal.target_shares.items()
             if t > 0 and cal.conditions.get(c, 0) > 0 and shares.get(c, 0.0) < UNDER_REPRESENTED * t]
    if missing:
        out.append(make("calibration.condition-missing",
                        f"calibration set {cal.id}: no sample of deployment condition(s) {', '.join(missing)}",
                        target=target, evidence={
                            "calibration": cal.id, "missing": missing,
                            "target_shares": {c: cal.target_shares[c] for c in missing},
                            "pool": {c: cal.pool_conditions.get(c, 0) for c in missing}}))
    if under:
        detail = ", ".join(f"{c} {shares[c]:.1%} (target {cal.target_shares[c]:.1%})" for c in under)
        out.append(make("calibration.condition-under-represented",
                        f"calibration set {cal.id}: {detail}", target=target, evidence={
                            "calibration": cal.id, "threshold": UNDER_REPRESENTED,
                            "conditions": [{"condition": c, "samples": cal.conditions.get(c, 0),
                                            "share": round(shares[c], 4), "target_share": cal.target_shares[c],
                                            "pool": cal.pool_conditions.get(c, 0)} for c in under]}))
    if cal.n < RECOMMENDED_MIN:
        out.append(make("calibration.too-small", f"calibration set {cal.id}: {cal.n} samples "
                        f"(fewer than {RECOMMENDED_MIN})", target=target,
                        evidence={"calibration": cal.id, "n": cal.n, "recommended_min": RECOMMENDED_MIN}))
    out += id_findings(cal.sample_ids, where=f"calibration set {cal.id}", target=target, dataset=dataset)
    if dataset is not None and getattr(dataset, "hash", None) == cal.dataset_hash and hasattr(dataset, "x"):
        from .leakage import leak_findings
        out += leak_findings(cal.sample_ids, dataset, where=f"calibration set {cal.id}", target=target,
                             size=input_size)
    return out


def id_findings(sample_ids: Any, *, where: str, target: str = "", dataset: Any = None) -> list[Finding]:
    """Test-split ids and duplicates in a list of sample ids."""
    out: list[Finding] = []
    ids = [str(s) for s in sample_ids]
    dupes = {s: k for s, k in Counter(ids).items() if k > 1}
    if dupes:
        listed = ", ".join(f"{s} x{k}" for s, k in list(dupes.items())[:MAX_LISTED])
        out.append(make("calibration.duplicates", f"{where}: {len(dupes)} sample id(s) listed more than once: "
                        f"{listed}", target=target,
                        evidence={"duplicates": dict(list(dupes.items())[:50]), "n_duplicated": len(dupes),
                                  "n_ids": len(ids), "n_unique": len(set(ids))}))
    split_of: dict[str, str] = {}
    if dataset is not None and hasattr(dataset, "ids") and hasattr(dataset, "split"):
        wanted = set(ids)
        split_of = {str(i): str(s) for i, s in zip(dataset.ids.tolist(), dataset.split.tolist()) if str(i) in wanted}
    test = [s for s in dict.fromkeys(ids) if split_of.get(s, "test" if s.startswith("test-") else "") == "test"]
    if test:
        out.append(make("calibration.test-ids", f"{where}: {len(test)} id(s) of the test split: "
                        + ", ".join(test[:MAX_LISTED]), target=target,
                        evidence={"test_ids": test[:50], "n_test_ids": len(test), "n_ids": len(ids),
                                  "checked_against": "dataset splits" if split_of else "id prefix 'test-'"}))
    return out


def file_findings(path: str | os.PathLike, *, target: str = "") -> list[Finding]:
    """A calibration set file (``workbench calibrate -o``) or a run's ``calibration.json`` record:
    does its stored hash match its ids?  Read as raw JSON, so an edited file is not refused first."""
    from .._io import read_json
    path = Path(path)
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return []
    if isinstance(data, dict) and isinstance(data.get("result"), dict):   # a run folder's stage record
        data = data["result"]
    if not isinstance(data, dict) or "sample_ids" not in data or "dataset_hash" not in data:
        return []
    stored = str(data.get("hash") or "")
    expected = content_hash(tuple(str(s) for s in data["sample_ids"]), str(data["dataset_hash"]))
    if stored and stored != expected:
        return [make("calibration.hash-mismatch", f"{path.name}: stored hash {stored[:12]} is not the hash of "
                     f"its {len(data['sample_ids'])} sample ids ({expected[:12]})", target=target,
                     evidence={"file": str(path), "stored_hash": stored, "computed_hash": expected,
                               "n_ids": len(data["sample_ids"])})]
    return []


def audit_findings(audit: CoverageAudit, *, target: str = "") -> list[Finding]:
    """One finding per deployment condition with layers clipping beyond the audit's threshold; the calibration
    samples that are test images under other ids."""
    out = []
    if audit.test_copies:
        copies = list(audit.test_copies)
        n_exact = sum(c.get("match") == "exact" for c in copies)
        shown = ", ".join(f"{c['calibration']} = {c['test']}" for c in copies[:4])
        out.append(make("calibration.test-content",
                        f"coverage audit of {audit.calibration_id}: {len(copies)} calibration samples are test images "
                        f"under other ids ({n_exact} exact pixel copies, {len(copies) - n_exact} after resize), "
                        f"e.g. {shown}", target=target,
                        evidence={"n_leaks": len(copies), "n_exact": n_exact, "n_after_resize": len(copies) - n_exact,
                                  "leaks": copies[:50]}))
    for cond in audit.conditions:
        risky = [r for r in audit.rows if r.condition == cond and r.at_risk]
        if not risky:
            continue
        worst = max(risky, key=lambda r: r.clip_rate)
        lo, hi = audit.calibrated_ranges.get(worst.layer, (None, None))
        layers = sorted(risky, key=lambda r: -r.clip_rate)
        out.append(make(
            "calibration.clipping",
            f"{cond}: {len(risky)} layer(s) clip more than {audit.clip_threshold:.2%} (worst {worst.layer}: "
            f"{worst.clip_rate:.2%}); the calibration set holds {audit.calibration_conditions.get(cond, 0)} "
            f"{cond} sample(s)", target=target,
            evidence={"condition": cond, "clip_threshold": audit.clip_threshold,
                      "calibration": audit.calibration_id,
                      "calibration_samples": audit.calibration_conditions.get(cond, 0),
                      "worst_layer": worst.layer, "worst_clip_rate": worst.clip_rate,
                      "observed": [worst.observed_min, worst.observed_max], "calibrated": [lo, hi],
                      "layers": [{"layer": r.layer, "clip_rate": round(r.clip_rate, 6)} for r in layers[:20]]},
            next_step=f"Add {cond} samples to the calibration set (stratified or coverage strategy), "
                      "then quantize again."))
    return out
