"""i.MX 95: NXP eIQ Neutron-S NPU through ``libneutron_delegate.so``.

No official Neutron-S operator table was retrievable, so this table combines the
public statements: the operator list and common constraints of an NXP Japan
technical blog (seed 001, section 7: static shapes, batch 1, 8-bit types,
symmetric weights, bias scale = input scale x weight scale), the ops the
lf-6.6.52_2.2.0 delegate can serialise for the converter (npu-facts.md §3.1: SUM
and PADV2 are not among them) and the explicit per-op limits written in
``neutron_delegate_utils.cc::IsNodeSupportedByNeutron`` (npu-facts.md §3.1:
UINT8/INT8 tensors with INT32 bias, 4-D CONV_2D, pooling limits).  Results are labelled "predicted" unless NXP's
converter is on PATH, in which case :mod:`workbench.placement` runs it.
"""

from __future__ import annotations

import math

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

SRC_SEED = "NXP Japan blog 'i.MX95 Neutron-S conversion flow' (seed 001) section 7"
SRC_DELEGATE = ("npu-facts.md §3.1 (nxp-imx/tflite-neutron-delegate lf-6.6.52_2.2.0 "
                "neutron_delegate_utils.cc IsNodeSupportedByNeutron)")
SRC_SERIALISE = "npu-facts.md §3.1 (lf-6.6.52_2.2.0 delegate SetBuiltinOptions switch)"

#: Seed 001 section 7.2 "main operators supported by MX95 (Neutron-S)" ("RELU systems" expanded).
SEED_OPS = ops_set(
    "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL", "AVERAGE_POOL_2D",
    "MAX_POOL_2D", "CONCATENATION", "PAD", "PADV2", "RESHAPE", "RESIZE_BILINEAR",
    "RESIZE_NEAREST_NEIGHBOR", "MEAN", "SUM", "LOGISTIC", "TANH", "HARD_SWISH", "PRELU",
    "LEAKY_RELU", "RELU", "RELU6", "RELU_N1_TO_1", "TRANSPOSE_CONV", "UNIDIRECTIONAL_SEQUENCE_LSTM",
)
#: The seed's list without SUM and PADV2, which the lf-6.6.52 delegate cannot serialise for the
#: converter (npu-facts.md §3.1): the ops predicted on the NPU.
NOT_SERIALISABLE_SEED_OPS = ops_set("SUM", "PADV2")
SUPPORTED_OPS = SEED_OPS - NOT_SERIALISABLE_SEED_OPS
#: Ops the lf-6.6.52 delegate can hand to the converter but the seed does not list: an upper bound.
DELEGATE_ONLY_OPS = ops_set(
    "ABS", "BATCH_TO_SPACE_ND", "DEQUANTIZE", "EXP", "EXPAND_DIMS", "GELU", "LOG", "MAXIMUM",
    "MINIMUM", "PACK", "QUANTIZE", "RSQRT", "SHAPE", "SLICE", "SOFTMAX", "SPACE_TO_BATCH_ND", "SPLIT",
    "SPLIT_V", "SQUARED_DIFFERENCE", "SQUEEZE", "STRIDED_SLICE", "TRANSPOSE", "UNPACK",
)
#: Every op the lf-6.6.52 delegate can serialise for the converter (npu-facts.md §3.1); any other
#: op throws "Can't support Operator." in the delegate and stays on the CPU.
SERIALISABLE_OPS = ops_set(
    "ABS", "ADD", "AVERAGE_POOL_2D", "BATCH_TO_SPACE_ND", "CONCATENATION", "CONV_2D",
    "DEPTHWISE_CONV_2D", "DEQUANTIZE", "EXP", "EXPAND_DIMS", "FULLY_CONNECTED", "GELU", "HARD_SWISH",
    "LEAKY_RELU", "LOG", "LOGISTIC", "MAXIMUM", "MAX_POOL_2D", "MEAN", "MINIMUM", "MUL", "PACK", "PAD",
    "PRELU", "QUANTIZE", "RELU", "RELU6", "RELU_N1_TO_1", "RESHAPE", "RESIZE_BILINEAR",
    "RESIZE_NEAREST_NEIGHBOR", "RSQRT", "SHAPE", "SLICE", "SOFTMAX", "SPACE_TO_BATCH_ND", "SPLIT",
    "SPLIT_V", "SQUARED_DIFFERENCE", "SQUEEZE", "STRIDED_SLICE", "SUB", "TANH", "TRANSPOSE",
    "TRANSPOSE_CONV", "UNIDIRECTIONAL_SEQUENCE_LSTM", "UNPACK",
)
CUSTOM_NPU_OPS = NPU_CUSTOM_OPS["imx95"]
#: Feature maps (non-constant tensors) must be 8-bit; constants may also be INT32 (bias, shapes,
#: paddings, axes).  npu-facts.md §3.1: "supported dtypes UINT8/INT8 (bias INT32)".
FM_DTYPES = ("UINT8", "INT8")
CONST_DTYPES = ("UINT8", "INT8", "INT32")
INT8_IO_OPS = ops_set("ADD", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
POOL_OPS = ops_set("MAX_POOL_2D", "AVERAGE_POOL_2D")
NUM_MACS = 16
WEIGHT_OPS = ops_set("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV")
CONV_OPS = ops_set("CONV_2D", "DEPTHWISE_CONV_2D")
BIAS_REL_TOL = 1e-3
PAD_CHANNEL_MULTIPLE = 16
PAD_MAX_CHANNEL_DELTA = 17


def _weights_bias(op: OpInfo) -> tuple[int, int]:
    return (1, 3) if op.type == "TRANSPOSE_CONV" else (1, 2)


def _op_list(graph: TFLiteGraph, op: OpInfo) -> str | None:
    if op.type in SEED_OPS or op.type in CUSTOM_NPU_OPS:
        return None
    if op.type in DELEGATE_ONLY_OPS:
        return (f"{label(op)}: {op.type} is not on the Neutron-S main operator list (the delegate "
                "can pass it to the converter, which may still accept it)")
    return f"{label(op)}: {op.type} is not a Neutron-S operator"


def _serialisable(graph: TFLiteGraph, op: OpInfo) -> str | None:
    if op.type in SERIALISABLE_OPS or op.type in CUSTOM_NPU_OPS:
        return None
    return (f"{label(op)}: the lf-6.6.52 Neutron delegate cannot serialise {op.type} for the converter "
            "(\"Can't support Operator.\")")


def _dtype(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(
        f"{label(op)} {'constant' if t.is_constant else 'feature map'} '{t.name}' is {t.dtype}"
        for t in graph.op_inputs(op) + graph.op_outputs(op)
        if t.dtype not in (CONST_DTYPES if t.is_constant else FM_DTYPES))


def _int8_io(graph: TFLiteGraph, op: OpInfo) -> str | None:
    """ADD: both inputs and the output int8/uint8; conv/FC: input, filter, output int8/uint8, bias int32."""
    out = []
    roles = (("input 0", 0), ("input 1", 1)) if op.type == "ADD" else (("input", 0), ("filter", 1))
    for role, pos in roles:
        t = tensor_at(graph, op, pos)
        if t is not None and t.dtype not in FM_DTYPES:
            out.append(f"{label(op)} {role} '{t.name}' is {t.dtype}")
    for t in graph.op_outputs(op):
        if t.dtype not in FM_DTYPES:
            out.append(f"{label(op)} output '{t.name}' is {t.dtype}")
    if op.type != "ADD":
        b = tensor_at(graph, op, 2)
        if b is not None and b.dtype != "INT32":
            out.append(f"{label(op)} bias '{b.name}' is {b.dtype}, not INT32")
    return first(out)


def _conv_4d(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} {what} '{t.name}' has rank {len(t.shape)}"
                 for what, t in (("input", tensor_at(graph, op, 0)), ("filter", tensor_at(graph, op, 1)),
                                 *(("output", o) for o in graph.op_outputs(op)))
                 if t is not None and len(t.shape) != 4)


def _same_padding(in_size: int, out_size: int, stride: int, kernel: int) -> tuple[int, int]:
    total = max((out_size - 1) * stride + kernel - in_size, 0)
    return total // 2, total - total // 2


def _max_pool_padding(graph: TFLiteGraph, op: OpInfo) -> str | None:
    x, outs = tensor_at(graph, op, 0), graph.op_outputs(op)
    if x is None or not outs or len(x.shape) != 4 or len(outs[0].shape) != 4:
        return None
    if op.options.get("padding") != "SAME":
        return None
    out = []
    for axis, dim in ((1, "H"), (2, "W")):
        stride = op.options.get(f"stride{dim}", 1)
        kernel = op.options.get(f"filter{'Height' if dim == 'H' else 'Width'}", 1)
        pad = _same_padding(x.shape[axis], outs[0].shape[axis], stride, kernel)
        if max(pad) >= kernel:
            out.append(f"{label(op)} pads {max(pad)} along {dim} with a kernel of {kernel}")
    return first(out)


def _pool_shape(graph: TFLiteGraph, op: OpInfo) -> str | None:
    x = tensor_at(graph, op, 0)
    if x is None:
        return None
    if op.type == "MAX_POOL_2D" and len(x.shape) != 4:
        return f"{label(op)} input '{x.name}' has rank {len(x.shape)}, not 4"
    if x.shape and x.shape[-1] % NUM_MACS:
        return f"{label(op)} input '{x.name}' has {x.shape[-1]} channels, not a multiple of {NUM_MACS}"
    return None


def _static(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} tensor '{t.name}' has shape signature {list(t.shape_signature)}"
                 for t in activations(graph, op) if t.is_dynamic)


def _batch(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} tensor '{t.name}' has batch {t.shape[0]}"
                 for t in activations(graph, op) if len(t.shape) >= 3 and t.shape[0] != 1)


def _positive_scale(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} tensor '{t.name}' has a scale <= 0"
                 for t in graph.op_inputs(op) + graph.op_outputs(op)
                 if t.is_quantized and any(not (s > 0) for s in t.scales))


def _symmetric(graph: TFLiteGraph, op: OpInfo) -> str | None:
    w = tensor_at(graph, op, _weights_bias(op)[0])
    if w is None or not w.is_quantized or not any(z != 0 for z in w.zero_points):
        return None
    return f"{label(op)} weights '{w.name}' have non-zero zero points {sorted(set(w.zero_points))[:4]}"


def _bias_scale(graph: TFLiteGraph, op: OpInfo) -> str | None:
    wi, bi = _weights_bias(op)
    x, w, b = tensor_at(graph, op, 0), tensor_at(graph, op, wi), tensor_at(graph, op, bi)
    if op.type == "TRANSPOSE_CONV":
        x = tensor_at(graph, op, 2)
    if b is None or x is None or w is None or not (x.is_quantized and w.is_quantized and b.is_quantized):
        return None
    if len(b.scales) not in (1, len(w.scales)) and len(w.scales) != 1:
        return f"{label(op)} bias has {len(b.scales)} scales for {len(w.scales)} weight scales"
    n = max(len(b.scales), len(w.scales))
    for i in range(n):
        expected = x.scales[0] * w.scales[i if len(w.scales) > 1 else 0]
        got = b.scales[i if len(b.scales) > 1 else 0]
        if not math.isclose(got, expected, rel_tol=BIAS_REL_TOL):
            return (f"{label(op)} bias scale[{i}] is {got:.6g}, input scale x weight scale is "
                    f"{expected:.6g}")
    return None


def _const_weights(graph: TFLiteGraph, op: OpInfo) -> str | None:
    out = []
    for pos, what in zip(_weights_bias(op), ("weights", "bias")):
        t = tensor_at(graph, op, pos)
        if t is not None and not t.is_constant:
            out.append(f"{label(op)} {what} '{t.name}' is not constant")
    return first(out)


def _dilation(graph: TFLiteGraph, op: OpInfo) -> str | None:
    dh, dw = op.options.get("dilationHFactor", 1), op.options.get("dilationWFactor", 1)
    return None if dh == 1 and dw == 1 else f"{label(op)} has dilation {dh}x{dw}"


def _depth_multiplier(graph: TFLiteGraph, op: OpInfo) -> str | None:
    m = op.options.get("depthMultiplier", 1)
    return None if m == 1 else f"{label(op)} has depth multiplier {m}"


def _stride_1_2(graph: TFLiteGraph, op: OpInfo) -> str | None:
    sh, sw = op.options.get("strideH", 1), op.options.get("strideW", 1)
    if op.type == "MAX_POOL_2D":
        return None if sh in (1, 2) else f"{label(op)} has stride height {sh}"
    return None if sh in (1, 2) and sw in (1, 2) else f"{label(op)} has stride {sh}x{sw}"


def _add_const(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} input '{t.name}' is a constant" for t in graph.op_inputs(op) if t.is_constant)


def _pad(graph: TFLiteGraph, op: OpInfo) -> str | None:
    x = tensor_at(graph, op, 0)
    outs = graph.op_outputs(op)
    if x is None or not outs or len(x.shape) != 4 or len(outs[0].shape) != 4:
        return None
    y = outs[0]
    if tuple(x.shape[:3]) != tuple(y.shape[:3]):
        return f"{label(op)} pads spatial/batch dimensions ({list(x.shape)} -> {list(y.shape)})"
    delta = y.shape[3] - x.shape[3]
    if y.shape[3] % PAD_CHANNEL_MULTIPLE or delta > PAD_MAX_CHANNEL_DELTA:
        return f"{label(op)} pads channels {x.shape[3]} -> {y.shape[3]}"
    return None


def _reshape_shape(graph: TFLiteGraph, op: OpInfo) -> str | None:
    s = tensor_at(graph, op, 1)
    if s is None:
        return None
    if s.dtype != "INT32" or not s.is_constant:
        return f"{label(op)} shape input '{s.name}' is {'constant ' if s.is_constant else 'non-constant '}{s.dtype}"
    return None


def _asymmetric_weights(graph: TFLiteGraph) -> tuple[str, ...]:
    hits = [label(op) for op in graph.ops if op.type in WEIGHT_OPS and _symmetric(graph, op)]
    if not hits:
        return ()
    return (f"{len(hits)} op(s) with asymmetric weights ({', '.join(hits[:6])}"
            f"{' ...' if len(hits) > 6 else ''}); re-quantize with symmetric weights (a8w8_pc)",)


C = Constraint
CONSTRAINTS = (
    C("neutron.op_list", f"The op must be on the Neutron-S main operator list ({len(SEED_OPS)} ops).",
      _op_list, None, SRC_SEED + " 7.2 (npu-facts.md §3.1 gives only an upper bound)"),
    C("neutron.delegate.serialisable", f"The lf-6.6.52 delegate must be able to serialise the op for "
      f"the converter ({len(SERIALISABLE_OPS)} builtins; SUM and PADV2 are not among them).",
      _serialisable, None, SRC_SERIALISE),
    C("neutron.generic.dtype", "Feature maps must be " + "/".join(FM_DTYPES) + "; constants "
      + "/".join(CONST_DTYPES) + " (INT16, INT64 and float tensors are rejected).", _dtype, None,
      SRC_DELEGATE + "; " + SRC_SEED + " 7.1 (not stated in npu-facts.md)"),
    C("neutron.types.int8_io", "ADD: both inputs and the output int8/uint8; CONV_2D, DEPTHWISE_CONV_2D "
      "and FULLY_CONNECTED: input, filter and output int8/uint8 with an INT32 bias.", _int8_io,
      INT8_IO_OPS, SRC_DELEGATE),
    C("neutron.conv.4d", "CONV_2D input, filter and output must be 4-D.", _conv_4d, ops_set("CONV_2D"),
      SRC_DELEGATE),
    C("neutron.max_pool.padding", "MAX_POOL_2D padding must be smaller than the kernel on each side "
      "(always met by SAME/VALID padding with consistent shapes; checked from the tensor shapes).",
      _max_pool_padding, ops_set("MAX_POOL_2D"), SRC_DELEGATE),
    C("neutron.pool.shape", f"Pooling input channels must be a multiple of NUM_MACS = {NUM_MACS} "
      "(i.MX 95); MAX_POOL_2D input must be 4-D.", _pool_shape, POOL_OPS, SRC_DELEGATE),
    C("neutron.generic.static_shape", "Tensor shapes must be static.", _static, None,
      SRC_SEED + " 7.1 (not stated in npu-facts.md)"),
    C("neutron.generic.batch_1", "The batch size must be 1 (rank >= 3 feature maps).", _batch, None,
      SRC_SEED + " 7.1 (not stated in npu-facts.md)"),
    C("neutron.generic.positive_scale", "Quantization scales must be positive.", _positive_scale, None,
      SRC_SEED + " 7.1 (not stated in npu-facts.md)"),
    C("neutron.generic.symmetric_weights", "Weights must be symmetrically quantized (zero point 0).",
      _symmetric, WEIGHT_OPS, SRC_SEED + " 7.1 (not stated in npu-facts.md)"),
    C("neutron.generic.bias_scale", "The bias scale must equal input scale x weight scale "
      f"(relative tolerance {BIAS_REL_TOL:g}).", _bias_scale, WEIGHT_OPS,
      SRC_SEED + " 7.1 (not stated in npu-facts.md)"),
    C("neutron.const_weights", "Weights and bias must be constant.", _const_weights,
      ops_set("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"), SRC_DELEGATE),
    C("neutron.conv.dilation", "Convolutions must have dilation 1.", _dilation, CONV_OPS, SRC_DELEGATE),
    C("neutron.depthwise.multiplier", "DEPTHWISE_CONV_2D must have depth multiplier 1.",
      _depth_multiplier, ops_set("DEPTHWISE_CONV_2D"), SRC_DELEGATE),
    C("neutron.stride", "DEPTHWISE_CONV_2D stride must be 1 or 2; MAX_POOL_2D stride height 1 or 2.",
      _stride_1_2, ops_set("DEPTHWISE_CONV_2D", "MAX_POOL_2D"), SRC_DELEGATE),
    C("neutron.add.no_constant", "ADD inputs must both be feature maps (no constant operand).",
      _add_const, ops_set("ADD"), SRC_DELEGATE),
    C("neutron.pad.channels", f"PAD may pad channels only, to a multiple of {PAD_CHANNEL_MULTIPLE}, by "
      f"at most {PAD_MAX_CHANNEL_DELTA}.", _pad, ops_set("PAD", "PADV2"), SRC_DELEGATE),
    C("neutron.reshape.shape", "RESHAPE shape input must be a constant INT32 tensor.", _reshape_shape,
      ops_set("RESHAPE"), SRC_DELEGATE),
)

MODEL_CHECKS = (
    ModelCheck("neutron.model.full_integer", "Neutron-S runs 8-bit ops only; float ops run on the "
               "Cortex-A55.", "error", check_full_integer, SRC_SEED + " 7.1 (not stated in npu-facts.md)"),
    ModelCheck("neutron.model.asymmetric_weights", "Neutron-S needs symmetric weights; asymmetric "
               "ones leave the layer on the CPU.", "error", _asymmetric_weights,
               SRC_SEED + " 7.1 (not stated in npu-facts.md)"),
    ModelCheck("model.dynamic_shapes", "Neutron-S needs static shapes with batch 1.", "error",
               check_dynamic_shapes, SRC_SEED + " 7.1 (not stated in npu-facts.md)"),
)

TARGET = Target(
    id="imx95",
    name="i.MX 95",
    soc="NXP i.MX 95",
    npu="NXP eIQ Neutron-S (2 TOPS)",
    delegate="libneutron_delegate.so",
    runtime="NXP BSP lf-6.6.52_2.2.0 tflite-neutron-delegate; Neutron SDK operator list as of "
            "compiler 3.2.x (seed 001)",
    sources=(SRC_SEED, SRC_DELEGATE, SRC_SERIALISE, "npu-facts.md §3.2 (third-party observations)"),
    supported_ops=SUPPORTED_OPS,
    constraints=CONSTRAINTS,
    model_checks=MODEL_CHECKS,
    authority="rule table (predicted)",
    npu_custom_ops=CUSTOM_NPU_OPS,
    compiler="neutron-converter",
    recipe="a8w8_pc",
    notes=(
        "No official Neutron-S constraint table was available; placement is predicted unless "
        "`neutron-converter` (or `neutron-compiler`) is on PATH, in which case it is run.",
        "Ops the delegate can pass to the converter but the operator list omits (e.g. SOFTMAX, "
        "TRANSPOSE, SLICE) are predicted CPU; the converter may accept them.",
        "Third-party reports show Neutron placement also depends on tensor sizes (Toradex: "
        "MobileNetV2 82/88 ops at 224x224, 22/88 at 320x320); sweep input sizes on the board.",
        "The per-op limits from IsNodeSupportedByNeutron are not called by the lf-6.6.52 delegate "
        "(the converter decides); they are the best public statement of Neutron-S limits.",
        "A third-party guide (RidgeRun, npu-facts.md §3.2) mentions 16-bit activations; the delegate "
        "code says UINT8/INT8 only, so 16-bit models are predicted on the CPU.",
    ),
    bsp_releases=(
        BspRelease(id="lf-6.6.3_1.0.0", toolchain=(("delegate", "nxp-imx/tflite-neutron-delegate "
                   "lf-6.6.3_1.0.0"),), source="npu-facts.md §3.1", compiler="tflite-neutron-delegate",
                   compiler_version="lf-6.6.3_1.0.0", has_rules=False,
                   notes=("The first delegate branch; its serialisable op list was not read.",)),
        BspRelease(id="lf-6.6.52_2.2.0", toolchain=(("delegate", "nxp-imx/tflite-neutron-delegate "
                   "lf-6.6.52_2.2.0"), ("converter", "closed Neutron converter library (online)")),
                   source="npu-facts.md §3.1", compiler="tflite-neutron-delegate",
                   compiler_version="lf-6.6.52_2.2.0"),
    ),
    bsp="lf-6.6.52_2.2.0",
)
