"""What the conversion did to a model's structure: the source's ops against the INT8 file's, by type.

``structural_diff(source, fmt, int8)`` counts the source model's ops in TFLite's vocabulary
(an ONNX ``Conv`` with ``group == channels`` is a ``DEPTHWISE_CONV_2D``, ``Gemm`` a
``FULLY_CONNECTED``; a float ``.tflite``'s ``DEQUANTIZE`` of float16 weights is storage, not an
op), counts the INT8 file's ops (its ``QUANTIZE``/``DEQUANTIZE`` at the model's inputs and outputs
aside), and lists what was added and what was removed.  Removed ops are mostly folded or fused
(batch norm into the convolution, ReLU into its producer); added ops are the converter's
(layout ``TRANSPOSE``, requantizing ``QUANTIZE``, padding), and placement findings use
:func:`op_origin` to say so when they end up on a CPU.  A custom op the float ``.tflite``'s preparation
rewrote (MediaPipe's ``Convolution2DTransposeBias``) counts as the builtin op it became and is listed
under ``rewritten``.

The result is plain JSON data; the quantize manifest records it as ``structure``.
"""

from __future__ import annotations

import collections
import os
import zipfile
from pathlib import Path
from typing import Any

STRUCTURE_VERSION = 2

# ONNX op type -> TFLite builtin(s) it becomes when it is not folded away (None: folded / no op)
_ONNX_TO_TFLITE: dict[str, str | None] = {
    "Gemm": "FULLY_CONNECTED", "MatMul": "FULLY_CONNECTED", "ConvTranspose": "TRANSPOSE_CONV",
    "MaxPool": "MAX_POOL_2D", "AveragePool": "AVERAGE_POOL_2D", "GlobalAveragePool": "MEAN",
    "GlobalMaxPool": "REDUCE_MAX", "ReduceMean": "MEAN", "ReduceMax": "REDUCE_MAX", "ReduceSum": "SUM",
    "Add": "ADD", "Sub": "SUB", "Mul": "MUL", "Div": "DIV", "Relu": "RELU", "Sigmoid": "LOGISTIC",
    "Tanh": "TANH", "HardSwish": "HARD_SWISH", "HardSigmoid": "RELU_0_TO_1", "Softmax": "SOFTMAX",
    "Concat": "CONCATENATION", "Reshape": "RESHAPE", "Flatten": "RESHAPE", "Squeeze": "RESHAPE",
    "Unsqueeze": "RESHAPE", "Transpose": "TRANSPOSE", "Pad": "PAD", "PRelu": "PRELU",
    "LeakyRelu": "LEAKY_RELU", "Slice": "STRIDED_SLICE", "Split": "SPLIT", "Resize": "RESIZE",
    "Upsample": "RESIZE", "Clip": "RELU6", "Max": "MAXIMUM", "Min": "MINIMUM", "Exp": "EXP",
    "Log": "LOG", "Sqrt": "SQRT", "Pow": "POW", "Abs": "ABS", "Neg": "NEG", "Sum": "ADD",
    "Gather": "GATHER", "ArgMax": "ARG_MAX", "Cast": "CAST", "Erf": "GELU",
    "BatchNormalization": None, "Identity": None, "Dropout": None, "Constant": None, "Shape": None,
    "ConstantOfShape": None,
}
_KERAS_TO_TFLITE: dict[str, str | None] = {
    "Dense": "FULLY_CONNECTED", "DepthwiseConv2D": "DEPTHWISE_CONV_2D", "MaxPooling2D": "MAX_POOL_2D",
    "AveragePooling2D": "AVERAGE_POOL_2D", "GlobalAveragePooling2D": "MEAN", "GlobalMaxPooling2D": "REDUCE_MAX",
    "Add": "ADD", "Multiply": "MUL", "Subtract": "SUB", "Concatenate": "CONCATENATION", "Reshape": "RESHAPE",
    "Flatten": "RESHAPE", "Permute": "TRANSPOSE", "ZeroPadding2D": "PAD", "Softmax": "SOFTMAX",
    "Conv2DTranspose": "TRANSPOSE_CONV", "UpSampling2D": "RESIZE", "PReLU": "PRELU", "LeakyReLU": "LEAKY_RELU",
    "ReLU": "RELU", "InputLayer": None, "BatchNormalization": None, "Dropout": None, "Rescaling": "MUL",
    "Activation": None,
}
_RESIZE = ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
# op types the converter adds to move data, not compute: where they land on a CPU, the conversion put them there
LAYOUT_OPS = ("TRANSPOSE", "RESHAPE", "PAD", "PADV2", "QUANTIZE", "DEQUANTIZE", "GATHER", "STRIDED_SLICE",
              "SLICE", "SPLIT", "CAST", "CONCATENATION")


def _onnx_histogram(path: Path) -> tuple[collections.Counter[str], str]:
    import onnx
    model = onnx.load(str(path), load_external_data=False)
    weights = {i.name: tuple(i.dims) for i in model.graph.initializer}
    for node in model.graph.node:          # Paddle2ONNX stores weights as Constant nodes
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value" and a.HasField("t"):
                    weights[node.output[0]] = tuple(a.t.dims)
    hist: collections.Counter[str] = collections.Counter()
    for node in model.graph.node:
        if node.op_type == "Conv":
            group = next((int(a.i) for a in node.attribute if a.name == "group"), 1)
            w = weights.get(node.input[1]) if len(node.input) > 1 else None
            if group > 1 and w is not None and len(w) >= 2 and int(w[1]) == 1:
                hist["DEPTHWISE_CONV_2D"] += 1
            else:
                hist["CONV_2D"] += 1
            if group > 1 and not (w is not None and len(w) >= 2 and int(w[1]) == 1):
                hist["grouped CONV_2D"] += 1
            continue
        mapped = _ONNX_TO_TFLITE.get(node.op_type, node.op_type.upper())
        if mapped is not None:
            hist[mapped] += 1
    return hist, "ONNX ops in TFLite's names (Conv with group == channels = DEPTHWISE_CONV_2D)"


def _keras_histogram(path: Path) -> tuple[collections.Counter[str], str] | None:
    import json
    try:
        with zipfile.ZipFile(path) as zf:
            config = json.loads(zf.read("config.json"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    hist: collections.Counter[str] = collections.Counter()

    def walk(layer: dict[str, Any]) -> None:
        cls = layer.get("class_name", "")
        cfg = layer.get("config", {}) or {}
        if isinstance(cfg.get("layers"), list):
            for sub in cfg["layers"]:
                walk(sub)
            return
        if cls in ("Conv2D", "SeparableConv2D"):
            groups = int(cfg.get("groups", 1) or 1)
            hist["DEPTHWISE_CONV_2D" if cls == "SeparableConv2D" else "CONV_2D"] += 1
            if cls == "SeparableConv2D":
                hist["CONV_2D"] += 1
            if groups > 1:
                hist["grouped CONV_2D"] += 1
            return
        mapped = _KERAS_TO_TFLITE.get(cls, cls.upper())
        if mapped is not None:
            hist[mapped] += 1
    walk(config)
    return hist, "Keras layers in TFLite's names"


def _tflite_histogram(path: Path, *, source: bool) -> tuple[collections.Counter[str], int, int]:
    """(op types, grouped CONV_2D count, edge/storage ops left out) of a .tflite file."""
    from .tflite_graph import read_tflite
    graph = read_tflite(path)
    inputs, outputs = set(graph.inputs), set(graph.outputs)
    hist: collections.Counter[str] = collections.Counter()
    grouped = skipped = 0
    for op in graph.ops:
        ins = [graph.tensors[i] for i in op.inputs if i >= 0]
        if op.type == "DEQUANTIZE" and ins and (ins[0].is_constant or any(o in outputs for o in op.outputs)):
            skipped += 1          # float16 weights' storage, or the model's output edge
            continue
        if op.type == "QUANTIZE" and not source and (any(i in inputs for i in op.inputs)
                                                     or any(o in outputs for o in op.outputs)):
            skipped += 1          # the model's input/output edge
            continue
        hist[op.type] += 1
        if op.type == "CONV_2D" and len(ins) > 1 and len(ins[0].shape) == 4 and len(ins[1].shape) == 4 \
                and int(ins[1].shape[3]) != int(ins[0].shape[3]):
            grouped += 1
    if grouped:
        hist["grouped CONV_2D"] = grouped
    return hist, grouped, skipped


def structural_diff(source: str | os.PathLike, fmt: str, int8: str | os.PathLike) -> dict[str, Any]:
    """The source's op histogram against the INT8 ``.tflite``'s, with what was added and removed."""
    int8_hist, _, _ = _tflite_histogram(Path(int8), source=False)
    src: tuple[collections.Counter[str], str] | None = None
    src_path = Path(source)
    try:
        if fmt == "onnx":
            src = _onnx_histogram(src_path)
        elif fmt == "tflite":
            hist, _, skipped = _tflite_histogram(src_path, source=True)
            src = hist, ("the float .tflite's ops" + (f" ({skipped} DEQUANTIZE of float16 weights left out)"
                                                      if skipped else ""))
        elif fmt == "keras" and src_path.suffix.lower() == ".keras":
            src = _keras_histogram(src_path)
    except Exception:  # noqa: BLE001 - a source we cannot read: the diff says so, quantize goes on
        src = None
    out: dict[str, Any] = {"version": STRUCTURE_VERSION, "int8_ops": dict(sorted(int8_hist.items())),
                           "int8_total": sum(v for k, v in int8_hist.items() if k != "grouped CONV_2D")}
    if src is None:
        out.update(compared=False, note=f"the {fmt} source's ops are not counted (read directly by the converter)")
        return out
    hist, counted = src
    from .tflite_custom_ops import REWRITES
    rewritten = {f"{k} -> {v}": hist[k] for k, v in REWRITES.items() if fmt == "tflite" and hist.get(k)}
    for k, v in REWRITES.items():   # a custom op the preparation rewrote counts as the builtin it became
        if fmt == "tflite" and hist.get(k):
            hist[v] += hist.pop(k)
    if rewritten:
        out["rewritten"] = rewritten
    for resize in _RESIZE:          # RESIZE in the source stands for either TFLite resize op
        if int8_hist.get(resize) and hist.get("RESIZE"):
            hist[resize] += hist.pop("RESIZE")
    added = {k: int8_hist[k] - hist.get(k, 0) for k in int8_hist if int8_hist[k] > hist.get(k, 0)}
    removed = {k: hist[k] - int8_hist.get(k, 0) for k in hist if hist[k] > int8_hist.get(k, 0)}
    out.update(compared=True, counted=counted, source_ops=dict(sorted(hist.items())),
               source_total=sum(v for k, v in hist.items() if k != "grouped CONV_2D"),
               added=dict(sorted(added.items())), removed=dict(sorted(removed.items())),
               transposes_added=max(0, int8_hist.get("TRANSPOSE", 0) - hist.get("TRANSPOSE", 0)),
               depthwise={"source": hist.get("DEPTHWISE_CONV_2D", 0), "int8": int8_hist.get("DEPTHWISE_CONV_2D", 0)},
               grouped_conv={"source": hist.get("grouped CONV_2D", 0), "int8": int8_hist.get("grouped CONV_2D", 0)})
    return out


def summary_lines(structure: dict[str, Any] | None) -> list[str]:
    """The structural diff as text lines (CLI and reports)."""
    if not structure:
        return []
    if not structure.get("compared"):
        return [f"structure: INT8 {structure.get('int8_total', '?')} ops; {structure.get('note', '')}"]
    dw = structure["depthwise"]
    lines = [f"structure: source {structure['source_total']} ops -> INT8 {structure['int8_total']} ops; "
             f"depthwise kept {min(dw['int8'], dw['source'])}/{dw['source']}; "
             f"TRANSPOSE added {structure['transposes_added']}"]
    if structure["added"]:
        lines.append("  more in INT8 (added or fused from several source ops): "
                     + ", ".join(f"{k} x{v}" for k, v in structure["added"].items()))
    if structure.get("rewritten"):
        lines.append("  custom ops rewritten into builtin ops: "
                     + ", ".join(f"{k} x{v}" for k, v in structure["rewritten"].items()))
    if structure["removed"]:
        lines.append("  fewer in INT8 (folded, fused or rewritten): "
                     + ", ".join(f"{k} x{v}" for k, v in structure["removed"].items()))
    return lines


def op_origin(structure: dict[str, Any] | None, op_type: str) -> str:
    """``"converter"`` when the source has no op of this type and the INT8 file has (the conversion
    added every one), ``"converter?"`` when the INT8 file has more of them than the source (some were
    added), ``"model"`` otherwise or when unknown."""
    if not structure or not structure.get("compared"):
        return "model"
    have = structure.get("source_ops", {}).get(op_type, 0)
    added = structure.get("added", {}).get(op_type, 0)
    if added and not have:
        return "converter"
    return "converter?" if added else "model"
