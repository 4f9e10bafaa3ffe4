"""``workbench.batch``: the stage notebooks per target with papermill, reports people can share.

One module, one job:

- :mod:`.pipeline`  ``run_batch`` (the verb, a short named pipeline);
- :mod:`.result`    :class:`BatchResult` (what it produced; the summary writers read it);
- :mod:`.options`   :class:`BatchOptions` and ``batch_request`` (keywords -> a RunSpec template + options);
- :mod:`.execute`   papermill execution of one notebook, :class:`StageRun`, :class:`TargetRun`;
- :mod:`.export`    self-contained, path-scrubbed HTML of an executed notebook;
- :mod:`.summary`   ``summary.json``, ``summary.csv`` and ``index.html``;
- :mod:`.commands`  ``workbench batch``.

The quality gate is :mod:`workbench.evaluate.gate` (the one gate every ``--gate`` reads);
its names are re-exported here for the batch's users.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> module that defines it; imported on first use so that `workbench --help` (which imports
# .commands, hence this package) stays instant
_EXPORTS = {
    **dict.fromkeys(("Gate", "GateResult", "GateViolation", "QualityGate", "check_quality_gate", "load_gate"),
                    "workbench.evaluate.gate"),
    **dict.fromkeys(("KERNEL", "NOTEBOOKS_DIR", "StageRun", "TargetRun"), "workbench.batch.execute"),
    **dict.fromkeys(("Scrubber", "export_html", "external_references", "make_self_contained"),
                    "workbench.batch.export"),
    **dict.fromkeys(("STAGE_NAMES", "STAGE_NOTEBOOKS", "run_batch"), "workbench.batch.pipeline"),
    **dict.fromkeys(("EXIT_FAILED", "EXIT_OK", "BatchResult"), "workbench.batch.result"),
    **dict.fromkeys(("write_index", "write_summary"), "workbench.batch.summary"),
    **dict.fromkeys(("BatchOptions", "batch_request"), "workbench.batch.options"),
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'workbench.batch' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
