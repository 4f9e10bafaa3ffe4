"""The VX delegate's op set, limits and op checks for the i.MX 8M Plus table (:mod:`workbench.targets.imx8mp`):
one function per constraint, each returning the reason an op fails it (None: it passes)."""

from __future__ import annotations

from ..models.tflite_graph import OpInfo, TFLiteGraph
from ..vocab import NPU_CUSTOM_OPS
from ._constraints import (
    activations,
    first,
    label,
    ops_set,
    tensor_at,
)

SRC_OPMAP = ("nxp-imx/tflite-vx-delegate-imx lf-6.6.3_1.0.0 (44aab8a) op_map.cc; "
             "VeriSilicon/tflite-vx-delegate 3f4759e op_map.cc")
SRC_FACTS = "npu-facts.md section 1"

SUPPORTED_OPS = ops_set(
    "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "DEPTH_TO_SPACE",
    "DEQUANTIZE", "EMBEDDING_LOOKUP", "FLOOR", "FULLY_CONNECTED", "HASHTABLE_LOOKUP",
    "L2_NORMALIZATION", "LOCAL_RESPONSE_NORMALIZATION", "LOGISTIC", "MAX_POOL_2D", "MUL", "RELU",
    "RELU_N1_TO_1", "RELU6", "RESHAPE", "RESIZE_BILINEAR", "RNN", "SOFTMAX", "SPACE_TO_DEPTH", "TANH",
    "PAD", "UNIDIRECTIONAL_SEQUENCE_RNN", "GATHER", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND",
    "TRANSPOSE", "MEAN", "SUB", "DIV", "SQUEEZE", "UNIDIRECTIONAL_SEQUENCE_LSTM", "STRIDED_SLICE",
    "BIDIRECTIONAL_SEQUENCE_RNN", "EXP", "SPLIT", "BIDIRECTIONAL_SEQUENCE_LSTM", "CAST", "PRELU",
    "MAXIMUM", "ARG_MAX", "MINIMUM", "LESS", "NEG", "GREATER", "GREATER_EQUAL", "LESS_EQUAL",
    "SELECT", "SLICE", "SIN", "TRANSPOSE_CONV", "EXPAND_DIMS", "EQUAL", "NOT_EQUAL", "LOG", "SUM",
    "SQRT", "RSQRT", "SHAPE", "POW", "ARG_MIN", "REDUCE_PROD", "REDUCE_MAX", "PACK", "LOGICAL_OR",
    "ONE_HOT", "LOGICAL_AND", "LOGICAL_NOT", "UNPACK", "REDUCE_MIN", "FLOOR_DIV", "REDUCE_ANY",
    "SQUARE", "RESIZE_NEAREST_NEIGHBOR", "LEAKY_RELU", "SQUARED_DIFFERENCE", "MIRROR_PAD", "ABS",
    "SPLIT_V", "REVERSE_V2", "ADD_N", "GATHER_ND", "ELU", "QUANTIZE", "HARD_SWISH", "SCATTER_ND",
    "SELECT_V2", "BATCH_MATMUL", "BROADCAST_TO", "CONV_3D", "GELU",
)
CUSTOM_NPU_OPS = NPU_CUSTOM_OPS["imx8mp"]     # a precompiled NBG graph

MAX_RANK = 6
MAX_DIM = 65535
FUSED_OK = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH")

# Which input must hold constant data, per op (op_map.cc IsOpSupported overrides).
CONST_INPUTS = {
    "RESHAPE": (1,), "STRIDED_SLICE": (1, 2, 3), "SLICE": (1, 2),
    "RESIZE_BILINEAR": (1,), "RESIZE_NEAREST_NEIGHBOR": (1,),
    "MEAN": (1,), "SUM": (1,), "REDUCE_MAX": (1,), "REDUCE_MIN": (1,), "REDUCE_PROD": (1,),
    "REDUCE_ANY": (1,), "EXPAND_DIMS": (1,), "REVERSE_V2": (1,), "ONE_HOT": (1,),
    "SCATTER_ND": (2,), "CONV_3D": (1,),
}
OUTPUT_RANK0_OPS = ops_set("TRANSPOSE_CONV", "RESHAPE", "PAD", "MIRROR_PAD",
                           "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND")
DYNAMIC_SHAPE_OPS = ops_set("TRANSPOSE", "ARG_MAX", "ARG_MIN")
NEEDS_QUANT_OPS = ops_set("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "SPLIT", "SPLIT_V",
                          "SPACE_TO_DEPTH", "DEPTH_TO_SPACE")
HYBRID_OPS = ops_set("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "CONV_3D")
SQDIFF_TYPES = (("FLOAT32", "FLOAT32"), ("INT8", "INT8"), ("UINT8", "UINT8"))
MIRROR_PAD_MODES = (0, 1)                   # schema MirrorPadMode REFLECT, SYMMETRIC
CAST_REJECTED = ("COMPLEX64", "UINT32", "UINT16")
LSTM_OUTPUT_STATE, LSTM_CELL_STATE = 18, 19  # UNIDIRECTIONAL_SEQUENCE_LSTM variable inputs
#: Inputs that are projection (16, 33) or auxiliary (aux input + weights) tensors, per op.
RNN_EXTRA_WEIGHTS = {
    "BIDIRECTIONAL_SEQUENCE_LSTM": (16, 33) + tuple(range(39, 48)),
    "BIDIRECTIONAL_SEQUENCE_RNN": (9, 10, 11),
}
RNN_OPS = ops_set("UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_LSTM")
SRC_14 = "npu-facts.md §1.4"
SRC_13 = "npu-facts.md §1.3"


def _op_map(graph: TFLiteGraph, op: OpInfo) -> str | None:
    if op.type in SUPPORTED_OPS or op.type in CUSTOM_NPU_OPS:
        return None
    kind = "custom op" if op.is_custom else "builtin"
    return f"{label(op)}: {kind} {op.type} is not registered in the VX delegate op map"


def _input_dtype(dtype: str):
    def check(graph: TFLiteGraph, op: OpInfo) -> str | None:
        return first(f"{label(op)} input '{t.name}' is {dtype}"
                     for t in graph.op_inputs(op) if t.dtype == dtype)
    return check


def _output_dtype(dtype: str):
    def check(graph: TFLiteGraph, op: OpInfo) -> str | None:
        return first(f"{label(op)} output '{t.name}' is {dtype}"
                     for t in graph.op_outputs(op) if t.dtype == dtype)
    return check


def _rank(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} input '{t.name}' has rank {len(t.shape)} > {MAX_RANK}"
                 for t in graph.op_inputs(op) if len(t.shape) > MAX_RANK)


def _zero_dim(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} tensor '{t.name}' has a 0 dimension {list(t.shape)}"
                 for t in graph.op_inputs(op) + graph.op_outputs(op) if 0 in t.shape)


def _big_dim(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} input '{t.name}' has a dimension > {MAX_DIM}: {list(t.shape)}"
                 for t in graph.op_inputs(op) if any(d > MAX_DIM for d in t.shape[1:]))


def _fused(graph: TFLiteGraph, op: OpInfo) -> str | None:
    act = op.options.get("fused_activation")
    if act is None or act in FUSED_OK:
        return None
    return f"{label(op)} has fused activation {act}"


def _hybrid(graph: TFLiteGraph, op: OpInfo) -> str | None:
    x, w = tensor_at(graph, op, 0), tensor_at(graph, op, 1)
    if x is None or w is None or x.dtype == w.dtype:
        return None
    return f"{label(op)} input is {x.dtype} but weights are {w.dtype} (hybrid)"


def _grouped_batch(graph: TFLiteGraph, op: OpInfo) -> str | None:
    x, w = tensor_at(graph, op, 0), tensor_at(graph, op, 1)
    if x is None or w is None or len(x.shape) != 4 or len(w.shape) != 4:
        return None
    if x.shape[3] != w.shape[3] and x.shape[0] != 1:
        return (f"{label(op)} is a grouped convolution (input C {x.shape[3]}, filter C "
                f"{w.shape[3]}) with batch {x.shape[0]}")
    return None


def _const_inputs(graph: TFLiteGraph, op: OpInfo) -> str | None:
    out = []
    for pos in CONST_INPUTS.get(op.type, ()):
        t = tensor_at(graph, op, pos)
        if t is not None and not t.is_constant:
            out.append(f"{label(op)} input {pos} '{t.name}' is not constant")
    return first(out)


def _output_rank0(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} output '{t.name}' has rank 0 (dynamic shape)"
                 for t in graph.op_outputs(op) if len(t.shape) == 0)


def _dynamic(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} tensor '{t.name}' is dynamic {list(t.shape_signature)}"
                 for t in activations(graph, op) if t.is_dynamic)


def _strided_masks(graph: TFLiteGraph, op: OpInfo) -> str | None:
    bad = [f"{k}={op.options.get(k)}" for k in ("newAxisMask", "ellipsisMask") if op.options.get(k)]
    return f"{label(op)} has {', '.join(bad)}" if bad else None


def _needs_quant(graph: TFLiteGraph, op: OpInfo) -> str | None:
    t = tensor_at(graph, op, 0)
    if t is not None and t.dtype in ("INT8", "UINT8") and not t.is_quantized:
        return f"{label(op)} input '{t.name}' is {t.dtype} without quantization parameters"
    return None


def _space_depth_int(graph: TFLiteGraph, op: OpInfo) -> str | None:
    t = tensor_at(graph, op, 0)
    if t is not None and t.dtype in ("INT32", "INT64"):
        return f"{label(op)} input '{t.name}' is {t.dtype}"
    return None


def _batch_space_rank(graph: TFLiteGraph, op: OpInfo) -> str | None:
    t = tensor_at(graph, op, 0)
    if t is not None and len(t.shape) != 4:
        return f"{label(op)} input '{t.name}' has rank {len(t.shape)}, not 4"
    return None


def _select_types(graph: TFLiteGraph, op: OpInfo) -> str | None:
    data = [t for i, t in enumerate(graph.op_inputs(op)) if i > 0] + graph.op_outputs(op)
    return first(f"{label(op)} tensor '{t.name}' is {t.dtype}"
                 for t in data if t.dtype in ("BOOL", "INT8", "UINT8"))


def _dequantize(graph: TFLiteGraph, op: OpInfo) -> str | None:
    t = tensor_at(graph, op, 0)
    if t is None:
        return None
    if t.dtype in ("INT16", "FLOAT16"):
        return f"{label(op)} input '{t.name}' is {t.dtype}"
    if t.dtype in ("INT8", "UINT8") and t.per_channel:
        return f"{label(op)} input '{t.name}' is per-channel {t.dtype} ({len(t.scales)} scales)"
    return None


def _quantize(graph: TFLiteGraph, op: OpInfo) -> str | None:
    x = tensor_at(graph, op, 0)
    outs = graph.op_outputs(op)
    if x is None or not outs:
        return None
    y = outs[0]
    if x.dtype in ("INT32", "INT16") and x.is_quantized and y.dtype in ("INT8", "UINT8"):
        return f"{label(op)} requantizes {x.dtype} to {y.dtype}"
    if x.dtype == "INT16" and y.dtype == "INT32":
        return f"{label(op)} converts INT16 to INT32"
    if x.dtype == "FLOAT32" and y.per_channel:
        return f"{label(op)} quantizes FLOAT32 to per-channel {y.dtype} ({len(y.scales)} scales)"
    return None


def _elementwise_int16(graph: TFLiteGraph, op: OpInfo) -> str | None:
    x = tensor_at(graph, op, 0)
    outs = graph.op_outputs(op)
    if x is not None and outs and x.dtype == "INT16" and x.is_quantized \
            and outs[0].dtype in ("INT8", "UINT8") and outs[0].is_quantized:
        return f"{label(op)} input is INT16 and output {outs[0].dtype}"
    return None


def _fc_int16(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} input '{t.name}' is INT16"
                 for t in graph.op_inputs(op) if t.dtype == "INT16")


def _fc_shuffled(graph: TFLiteGraph, op: OpInfo) -> str | None:
    fmt = op.options.get("weightsFormat", 0)
    return f"{label(op)} uses SHUFFLED4x16INT8 weights" if fmt not in (0, None, "DEFAULT") else None


def _batch_matmul(graph: TFLiteGraph, op: OpInfo) -> str | None:
    ins, outs = graph.op_inputs(op), graph.op_outputs(op)
    out = []
    if outs and outs[0].dtype == "INT32":
        out.append(f"{label(op)} output is INT32")
    # NXP's fork rejects only input 0 INT8 with input 1 FLOAT32 (the reverse order is accepted).
    if len(ins) >= 2 and ins[0].dtype == "INT8" and ins[1].dtype == "FLOAT32":
        out.append(f"{label(op)} input 0 is INT8 and input 1 FLOAT32")
    if op.options.get("adjX") and op.options.get("adjY"):
        out.append(f"{label(op)} has adj_x and adj_y both true")
    return first(out)


def _squared_difference(graph: TFLiteGraph, op: OpInfo) -> str | None:
    ins, outs = graph.op_inputs(op), graph.op_outputs(op)
    if len(ins) < 2 or not outs:
        return None
    if ins[0].dtype != ins[1].dtype:
        return f"{label(op)} inputs are {ins[0].dtype} and {ins[1].dtype}"
    pair = (ins[0].dtype, outs[0].dtype)
    if pair not in SQDIFF_TYPES:
        return f"{label(op)} maps {pair[0]} to {pair[1]} (only FLOAT32->FLOAT32, INT8->INT8, UINT8->UINT8)"
    if ins[0].dtype in ("INT8", "UINT8") and (ins[0].per_channel or outs[0].per_channel):
        return f"{label(op)} has per-channel quantized input 0 or output"
    return None


def _conv3d_dilation(graph: TFLiteGraph, op: OpInfo) -> str | None:
    d = [op.options.get(k, 1) for k in ("dilationDFactor", "dilationHFactor", "dilationWFactor")]
    return None if all(x <= 1 for x in d) else f"{label(op)} has dilation {'x'.join(map(str, d))} (DxHxW)"


def _slice_batch(graph: TFLiteGraph, op: OpInfo) -> str | None:
    x, outs = tensor_at(graph, op, 0), graph.op_outputs(op)
    if x is None or not outs or len(x.shape) <= 3 or not outs[0].shape:
        return None
    if outs[0].shape[0] != x.shape[0]:
        return (f"{label(op)} slices the batch of a rank-{len(x.shape)} input ({x.shape[0]} -> "
                f"{outs[0].shape[0]})")
    return None


def _mirror_pad_mode(graph: TFLiteGraph, op: OpInfo) -> str | None:
    mode = op.options.get("mode")
    return None if mode in MIRROR_PAD_MODES else f"{label(op)} has undefined mirror-pad mode {mode!r}"


def _split_dynamic(graph: TFLiteGraph, op: OpInfo) -> str | None:
    # SPLIT: input 0 is the axis; SPLIT_V: input 1 the sizes, input 2 the axis.  Either not constant,
    # or an output without a static shape, makes TFLite allocate the outputs dynamically.
    positions = (0,) if op.type == "SPLIT" else (1, 2)
    out = [f"{label(op)} input {p} '{t.name}' is not constant"
           for p in positions if (t := tensor_at(graph, op, p)) is not None and not t.is_constant]
    out += [f"{label(op)} output '{t.name}' is dynamic {list(t.shape_signature)}"
            for t in graph.op_outputs(op) if t.is_dynamic or len(t.shape) == 0]
    return first(out)


def _block_shape(graph: TFLiteGraph, op: OpInfo) -> str | None:
    b = tensor_at(graph, op, 1)
    if b is None or not b.shape:
        return None
    return None if b.shape[0] == 2 else f"{label(op)} block shape has length {b.shape[0]}, not 2"


def _select_rank(graph: TFLiteGraph, op: OpInfo) -> str | None:
    c, x = tensor_at(graph, op, 0), tensor_at(graph, op, 1)
    if c is None or x is None or len(c.shape) == len(x.shape):
        return None
    return f"{label(op)} condition has rank {len(c.shape)}, input rank {len(x.shape)}"


def _pow_int32(graph: TFLiteGraph, op: OpInfo) -> str | None:
    ins = graph.op_inputs(op)
    if len(ins) >= 2 and ins[0].dtype == "INT32" and ins[1].dtype == "INT32":
        return f"{label(op)} has two INT32 inputs"
    return None


def _relu_n1_int32(graph: TFLiteGraph, op: OpInfo) -> str | None:
    if op.options.get("fused_activation") != "RELU_N1_TO_1":
        return None
    return first(f"{label(op)} fuses RELU_N1_TO_1 with INT32 tensor '{t.name}'"
                 for t in graph.op_inputs(op) + graph.op_outputs(op) if t.dtype == "INT32")


def _embedding_types(graph: TFLiteGraph, op: OpInfo) -> str | None:
    w, outs = tensor_at(graph, op, 1), graph.op_outputs(op)
    if w is not None and outs and w.dtype == "UINT8" and outs[0].dtype == "INT8":
        return f"{label(op)} reads UINT8 weights '{w.name}' into an INT8 output"
    return None


def _one_hot_bool(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} output '{t.name}' is BOOL" for t in graph.op_outputs(op) if t.dtype == "BOOL")


def _cast_types(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} {'input' if i < len(op.inputs) else 'output'} '{t.name}' is {t.dtype}"
                 for i, t in enumerate(graph.op_inputs(op) + graph.op_outputs(op))
                 if t.dtype in CAST_REJECTED)


def _lstm_states(graph: TFLiteGraph, op: OpInfo) -> str | None:
    out = []
    outs = graph.op_outputs(op)
    state, cell = tensor_at(graph, op, LSTM_OUTPUT_STATE), tensor_at(graph, op, LSTM_CELL_STATE)
    if state is not None and outs and state.dtype != outs[0].dtype:
        out.append(f"{label(op)} output state '{state.name}' is {state.dtype}, output {outs[0].dtype}")
    if cell is not None and cell.dtype not in ("INT16", "FLOAT16"):
        out.append(f"{label(op)} cell state '{cell.name}' is {cell.dtype}, not INT16/FLOAT16")
    return first(out)


def _rnn_weights(graph: TFLiteGraph, op: OpInfo) -> str | None:
    out = [f"{label(op)} weights '{t.name}' are quantized {t.dtype}"
           for i, t in ((i, tensor_at(graph, op, i)) for i in range(1, len(op.inputs)))
           if t is not None and t.is_constant and t.dtype in ("INT8", "UINT8")]
    for pos in RNN_EXTRA_WEIGHTS.get(op.type, ()):
        t = tensor_at(graph, op, pos)
        if t is not None:
            out.append(f"{label(op)} has {'projection' if pos in (16, 33) else 'auxiliary'} input {pos} "
                       f"'{t.name}'")
    return first(out)


def _pack(graph: TFLiteGraph, op: OpInfo) -> str | None:
    t = tensor_at(graph, op, 0)
    if t is None:
        return None
    if t.dtype == "INT32":
        return f"{label(op)} input '{t.name}' is INT32"
    if t.dtype in ("INT8", "UINT8") and len(t.shape) == 1:
        return f"{label(op)} input '{t.name}' is a 1-D {t.dtype} tensor"
    return None


def _lstm_float(graph: TFLiteGraph, op: OpInfo) -> str | None:
    t = tensor_at(graph, op, 0)
    if t is not None and t.dtype not in ("INT8", "UINT8"):
        return f"{label(op)} input '{t.name}' is {t.dtype} (quantized LSTM only)"
    return None


def _per_channel_weights(graph: TFLiteGraph) -> tuple[str, ...]:
    hits = []
    for op in graph.ops:
        if op.type in HYBRID_OPS:
            w = tensor_at(graph, op, 1)
            if w is not None and w.per_channel:
                hits.append(label(op))
    if not hits:
        return ()
    return (f"{len(hits)} op(s) with per-channel weights ({', '.join(hits[:6])}"
            f"{' ...' if len(hits) > 6 else ''}): accepted by the VX delegate but likely slower "
            "than per-tensor on this NPU; try recipe a8w8_pt",)
