"""The placement each authority gives: the rule table, a model already compiled for an NPU, the BSP's Vela
(with its crash, NXP's fork notes and the other Vela versions compared) and NXP's Neutron converter."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

from ..errors import PlacementError, TargetError, WorkbenchWarning
from ..models.tflite_graph import TFLiteGraph, read_tflite
from ..targets import Reason, Target
from ..targets._constraints import has_integer_activations, label
from .ops import CPU, NPU, CompilerDisagreement, CompilerRun, OpPlacement
from .vela import VelaCrash, VelaRun, run_vela, vela_version

NEUTRON_TOOLS = ("neutron-converter", "neutron-compiler")


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
