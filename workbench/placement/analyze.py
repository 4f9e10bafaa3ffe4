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
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._io import sha256_file
from .._results import Result
from ..errors import PlacementError, TargetError, WorkbenchWarning
from ..models.tflite_graph import TFLiteGraph, read_tflite
from ..targets import Finding, Reason, Target, get_target
from ..targets._constraints import has_integer_activations, label, non_integer_ops
from ..vocab import ALL_NPU_CUSTOM_OPS, Placement
from .vela import VelaCrash, VelaRun, run_vela, vela_version

NPU, CPU = Placement.NPU, Placement.CPU
NEUTRON_TOOLS = ("neutron-converter", "neutron-compiler")
LATENCY_NOTE = "a compiler model of the Ethos-U65, not a board measurement"


def vela_latency_label(version: str) -> str:
    from ..vocab import latency_label
    return latency_label("vela", version=version)


@dataclass(frozen=True)
class OpPlacement:
    """One op: where it runs and every constraint it violates."""

    index: int
    type: str
    name: str
    placement: str                      # "NPU" or "CPU"
    reasons: tuple[Reason, ...] = ()
    cycles: int | None = None           # imx93: Vela's op cycles (all NNG ops of this TFLite op)
    macs: int | None = None
    notes: tuple[str, ...] = ()         # e.g. where NXP's Vela fork differs from upstream


@dataclass(frozen=True)
class CompilerRun:
    """One compiler's placement of the model, kept for comparison (``--vela-versions``)."""

    compiler: str                       # "vela"
    version: str                        # "5.2.0"
    cpu_ops: tuple[int, ...]
    npu_ops: int
    estimated_latency_ms: float | None = None
    bsp_compiler: bool = False          # True for the compiler the BSP ships (the report's placement)


@dataclass(frozen=True)
class CompilerDisagreement:
    """An op the BSP's compiler places differently from another compiler version."""

    index: int
    type: str
    name: str
    bsp_compiler: str                   # "vela 3.10.0"
    bsp_placement: str
    other_compiler: str                 # "vela 5.2.0"
    other_placement: str
    other_is_newest: bool
    reason: str                         # why the compiler that says CPU says so


@dataclass(frozen=True)
class Segment:
    """A maximal run of consecutive ops with the same placement."""

    placement: str
    ops: tuple[int, ...]

    @property
    def first(self) -> int:
        return self.ops[0]

    @property
    def last(self) -> int:
        return self.ops[-1]


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


def _after_crash(graph: TFLiteGraph, tgt: Target, exc: VelaCrash, use_cache: bool
                 ) -> tuple[tuple[OpPlacement, ...], tuple[CompilerRun, ...], dict]:
    """The BSP's Vela crashed: every op on the CPU (the board gets no compiled model), and the other
    installed Vela's answer beside it (or why there is none)."""
    reason = exc.reason
    placements = tuple(OpPlacement(op.index, op.type, op.name, CPU, (Reason(
        "ethosu.compiler-crash", f"{label(op)}: Vela {exc.version} crashed compiling the model ({reason})"),))
        for op in graph.ops)
    crash: dict = {"compiler": "vela", "version": exc.version, "reason": reason, "tail": exc.tail,
                   "returncode": exc.returncode, "bsp": tgt.bsp}
    runs = [CompilerRun("vela", exc.version, tuple(p.index for p in placements), 0, None, True)]
    other = vela_version()
    if other != exc.version:
        try:
            run = run_vela(graph.path, use_cache=use_cache, version=other)
        except PlacementError as err:
            crash["other_error"] = f"Vela {other}: {getattr(err, 'reason', None) or str(err)[:300]}"
        else:
            theirs = _vela_placements(graph, run, tgt)
            npu = sum(1 for p in theirs if p.placement == NPU)
            runs.append(CompilerRun("vela", run.vela_version, tuple(p.index for p in theirs if p.placement == CPU),
                                    npu, run.estimated_latency_ms))
            crash.update(other_version=run.vela_version, other_npu_ops=npu)
    return placements, tuple(runs), crash


def _fork_notes(placements: tuple[OpPlacement, ...], tgt: Target, version: str) -> tuple[OpPlacement, ...]:
    """Per op, where NXP's Vela fork of the BSP differs from the upstream Vela that ran."""
    from ..targets.imx93 import NXP_FORK_OPS
    if tgt.bsp != "lf-6.6.3_1.0.0" or not version.startswith("3.10"):
        return placements
    out = []
    for p in placements:
        if p.placement == CPU and p.type in NXP_FORK_OPS:
            note = (f"NXP fork: {NXP_FORK_OPS[p.type]}; upstream Vela {version} put it on the CPU, "
                    f"the BSP's compiler ({tgt.bsp}) likely runs it on the NPU")
            p = dataclasses.replace(p, notes=p.notes + (note,))
        out.append(p)
    return tuple(out)


def _compare_vela(graph: TFLiteGraph, tgt: Target, placements: tuple[OpPlacement, ...], primary: VelaRun,
                  versions: Sequence[str] | None, use_cache: bool):
    """Compile with the other Vela versions and list the ops placed differently from the BSP's."""
    newest = vela_version()
    wanted = [newest] if versions is None else [str(v).strip() for v in versions if str(v).strip()]
    others = [v for v in dict.fromkeys(wanted) if v != primary.vela_version]
    if not others:
        return (), ()
    bsp_name = f"vela {primary.vela_version}"
    runs = [CompilerRun("vela", primary.vela_version, tuple(p.index for p in placements if p.placement == CPU),
                        sum(1 for p in placements if p.placement == NPU), primary.estimated_latency_ms, True)]
    disagreements = []
    for v in others:
        run = run_vela(graph.path, use_cache=use_cache, version=v)
        theirs = _vela_placements(graph, run, tgt)
        runs.append(CompilerRun("vela", run.vela_version, tuple(p.index for p in theirs if p.placement == CPU),
                                sum(1 for p in theirs if p.placement == NPU), run.estimated_latency_ms))
        for mine, other in zip(placements, theirs):
            if mine.placement == other.placement:
                continue
            on_cpu = mine if mine.placement == CPU else other
            reason = "; ".join(r.detail for r in on_cpu.reasons) or "placed on the CPU"
            disagreements.append(CompilerDisagreement(
                mine.index, mine.type, mine.name, bsp_name, mine.placement, f"vela {run.vela_version}",
                other.placement, run.vela_version == newest, reason))
    return tuple(runs), tuple(disagreements)


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


def _check_model_fits(graph: TFLiteGraph, tgt: Target, path: Path) -> None:
    if not graph.ops:
        raise PlacementError(f"{path}: the model has no ops in its main subgraph.")
    if not has_integer_activations(graph) and not any(op.is_custom for op in graph.ops):
        raise TargetError(
            f"{path} is a float model (no quantized INT8/UINT8/INT16 feature maps), but {tgt.id} ({tgt.npu}) runs "
            f"INT8. Quantize it first: run `workbench quantize {path} --recipe {tgt.recipe}` "
            f"(recommended for {tgt.id}) and analyse the INT8 .tflite it writes.")


def _rule_placement(graph: TFLiteGraph, tgt: Target, op) -> OpPlacement:
    reasons = tgt.evaluate_op(graph, op)
    return OpPlacement(op.index, op.type, op.name, CPU if reasons else NPU, reasons)


def _precompiled(graph: TFLiteGraph, tgt: Target, kinds: set[str], path: Path):
    if not kinds <= tgt.npu_custom_ops:
        raise TargetError(
            f"{path} is already compiled for another NPU (custom op(s) {', '.join(sorted(kinds))}), "
            f"not for {tgt.id}. Analyse the INT8 .tflite from before compilation.")
    out = []
    for op in graph.ops:
        if op.type in tgt.npu_custom_ops:
            out.append(OpPlacement(op.index, op.type, op.name, NPU))
        else:
            out.append(OpPlacement(op.index, op.type, op.name, CPU, (Reason(
                f"{tgt.id}.compiled", f"{label(op)} was left on the CPU when the model was compiled"),)))
    return tuple(out), "compiled model", "compiled"


def _vela_reason_id(text: str) -> str:
    from ..targets.imx93 import VELA_REASON_IDS
    for needle, cid in VELA_REASON_IDS:
        if needle.lower() in text.lower():
            return cid
    return "ethosu.vela"


def _vela_placements(graph: TFLiteGraph, run: VelaRun, tgt: Target) -> tuple[OpPlacement, ...]:
    cpu_names = {name for _, name in run.cpu_ops}
    by_name: dict[str, list] = {}
    for w in run.warnings:
        by_name.setdefault(w.name, []).append(w)
    known = {op.name for op in graph.ops}
    unmatched = sorted(cpu_names - known)
    if unmatched:
        warnings.warn(f"{graph.path}: Vela listed CPU op(s) that match no op of the model: "
                      f"{', '.join(unmatched[:5])}", WorkbenchWarning, stacklevel=3)
    cycles, macs = _attribute_layers(graph, run)
    out = []
    for op in graph.ops:
        if op.name in cpu_names:
            reasons = tuple(Reason(_vela_reason_id(w.reason), f"{label(op)}: {w.reason}")
                            for w in by_name.get(op.name, ()))
            if not reasons:
                reasons = (Reason("ethosu.vela", f"{label(op)} placed on the CPU by Vela"),)
            out.append(OpPlacement(op.index, op.type, op.name, CPU, reasons,
                                   cycles.get(op.index), macs.get(op.index)))
        else:
            out.append(OpPlacement(op.index, op.type, op.name, NPU, (), cycles.get(op.index),
                                   macs.get(op.index)))
    return tuple(out)


def _attribute_layers(graph: TFLiteGraph, run: VelaRun) -> tuple[dict[int, int], dict[int, int]]:
    """Sum Vela's per-layer rows onto the TFLite op they came from.

    A row whose name is an op's name belongs to that op; rows Vela renamed while
    decomposing an op (``..._softmax_3``, ``..._intermediate``) are held until the
    next row that names an op of the same original operator type, else they go
    to the previous op.
    """
    index_by_name = {op.name: op.index for op in graph.ops}
    cycles: dict[int, int] = {}
    macs: dict[int, int] = {}
    pending: list = []
    previous = None

    def add(idx: int, layer) -> None:
        cycles[idx] = cycles.get(idx, 0) + layer.op_cycles
        macs[idx] = macs.get(idx, 0) + layer.mac_count

    for layer in run.layers:
        idx = index_by_name.get(layer.name)
        if idx is None:
            pending.append(layer)
            continue
        for p in pending:
            if p.original_operator == layer.original_operator or previous is None:
                add(idx, p)
            else:
                add(previous, p)
        pending = []
        add(idx, layer)
        previous = idx
    if previous is not None:
        for p in pending:
            add(previous, p)
    return cycles, macs


def _copy_vela_model(src: str, dest: Path, model: Path) -> Path:
    from .._io import atomic_write_bytes
    target = dest / f"{model.stem}_vela.tflite" if (dest.is_dir() or not dest.suffix) else dest
    return atomic_write_bytes(target, Path(src).read_bytes())


def neutron_converter() -> str | None:
    """The path of NXP's Neutron converter if one is on PATH, else None."""
    for name in NEUTRON_TOOLS:
        found = shutil.which(name)
        if found:
            return found
    return None


def _converter_placements(graph: TFLiteGraph, tgt: Target, path: Path, tool: str):
    """Run the Neutron converter and read which ops it left outside ``NeutronGraph`` nodes."""
    with tempfile.TemporaryDirectory(prefix="neutron-") as tmp:
        out_path = Path(tmp) / f"{path.stem}_neutron.tflite"
        cmd = [tool, "--input", str(path), "--output", str(out_path), "--target", tgt.id]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=1800)
        if proc.returncode != 0 or not out_path.is_file():
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-10:])
            raise PlacementError(f"{path}: {Path(tool).name} failed for {tgt.id} (exit "
                                 f"{proc.returncode}).\ncommand: {' '.join(cmd)}\n{tail}")
        converted = read_tflite(out_path)
    cpu_names = {op.name for op in converted.ops if op.type not in tgt.npu_custom_ops}
    out = []
    for op in graph.ops:
        if op.name in cpu_names:
            out.append(OpPlacement(op.index, op.type, op.name, CPU, (Reason(
                "neutron.converter", f"{label(op)} left on the CPU by {Path(tool).name}"),)))
        else:
            out.append(OpPlacement(op.index, op.type, op.name, NPU))
    return tuple(out)
