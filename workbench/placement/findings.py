"""Findings of the placement stage, computed from a :class:`PlacementReport`.

- ``placement.cpu-island``: CPU ops between two NPU segments (one finding per island);
- ``placement.per-channel-slow``: the target table's per-channel model check (imx8mp);
- ``placement.int16-activations``: ops with INT16 feature maps the target puts on the CPU;
- ``placement.compiler-crash``: the BSP's compiler crashed on the model (every op on the CPU; the other
  installed Vela's answer beside it);
- ``placement.bsp-compiler-cpu``: ops the BSP's compiler version puts on the CPU where the newest
  one does not (read from the report when the placement stage records the comparison).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import WorkbenchError
from ..findings import Finding, entry, make

MAX_LISTED = 8


def findings(report: Any, *, target: str = "", **_: Any) -> list[Finding]:
    target = target or report.target
    out: list[Finding] = []
    name = Path(report.model).name
    by_index = {o.index: o for o in report.ops}
    structure = model_structure(report.model)
    from ..models.structure import op_origin
    for island in report.cpu_islands:
        ops = [by_index[i] for i in island.ops if i in by_index]
        listed = ", ".join(f"{o.type} #{o.index}" for o in ops[:MAX_LISTED])
        origins = [op_origin(structure, o.type) for o in ops]
        added = bool(ops) and all(g.startswith("converter") for g in origins)
        source_ops = (structure or {}).get("source_ops", {})
        why = ("; the conversion added them (the source model has "
               + ", ".join(f"{source_ops.get(t, 0)} {t}" for t in sorted({o.type for o in ops}))
               + ", the INT8 file more); the island is the converter's, not your model's") if added else ""
        out.append(make("placement.cpu-island",
                        f"{name} on {target}: {listed} run(s) on the CPU between NPU segments "
                        f"(ops {island.first}-{island.last}){why}", target=target,
                        next_step=entry("convert.added-ops").action if added else None,
                        evidence={"authority": report.authority, "first": island.first, "last": island.last,
                                  "origin": "converter" if added else "model",
                                  "ops": [{"index": o.index, "op": o.type, "name": o.name, "origin": g,
                                           "reasons": [f"{r.constraint}: {r.detail}" for r in o.reasons]}
                                          for o, g in zip(ops, origins)]}))
    cpu_added = [o for o in report.ops if o.placement == "CPU" and op_origin(structure, o.type) != "model"]
    if cpu_added:
        kinds = sorted({o.type for o in cpu_added})
        rules = {o.index: _rules(target, o) for o in cpu_added}
        causes: dict[tuple[str, str], None] = {}
        for o in cpu_added:
            for r in rules[o.index]:
                causes[(o.type, f"{r['rule']}" + (f" ({r['source']})" if r["source"] else ""))] = None
        because = "; ".join(f"{t} by {rule}" for t, rule in causes)
        out.append(make("convert.added-ops",
                        f"{name} on {target}: {len(cpu_added)} op(s) of a type the conversion added run on the CPU "
                        f"({', '.join(f'{o.type} #{o.index}' for o in cpu_added[:MAX_LISTED])})"
                        + (f": {because}" if because else ""), target=target,
                        evidence={"ops": [{"index": o.index, "op": o.type, "origin": op_origin(structure, o.type),
                                           "rules": rules[o.index]} for o in cpu_added],
                                  "source_ops": {k: structure.get("source_ops", {}).get(k, 0) for k in kinds}
                                  if structure else {},
                                  "int8_ops": {k: structure.get("int8_ops", {}).get(k, 0) for k in kinds}
                                  if structure else {}}))
    for f in report.findings:
        if f.check.endswith("model.per_channel"):
            out.append(make("placement.per-channel-slow", f"{name} on {target}: {f.detail}", target=target,
                            evidence={"check": f.check, "detail": f.detail}))
    out += _crash_findings(report, target, name)
    out += _int16_findings(report, target, name)
    out += _bsp_findings(report, target, name)
    return out


def _rules(target: str, op: Any) -> list[dict[str, str]]:
    """The rules that put ``op`` on the CPU: id, the instance detail and the rule's source in the target table
    (empty for a compiler's own reason, e.g. Vela's)."""
    from ..targets import get_target
    try:
        table = get_target(target)
    except WorkbenchError:
        table = None
    out = []
    for r in op.reasons:
        try:
            source = table.constraint(r.constraint).source if table is not None else ""
        except KeyError:
            source = ""
        out.append({"rule": r.constraint, "detail": r.detail, "source": source})
    return out


def model_structure(model: str) -> dict[str, Any] | None:
    """The structural diff recorded in the manifest beside ``model`` (quantize writes it), or None."""
    from ..quantize.manifest import MANIFEST_NAME
    path = Path(model).parent / MANIFEST_NAME
    try:
        import json
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    structure = data.get("structure") if isinstance(data, dict) and data.get("file") == Path(model).name else None
    return structure if isinstance(structure, dict) and structure.get("compared") else None


def _crash_findings(report: Any, target: str, name: str) -> list[Finding]:
    """``placement.compiler-crash``: the BSP's compiler crashed on the model (the report's ``compiler_crash``)."""
    crash = getattr(report, "compiler_crash", None)
    if not crash:
        return []
    n = len(report.ops)
    other = (f"Vela {crash['other_version']} (installed) compiles it: {crash['other_npu_ops']} of {n} ops on the NPU"
             if crash.get("other_version") else crash.get("other_error") or "no other Vela is installed")
    if crash.get("other_version"):
        step = (f"The board compiles with the BSP's Vela {crash['version']} ({crash.get('bsp')}): either take a BSP "
                f"release whose Vela compiles the model (`--bsp`; Vela {crash['other_version']} does), or change "
                f"the model where the compiler fails ({crash['reason']}) and place it again.")
    else:
        step = (f"Change the model where the compiler fails ({crash['reason']}) and place it again; until then "
                "the model runs on the CPU of this target.")
    return [make("placement.compiler-crash",
                 f"{name} on {target}: the BSP's compiler, Vela {crash['version']}, crashed ({crash['reason']}); "
                 f"every op runs on the CPU. {other}", target=target,
                 evidence={k: crash.get(k) for k in ("compiler", "version", "bsp", "reason", "returncode",
                                                     "other_version", "other_npu_ops", "other_error", "tail")},
                 next_step=step)]


def _int16_findings(report: Any, target: str, name: str) -> list[Finding]:
    path = Path(report.model)
    if not path.is_file() or path.suffix.lower() != ".tflite":
        return []
    from ..models.tflite_graph import read_tflite
    from ..targets._constraints import activations
    try:
        graph = read_tflite(path)
    except WorkbenchError:  # the file was replaced by something unreadable: nothing to check
        return []
    int16 = [op for op in graph.ops if any(t.dtype == "INT16" and t.is_quantized for t in activations(graph, op))]
    if not int16:
        return []
    placed = {o.index: o for o in report.ops}
    on_cpu = [placed[op.index] for op in int16 if op.index in placed and placed[op.index].placement == "CPU"]
    if not on_cpu:
        return []
    listed = ", ".join(f"{o.type} #{o.index}" for o in on_cpu[:MAX_LISTED])
    return [make("placement.int16-activations",
                 f"{name} on {target}: {len(on_cpu)} of {len(int16)} op(s) with INT16 activations fall back to "
                 f"the CPU: {listed}", target=target,
                 evidence={"int16_ops": len(int16), "ops": [
                     {"index": o.index, "op": o.type, "name": o.name,
                      "reasons": [f"{r.constraint}: {r.detail}" for r in o.reasons]} for o in on_cpu]})]


def _bsp_findings(report: Any, target: str, name: str) -> list[Finding]:
    """Ops the BSP's compiler puts on the CPU where the newest compiler does not.

    Reads ``report.disagreements_with_newest()`` (the placement stage compares the compiler the
    BSP ships with the newest one installed, e.g. Vela 3.10.0 against Vela 5.x on imx93).
    """
    pick = getattr(report, "disagreements_with_newest", None)
    diffs = tuple(pick()) if callable(pick) else ()
    if not diffs:
        return []
    items = [{"index": d.index, "op": d.type, "name": d.name, "bsp_compiler": d.bsp_compiler,
              "bsp_placement": d.bsp_placement, "newest_compiler": d.other_compiler,
              "newest_placement": d.other_placement, "reason": d.reason} for d in diffs]
    listed = ", ".join(f"{i['op']} #{i['index']}" for i in items[:MAX_LISTED])
    return [make("placement.bsp-compiler-cpu",
                 f"{name} on {target}: {items[0]['bsp_compiler']} (the BSP's) puts {len(items)} op(s) on the CPU "
                 f"that {items[0]['newest_compiler']} places on the NPU: {listed}", target=target,
                 evidence={"bsp": getattr(report, "bsp", ""), "ops": items})]
