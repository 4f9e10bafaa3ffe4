"""Read a quantized model back, never trust the conversion.

``inspect_model(path)`` reads a ``.tflite`` file (through
:mod:`workbench.models.tflite_graph`) or an ``.onnx`` file and returns a
:class:`ModelInspection`: every tensor and op with its dtype and quantization
parameters, the ops that compute in float, QUANTIZE/DEQUANTIZE pairs left
inside the graph, and one :class:`WeightCheck` per weight tensor (how many
scales over how many output channels, on which axis, symmetric or not).
``ModelInspection.check(recipe)`` lists every way the file breaks the recipe.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._io import sha256_file
from .._results import Result
from ..errors import ModelError, missing_file

FLOAT_DTYPES = ("FLOAT32", "FLOAT16", "FLOAT64", "BFLOAT16")
# weight input index and the output-channel axis of the weight, per TFLite op
TFLITE_WEIGHT_OPS = {"CONV_2D": (1, 0), "DEPTHWISE_CONV_2D": (1, 3), "FULLY_CONNECTED": (1, 0),
                     "TRANSPOSE_CONV": (1, 0), "CONV_3D": (1, 4)}
ONNX_WEIGHT_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")
ONNX_DTYPE_NAMES = {"FLOAT": "FLOAT32", "DOUBLE": "FLOAT64", "FLOAT16": "FLOAT16"}
ONNX_SHAPE_ONLY = ("Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity")
# ONNX op types with an integer kernel when they sit between DequantizeLinear and QuantizeLinear
# (ONNX Runtime's QDQ and QLinear registries, onnxruntime.quantization.registry, plus data-movement
# ops). Any other op there (Sin, Cos, Erf, Exp...) computes in float in a QDQ model.
ONNX_INTEGER_KERNELS = frozenset({
    "Add", "ArgMax", "AveragePool", "BatchNormalization", "Clip", "Concat", "Conv", "ConvTranspose",
    "CumSum", "EmbedLayerNormalization", "Flatten", "Gather", "GatherElements", "Gemm", "GlobalAveragePool",
    "InstanceNormalization", "LayerNormalization", "LeakyRelu", "MatMul", "MaxPool", "Mul", "Pad", "Relu",
    "Reshape", "Resize", "Sigmoid", "Slice", "Softmax", "Split", "Squeeze", "TopK", "Transpose", "Unsqueeze",
    "Where", "Identity", "Expand", "Tile", "DepthToSpace", "SpaceToDepth", "GlobalMaxPool"})


@dataclass(frozen=True)
class TensorQuant:
    """One tensor: dtype, shape and quantization parameters (empty when not quantized)."""

    index: int
    name: str
    dtype: str
    shape: tuple[int, ...]
    scales: tuple[float, ...] = ()
    zero_points: tuple[int, ...] = ()
    axis: int | None = None        # quantized dimension when per-channel
    is_constant: bool = False


@dataclass(frozen=True)
class OpQuant:
    """One op in execution order with the dtypes it reads and writes."""

    index: int
    type: str
    name: str
    input_dtypes: tuple[str, ...]
    output_dtypes: tuple[str, ...]
    is_float: bool = False

    @property
    def label(self) -> str:
        return f"{self.type} #{self.index} ({self.name})"


@dataclass(frozen=True)
class WeightCheck:
    """The quantization of one weight tensor, as found in the file."""

    op: str                  # "CONV_2D #0 (name)"
    tensor: str
    dtype: str
    channels: int            # size of the output-channel axis
    expected_axis: int       # the output-channel axis for this op
    n_scales: int
    axis: int | None      # the quantized dimension in the file (None when per-tensor)
    symmetric: bool          # every zero point is 0

    @property
    def granularity(self) -> str:
        if self.n_scales == 0:
            return "unquantized"
        if self.n_scales == 1 and self.channels != 1:
            return "per_tensor"
        if self.n_scales == self.channels and (self.axis is None or self.axis == self.expected_axis):
            return "per_channel" if self.channels > 1 or self.axis is not None else "per_tensor"
        return "invalid"


@dataclass(frozen=True)
class QuantParams:
    """How a model input or output is quantized (scale/zero point are None for float)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    scale: float | None = None
    zero_point: int | None = None


@dataclass(frozen=True)
class ModelInspection(Result):
    """What a quantized model file really contains."""

    path: str
    format: str                       # "tflite" | "onnx"
    sha256: str
    size_bytes: int
    ops: tuple[OpQuant, ...]
    tensors: tuple[TensorQuant, ...]
    inputs: tuple[QuantParams, ...]
    outputs: tuple[QuantParams, ...]
    op_summary: dict[str, int]
    float_ops: tuple[str, ...]        # labels of ops computing in float (Q/DQ excluded)
    qdq_inside: tuple[str, ...]       # QUANTIZE/DEQUANTIZE inside the graph (not at its boundary)
    boundary_ops: tuple[str, ...]     # Q/DQ (and shape-only ONNX ops) at the model's inputs/outputs
    weights: tuple[WeightCheck, ...]
    min_runtime: str = ""

    @property
    def full_integer(self) -> bool:
        return not self.float_ops and not self.qdq_inside

    @property
    def weight_granularity(self) -> str:
        kinds = {w.granularity for w in self.weights}
        if not kinds:
            return "none"
        return kinds.pop() if len(kinds) == 1 else "mixed"

    def check(self, recipe: Any) -> tuple[str, ...]:
        """Every way this file breaks ``recipe`` (a :class:`QuantRecipe`); empty when it fits."""
        problems: list[str] = []
        excluded = set(getattr(recipe, "exclude", ()))
        if recipe.full_integer and not self.full_integer:
            problems.append("float ops left in a full-integer model: "
                            + ", ".join(self.float_ops + self.qdq_inside))
        for w in self.weights:
            if w.n_scales == 0:
                op_type = w.op.split(" ")[0]
                if not recipe.full_integer and (op_type in excluded or any(e in w.op for e in excluded)):
                    continue
                problems.append(f"{w.op}: weight {w.tensor!r} is not quantized ({w.dtype})")
                continue
            if recipe.per_channel and w.channels > 1 and w.granularity != "per_channel":
                problems.append(f"{w.op}: weight {w.tensor!r} has {w.n_scales} scale(s) on axis {w.axis} "
                                f"for {w.channels} output channels (axis {w.expected_axis}); per-channel "
                                "needs one scale per output channel")
            if not recipe.per_channel and w.n_scales != 1:
                problems.append(f"{w.op}: weight {w.tensor!r} has {w.n_scales} scales; per-tensor needs one")
            if not w.symmetric:
                problems.append(f"{w.op}: weight {w.tensor!r} is not symmetric (a zero point is not 0)")
        if self.format == "tflite":
            for kind, params, wanted in (("input", self.inputs, recipe.input_dtype),
                                         ("output", self.outputs, recipe.output_dtype)):
                for p in params:
                    if p.dtype.lower() != wanted:
                        problems.append(f"model {kind} {p.name!r} is {p.dtype}, the recipe asks {wanted}")
        return tuple(problems)

    def summary(self) -> str:
        ops = sum(self.op_summary.values())
        state = "full integer" if self.full_integer else f"{len(self.float_ops)} float op(s)"
        io = ", ".join(p.dtype for p in self.inputs) + " -> " + ", ".join(p.dtype for p in self.outputs)
        return (f"{Path(self.path).name} ({self.format}, {self.size_bytes / 1024:.1f} KiB): {ops} ops, "
                f"{state}, weights {self.weight_granularity.replace('_', '-')}, io {io}")

    def _repr_html_(self) -> str:
        from .. import display
        parts = [display.heading(f"Model inspection: {Path(self.path).name}"), display.paragraph(self.summary())]
        if self.float_ops or self.qdq_inside:
            parts.append(display.paragraph("Float ops: " + ", ".join(self.float_ops + self.qdq_inside)))
        parts.append(display.table(("op type", "count"), sorted(self.op_summary.items())))
        rows = [(w.op, w.tensor, w.dtype, w.channels, w.n_scales, "" if w.axis is None else w.axis,
                 w.granularity, "yes" if w.symmetric else "no") for w in self.weights]
        styles = ["" if w.granularity in ("per_channel", "per_tensor") and w.symmetric else display.BAD_STYLE
                  for w in self.weights]
        parts.append(display.table(("op", "weight", "dtype", "channels", "scales", "axis", "granularity",
                                    "symmetric"), rows, row_styles=styles, caption="Weights"))
        op_rows = [(o.index, o.type, o.name, " ".join(o.input_dtypes), " ".join(o.output_dtypes)) for o in self.ops]
        parts.append(display.table(("#", "op", "name", "inputs", "outputs"), op_rows,
                                   row_styles=[display.BAD_STYLE if o.is_float else "" for o in self.ops],
                                   caption="Ops"))
        return "".join(parts)


def inspect_model(path: str | os.PathLike) -> ModelInspection:
    """Inspect a quantized ``.tflite`` or ``.onnx`` file."""
    path = Path(path)
    if not path.is_file():
        raise missing_file("model file", path, "inspect_model takes a .tflite or .onnx file", ModelError)
    if path.suffix.lower() == ".onnx":
        return _inspect_onnx(path)
    head = path.read_bytes()[:8]
    if path.suffix.lower() == ".tflite" or head[4:8] == b"TFL3":
        return _inspect_tflite(path)
    raise ModelError(f"{path}: inspect_model reads .tflite and .onnx files; got {path.suffix or 'no suffix'!r}.")


# -- TFLite ------------------------------------------------------------------------------------
def _inspect_tflite(path: Path) -> ModelInspection:
    from ..models.tflite_graph import read_tflite, tflite_metadata
    g = read_tflite(path)
    tensors = tuple(TensorQuant(index=t.index, name=t.name, dtype=t.dtype, shape=t.shape, scales=t.scales,
                                zero_points=t.zero_points, axis=t.quantized_dimension if t.per_channel else None,
                                is_constant=t.is_constant) for t in g.tensors)
    graph_inputs, graph_outputs = set(g.inputs), set(g.outputs)
    ops: list[OpQuant] = []
    float_ops: list[str] = []
    qdq_inside: list[str] = []
    boundary: list[str] = []
    weights: list[WeightCheck] = []
    for op in g.ops:
        ins = [g.tensors[i] for i in op.inputs if i >= 0]
        outs = [g.tensors[i] for i in op.outputs if i >= 0]
        touches_float = any(t.dtype in FLOAT_DTYPES for t in ins + outs)
        label = f"{op.type} #{op.index} ({op.name})"
        is_float = False
        if op.type == "QUANTIZE" and any(t.dtype in FLOAT_DTYPES for t in ins):
            (boundary if all(i in graph_inputs for i in op.inputs if i >= 0) else qdq_inside).append(label)
        elif op.type == "DEQUANTIZE":
            if all(o in graph_outputs for o in op.outputs):
                boundary.append(label)
            else:
                qdq_inside.append(label)
        elif touches_float:
            is_float = True
            float_ops.append(label)
        ops.append(OpQuant(index=op.index, type=op.type, name=op.name,
                           input_dtypes=tuple(t.dtype for t in ins), output_dtypes=tuple(t.dtype for t in outs),
                           is_float=is_float))
        if op.type in TFLITE_WEIGHT_OPS:
            w_index, axis = TFLITE_WEIGHT_OPS[op.type]
            if len(op.inputs) > w_index and op.inputs[w_index] >= 0:
                w = g.tensors[op.inputs[w_index]]
                weights.append(WeightCheck(
                    op=label, tensor=w.name, dtype=w.dtype,
                    channels=int(w.shape[axis]) if len(w.shape) > axis else 0, expected_axis=axis,
                    n_scales=len(w.scales), axis=w.quantized_dimension if w.per_channel else None,
                    symmetric=all(z == 0 for z in w.zero_points)))

    def params(index: int) -> QuantParams:
        t = g.tensors[index]
        q = t.is_quantized and t.dtype not in FLOAT_DTYPES
        return QuantParams(name=t.name, dtype=t.dtype, shape=t.shape, scale=t.scales[0] if q else None,
                           zero_point=t.zero_points[0] if q and t.zero_points else (0 if q else None))

    meta = tflite_metadata(path)
    min_runtime = meta.get("min_runtime_version", b"").decode("ascii", "replace").strip("\0")
    return ModelInspection(
        path=str(path), format="tflite", sha256=sha256_file(path), size_bytes=path.stat().st_size,
        ops=tuple(ops), tensors=tensors, inputs=tuple(params(i) for i in g.inputs),
        outputs=tuple(params(i) for i in g.outputs), op_summary=dict(Counter(o.type for o in ops)),
        float_ops=tuple(float_ops), qdq_inside=tuple(qdq_inside), boundary_ops=tuple(boundary),
        weights=tuple(weights), min_runtime=f"TFLite runtime >= {min_runtime}" if min_runtime else "")


# -- ONNX --------------------------------------------------------------------------------------
def load_onnx(path: str | os.PathLike) -> Any:
    import onnx
    try:
        return onnx.load(str(path))
    except Exception as exc:  # DecodeError and friends: truncated or not ONNX
        raise ModelError(f"{path}: the ONNX file is corrupt or truncated ({type(exc).__name__}: {exc}). "
                         "Re-export or re-copy the model.") from exc


def _inspect_onnx(path: Path) -> ModelInspection:
    import onnx
    from onnx import numpy_helper
    model = load_onnx(path)
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # shape inference is a help, not a requirement
        inferred = model
    graph = inferred.graph
    elem = {v: ONNX_DTYPE_NAMES.get(k, k) for k, v in onnx.TensorProto.DataType.items()}
    init = {i.name: i for i in graph.initializer}
    init_arrays: dict[str, Any] = {}

    def arr(name: str) -> Any:
        if name not in init_arrays:
            init_arrays[name] = numpy_helper.to_array(init[name])
        return init_arrays[name]

    types: dict[str, tuple[str, tuple[int, ...]]] = {}
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        tt = vi.type.tensor_type
        shape = tuple(int(d.dim_value) if d.HasField("dim_value") else -1 for d in tt.shape.dim)
        types[vi.name] = (elem.get(tt.elem_type, str(tt.elem_type)), shape)
    for name, t in init.items():
        types[name] = (elem.get(t.data_type, str(t.data_type)), tuple(int(d) for d in t.dims))

    producer: dict[str, Any] = {}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for o in node.output:
            producer[o] = node
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    graph_inputs = {i.name for i in graph.input if i.name not in init}
    graph_outputs = {o.name for o in graph.output}

    def attr(node: Any, name: str, default: Any = None) -> Any:
        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    # quantization parameters per quantized tensor (Q outputs and DQ inputs)
    qparams: dict[str, tuple[tuple[float, ...], tuple[int, ...], int | None]] = {}
    for node in graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") and len(node.input) >= 2 and node.input[1] in init:
            scale = tuple(float(s) for s in arr(node.input[1]).reshape(-1))
            has_zp = len(node.input) > 2 and node.input[2] in init
            zp = tuple(int(z) for z in arr(node.input[2]).reshape(-1)) if has_zp else (0,) * len(scale)
            axis = attr(node, "axis", 1) if len(scale) > 1 else None
            qname = node.output[0] if node.op_type == "QuantizeLinear" else node.input[0]
            qparams[qname] = (scale, zp, axis)
            if node.op_type == "QuantizeLinear" and len(node.input) > 2 and node.input[2] in init:
                types.setdefault(qname, (elem.get(init[node.input[2]].data_type, "?"),
                                         types.get(node.input[0], ("", ()))[1]))

    names = list(dict.fromkeys([i.name for i in graph.input] + list(init) + [o for n in graph.node for o in n.output]))
    tensors = []
    for idx, name in enumerate(names):
        dtype, shape = types.get(name, ("UNKNOWN", ()))
        scale, zp, axis = qparams.get(name, ((), (), None))
        tensors.append(TensorQuant(index=idx, name=name, dtype=dtype.upper(), shape=shape, scales=scale,
                                   zero_points=zp, axis=axis, is_constant=name in init))

    def is_float(name: str) -> bool:
        return types.get(name, ("",))[0].upper() in FLOAT_DTYPES

    def from_input_side(name: str) -> bool:
        """A tensor computed from graph inputs by shape-only ops (the model's boundary)."""
        if name in graph_inputs:
            return True
        node = producer.get(name)
        return node is not None and node.op_type in ONNX_SHAPE_ONLY and from_input_side(node.input[0])

    def to_output_side(name: str) -> bool:
        if name in graph_outputs:
            return True
        users = consumers.get(name, [])
        return bool(users) and all(u.op_type in ONNX_SHAPE_ONLY and to_output_side(u.output[0]) for u in users)

    ops, float_ops, qdq_inside, boundary, weights = [], [], [], [], []
    for index, node in enumerate(graph.node):
        label = f"{node.op_type} #{index} ({node.name or node.output[0]})"
        ins = [i for i in node.input if i]
        flagged = False
        if node.op_type == "QuantizeLinear":
            if from_input_side(node.input[0]):
                boundary.append(label)
        elif node.op_type == "DequantizeLinear":
            if to_output_side(node.output[0]):
                boundary.append(label)
        else:
            float_in = [i for i in ins if is_float(i)]
            float_out = [o for o in node.output if o and is_float(o)]
            bad_in = [i for i in float_in if not (producer.get(i) is not None
                                                   and producer[i].op_type == "DequantizeLinear")]
            bad_out = [o for o in float_out if not consumers.get(o)
                       or not all(c.op_type == "QuantizeLinear" for c in consumers[o])]
            if node.op_type in ONNX_SHAPE_ONLY and all(from_input_side(i) for i in bad_in) \
                    and all(to_output_side(o) for o in bad_out) and (bad_in or bad_out):
                boundary.append(label)
            elif bad_in or bad_out or (float_in and node.op_type not in ONNX_INTEGER_KERNELS):
                flagged = True
                float_ops.append(label)
                for i in float_in:
                    if producer.get(i) is not None and producer[i].op_type == "DequantizeLinear" \
                            and i not in init:
                        src = producer[i]
                        if src.input[0] not in init:
                            qdq_inside.append(f"DequantizeLinear ({src.name or src.output[0]}) -> {label}")
        ops.append(OpQuant(index=index, type=node.op_type, name=node.name or node.output[0],
                           input_dtypes=tuple(types.get(i, ("?",))[0].upper() for i in ins),
                           output_dtypes=tuple(types.get(o, ("?",))[0].upper() for o in node.output if o),
                           is_float=flagged))
        if node.op_type in ONNX_WEIGHT_OPS and len(node.input) > 1:
            wname = node.input[1]
            src = producer.get(wname)
            if src is not None and src.op_type == "DequantizeLinear" and src.input[0] in init:
                qname = src.input[0]
                dtype, shape = types.get(qname, ("?", ()))
                scale, zp, axis = qparams.get(qname, ((), (), None))
            elif wname in init:
                qname, (dtype, shape), scale, zp, axis = wname, types[wname], (), (), None
            else:
                continue  # an activation x activation MatMul: no weight
            if node.op_type == "MatMul":
                expected = max(len(shape) - 1, 0)
            elif node.op_type == "Gemm":
                expected = 0 if attr(node, "transB", 0) else 1
            else:
                expected = {"Conv": 0, "ConvTranspose": 1}[node.op_type]
            if axis is not None and axis < 0:
                axis += len(shape)
            weights.append(WeightCheck(
                op=label, tensor=qname, dtype=dtype.upper(),
                channels=int(shape[expected]) if len(shape) > expected else 0, expected_axis=expected,
                n_scales=len(scale), axis=axis, symmetric=all(z == 0 for z in zp)))

    def io(name: str) -> QuantParams:
        dtype, shape = types.get(name, ("?", ()))
        return QuantParams(name=name, dtype=dtype.upper(), shape=shape)

    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    return ModelInspection(
        path=str(path), format="onnx", sha256=sha256_file(path), size_bytes=path.stat().st_size,
        ops=tuple(ops), tensors=tuple(tensors),
        inputs=tuple(io(i.name) for i in graph.input if i.name not in init),
        outputs=tuple(io(o.name) for o in graph.output),
        op_summary=dict(Counter(o.type for o in ops)), float_ops=tuple(float_ops),
        qdq_inside=tuple(dict.fromkeys(qdq_inside)), boundary_ops=tuple(boundary), weights=tuple(weights),
        min_runtime=f"ONNX opset {opset} (IR {model.ir_version}); a runtime with QDQ support")
