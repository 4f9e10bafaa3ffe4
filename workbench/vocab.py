"""The project's vocabulary, defined once: target ids, stage names, recipe and strategy names,
NPU custom-op names and the labels that say where a latency comes from.

Every other module imports these names instead of writing the strings again (a name written
twice is a bug waiting).  The enums are ``StrEnum``: a member *is* its string, so
``Recipe.A8W8_PC == "a8w8_pc"`` and JSON files keep plain strings.

Adding a target: add it to :class:`TargetId` and :data:`NPU_CUSTOM_OPS`, then write
``workbench/targets/<id>.py``, ``docs/targets/<id>.md`` and its tests (``CONTRIBUTING.md``;
``tests/test_vocab.py`` fails until all exist).
"""

from __future__ import annotations

from enum import StrEnum


# -- targets -----------------------------------------------------------------------------------
class TargetId(StrEnum):
    """The i.MX NPUs the workbench knows."""

    IMX8MP = "imx8mp"
    IMX93 = "imx93"
    IMX95 = "imx95"


#: every target id, in display order
TARGETS: tuple[str, ...] = tuple(t.value for t in TargetId)

#: custom ops that stand for a part of the graph an NPU runs (after its compiler/converter)
NPU_CUSTOM_OPS: dict[str, frozenset[str]] = {
    TargetId.IMX8MP.value: frozenset({"vsi-npu"}),                    # a precompiled NBG graph
    TargetId.IMX93.value: frozenset({"ethos-u"}),                     # Vela's compiled command stream
    TargetId.IMX95.value: frozenset({"NeutronGraph", "NeutronOp"}),   # the Neutron converter's ops
}

#: every NPU custom-op name of every target
ALL_NPU_CUSTOM_OPS: frozenset[str] = frozenset().union(*NPU_CUSTOM_OPS.values())


# -- stages ------------------------------------------------------------------------------------
class Stage(StrEnum):
    """The pipeline stages a run folder holds, in order."""

    CALIBRATION = "calibration"
    QUANTIZE = "quantize"
    ACCURACY = "accuracy"
    PLACEMENT = "placement"
    TIMING = "timing"


STAGES: tuple[str, ...] = tuple(s.value for s in Stage)

#: the notebook of each stage (``notebooks/<name>.ipynb``)
STAGE_NOTEBOOKS: dict[str, str] = {
    Stage.CALIBRATION.value: "10_calibration_set",
    Stage.QUANTIZE.value: "20_quantize",
    Stage.ACCURACY.value: "30_accuracy_by_condition",
    Stage.PLACEMENT.value: "40_op_placement",
    Stage.TIMING.value: "50_board_timing",
}
SUMMARY_NOTEBOOK = "90_summary"

#: the result type each stage saves (``module:class``): what a run folder or a store builds from a record
#: (a record never chooses the code that reads it)
STAGE_TYPES: dict[str, str] = {
    Stage.CALIBRATION.value: "workbench.calibration.curate:CalibrationSet",
    Stage.QUANTIZE.value: "workbench.quantize.engine:QuantizedModel",
    Stage.ACCURACY.value: "workbench.evaluate.accuracy:AccuracyReport",
    Stage.PLACEMENT.value: "workbench.placement.analyze:PlacementReport",
    Stage.TIMING.value: "workbench.board.timing:TimingResult",
}


# -- recipes and calibration strategies --------------------------------------------------------
class Recipe(StrEnum):
    """Named quantization recipes: ``a<act bits>w<weight bits>_<pc|pt>[+<transform>]``."""

    A8W8_PC = "a8w8_pc"
    A8W8_PT = "a8w8_pt"
    A16W8_PC = "a16w8_pc"


RECIPES: tuple[str, ...] = tuple(r.value for r in Recipe)
DEFAULT_RECIPE = Recipe.A8W8_PC
#: in batch/run parameters: the recipe the target's table recommends
AUTO_RECIPE = "auto"


class Strategy(StrEnum):
    """Calibration-set curation strategies."""

    RANDOM = "random"
    STRATIFIED = "stratified"
    COVERAGE = "coverage"


STRATEGIES: tuple[str, ...] = tuple(s.value for s in Strategy)
DEFAULT_STRATEGY = Strategy.STRATIFIED


# -- placement, findings, run status, timing runner, delegate coverage, model origin --------------
class Placement(StrEnum):
    """Where one op runs."""

    NPU = "NPU"
    CPU = "CPU"


class Severity(StrEnum):
    """How much a finding matters, lowest first (the order ranks them)."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


SEVERITIES: tuple[str, ...] = tuple(s.value for s in Severity)


class Status(StrEnum):
    """How a target (or a stage notebook) of a run ended."""

    OK = "ok"
    FAILED = "failed"
    INCOMPLETE = "incomplete"


class Runner(StrEnum):
    """How a model is timed: the workbench's Python runner or the BSP's ``benchmark_model`` on a board,
    or this machine's CPU."""

    PYTHON = "python"
    BENCHMARK_MODEL = "benchmark_model"
    LOCAL = "local"


#: the runners a board takes (``local`` is the host CPU, not a board runner)
BOARD_RUNNERS: tuple[str, ...] = (Runner.PYTHON.value, Runner.BENCHMARK_MODEL.value)


class Coverage(StrEnum):
    """How much of the graph a board's delegate took, as its output says."""

    COMPLETE = "complete"
    PARTIAL = "partial"
    NONE = "none"
    UNKNOWN = "unknown"


class ModelOrigin(StrEnum):
    """Where a built-in model's weights come from."""

    SHIPPED = "shipped"          # the weights shipped with the package
    RETRAINED = "retrained"      # trained again from the shipped recipe (``retrain=True``)
    TRAINED = "trained"          # trained for another dataset, seed or epoch count


# -- where a latency comes from ----------------------------------------------------------------
class LatencySource(StrEnum):
    """Kinds of latency number; :func:`latency_label` builds the text shown beside one."""

    BOARD = "board"              # measured on a board through its NPU delegate
    BOARD_CPU = "board-cpu"      # measured on a board, CPU only (no delegate)
    HOST_CPU = "host-cpu"        # measured on this machine's CPU: not an NPU
    VELA = "vela"                # Vela's compiler estimate (imx93), not a measurement
    REPLAYED = "replayed"        # a recorded board measurement replayed from a file


LATENCY_SOURCES: tuple[str, ...] = tuple(k.value for k in LatencySource)
#: the kinds that were measured on a board
BOARD_SOURCES = frozenset({LatencySource.BOARD, LatencySource.BOARD_CPU})

HOST_CPU_LABEL = "host CPU (not an NPU)"


def latency_label(kind: str, *, board: str | None = None, delegate: str | None = None,
                  version: str | None = None, date: str | None = None) -> str:
    """The one text for each kind of latency number.

    >>> latency_label("board", board="evk93", delegate="libethosu_delegate.so")
    'board evk93 via libethosu_delegate.so'
    >>> latency_label("board-cpu", board="evk93")
    'board evk93 CPU only (no delegate)'
    >>> latency_label("host-cpu")
    'host CPU (not an NPU)'
    >>> latency_label("vela", version="5.2.0")
    'Vela 5.2.0 estimate'
    >>> latency_label("replayed", board="evk93", date="2026-11-30")
    'replayed from evk93 2026-11-30'
    """
    kind = LatencySource(kind)
    name = board or "?"
    if kind is LatencySource.BOARD:
        return f"board {name} via {delegate}" if delegate else f"board {name} via its delegate"
    if kind is LatencySource.BOARD_CPU:
        return f"board {name} CPU only (no delegate)"
    if kind is LatencySource.HOST_CPU:
        return HOST_CPU_LABEL
    if kind is LatencySource.VELA:
        return f"Vela {version} estimate" if version else "Vela estimate"
    return "replayed from " + " ".join(p for p in (board, date) if p) if (board or date) else "replayed"


def is_board_source(kind: str | None) -> bool:
    """True for a latency measured on a board (through its delegate or on its CPU)."""
    return kind in BOARD_SOURCES
