"""Loadable means loaded: the INT8 ``.tflite`` allocated and run before it is stored.

:func:`check_tflite` allocates the quantized bytes in LiteRT's default runtime (XNNPACK applied), and
where XNNPACK refuses them (``failed to create XNNPACK runtime``) with the builtin kernels, then runs a
few calibration samples through it.  It records what loaded the file and whether different inputs
gave different INT8 outputs (a model that ignores its input: every output identical while the float
model's outputs differ).  :func:`absurd_scales` names activation tensors whose quantization range no
real activation reaches (a float32-lowest padding value calibrated in: scale 1.33e36), with the op
that produced each.

The record goes into the manifest (``runtime``) so the findings of a saved model read it later.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

#: an activation whose INT8 range (255 x scale) exceeds this is no real activation (float32-lowest padding)
ABSURD_RANGE = 1e9
#: how many calibration samples are run through the INT8 model
PROBES = 8
#: INT8 outputs identical while the float outputs spread over more than this many output steps: ignored input
#: (a float model whose outputs move by a few steps only may legitimately give one INT8 output)
IGNORED_STEPS = 16
XNNPACK_REFUSED = "failed to create XNNPACK runtime"


def _interpreter(data: bytes, builtin: bool) -> Any:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    kwargs: dict[str, Any] = {}
    if builtin:
        kwargs["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    it = Interpreter(model_content=data, num_threads=1, **kwargs)
    it.allocate_tensors()
    return it


def load_tflite(data: bytes) -> tuple[Any, str | None]:
    """An allocated interpreter for ``data``: LiteRT's default runtime (XNNPACK), or the builtin kernels
    when XNNPACK refuses the file; and XNNPACK's error (None when it took the file).  A file neither
    loads raises the builtin kernels' error."""
    try:
        return _interpreter(data, builtin=False), None
    except (RuntimeError, ValueError) as exc:
        refused = " ".join(str(exc).split())[:300]
    return _interpreter(data, builtin=True), refused


def _run(it: Any, x: np.ndarray) -> list[np.ndarray]:
    from ..models.predict import quantize_input
    inp = it.get_input_details()[0]
    outs = it.get_output_details()
    res: list[list[np.ndarray]] = [[] for _ in outs]
    dtype = np.dtype(inp["dtype"])
    for i in range(len(x)):
        v = x[i:i + 1].reshape(inp["shape"])
        if np.issubdtype(dtype, np.integer):
            scale, zp = inp["quantization"]
            v = quantize_input(v, scale, zp, dtype)
        it.set_tensor(inp["index"], v.astype(dtype, copy=False))
        it.invoke()
        for k, o in enumerate(outs):
            res[k].append(np.array(it.get_tensor(o["index"])).reshape(-1))
    return [np.stack(r) for r in res]


def _probes(x: np.ndarray) -> np.ndarray:
    idx = np.unique(np.linspace(0, len(x) - 1, min(PROBES, len(x))).round().astype(int))
    return x[idx]


def check_tflite(data: bytes, x: np.ndarray, *, reference: Callable[[np.ndarray], list[np.ndarray]] | None = None
                 ) -> dict[str, Any]:
    """Load ``data`` (INT8 ``.tflite`` bytes) as a user's LiteRT would and run up to :data:`PROBES` of the
    calibration samples ``x`` (model inputs, float) through it.  ``reference``: the float model on the same
    samples (a list of outputs), to tell an INT8 model that ignores its input from a float model that does."""
    it, refused = load_tflite(data)
    probes = _probes(x)
    outputs = _run(it, probes)
    outs = it.get_output_details()
    distinct_inputs = len({p.tobytes() for p in probes})
    constant = [o["name"] for o, y in zip(outs, outputs) if len(y) > 1 and not np.any(y != y[:1])]
    record: dict[str, Any] = {
        "loaded_by": "LiteRT builtin kernels" if refused else "LiteRT default runtime (XNNPACK)",
        "xnnpack": refused is None, "xnnpack_error": refused, "probes": int(len(probes)),
        "distinct_inputs": distinct_inputs, "constant_outputs": constant,
        "n_outputs": len(outs), "ignores_input": False}
    if distinct_inputs > 1 and outs and len(constant) == len(outs):
        float_varies = True
        if reference is not None:
            try:
                ref = reference(probes)
                steps = [float(o["quantization"][0] or 0.0) for o in outs]
                tol = IGNORED_STEPS * max(steps) if steps else 0.0
                spread = max(float(np.max(np.abs(np.asarray(r, np.float64).reshape(len(probes), -1)
                                                 - np.asarray(r, np.float64).reshape(len(probes), -1)[:1])))
                             for r in ref)
                record["float_spread"] = spread
                float_varies = spread > tol
            except Exception as exc:  # noqa: BLE001 - no reference: the INT8 outputs alone decide
                record["reference_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        record["ignores_input"] = bool(float_varies)
    return record


def absurd_scales(inspection_path: str) -> list[dict[str, Any]]:
    """Non-constant tensors of the quantized ``.tflite`` whose INT8 range (255 x scale) exceeds
    :data:`ABSURD_RANGE`, in execution order, each with the op that produced it (and, for a PAD, its pad value)."""
    from ..models.tflite_graph import read_tflite
    graph = read_tflite(inspection_path)
    producer = {t: op for op in graph.ops for t in op.outputs}
    out = []
    seen: set[int] = set()
    for op in graph.ops:
        for t_index in op.outputs:
            t = graph.tensor(t_index)
            if t is None or t.is_constant or not t.scales or t_index in seen:
                continue
            seen.add(t_index)
            if 255.0 * max(t.scales) <= ABSURD_RANGE:
                continue
            row: dict[str, Any] = {"tensor": t.name, "scale": float(max(t.scales)), "dtype": t.dtype,
                                   "op": op.type, "op_index": op.index}
            if op.type in ("PAD", "PADV2") and len(op.inputs) > 2 and op.inputs[2] >= 0:
                pad = graph.tensor(op.inputs[2])
                if pad is not None and pad.scales:
                    row["pad_tensor"] = pad.name
            src = [graph.tensor(i) for i in op.inputs if i >= 0]
            row["inputs"] = [s.name for s in src if s is not None and not s.is_constant][:2]
            row["from_input"] = any(i in producer for i in op.inputs if i >= 0)
            out.append(row)
    return out


def cause(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The row that explains the others: the first PAD/PADV2 among them, else the first in execution order."""
    return next((r for r in rows if r["op"] in ("PAD", "PADV2")), rows[0])


def describe_absurd(rows: list[dict[str, Any]]) -> str:
    """One sentence naming the absurd tensor that explains the others (a PAD's output: its pad value was
    calibrated in, and the tensor before it shares its scale) and its op."""
    if not rows:
        return ""
    r = cause(rows)
    more = f" ({len(rows) - 1} more tensor(s) with it)" if len(rows) > 1 else ""
    pad = (" (a PAD whose pad value is calibrated in: onnx2tf pads a ceil-mode max-pool with float32's lowest "
           "value)") if r["op"] in ("PAD", "PADV2") else ""
    return (f"tensor {r['tensor']!r}, output of {r['op']} #{r['op_index']}{pad}, has activation scale "
            f"{r['scale']:.3g} (a range of {255 * r['scale']:.3g}; no real activation reaches {ABSURD_RANGE:.0e})"
            f"{more}")
