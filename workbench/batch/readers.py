"""What the batch's reports read back from its output folder: the sweep's recommendations and a target's saved
accuracy and placement reports (typed; None when missing or unreadable).  The summary and the verdict both
read them: their own module keeps the two from importing each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import WorkbenchError


def sweep_recommendation_objects(out_dir: Path, files: dict[str, str]) -> list[Any]:
    """The sweep's :class:`~workbench.sweep.result.Recommendation` per target (none when missing/unreadable)."""
    from .._io import read_json
    from ..sweep.result import Recommendation
    if "sweep" not in files:
        return []
    try:
        return [Recommendation.from_dict(r) for r in read_json(out_dir / files["sweep"])["recommendations"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _stage_results(run_dir: Path, target: str) -> tuple[Any, Any]:
    """The target's saved accuracy report and placement report (typed; None when missing or unreadable)."""
    if not (run_dir / target).is_dir():
        return None, None
    from ..runs import RunFolder
    folder = RunFolder(run_dir, target=target)
    out = []
    for stage in ("accuracy", "placement"):
        try:
            out.append(folder.load(stage))
        except WorkbenchError:      # a damaged record: the summary already says so
            out.append(None)
    return out[0], out[1]
