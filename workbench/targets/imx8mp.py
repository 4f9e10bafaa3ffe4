"""i.MX 8M Plus: VeriSilicon VIPNano-SI+ NPU through the VX delegate (``libvx_delegate.so``).

The table follows ``op_map.cc`` of the VX delegate (NXP ``lf-6.6.3_1.0.0`` and
VeriSilicon HEAD register the same 95 builtins): an op is delegated when its
builtin is registered, the generic checks of ``OpMapperBase::IsSupported`` pass
and the op's own ``IsOpSupported`` override passes.  Placement is a prediction
from this table (the delegate is not available off the board).
"""

from __future__ import annotations

from ..models.tflite_graph import OpInfo, TFLiteGraph
from ..vocab import NPU_CUSTOM_OPS
from ._constraints import (
    BspRelease,
    Constraint,
    ModelCheck,
    Target,
    activations,
    check_dynamic_shapes,
    check_full_integer,
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


C = Constraint
CONSTRAINTS = (
    C("vx.op_map", "The builtin must be registered in the VX delegate op map (95 builtins); "
      "otherwise it falls back to TFLite on the CPU.", _op_map, None, "npu-facts.md §1.2 (" + SRC_OPMAP + ")"),
    C("vx.generic.int64_input", "No input tensor may be INT64 (except BROADCAST_TO).",
      _input_dtype("INT64"), None, SRC_13 + " OpMapperBase::IsSupported", exempt=ops_set("BROADCAST_TO")),
    C("vx.generic.string_input", "No input tensor may be STRING.", _input_dtype("STRING"), None,
      SRC_13 + " OpMapperBase::IsSupported"),
    C("vx.generic.rank", f"Input tensors must have rank <= {MAX_RANK}.", _rank, None,
      SRC_13 + " OpMapperBase::IsSupported"),
    C("vx.generic.zero_dim", "No input or output tensor may have a dimension of 0.", _zero_dim, None,
      SRC_13 + " OpMapperBase::IsSupported"),
    C("vx.generic.max_dim", f"Input dimensions other than the batch must be <= {MAX_DIM}.", _big_dim,
      None, SRC_13 + " OpMapperBase::IsSupported"),
    C("vx.generic.int16_output", "No output tensor may be INT16.", _output_dtype("INT16"), None,
      SRC_13 + " OpMapperBase::IsSupported"),
    C("vx.generic.int64_output", "No output tensor may be INT64.", _output_dtype("INT64"), None,
      SRC_13 + " OpMapperBase::IsSupported"),
    C("vx.generic.fused_activation", "A fused activation must be one of " + ", ".join(FUSED_OK)
      + " (others are not filtered by the delegate but crash it; predicted CPU).", _fused, None,
      "npu-facts.md §1.6 delegate_main.cc FusedActivationAction [infer]"),
    C("vx.conv.hybrid", "Input and weights must have the same type (no hybrid conv/FC).", _hybrid,
      HYBRID_OPS, SRC_14 + " op_map.cc Conv2d/DepthwiseConv/FullyConnected/Conv3d"),
    C("vx.conv_2d.grouped_batch", "A grouped CONV_2D (input C != filter C) needs batch 1.",
      _grouped_batch, ops_set("CONV_2D"), SRC_14 + " op_map.cc Conv2dMapper"),
    C("vx.fully_connected.int16", "FULLY_CONNECTED inputs must not be INT16.", _fc_int16,
      ops_set("FULLY_CONNECTED"), SRC_14 + " op_map.cc FullyConnectedMapper"),
    C("vx.fully_connected.shuffled", "FULLY_CONNECTED weights must not be SHUFFLED4x16INT8.",
      _fc_shuffled, ops_set("FULLY_CONNECTED"), SRC_14 + " op_map.cc FullyConnectedMapper"),
    C("vx.const_input", "Shape/axis/size/begin-end inputs must be constant ("
      + "; ".join(f"{k} input {','.join(map(str, v))}" for k, v in sorted(CONST_INPUTS.items())) + ").",
      _const_inputs, frozenset(CONST_INPUTS), SRC_14 + " op_map.cc IsOpSupported overrides"),
    C("vx.output_rank0", "The output shape must be known (rank 0 output = dynamic).", _output_rank0,
      OUTPUT_RANK0_OPS, SRC_14 + " op_map.cc IsOpSupported overrides"),
    C("vx.dynamic_shape", "TRANSPOSE, ARG_MAX and ARG_MIN need static shapes.", _dynamic,
      DYNAMIC_SHAPE_OPS, SRC_14 + " op_map.cc IsOpSupported overrides"),
    C("vx.strided_slice.masks", "STRIDED_SLICE must have new_axis_mask = 0 and ellipsis_mask = 0.",
      _strided_masks, ops_set("STRIDED_SLICE"), SRC_14 + " op_map.cc StridedSliceMapper"),
    C("vx.quant_params", "INT8/UINT8 inputs of resize, split and space/depth ops need "
      "quantization parameters.", _needs_quant, NEEDS_QUANT_OPS, SRC_14 + " op_map.cc"),
    C("vx.space_depth.int_input", "SPACE_TO_DEPTH/DEPTH_TO_SPACE inputs must not be INT32 or INT64.",
      _space_depth_int, ops_set("SPACE_TO_DEPTH", "DEPTH_TO_SPACE"), SRC_14 + " op_map.cc"),
    C("vx.batch_space.rank", "BATCH_TO_SPACE_ND/SPACE_TO_BATCH_ND inputs must have rank 4.",
      _batch_space_rank, ops_set("BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND"), SRC_14 + " op_map.cc"),
    C("vx.select.types", "SELECT/SELECT_V2 data inputs and output must not be BOOL, INT8 or UINT8.",
      _select_types, ops_set("SELECT", "SELECT_V2"), SRC_14 + " op_map.cc SelectMapper"),
    C("vx.dequantize.input", "DEQUANTIZE input must not be INT16/FLOAT16 or per-channel INT8/UINT8.",
      _dequantize, ops_set("DEQUANTIZE"), SRC_14 + " op_map.cc DequantizeMapper"),
    C("vx.quantize.types", "QUANTIZE must not requantize INT32/INT16 to 8 bit, convert INT16 to "
      "INT32, or quantize FLOAT32 to a per-channel output.", _quantize, ops_set("QUANTIZE"),
      SRC_14 + " op_map.cc QuantizeMapper"),
    C("vx.elementwise.int16_to_int8", "ADD/SUB/MUL/DIV must not take an INT16 input to an 8-bit output.",
      _elementwise_int16, ops_set("ADD", "SUB", "MUL", "DIV"), SRC_14 + " op_map.cc SimpleOpMapper"),
    C("vx.batch_matmul.types", "BATCH_MATMUL must not output INT32, take an INT8 input 0 with a FLOAT32 "
      "input 1 (NXP's fork; the reverse is accepted), or set adj_x and adj_y together.", _batch_matmul,
      ops_set("BATCH_MATMUL"), SRC_14 + " op_map.cc (NXP)"),
    C("vx.squared_difference.types", "SQUARED_DIFFERENCE inputs must share a type, map FLOAT32->FLOAT32, "
      "INT8->INT8 or UINT8->UINT8, and 8-bit input 0 and output must be per-tensor.", _squared_difference,
      ops_set("SQUARED_DIFFERENCE"), SRC_14 + " op_map.cc"),
    C("vx.pack.input", "PACK input must not be INT32 or a 1-D INT8/UINT8 tensor (NXP fork).", _pack,
      ops_set("PACK"), SRC_14 + " nxp-imx op_map.cc PackMapper"),
    C("vx.conv_3d.dilation", "CONV_3D dilation must be 1 in every dimension.", _conv3d_dilation,
      ops_set("CONV_3D"), SRC_14 + " op_map.cc Conv3dMapper"),
    C("vx.slice.batch", "SLICE of a rank > 3 input must keep the batch.", _slice_batch, ops_set("SLICE"),
      SRC_14 + " op_map.cc SliceMapper"),
    C("vx.mirror_pad.mode", "MIRROR_PAD mode must be REFLECT or SYMMETRIC.", _mirror_pad_mode,
      ops_set("MIRROR_PAD"), SRC_14 + " op_map.cc MirrorPadMapper"),
    C("vx.split.dynamic", "SPLIT/SPLIT_V outputs must not be allocated dynamically (axis and sizes "
      "constant, static output shapes).", _split_dynamic, ops_set("SPLIT", "SPLIT_V"),
      SRC_14 + " op_map.cc SplitMapper"),
    C("vx.batch_space.block_shape", "BATCH_TO_SPACE_ND/SPACE_TO_BATCH_ND block shape must have length 2.",
      _block_shape, ops_set("BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND"), SRC_14 + " op_map.cc"),
    C("vx.select.condition_rank", "SELECT/SELECT_V2 condition rank must equal the input rank.",
      _select_rank, ops_set("SELECT", "SELECT_V2"), SRC_14 + " op_map.cc SelectMapper"),
    C("vx.pow.int32", "POW must not take two INT32 inputs.", _pow_int32, ops_set("POW"),
      SRC_14 + " op_map.cc PowMapper"),
    C("vx.elementwise.relu_n1_int32", "ADD/SUB/MUL/DIV must not fuse RELU_N1_TO_1 with INT32 inputs or "
      "outputs.", _relu_n1_int32, ops_set("ADD", "SUB", "MUL", "DIV"), SRC_14 + " op_map.cc SimpleOpMapper"),
    C("vx.embedding_lookup.types", "EMBEDDING_LOOKUP must not read UINT8 weights into an INT8 output.",
      _embedding_types, ops_set("EMBEDDING_LOOKUP"), SRC_14 + " op_map.cc"),
    C("vx.one_hot.bool", "ONE_HOT must not output BOOL.", _one_hot_bool, ops_set("ONE_HOT"),
      SRC_14 + " op_map.cc OneHotMapper"),
    C("vx.cast.types", "CAST must not read or write " + ", ".join(CAST_REJECTED) + ".", _cast_types,
      ops_set("CAST"), SRC_14 + " op_map.cc CastMapper"),
    C("vx.lstm.states", "UNIDIRECTIONAL_SEQUENCE_LSTM output state must have the output's type and the "
      "cell state must be INT16 or FLOAT16.", _lstm_states, ops_set("UNIDIRECTIONAL_SEQUENCE_LSTM"),
      SRC_14 + " op_map.cc"),
    C("vx.rnn.weights", "(BI/UNI)DIRECTIONAL_SEQUENCE_RNN and BIDIRECTIONAL_SEQUENCE_LSTM must not have "
      "quantized weights, projection or auxiliary weights.", _rnn_weights, RNN_OPS, SRC_14 + " op_map.cc"),
    C("vx.lstm.quantized", "UNIDIRECTIONAL_SEQUENCE_LSTM input must be INT8/UINT8.", _lstm_float,
      ops_set("UNIDIRECTIONAL_SEQUENCE_LSTM"), SRC_14 + " op_map.cc"),
)

MODEL_CHECKS = (
    ModelCheck("vx.model.full_integer", "The workbench deploys INT8 on the 8M Plus NPU; float ops are "
               "accepted by the delegate but run far slower than 8-bit ones [infer].", "warning",
               check_full_integer, SRC_FACTS),
    ModelCheck("vx.model.per_channel", "Per-channel weights are accepted (SYMMETRIC_PER_CHANNEL) "
               "but are likely slower than per-tensor on VeriSilicon NPUs; prefer a8w8_pt [infer].",
               "warning", _per_channel_weights, "npu-facts.md 1.5 (OpenCV Zoo, ST notes)"),
    ModelCheck("model.dynamic_shapes", "Dynamic dimensions keep shape-dependent ops (TRANSPOSE, "
               "ARG_MAX/MIN, RESHAPE...) off the NPU; export with a fixed shape and batch 1.",
               "warning", check_dynamic_shapes, SRC_FACTS),
)

TARGET = Target(
    id="imx8mp",
    name="i.MX 8M Plus",
    soc="NXP i.MX 8M Plus",
    npu="VeriSilicon VIPNano-SI+ (2.3 TOPS)",
    delegate="libvx_delegate.so",
    runtime="NXP BSP lf-6.6.3_1.0.0 tflite-vx-delegate-imx (same op map as VeriSilicon 2025-01 HEAD)",
    sources=(SRC_OPMAP, "delegate_main.cc PrepareDelegate / SupportedOp", SRC_FACTS),
    supported_ops=SUPPORTED_OPS,
    constraints=CONSTRAINTS,
    model_checks=MODEL_CHECKS,
    authority="rule table (predicted)",
    npu_custom_ops=CUSTOM_NPU_OPS,
    per_channel_fast=False,
    recipe="a8w8_pt",
    notes=(
        "Every supported node is delegated in one call, so several disjoint NPU partitions are possible.",
        "The NPU graph compiles on the first invoke; benchmark warm-up carries the compile time.",
        "Per-tensor INT8 is recommended; per-channel is accepted and flagged as a likely slowdown.",
        "Placement is predicted from op_map.cc; on the board, benchmark_model op profiling shows "
        "CPU ops as rows other than 'Vx Delegate'.",
    ),
    bsp_releases=(
        BspRelease(id="lf-6.6.3_1.0.0", toolchain=(("delegate", "nxp-imx/tflite-vx-delegate-imx "
                   "lf-6.6.3_1.0.0 (44aab8a)"),), source="npu-facts.md §1.2",
                   compiler="tflite-vx-delegate-imx op_map.cc", compiler_version="lf-6.6.3_1.0.0 (44aab8a)",
                   notes=("Same 95 registered builtins as VeriSilicon HEAD (2025-01); NXP adds a PACK "
                          "check and a looser BATCH_MATMUL type check.",)),
    ),
    bsp="lf-6.6.3_1.0.0",
)
