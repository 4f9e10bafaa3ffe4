"""npu-workbench: FP32 to INT8 on i.MX NPUs, and the truth about what happens on the way.

Notebook-facing verbs and result types only.  Names are imported lazily so that
``import workbench`` (and ``workbench --help``) stays instant: TensorFlow, ONNX
Runtime and Vela load only when a verb that needs them runs.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.2.0"

# name -> module that defines it.  Keep one block per pipeline stage.
_EXPORTS = {
    # errors
    "WorkbenchError": "workbench.errors",
    "WorkbenchWarning": "workbench.errors",
    # data (stage 0)
    "Dataset": "workbench.data.dataset",
    "load_dataset": "workbench.data.loaders",
    "register_condition": "workbench.data.conditions",
    "list_conditions": "workbench.data.conditions",
    "apply_condition": "workbench.data.conditions",
    # models
    "reference_model": "workbench.models.reference",
    "InputContract": "workbench.models.contract",
    "resolve_contract": "workbench.models.contract",
    "keypoint_model": "workbench.models.keypoints",
    "KeypointModel": "workbench.models.keypoints",
    "ReferenceModel": "workbench.models.reference",
    "model_format": "workbench.models.formats",
    # calibration (stage 1)
    "curate_calibration_set": "workbench.calibration.curate",
    "CalibrationSet": "workbench.calibration.curate",
    "audit_coverage": "workbench.calibration.audit",
    "CoverageAudit": "workbench.calibration.audit",
    "compare_calibration_strategies": "workbench.calibration.experiment",
    "CalibrationExperiment": "workbench.calibration.experiment",
    # quantize (stage 2)
    "QuantRecipe": "workbench.quantize.recipe",
    "get_recipe": "workbench.quantize.recipe",
    "quantize": "workbench.quantize.engine",
    "QuantizedModel": "workbench.quantize.engine",
    "inspect_model": "workbench.quantize.inspect",
    "ModelInspection": "workbench.quantize.inspect",
    "layer_errors": "workbench.quantize.layer_errors",
    "LayerErrors": "workbench.quantize.layer_errors",
    # evaluate (stage 3)
    "compare_accuracy": "workbench.evaluate.accuracy",
    "FidelityRow": "workbench.evaluate.fidelity",
    "AccuracyReport": "workbench.evaluate.accuracy",
    "Gate": "workbench.evaluate.gate",
    "check_gate": "workbench.evaluate.gate",
    "GateResult": "workbench.evaluate.gate",
    # targets and placement (stage 4)
    "get_target": "workbench.targets",
    "list_targets": "workbench.targets",
    "analyze_placement": "workbench.placement.analyze",
    "model_graph": "workbench.placement.graph",
    "activation_sqnr": "workbench.placement.graph",
    "ModelGraph": "workbench.placement.graph",
    "PlacementReport": "workbench.placement.analyze",
    "compare_placement": "workbench.placement.compare",
    "PlacementComparison": "workbench.placement.compare",
    # board timing (stage 5)
    "load_boards": "workbench.board.inventory",
    "time_on_board": "workbench.board.timing",
    "TimingResult": "workbench.board.timing",
    "parse_benchmark_output": "workbench.board.parse",
    "BenchmarkLog": "workbench.board.parse",
    # findings (every stage)
    "Finding": "workbench.findings",
    "Findings": "workbench.findings",
    "findings_for": "workbench.findings",
    "run_findings": "workbench.run_findings",
    "resolve_run": "workbench.run_findings",
    "run_gate": "workbench.run_findings",
    "try_fixes": "workbench.evaluate.remedies",
    # runs, batch, explorer
    "RunFolder": "workbench.runs",
    "StageChain": "workbench.chain",
    "CalibrationOptions": "workbench.chain",
    "ChainResult": "workbench.chain",
    "RunSpec": "workbench.pipeline",
    "Pipeline": "workbench.pipeline",
    "EvaluationOptions": "workbench.pipeline",
    "PlacementOptions": "workbench.pipeline",
    "TimingSettings": "workbench.pipeline",
    "run_batch": "workbench.batch",
    "BatchResult": "workbench.batch",
    "summarize_run": "workbench.run_summary",
    "RunSummary": "workbench.run_summary",
    "explorer": "workbench.explore",
    # trade-offs: the demo model, sweeps, run diff
    "tradeoff_model": "workbench.models.tradeoff",
    "TradeoffModel": "workbench.models.tradeoff",
    "run_sweep": "workbench.sweep.run",
    "SweepSpec": "workbench.sweep.plan",
    "SweepResult": "workbench.sweep.result",
    "diff_runs": "workbench.diff",
    "RunDiff": "workbench.diff",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'workbench' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


def _in_ipython() -> bool:
    import sys
    ipython = sys.modules.get("IPython")
    return ipython is not None and getattr(ipython, "get_ipython", lambda: None)() is not None


if _in_ipython():   # a notebook: a WorkbenchWarning prints as one line, without the cell's temp file and source
    from .display import compact_warnings as _compact_warnings
    _compact_warnings()
