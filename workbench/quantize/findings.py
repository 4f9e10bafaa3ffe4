"""Findings of the quantize stage, computed from a :class:`ModelInspection` or a :class:`QuantizedModel`.

- ``quantize.float-op-left``: an op computing in float in a model that has integer ops (the
  inspection's ``float_ops``; for ONNX QDQ models ops without an integer kernel between
  DequantizeLinear and QuantizeLinear count too);
- ``quantize.qdq-inside``: QUANTIZE/DEQUANTIZE in the middle of the graph;
- ``quantize.per-tensor-collapse``: per-tensor weights that leave some output channels a few
  INT8 levels (read from the weight bytes in the file);
- ``quantize.channel-range-spread`` (info): per-channel scales spread by orders of magnitude;
- ``quantize.absurd-scale``: an activation scale no real activation reaches (float32-lowest padding);
- ``quantize.xnnpack-refused``: LiteRT's default runtime refuses the file (the manifest's ``runtime``);
- ``model.dynamic-batch``: a dynamic input dimension;
- ``deploy.manifest-sha-mismatch`` / ``deploy.toolchain-drift``: the manifest beside the model
  against the file's bytes and the tools installed now.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import WorkbenchError
from ..findings import Finding, make
from .inspect import ModelInspection

COLLAPSE_LEVELS = 4          # a channel whose largest |q| is at most this keeps ~3 bits or fewer
COLLAPSE_SPREAD = 16.0       # ...and the layer's widest channel spans at least this many times more
SPREAD_RATIO = 100.0         # per-channel scales this far apart: per-tensor would collapse the layer
MAX_LISTED = 12


def findings(result: Any, *, target: str = "", **_: Any) -> list[Finding]:
    if isinstance(result, ModelInspection):
        return inspection_findings(result, target=target)
    return quantized_findings(result, target=target)


# -- the model file ---------------------------------------------------------------------------------
def _op_ref(label: str) -> dict[str, Any]:
    """``"SIN #2 (name)"`` -> ``{"op": "SIN", "index": 2, "name": "name"}``."""
    head, _, rest = label.partition(" (")
    kind, _, index = head.partition(" #")
    try:
        idx: int | None = int(index)
    except ValueError:
        idx = None
    return {"op": kind, "index": idx, "name": rest.removesuffix(")")}


def _has_integer_ops(insp: ModelInspection) -> bool:
    return any(w.n_scales > 0 for w in insp.weights) or any(t.scales for t in insp.tensors if not t.is_constant)


def inspection_findings(insp: ModelInspection, *, target: str = "", excluded: tuple[str, ...] = ()) -> list[Finding]:
    """Findings of the model file itself (float ops, Q/DQ inside, weights, dynamic batch)."""
    out: list[Finding] = []
    name = Path(insp.path).name
    if insp.float_ops and _has_integer_ops(insp):
        ops = [_op_ref(label) for label in insp.float_ops]
        on_purpose = [o for o in ops if o["op"] in excluded or o["name"] in excluded]
        accidental = [o for o in ops if o not in on_purpose]
        if accidental:
            listed = ", ".join(f"{o['op']} #{o['index']}" for o in accidental[:MAX_LISTED])
            out.append(make("quantize.float-op-left",
                            f"{name}: {len(accidental)} op(s) compute in float inside the INT8 model: {listed}",
                            target=target, evidence={"format": insp.format, "ops": accidental}))
        if on_purpose:
            listed = ", ".join(f"{o['op']} #{o['index']}" for o in on_purpose[:MAX_LISTED])
            out.append(make("quantize.float-op-left", f"{name}: {len(on_purpose)} op(s) kept in float on "
                            f"purpose (--exclude): {listed}", target=target, severity="info",
                            evidence={"format": insp.format, "ops": on_purpose, "excluded": list(excluded)}))
    if insp.qdq_inside and _has_integer_ops(insp):
        listed = ", ".join(insp.qdq_inside[:MAX_LISTED])
        out.append(make("quantize.qdq-inside", f"{name}: {len(insp.qdq_inside)} QUANTIZE/DEQUANTIZE op(s) "
                        f"inside the graph: {listed}", target=target,
                        evidence={"format": insp.format, "ops": [_op_ref(q) for q in insp.qdq_inside]
                                  if insp.format == "tflite" else list(insp.qdq_inside)}))
    out += weight_findings(insp, target=target)
    out += absurd_scale_findings(insp, target=target)
    dynamic = dynamic_inputs(insp)
    if dynamic:
        listed = ", ".join(f"{d['tensor']} {d['shape']}" for d in dynamic)
        out.append(make("model.dynamic-batch", f"{name}: input(s) with a dynamic dimension: {listed}",
                        target=target, evidence={"inputs": dynamic}))
    return out


def absurd_scale_findings(insp: ModelInspection, *, target: str = "") -> list[Finding]:
    """``quantize.absurd-scale``: activation tensors whose INT8 range no real activation reaches, read from
    the file (the PAD that explains the others named first)."""
    if insp.format != "tflite":
        return []
    from .runtime_check import absurd_scales, cause, describe_absurd
    try:
        rows = absurd_scales(insp.path)
    except WorkbenchError:   # the file moved since the inspection
        return []
    if not rows:
        return []
    first = cause(rows)
    return [make("quantize.absurd-scale", f"{Path(insp.path).name}: {describe_absurd(rows)}", target=target,
                 evidence={"tensor": first["tensor"], "op": first["op"], "op_index": first["op_index"],
                           "scale": first["scale"], "tensors": rows[:MAX_LISTED]})]


def runtime_findings(runtime: dict[str, Any] | None, name: str, *, target: str = "") -> list[Finding]:
    """``quantize.xnnpack-refused`` from the manifest's ``runtime`` record (runtime_check.check_tflite)."""
    if not runtime or runtime.get("xnnpack", True):
        return []
    return [make("quantize.xnnpack-refused", f"{name}: LiteRT's default runtime refuses the INT8 model (XNNPACK: "
                 f"{runtime.get('xnnpack_error')}); it runs with the builtin kernels only", target=target,
                 evidence={"xnnpack_error": runtime.get("xnnpack_error"), "loaded_by": runtime.get("loaded_by")})]


def range_findings(manifest_path: str | os.PathLike, name: str, *, target: str = "") -> list[Finding]:
    """``quantize.range-outliers`` from the manifest's ``ranges`` record (ranges.py): calibrated ranges at least
    10x wider than the data's 0.1..99.9 percentile range, with min/max calibration."""
    from .._io import read_json
    try:
        ranges = read_json(manifest_path).get("ranges") or {}
    except (OSError, ValueError):
        return []
    rows = ranges.get("outliers") or []
    if not rows or ranges.get("calibrator") != "minmax":
        return []
    listed = ", ".join(f"{r['tensor']!r} [{r['calibrated'][0]:.4g}, {r['calibrated'][1]:.4g}] vs "
                       f"[{r['p0.1']:.4g}, {r['p99.9']:.4g}] ({r['ratio']:g}x)" for r in rows[:4])
    more = f" and {ranges.get('n_outliers', len(rows)) - 4} more" if ranges.get("n_outliers", len(rows)) > 4 else ""
    return [make("quantize.range-outliers",
                 f"{name}: {ranges.get('n_outliers', len(rows))} tensor(s) calibrated far wider than the data's "
                 f"0.1..99.9th percentiles: {listed}{more}", target=target,
                 evidence={"tensors": rows, "n_outliers": ranges.get("n_outliers", len(rows))})]


def clipped_range_findings(manifest_path: str | os.PathLike, name: str, *, target: str = "") -> list[Finding]:
    """``quantize.range-clipped`` from the manifest's ``ranges.clipped`` (ranges.py): AI Edge Quantizer's moving
    average left calibrated ranges holding less than 75% of the data's 0.1..99.9 percentile range."""
    from .._io import read_json
    try:
        ranges = read_json(manifest_path).get("ranges") or {}
    except (OSError, ValueError):
        return []
    rows = ranges.get("clipped") or []
    if not rows or ranges.get("calibrator") != "minmax":
        return []
    n = ranges.get("n_clipped", len(rows))
    listed = ", ".join(f"{r['tensor']!r} [{r['calibrated'][0]:.4g}, {r['calibrated'][1]:.4g}] vs "
                       f"[{r['p0.1']:.4g}, {r['p99.9']:.4g}] ({r['held']:.0%})" for r in rows[:4])
    more = f" and {n - 4} more" if n > 4 else ""
    return [make("quantize.range-clipped",
                 f"{name}: {n} tensor(s) calibrated narrower than the data's 0.1..99.9th percentiles (the moving "
                 f"average of each sample's min/max): {listed}{more}; --calibrator percentile sets them to the data's",
                 target=target, evidence={"tensors": rows, "n_clipped": n})]


def depthwise_spread_findings(manifest_path: str | os.PathLike, name: str, *, target: str = "") -> list[Finding]:
    """``quantize.depthwise-spread`` from the manifest's ``ranges.depthwise_spread`` (aeq_backend.py): a float
    .tflite's depthwise output with one channel far wider than the median one, which ``+cle`` equalises."""
    from .._io import read_json
    try:
        manifest = read_json(manifest_path)
    except (OSError, ValueError):
        return []
    rows = (manifest.get("ranges") or {}).get("depthwise_spread") or []
    if not rows:
        return []
    listed = ", ".join(f"{r['tensor']!r} channel {r['channel']} spans {r['widest']:.4g} ({r['ratio']:g}x the median "
                       f"{r['median']:.4g})" for r in rows[:4])
    return [make("quantize.depthwise-spread",
                 f"{name}: {len(rows)} depthwise output(s) with one channel far wider than the rest: {listed}",
                 target=target, evidence={"tensors": rows})]


def dynamic_inputs(insp: ModelInspection) -> list[dict[str, Any]]:
    """Inputs whose shape has a dynamic (-1 / None / 0) dimension."""
    shapes = {p.name: tuple(p.shape) for p in insp.inputs}
    if insp.format == "tflite":
        from ..models.tflite_graph import read_tflite
        try:
            graph = read_tflite(insp.path)
            shapes = {t.name: tuple(t.shape_signature) for t in graph.input_tensors()}
        except WorkbenchError:  # the file moved since the inspection: the recorded shapes are all we have
            graph = None
    return [{"tensor": n, "shape": [None if d <= 0 else d for d in s],
             "dynamic_axes": [i for i, d in enumerate(s) if d <= 0]}
            for n, s in shapes.items() if any(d <= 0 for d in s)]


def weight_findings(insp: ModelInspection, *, target: str = "") -> list[Finding]:
    """Per-tensor collapse (per-tensor weights) and range spread (per-channel weights)."""
    collapsed, spread = [], []
    for w, levels, scales in _weight_levels(insp):
        if w.channels < 2 or levels is None:
            continue
        if w.n_scales == 1:
            top = int(levels.max())
            live = levels[levels > 0]
            small = np.flatnonzero(levels <= COLLAPSE_LEVELS)
            if top >= 32 and len(small) and (len(live) == 0 or top / max(int(live.min()), 1) >= COLLAPSE_SPREAD):
                ref = _op_ref(w.op)
                collapsed.append({**ref, "tensor": w.tensor, "channels": w.channels,
                                  "collapsed_channels": len(small),
                                  "zero_channels": int(np.sum(levels == 0)),
                                  "levels_min": int(levels.min()), "levels_max": top,
                                  "first_collapsed": [int(c) for c in small[:8]]})
        elif w.n_scales == w.channels and scales is not None and np.min(scales) > 0:
            ratio = float(np.max(scales) / np.min(scales))
            if ratio >= SPREAD_RATIO:
                est = 127.0 / ratio
                spread.append({**_op_ref(w.op), "tensor": w.tensor, "channels": w.channels,
                               "scale_ratio": round(ratio, 1),
                               "per_tensor_levels_smallest": round(est, 2),
                               "channels_below_4_levels_per_tensor": int(np.sum(127.0 * scales / np.max(scales)
                                                                                <= COLLAPSE_LEVELS))})
    out = []
    name = Path(insp.path).name
    if collapsed:
        allow = _what_target_allows(target)
        layers = ", ".join(f"{c['op']} #{c['index']} ({c['collapsed_channels']}/{c['channels']} channels)"
                           for c in collapsed[:MAX_LISTED])
        out.append(make("quantize.per-tensor-collapse",
                        f"{name}: per-tensor weights leave channels <= {COLLAPSE_LEVELS} INT8 levels in "
                        f"{len(collapsed)} layer(s): {layers}; {allow}", target=target,
                        evidence={"layers": collapsed, "collapse_levels": COLLAPSE_LEVELS},
                        next_step=_collapse_next_step(target)))
    if spread:
        layers = ", ".join(f"{c['op']} #{c['index']} ({c['scale_ratio']:.0f}x)" for c in spread[:MAX_LISTED])
        out.append(make("quantize.channel-range-spread",
                        f"{name}: per-channel weight scales span >= {SPREAD_RATIO:.0f}x in {len(spread)} "
                        f"layer(s): {layers}; per-tensor weights would collapse them", target=target,
                        evidence={"layers": spread, "spread_ratio": SPREAD_RATIO},
                        next_step=_collapse_next_step(target)))
    return out


def _per_channel_fast(target: str | None) -> bool | None:
    """The target's table says whether per-channel weights run at full speed (None: no target, or unknown)."""
    if not target:
        return None
    from ..errors import TargetError
    from ..targets import get_target
    try:
        return get_target(target).per_channel_fast
    except TargetError:
        return None


def _what_target_allows(target: str) -> str:
    fast = _per_channel_fast(target)
    if fast is False:
        return (f"{target} takes per-channel weights but runs them slower: per-tensor with cross-layer "
                "equalisation (a8w8_pt+cle) keeps per-tensor speed")
    if fast:
        return f"{target} runs per-channel weights (a8w8_pc)"
    return "use per-channel weights (a8w8_pc), or a8w8_pt+cle where per-tensor is required"


def _collapse_next_step(target: str) -> str:
    fast = _per_channel_fast(target)
    if fast is False:
        return "Quantize with a8w8_pt+cle (cross-layer equalisation), or a8w8_pc if the slowdown is acceptable."
    if fast:
        return f"Quantize with a8w8_pc (per-channel weights): {target} runs them on the NPU."
    return "Quantize with a8w8_pc (per-channel), or a8w8_pt+cle where the target needs per-tensor weights."


def _weight_levels(insp: ModelInspection) -> Iterator[tuple[Any, np.ndarray | None, np.ndarray | None]]:
    """Per weight: the largest |q| of each output channel, and the per-channel scales."""
    arrays = _weight_arrays(insp)
    for w in insp.weights:
        q = arrays.get(w.tensor)
        scales = None
        tensor = next((t for t in insp.tensors if t.name == w.tensor), None)
        if tensor is not None and tensor.scales:
            scales = np.asarray(tensor.scales, dtype=np.float64)
        if q is None or q.ndim <= w.expected_axis or q.shape[w.expected_axis] != w.channels:
            yield w, None, scales
            continue
        moved = np.moveaxis(np.abs(q.astype(np.int64)), w.expected_axis, 0).reshape(w.channels, -1)
        yield w, moved.max(axis=1), scales


def _weight_arrays(insp: ModelInspection) -> dict[str, np.ndarray]:
    """Integer weight arrays by tensor name, read from the file (empty when it is gone)."""
    path = Path(insp.path)
    if not path.is_file():
        return {}
    wanted = {w.tensor for w in insp.weights if w.dtype in ("INT8", "UINT8", "INT4")}
    if not wanted:
        return {}
    try:
        return _tflite_arrays(path, wanted) if insp.format == "tflite" else _onnx_arrays(path, wanted)
    except (WorkbenchError, OSError, ValueError, IndexError, AttributeError, TypeError):
        # an unreadable buffer leaves the weight unchecked, never breaks a report
        return {}


def _tflite_arrays(path: Path, wanted: set[str]) -> dict[str, np.ndarray]:
    from ai_edge_litert import schema_py_generated as schema
    model = schema.ModelT.InitFromPackedBuf(bytearray(path.read_bytes()), 0)
    dtypes = {schema.TensorType.INT8: np.int8, schema.TensorType.UINT8: np.uint8}
    out = {}
    for t in model.subgraphs[0].tensors or []:
        name = t.name.decode("utf-8", "replace") if isinstance(t.name, bytes) else str(t.name)
        if name not in wanted or t.type not in dtypes:
            continue
        buf = model.buffers[t.buffer]
        if buf.data is None or len(buf.data) == 0:
            continue
        out[name] = np.asarray(buf.data, dtype=np.uint8).view(dtypes[t.type]).reshape(tuple(t.shape))
    return out


def _onnx_arrays(path: Path, wanted: set[str]) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    from .inspect import load_onnx
    model = load_onnx(path)
    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer if i.name in wanted}


# -- the quantized model and its manifest --------------------------------------------------------------
def quantized_findings(q: Any, *, target: str = "") -> list[Finding]:
    """Findings of a :class:`QuantizedModel`: the file (re-inspected) and its manifest."""
    from .inspect import inspect_model
    excluded = tuple(getattr(q.recipe, "exclude", ()) or ())
    out: list[Finding] = []
    inspection = None
    if Path(q.path).is_file():
        try:
            inspection = inspect_model(q.path)
        except WorkbenchError:   # a damaged file: the manifest check below names it
            inspection = None
    if inspection is not None:
        out += inspection_findings(inspection, target=target, excluded=excluded)
    elif q.float_ops:
        ops = [_op_ref(label) for label in q.float_ops]
        out.append(make("quantize.float-op-left", f"{Path(q.path).name}: {len(ops)} op(s) compute in float "
                        "inside the INT8 model (recorded; the file is gone): "
                        + ", ".join(f"{o['op']} #{o['index']}" for o in ops[:MAX_LISTED]),
                        target=target, evidence={"format": q.format, "ops": ops}))
    out += runtime_findings(getattr(q, "runtime", None), Path(q.path).name, target=target)
    out += range_findings(q.manifest_path, Path(q.path).name, target=target)
    out += clipped_range_findings(q.manifest_path, Path(q.path).name, target=target)
    out += depthwise_spread_findings(q.manifest_path, Path(q.path).name, target=target)
    out += deployed_findings(q.path, q.manifest_path, target=target, backend=q.backend)
    out += structure_findings(getattr(q, "structure", None), Path(q.path).name, target=target)
    return out


def structure_findings(structure: dict[str, Any] | None, name: str, *, target: str = "") -> list[Finding]:
    """``convert.added-ops`` (info here: where they land is placement's question) and
    ``convert.depthwise-lost`` from the structural diff of a quantize result."""
    from ..models.structure import LAYOUT_OPS
    if not structure or not structure.get("compared"):
        return []
    out = []
    added = {k: v for k, v in structure.get("added", {}).items() if k in LAYOUT_OPS}
    if added:
        out.append(make("convert.added-ops", f"{name}: the conversion added "
                        + ", ".join(f"{k} x{v}" for k, v in added.items()) + " that the source model does not have",
                        target=target, severity="info",
                        evidence={"added": added, "source_ops": structure.get("source_ops", {}),
                                  "int8_ops": structure.get("int8_ops", {})}))
    dw = structure.get("depthwise") or {}          # structural_diff writes both counts (or, before them, none)
    if dw and dw["int8"] < dw["source"]:
        out.append(make("convert.depthwise-lost", f"{name}: {dw['source'] - dw['int8']} of {dw['source']} depthwise "
                        "convolution(s) of the source are not DEPTHWISE_CONV_2D in the INT8 file", target=target,
                        evidence={"depthwise": dw, "grouped_conv": structure.get("grouped_conv", {})}))
    return out


def deployed_findings(model_path: str | os.PathLike, manifest_path: str | os.PathLike | None = None, *,
                      target: str = "", backend: str | None = None) -> list[Finding]:
    """The manifest beside a deployed model against the file's bytes and the tools running now."""
    from .._io import read_json, sha256_file
    from .manifest import manifest_path_for
    model_path = Path(model_path)
    manifest_path = Path(manifest_path) if manifest_path else manifest_path_for(model_path)
    if not model_path.is_file() or not manifest_path.is_file():
        return []
    try:
        manifest = read_json(manifest_path)
    except (OSError, ValueError):
        return []
    out = []
    actual = sha256_file(model_path)
    if manifest.get("sha256") and manifest["sha256"] != actual:
        out.append(make("deploy.manifest-sha-mismatch",
                        f"{model_path.name}: sha256 {actual[:12]} but {manifest_path.name} says "
                        f"{str(manifest['sha256'])[:12]}", target=target,
                        evidence={"file": str(model_path), "file_sha256": actual,
                                  "manifest": str(manifest_path), "manifest_sha256": manifest["sha256"]}))
    recorded = manifest.get("toolchain") or {}
    backend = backend or manifest.get("backend") or "tflite"
    if recorded:
        from .engine import _toolchain
        try:
            running = _toolchain(backend)
        except ImportError:  # the backend's packages are not installed here: nothing to compare
            running = {}
        drift = {k: {"manifest": v, "running": running[k]} for k, v in recorded.items()
                 if k in running and str(running[k]) != str(v)}
        if drift:
            listed = ", ".join(f"{k} {d['manifest']} -> {d['running']}" for k, d in drift.items())
            out.append(make("deploy.toolchain-drift", f"{model_path.name}: made with other tool versions "
                            f"than the ones running now: {listed}", target=target,
                            evidence={"manifest": str(manifest_path), "versions": drift}))
    return out
