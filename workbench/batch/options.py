"""What a batch is asked: a :class:`~workbench.pipeline.RunSpec` (what each target computes) and
:class:`BatchOptions` (how the batch runs: where it writes, how many targets at once, which stages,
the gate, the boards).  :func:`batch_request` turns ``run_batch``'s keywords into the two."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from ..errors import BatchError, WorkbenchError
from ..pipeline.spec import RunSpec, parameter_names
from .execute import KERNEL

__all__ = ["BatchOptions", "batch_request"]


@dataclass(frozen=True)
class BatchOptions:
    """How a batch runs (see :func:`~workbench.batch.run_batch` for each field)."""

    out: str | os.PathLike = "reports"
    gate: Any = None
    jobs: int = 1
    run_id: str | None = None
    board: str | Mapping[str, str] | None = None
    record: str | os.PathLike | None = None
    stages: Sequence[str] | None = None
    parameters: Mapping[str, Any] | None = None
    target_parameters: Mapping[str, Mapping[str, Any]] | None = None
    kernel: str = KERNEL
    notebooks_dir: str | os.PathLike | None = None
    timeout: float | None = None
    progress: bool = True
    reuse: bool = True
    quiet: bool = True
    sweep: bool = False


#: run_batch keywords that name a timing setting differently from its notebook parameter
_RENAMED = {"timing_runs": "timing_runs", "timing_warmup": "timing_warmup"}


def batch_request(spec: RunSpec | None = None, options: BatchOptions | None = None,
                  **keywords: Any) -> tuple[RunSpec, BatchOptions]:
    """``run_batch``'s keywords as a spec template (no target yet, not resolved: nothing is loaded before the
    kernels start) and the batch's options.  A keyword is a notebook parameter of the spec
    (:func:`~workbench.pipeline.parameter_names`: ``model``, ``dataset``, ``recipe``, ``calibration_size``...)
    or a :class:`BatchOptions` field; giving ``spec``/``options`` and the same keywords is refused."""
    spec_names = set(parameter_names()) - {"target", "board", "record"}
    option_names = {f.name for f in fields(BatchOptions)}
    unknown = sorted(set(keywords) - spec_names - option_names)
    if unknown:
        raise TypeError(f"run_batch() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
    spec_keywords = {k: v for k, v in keywords.items() if k in spec_names}
    option_keywords = {k: v for k, v in keywords.items() if k in option_names}
    if spec is not None and spec_keywords:
        raise BatchError(f"give `spec` or its parameters ({', '.join(sorted(spec_keywords))}), not both.")
    if options is not None and option_keywords:
        raise BatchError(f"give `options` or its fields ({', '.join(sorted(option_keywords))}), not both.")
    if spec is None:
        try:
            spec = RunSpec.from_parameters(spec_keywords, resolve=False)
        except WorkbenchError as exc:
            raise BatchError(str(exc)) from None
    return spec, options if options is not None else BatchOptions(**option_keywords)
