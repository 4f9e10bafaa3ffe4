"""The one quality gate: what a deployment may accept, read by every command that takes ``--gate``.

A :class:`Gate` is data (frozen, validated at construction, from keyword arguments
or a YAML file).  Two checks read it and return every violation with its reason,
never only the first:

- :func:`check_gate` on an :class:`~workbench.evaluate.accuracy.AccuracyReport`
  (``workbench evaluate --gate``): the ``accuracy`` section;
- :func:`check_quality_gate` on a :class:`~workbench.runs.RunSummary`
  (``workbench batch --gate``): every section, per target.

YAML form (every section and key optional; a limit a file does not state is not checked)::

    accuracy:
      max_drop_pp: 3.0            # largest FP32 -> INT8 top-1 drop, percentage points
      min_agreement: 0.97         # smallest FP32/INT8 argmax agreement (fraction)
      use_ci: false               # judge the upper end of the drop's CI (evaluate only)
      models: [a8w8_pc]           # which candidates (evaluate only; default all)
      per_condition:              # per-condition overrides: a number (max_drop_pp) or a mapping
        sensor-noise: 5.0
        low-light: {max_drop_pp: 4.0, min_agreement: 0.9}
    placement:
      min_npu_share: 0.9          # every target, or {imx8mp: 0.9, imx93: 1.0}
      max_cpu_islands: 0
    latency:
      max_ms: 5.0
      statistic: p50              # p50 | p99
      source: measured            # measured | board | vela
      allow_missing: false        # source board: pass (noted) when there is no board measurement
    findings:
      max_severity: warning       # fail on any finding more severe (an error); see docs/findings.md

Every number must be finite (NaN compares false with every value and would pass
anything): a NaN or infinite limit is refused with its key's name.

Extending the gate (a new section or key): add the field to :class:`Gate` (validated
in ``__post_init__``), one row to :data:`SCHEMA` (``section -> key -> (field, parse)``),
the check in :func:`check_quality_gate` (and in :func:`check_gate` if an accuracy
report holds what it needs), a line in ``Gate.summary`` and in the committed ``gate.yaml``.

Where each part lives: :class:`Gate`, :data:`SCHEMA` and :func:`load_gate` in ``schema``; the parsing of one
value and :class:`ConditionLimit` in ``limits``; the results and both checks in ``checks``.
"""

from __future__ import annotations

from .checks import GateReport, GateResult, GateViolation, check_gate, check_quality_gate, get_target
from .limits import ConditionLimit
from .schema import DEFAULT_MAX_DROP_PP, GATE_LATENCY_SOURCES, LATENCY_STATISTICS, SCHEMA, Gate, QualityGate, load_gate

__all__ = ["DEFAULT_MAX_DROP_PP", "GATE_LATENCY_SOURCES", "LATENCY_STATISTICS", "SCHEMA", "ConditionLimit", "Gate",
           "GateReport", "GateResult", "GateViolation", "QualityGate", "check_gate", "check_quality_gate",
           "get_target", "load_gate"]
