"""The findings of a run folder: every stage record of every target read and given to the stage rules
(:func:`run_findings`, :func:`target_findings`), and which run a folder the user named means
(:func:`resolve_run`).  The run side reads findings: :mod:`workbench.findings` never imports a run folder."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import WorkbenchError
from .findings import Findings, collect, findings_for, make


@dataclass(frozen=True)
class RunLocation:
    """Where the findings of a folder the user named are read: the run folder, and how it was found."""

    run_dir: Path
    given: Path
    targets: tuple[str, ...] = ()       # the targets of the run (a target folder given: that target)
    note: str = ""                      # how ``given`` became ``run_dir`` ("" when it is the run folder)

    @property
    def run_id(self) -> str:
        return self.run_dir.name


def _stage_record_targets(folder: Path) -> list[str]:
    """The target folders of ``folder`` that hold a stage record (or a batch's error.json)."""
    from .vocab import STAGES, TARGETS
    names = [f"{s}.json" for s in STAGES] + ["error.json"]
    return [t for t in TARGETS if (folder / t).is_dir() and any((folder / t / n).is_file() for n in names)]


def resolve_run(path: str | os.PathLike) -> RunLocation:
    """The run folder behind ``path``, from any working folder.

    ``path`` may be a run folder (``<run>/<target>/<stage>.json``), one target's folder of a run, or the
    folder ``workbench batch --out`` wrote (``index.html``, ``summary.json``, ``runs/<run-id>/``): then the
    run its ``summary.json`` names, else the newest run under ``runs/``, is read and named in ``note``.
    A :class:`WorkbenchError` names the folder and what was expected otherwise."""
    from ._io import read_json
    from .vocab import TARGETS
    given = Path(path)
    root = given.resolve()
    if not root.is_dir():
        raise WorkbenchError(f"{path}: no such run folder; give the folder `workbench batch --out` wrote, or one "
                             "of its runs (runs/<run-id>: one folder per target).")
    if root.name in TARGETS and _stage_record_targets(root.parent) and root.name in _stage_record_targets(root.parent):
        return RunLocation(root.parent, given, (root.name,), note=f"target folder of run {root.parent.name}")
    found = _stage_record_targets(root)
    if found:
        return RunLocation(root, given, tuple(found))
    runs = root / "runs"
    candidates = [p for p in runs.iterdir() if p.is_dir() and _stage_record_targets(p)] if runs.is_dir() else []
    if not candidates:
        if any((root / t).is_dir() for t in TARGETS):
            raise WorkbenchError(f"{path}: its target folders hold no stage record (<target>/<stage>.json) and it "
                                 "has no runs/ folder; run the stage notebooks or `workbench batch` into it first.")
        raise WorkbenchError(f"{path}: no target folders ({', '.join(TARGETS)}) and no runs/<run-id>/ in this "
                             "folder; give the folder `workbench batch --out` wrote or one of its runs.")
    chosen = None
    summary = root / "summary.json"
    if summary.is_file():
        try:
            named = (root / str(read_json(summary)["run_dir"])).resolve()
            chosen = next((c for c in candidates if c.resolve() == named), None)
        except (OSError, ValueError, KeyError, TypeError):
            chosen = None
    how = "the run its summary.json names"
    if chosen is None:
        chosen = max(candidates, key=_newest_record_time)
        how = "the newest run"
    note = (f"batch output {given}: {how}, runs/{chosen.name}"
            + (f" (of {len(candidates)} runs)" if len(candidates) > 1 else ""))
    return RunLocation(chosen, given, tuple(_stage_record_targets(chosen)), note=note)


#: the gate a batch checks its run against, saved in the run folder (``<run>/gate.json``) so that every view
#: of the run judges its accuracy drops by the same ``max_drop_pp`` (per condition) as the gate
RUN_GATE_FILE = "gate.json"


def save_run_gate(run_dir: str | os.PathLike, gate: Any) -> Path:
    """Save ``gate`` (a :class:`~workbench.evaluate.gate.Gate`) as the gate of the run in ``run_dir``."""
    from ._io import atomic_write_json
    return atomic_write_json(Path(run_dir) / RUN_GATE_FILE, {"gate": gate.to_dict()})


def run_gate(run_dir: str | os.PathLike) -> Any:
    """The gate saved in ``run_dir`` by :func:`save_run_gate` (None when the run has none).  A file that
    cannot be read raises a :class:`WorkbenchError` naming it."""
    from ._io import read_json
    from .evaluate.gate import Gate
    path = Path(run_dir) / RUN_GATE_FILE
    if not path.is_file():
        return None
    try:
        return Gate.from_dict(read_json(path)["gate"])
    except (OSError, ValueError, KeyError, TypeError, WorkbenchError) as exc:
        raise WorkbenchError(f"{path}: the run's gate cannot be read ({type(exc).__name__}: {exc}); write it "
                             "again by running the batch with its --gate, or delete the file (1 pp then).") from None


def _newest_record_time(run: Path) -> float:
    times = [p.stat().st_mtime for p in run.glob("*/*.json")]
    return max(times, default=run.stat().st_mtime)


def run_findings(run_dir: str | os.PathLike, *, targets: Iterable[str] | str | None = None) -> Findings:
    """Every finding of a run, per target: THE list every view shows (index.html, summary.json, the reports,
    the explorer's run view, ``workbench findings``, the gate).

    ``run_dir``: a run folder, a target folder of one, or a batch ``--out`` folder (its latest run; see
    :func:`resolve_run`); the answer does not depend on the working folder.  A stage record that cannot be
    read is itself a finding (``run.unreadable-record``, error).  Accuracy drops are judged by the run's gate
    (:func:`run_gate`: its ``max_drop_pp`` per condition), 1 pp without one."""
    from .runs import RunFolder
    from .vocab import TARGETS
    where = resolve_run(run_dir)
    root = where.run_dir
    if isinstance(targets, str):
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    chosen = list(targets) if targets else list(where.targets)
    if not chosen:
        raise WorkbenchError(f"{run_dir}: no target folders ({', '.join(TARGETS)}) in this run folder.")
    groups = []
    for target in chosen:
        folder = RunFolder.__new__(RunFolder)          # read-only: no folder is created
        folder.root, folder.target, folder.path = root, target, root / target
        if folder.path.is_dir():
            groups.append(target_findings(folder))
    return collect(*groups)


def target_findings(folder: Any) -> Findings:
    """The findings of one target's folder of a run (every stage that ran; an unreadable record is an error)."""
    from .vocab import STAGES
    target = folder.target
    results: dict[str, Any] = {}
    groups: list[Findings] = []
    try:
        gate = run_gate(folder.root)
    except WorkbenchError as exc:       # the drops are then judged by 1 pp: say the gate was not read
        gate = None
        groups.append(Findings((make(
            "run.unreadable-record", str(exc)[:400].replace("\n", " "), target=target,
            evidence={"stage": "gate", "file": RUN_GATE_FILE, "error": "WorkbenchError"}),)))
    for stage in STAGES:
        if not folder.file(stage).exists():
            continue
        try:
            results[stage] = folder.load(stage)
        except (WorkbenchError, TypeError, ValueError, KeyError, ImportError, AttributeError, OSError) as exc:
            groups.append(Findings((make(
                "run.unreadable-record", f"{stage}.json cannot be read: {exc}"[:400].replace("\n", " "),
                target=target, evidence={"stage": stage, "file": f"{target}/{stage}.json",
                                         "error": type(exc).__name__}),)))
    quantized = results.get("quantize")
    calibration = results.get("calibration")
    placement = results.get("placement")
    dataset = _dataset_of(folder, calibration)
    if calibration is None and folder.file("calibration").is_file():
        # a record that no longer loads (edited ids, stale hash) is still read as raw data
        from .calibration.findings import file_findings
        raw = Findings(tuple(file_findings(folder.file("calibration"), target=target)))
        groups.append(raw)
        if raw:     # the raw reading says why: the unreadable-record finding adds nothing
            groups = [Findings(tuple(f for f in g if not (f.code == "run.unreadable-record"
                                                           and f.evidence.get("stage") == "calibration")))
                      for g in groups]
    for stage, result in results.items():
        if result is None:
            continue
        context: dict[str, Any] = {}
        if stage == "calibration":
            context["dataset"] = dataset
            context["calibration_file"] = folder.file("calibration")
        elif stage == "timing":
            context["placement"] = placement
            context["quantized"] = quantized
        elif stage == "placement":
            context["quantized"] = quantized
        elif stage == "accuracy":
            context["quantized"] = quantized
            context["gate"] = gate
        groups.append(findings_for(result, target=target, **context))
    return collect(*groups)


def _dataset_of(folder: Any, calibration: Any) -> Any:
    """The run's dataset when it can be loaded cheaply (needed to check test-split ids)."""
    from ._io import local_paths
    record = folder.record("calibration") or folder.record("quantize") or {}
    name = local_paths({"dataset": record.get("dataset")}, base=folder.path)["dataset"]
    if not name or calibration is None:
        return None
    try:
        from .data.loaders import load_dataset
        data = load_dataset(name)
    except WorkbenchError:
        return None
    return data if getattr(data, "hash", None) == calibration.dataset_hash else None
