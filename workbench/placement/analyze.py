"""Where each op of an INT8 .tflite runs on one target, and why.

``analyze_placement(model, target)`` reads the model through
:mod:`workbench.models.tflite_graph` and decides every op's placement:

- ``imx93``: the Vela the chosen BSP release ships compiles the model (see :mod:`.vela`;
  lf-6.6.3_1.0.0: Vela 3.10.0 from its tool env); its own CPU list is the placement, its
  warnings are the reasons, its per-layer table gives cycles/MACs.  The installed (newest)
  Vela compiles it too, and the ops the two place differently are listed as
  ``compiler_disagreements``; ops NXP's Vela fork treats differently carry a note.
- ``imx95``: NXP's ``neutron-converter`` / ``neutron-compiler`` when it is on
  PATH; otherwise the rule table, labelled "predicted".
- ``imx8mp``: the VX delegate rule table, labelled "predicted".

Every report names the BSP release whose rules produced it (``bsp``, default the newest the
tables know) and the compiler and version (``compiler``, ``compiler_version``).

The partitioning is read in execution order: NPU segments are maximal runs of
NPU ops, CPU islands are CPU runs with an NPU segment on both sides (each one is
a round trip between NPU and CPU memory).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._io import sha256_file
from .._results import Result
from ..models.tflite_graph import TFLiteGraph, read_tflite
from ..targets import Finding, Target, get_target
from ..targets._constraints import non_integer_ops
from ..vocab import ALL_NPU_CUSTOM_OPS
from .compilers import (
    NEUTRON_TOOLS,
    _after_crash,
    _check_model_fits,
    _compare_vela,
    _converter_placements,
    _copy_vela_model,
    _fork_notes,
    _precompiled,
    _rule_placement,
    _vela_placements,
    neutron_converter,
)
from .ops import CPU, NPU, CompilerDisagreement, CompilerRun, OpPlacement, Segment
from .vela import VelaCrash, VelaRun, run_vela

LATENCY_NOTE = "a compiler model of the Ethos-U65, not a board measurement"

#: the names of analyze, wherever they are defined (the op records in ``ops``, each authority's placement in
#: ``compilers``; the report and ``analyze_placement`` here)
__all__ = ["CPU", "LATENCY_NOTE", "NEUTRON_TOOLS", "NPU", "PLACEMENT_COLORS", "CompilerDisagreement", "CompilerRun",
           "OpPlacement", "PlacementReport", "Segment", "analyze_placement", "build_report", "cpu_islands",
           "draw_strip", "neutron_converter", "partition", "vela_latency_label"]


def vela_latency_label(version: str) -> str:
    from ..vocab import latency_label
    return latency_label("vela", version=version)


@dataclass(frozen=True)
class PlacementReport(Result):
    """Per-op placement of one model on one target, with the partitioning it implies."""

    target: str
    target_name: str
    model: str
    model_sha256: str
    authority: str                      # "vela 5.2.0", "rule table (predicted)", "neutron-converter"
    label: str                          # "vela", "predicted" or "neutron-converter"
    ops: tuple[OpPlacement, ...]
    npu_ops: int
    cpu_ops: int
    npu_share: float
    npu_segments: int
    segments: tuple[Segment, ...]
    cpu_islands: tuple[Segment, ...]
    non_integer_ops: tuple[int, ...]
    findings: tuple[Finding, ...] = ()
    vela: VelaRun | None = None
    estimated_latency_ms: float | None = None
    latency_label: str = ""
    vela_model: str | None = None       # the _vela.tflite the board loads (imx93)
    notes: tuple[str, ...] = ()
    bsp: str = ""                       # the BSP release whose rules/compiler produced this
    compiler: str = ""                  # "vela", "rule table", "neutron-converter", "compiled model"
    compiler_version: str = ""          # "3.10.0", or the delegate/table version the rules mirror
    compiler_runs: tuple[CompilerRun, ...] = ()
    compiler_disagreements: tuple[CompilerDisagreement, ...] = ()
    #: the BSP's compiler crashed on the model: {compiler, version, reason, tail, other_version, other_npu_ops,
    #: other_error}; every op is then on the CPU (no compiled model for the board)
    compiler_crash: dict | None = None

    @property
    def cpu_op_indices(self) -> tuple[int, ...]:
        return tuple(o.index for o in self.ops if o.placement == CPU)

    @property
    def n_cpu_islands(self) -> int:
        return len(self.cpu_islands)

    @property
    def produced_by(self) -> str:
        """``vela 3.10.0, BSP lf-6.6.3_1.0.0``: which compiler and which release's rules."""
        who = f"{self.compiler} {self.compiler_version}".strip() or self.authority
        return who + (f", BSP {self.bsp}" if self.bsp else "")

    @property
    def fork_notes(self) -> tuple[tuple[int, str], ...]:
        """(op index, note) for every op whose placement NXP's compiler fork changes."""
        return tuple((o.index, n) for o in self.ops for n in o.notes)

    def disagreements_with_newest(self) -> tuple[CompilerDisagreement, ...]:
        """Ops the BSP's compiler puts on the CPU where the newest compiler here puts them on the NPU."""
        return tuple(d for d in self.compiler_disagreements
                     if d.other_is_newest and d.bsp_placement == CPU and d.other_placement == NPU)

    def summary(self) -> str:
        total = len(self.ops)
        text = (f"{Path(self.model).name} on {self.target}: {self.npu_ops}/{total} ops on the NPU "
                f"({self.npu_share:.0%}), {self.npu_segments} NPU segment(s), "
                f"{len(self.cpu_islands)} CPU island(s)")
        if self.estimated_latency_ms is not None:
            text += f", {self.estimated_latency_ms:.4g} ms ({self.latency_label})"
        if self.compiler_disagreements:
            others = sorted({d.other_compiler for d in self.compiler_disagreements})
            text += (f", {len({d.index for d in self.compiler_disagreements})} op(s) placed differently "
                     f"by {', '.join(others)}")
        return text + f" [{self.label}: {self.produced_by}]"

    def _repr_html_(self) -> str:
        from .. import display
        parts = [display.heading(f"Placement on {self.target_name} ({self.target})"),
                 display.paragraph(self.summary()),
                 display.paragraph(f"Authority: {self.authority} ({self.produced_by}). "
                                   f"Model sha256 {self.model_sha256[:16]}...")]
        if self.estimated_latency_ms is not None:
            parts.append(display.paragraph(f"Estimated latency {self.estimated_latency_ms:.4f} ms: "
                                           f"{self.latency_label}."))
        if self.findings:
            parts.append(display.table(("check", "severity", "detail"),
                                       [(f.check, f.severity, f.detail) for f in self.findings],
                                       caption="Model checks"))
        if self.compiler_disagreements:
            parts.append(display.table(
                ("#", "type", "name", "BSP compiler", "placement", "other compiler", "placement", "reason"),
                [(d.index, d.type, display.short_name(d.name), d.bsp_compiler, d.bsp_placement,
                  d.other_compiler, d.other_placement, d.reason) for d in self.compiler_disagreements],
                caption="Ops the compiler versions place differently"))
        if self.cpu_islands:
            parts.append(display.paragraph("CPU islands (NPU -> CPU -> NPU round trips): " + "; ".join(
                f"ops {s.first}-{s.last}" for s in self.cpu_islands)))
        headers = ["#", "type", "name", "placement", "reasons"]
        with_cycles = any(o.cycles is not None for o in self.ops)
        if with_cycles:
            headers += ["cycles", "MACs"]
        rows, styles = [], []
        for o in self.ops:
            row = [o.index, o.type, display.short_name(o.name), o.placement,
                   "; ".join([f"{r.constraint}: {r.detail}" for r in o.reasons] + list(o.notes))]
            if with_cycles:
                row += ["" if o.cycles is None else o.cycles, "" if o.macs is None else o.macs]
            rows.append(row)
            styles.append(display.BAD_STYLE if o.placement == CPU else "")
        cpu = [o for o in self.ops if o.placement == CPU]
        if cpu:     # identical reasons once: "9 ops CONV_2D: INT16 activations ..."
            groups: dict[tuple[str, str], list[int]] = {}
            for o in cpu:
                why = "; ".join([f"{r.constraint}: {r.detail}" for r in o.reasons] + list(o.notes)) or "(no rule)"
                groups.setdefault((o.type, why), []).append(o.index)
            parts.append(display.table(("ops", "type", "why on the CPU", "op indices"),
                                       [(len(ix), op, why, ", ".join(map(str, ix[:30])) + (" ..." if len(ix) > 30
                                                                                            else ""))
                                        for (op, why), ix in sorted(groups.items(), key=lambda g: -len(g[1]))],
                                       caption="CPU fallback, per op type and reason"))
        ops_table = display.table(headers, rows, row_styles=styles, caption="Ops")
        parts.append(ops_table if len(self.ops) <= 20 else
                     f'<details><summary style="cursor:pointer">All {len(self.ops)} ops (index, type, tensor name, '
                     f"placement, reasons)</summary>{ops_table}</details>")
        for note in self.notes:
            parts.append(display.paragraph(note))
        return "".join(parts)

    def plot(self, ax=None):
        """The op sequence as a strip coloured by placement (blue NPU, orange CPU)."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(max(4.0, 0.12 * len(self.ops) + 2), 1.2))
        draw_strip(ax, self, 0)
        ax.set_yticks([0])
        ax.set_yticklabels([f"{self.target} ({self.label})"])
        ax.set_xlabel("op index (execution order)")
        ax.set_xlim(-0.5, max(len(self.ops), 1) - 0.5)
        ax.set_ylim(-0.6, 0.6)
        ax.set_title(self.summary(), fontsize=10)
        return ax


#: Okabe-Ito blue and orange: told apart with any colour vision (and in greyscale: dark vs light)
PLACEMENT_COLORS: dict[str, str] = {NPU: "#0072B2", CPU: "#E69F00"}


def draw_strip(ax, report: PlacementReport, y: float) -> None:
    """One row of cells, one per op, coloured by placement."""
    from matplotlib.patches import Rectangle
    for o in report.ops:
        ax.add_patch(Rectangle((o.index - 0.5, y - 0.4), 1.0, 0.8,
                               facecolor=PLACEMENT_COLORS[o.placement], edgecolor="white", linewidth=0.5))


# --------------------------------------------------------------------------- analysis

def analyze_placement(model: str | os.PathLike, target: str | Target, *, use_vela: bool = True,
                      use_converter: bool = True, vela_output: str | os.PathLike | None = None,
                      use_cache: bool = True, bsp: str | None = None,
                      vela_versions: Sequence[str] | None = None) -> PlacementReport:
    """Place every op of an INT8 ``.tflite`` on ``target`` ('imx8mp', 'imx93', 'imx95').

    ``bsp`` picks the NXP BSP release whose rules (and, on imx93, whose Vela) decide; the
    default is the newest release the tables know.  ``vela_versions`` (imx93) lists Vela
    versions to compile with besides the BSP's; the default compares with the installed
    (newest) Vela, ``()`` compares with none.  ``use_vela=False`` predicts imx93 from its
    table instead of compiling; ``use_converter=False`` ignores a ``neutron-converter`` on
    PATH; ``vela_output`` copies the BSP Vela's ``_vela.tflite`` there (a folder or a file).
    Raises :class:`TargetError` for an unknown target or BSP release or a float model, and
    :class:`~workbench.errors.ModelError` when ``model`` is not a TFLite file.
    """
    tgt = get_target(target, bsp=bsp)
    release = tgt.release
    path = Path(model)
    from ..models.formats import require_int8_tflite_file
    require_int8_tflite_file(path, stage=f"placement on {tgt.id}")   # .onnx/Keras/SavedModel: say what to do
    graph = read_tflite(path)
    _check_model_fits(graph, tgt, path)
    findings = tgt.evaluate_model(graph)
    notes: list[str] = []
    vela_run = None
    crash: dict | None = None
    runs: tuple[CompilerRun, ...] = ()
    disagreements: tuple[CompilerDisagreement, ...] = ()
    compiled_for = {op.type for op in graph.ops} & ALL_NPU_CUSTOM_OPS
    table_version = "" if release is None else (release.compiler_version or release.describe())

    if compiled_for:
        placements, authority, kind = _precompiled(graph, tgt, compiled_for, path)
        compiler, version = "compiled model", ""
    elif tgt.authority == "vela" and use_vela:
        primary = release.compiler_version if release is not None and release.tool_env else None
        try:
            vela_run = run_vela(path, use_cache=use_cache, version=primary)
        except VelaCrash as exc:    # this target's result, not an error for every target
            placements, runs, crash = _after_crash(graph, tgt, exc, use_cache)
            authority, kind = f"vela {exc.version} (crashed)", "vela"
            compiler, version = "vela", exc.version
            notes.append(f"Vela {exc.version}, the compiler of {tgt.bsp}, crashed on this model ({crash['reason']}): "
                         "without a compiled model every op runs on the CPU." + (
                             f" Vela {crash['other_version']} compiles it: {crash['other_npu_ops']} of "
                             f"{len(graph.ops)} ops on the NPU." if crash.get("other_version") else ""))
        else:
            placements = _vela_placements(graph, vela_run, tgt)
            authority, kind = f"vela {vela_run.vela_version}", "vela"
            compiler, version = "vela", vela_run.vela_version
            placements = _fork_notes(placements, tgt, vela_run.vela_version)
            runs, disagreements = _compare_vela(graph, tgt, placements, vela_run, vela_versions, use_cache)
    elif tgt.compiler == "neutron-converter" and use_converter and (converter := neutron_converter()) is not None:
        placements = _converter_placements(graph, tgt, path, converter)
        authority, kind = Path(converter).name, "neutron-converter"
        compiler, version = kind, ""
    else:
        placements = tuple(_rule_placement(graph, tgt, op) for op in graph.ops)
        authority, kind = "rule table (predicted)", "predicted"
        compiler, version = "rule table", table_version
        if tgt.compiler == "neutron-converter" and use_converter:
            notes.append("neutron-converter was not found on PATH: placement predicted from the table.")
        if tgt.authority == "vela":
            notes.append(f"Vela was not run (use_vela=False): placement predicted from the table that "
                         f"mirrors Vela {table_version}.")

    vela_model = None
    if vela_run is not None:
        vela_model = vela_run.vela_model
        if vela_output is not None:
            vela_model = str(_copy_vela_model(vela_run.vela_model, Path(vela_output), path))
    report = build_report(graph, tgt, path, placements, authority=authority, label=kind,
                          findings=findings, vela=vela_run, vela_model=vela_model, notes=tuple(notes))
    return dataclasses.replace(report, bsp=tgt.bsp, compiler=compiler, compiler_version=version,
                               compiler_runs=runs, compiler_disagreements=disagreements, compiler_crash=crash)


def build_report(graph: TFLiteGraph, tgt: Target, path: Path, placements: tuple[OpPlacement, ...], *,
                 authority: str, label: str, findings: tuple[Finding, ...] = (),
                 vela: VelaRun | None = None, vela_model: str | None = None,
                 notes: tuple[str, ...] = ()) -> PlacementReport:
    segments = partition(placements)
    n_npu = sum(1 for p in placements if p.placement == NPU)
    return PlacementReport(
        target=tgt.id, target_name=tgt.name, model=str(path), model_sha256=sha256_file(path),
        authority=authority, label=label, ops=placements, npu_ops=n_npu,
        cpu_ops=len(placements) - n_npu, npu_share=(n_npu / len(placements)) if placements else 0.0,
        npu_segments=sum(1 for s in segments if s.placement == NPU), segments=segments,
        cpu_islands=cpu_islands(segments), non_integer_ops=non_integer_ops(graph), findings=findings,
        vela=vela, estimated_latency_ms=None if vela is None else vela.estimated_latency_ms,
        latency_label=vela_latency_label(vela.vela_version) if vela is not None else "",
        vela_model=vela_model, notes=notes, bsp=tgt.bsp)


def partition(placements: tuple[OpPlacement, ...]) -> tuple[Segment, ...]:
    """Maximal runs of equal placement, in execution order."""
    out: list[Segment] = []
    for p in placements:
        if out and out[-1].placement == p.placement:
            out[-1] = Segment(p.placement, out[-1].ops + (p.index,))
        else:
            out.append(Segment(p.placement, (p.index,)))
    return tuple(out)


def cpu_islands(segments: tuple[Segment, ...]) -> tuple[Segment, ...]:
    """CPU segments with an NPU segment before and after them."""
    return tuple(s for i, s in enumerate(segments)
                 if s.placement == CPU and 0 < i < len(segments) - 1)
