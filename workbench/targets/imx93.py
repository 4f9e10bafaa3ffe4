"""i.MX 93: Arm Ethos-U65-256 through Vela and ``libethosu_delegate.so``.

Vela is the authority: :func:`workbench.placement.analyze_placement` compiles the
model with the configuration below and reads Vela's own CPU/NPU lists.  The op
set and constraints here mirror the Ethos-U55/U65 TFLite section of the
installed Vela's ``SUPPORTED_OPS.md`` (a test keeps the op set equal to it); they
are used for the generated docs and for a quick prediction without Vela
(``use_vela=False``), and to give Vela's reasons a stable constraint id.
"""

from __future__ import annotations

from ..models.tflite_graph import OpInfo, TFLiteGraph
from ..vocab import NPU_CUSTOM_OPS
from ._constraints import (
    Constraint, ModelCheck, Target, activations, check_dynamic_shapes, check_full_integer, first,
    label, ops_set, tensor_at,
)

#: The Vela configuration NXP's i.MX 93 build uses (passed to every Vela run).
VELA_CONFIG = {
    "accelerator_config": "ethos-u65-256",
    "config": "Arm/vela.ini",
    "system_config": "Ethos_U65_High_End",
    "memory_mode": "Dedicated_Sram_384KB",
}
SRC_VELA = "ethos-u-vela 5.2.0 SUPPORTED_OPS.md (Ethos-U55 and Ethos-U65 TFLite)"

SUPPORTED_OPS = ops_set(
    "ABS", "ADD", "ARG_MAX", "AVERAGE_POOL_2D", "BATCH_MATMUL", "CONCATENATION", "CONV_2D",
    "DEPTHWISE_CONV_2D", "ELU", "EXP", "EXPAND_DIMS", "FULLY_CONNECTED", "GELU", "HARD_SWISH",
    "LEAKY_RELU", "LOG", "LOGISTIC", "MAXIMUM", "MAX_POOL_2D", "MEAN", "MINIMUM", "MIRROR_PAD", "MUL",
    "NEG", "PACK", "PAD", "PADV2", "PRELU", "QUANTIZE", "REDUCE_MAX", "REDUCE_MIN", "RELU", "RELU6",
    "RELU_0_TO_1", "RELU_N1_TO_1", "RESHAPE", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR",
    "REVERSE_V2", "RSQRT", "SLICE", "SOFTMAX", "SPLIT", "SPLIT_V", "SQUARED_DIFFERENCE", "SQUEEZE",
    "STRIDED_SLICE", "SUB", "SUM", "TANH", "TILE", "TRANSPOSE", "TRANSPOSE_CONV",
    "UNIDIRECTIONAL_SEQUENCE_LSTM", "UNPACK",
)
CUSTOM_NPU_OPS = NPU_CUSTOM_OPS["imx93"]
FM_DTYPES = ("INT16", "INT32", "INT64", "INT8", "UINT8")
NO_QUANT_OK = ops_set("ARG_MAX", "EXPAND_DIMS", "MIRROR_PAD", "PAD", "PADV2", "QUANTIZE", "TRANSPOSE")
PER_AXIS_OK = ops_set("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV")
STRIDE_RANGE = (1, 3)
WEIGHT_OPS = ops_set("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV")


def _op_type(graph: TFLiteGraph, op: OpInfo) -> str | None:
    if op.type in SUPPORTED_OPS or op.type in CUSTOM_NPU_OPS:
        return None
    return f"{label(op)}: {op.type} is not in Vela's Ethos-U65 operator list"


def _dtype(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} feature map '{t.name}' is {t.dtype}"
                 for t in activations(graph, op) if t.dtype not in FM_DTYPES)


def _static(graph: TFLiteGraph, op: OpInfo) -> str | None:
    return first(f"{label(op)} tensor '{t.name}' has shape signature {list(t.shape_signature)}"
                 for t in activations(graph, op) if t.is_dynamic)


def _quant(graph: TFLiteGraph, op: OpInfo) -> str | None:
    if op.type in NO_QUANT_OK:
        return None
    return first(f"{label(op)} tensor '{t.name}' has no quantization parameters"
                 for t in activations(graph, op) if t.dtype in FM_DTYPES and not t.is_quantized)


def _per_axis(graph: TFLiteGraph, op: OpInfo) -> str | None:
    if op.type in PER_AXIS_OK:
        return None
    return first(f"{label(op)} tensor '{t.name}' is per-axis quantized ({len(t.scales)} scales)"
                 for t in graph.op_inputs(op) + graph.op_outputs(op) if t.per_channel)


def _int64(graph: TFLiteGraph, op: OpInfo) -> str | None:
    if op.type == "ARG_MAX":
        return None
    return first(f"{label(op)} feature map '{t.name}' is INT64"
                 for t in activations(graph, op) if t.dtype == "INT64")


def _stride(graph: TFLiteGraph, op: OpInfo) -> str | None:
    sh, sw = op.options.get("strideH", 1), op.options.get("strideW", 1)
    lo, hi = STRIDE_RANGE
    if lo <= sh <= hi and lo <= sw <= hi:
        return None
    if op.type == "CONV_2D" and op.options.get("padding") == "VALID" \
            and op.options.get("dilationHFactor", 1) == 1 and op.options.get("dilationWFactor", 1) == 1:
        return None
    return f"{label(op)} has stride {sh}x{sw}"


def _weights(graph: TFLiteGraph, op: OpInfo) -> str | None:
    w = tensor_at(graph, op, 1)
    if w is None:
        return None
    if w.dtype not in ("INT8", "UINT8"):
        return f"{label(op)} weights '{w.name}' are {w.dtype}"
    return None


def _bias(graph: TFLiteGraph, op: OpInfo) -> str | None:
    b = tensor_at(graph, op, 3 if op.type == "TRANSPOSE_CONV" else 2)
    if b is not None and not b.is_constant:
        return f"{label(op)} bias '{b.name}' is not constant"
    return None


C = Constraint
CONSTRAINTS = (
    C("ethosu.op_type", f"The op must be one of the {len(SUPPORTED_OPS)} TFLite operators Vela "
      "places on the Ethos-U65; any other op is left on the CPU.", _op_type, None, SRC_VELA),
    C("ethosu.generic.dtype", "Feature-map data types must be one of " + ", ".join(FM_DTYPES) + ".",
      _dtype, None, SRC_VELA + " generic"),
    C("ethosu.generic.static_shape", "Tensors must have a constant shape.", _static, None,
      SRC_VELA + " generic"),
    C("ethosu.generic.quant_params", "Inputs, outputs and weights must have quantization "
      "parameters (except " + ", ".join(sorted(NO_QUANT_OK)) + ").", _quant, None, SRC_VELA + " generic"),
    C("ethosu.generic.per_axis", "Per-axis quantization is supported only for "
      + ", ".join(sorted(PER_AXIS_OK)) + ".", _per_axis, None, SRC_VELA + " generic"),
    C("ethosu.generic.int64", "64-bit feature maps are not supported (except ARG_MAX).", _int64, None,
      SRC_VELA + " generic"),
    C("ethosu.stride", f"Kernel stride must be in the range {STRIDE_RANGE} (CONV_2D: larger only "
      "with dilation 1 and VALID padding).", _stride,
      ops_set("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D"), SRC_VELA),
    C("ethosu.weights_8bit", "Weight tensors must be 8-bit.", _weights, WEIGHT_OPS, SRC_VELA),
    C("ethosu.bias_const", "Bias tensors must be constant.", _bias, WEIGHT_OPS, SRC_VELA),
)

#: Vela's reason text -> the constraint id above (first match wins; else "ethosu.vela").
VELA_REASON_IDS = (
    ("Unsupported opType", "ethosu.op_type"),
    ("unsupported DataType", "ethosu.generic.dtype"),
    ("dataTypes must be", "ethosu.generic.dtype"),
    ("constant shape", "ethosu.generic.static_shape"),
    ("can be dynamic", "ethosu.generic.static_shape"),
    ("quantization parameters", "ethosu.generic.quant_params"),
    ("Per-axis", "ethosu.generic.per_axis"),
    ("64-bit", "ethosu.generic.int64"),
    ("stride", "ethosu.stride"),
    ("8-bit precision", "ethosu.weights_8bit"),
    ("Bias tensors must be constant", "ethosu.bias_const"),
)

MODEL_CHECKS = (
    ModelCheck("ethosu.model.full_integer", "Vela places no float op on the NPU: every float op "
               "runs on the Cortex-A55 and splits the NPU graph.", "error", check_full_integer,
               SRC_VELA),
    ModelCheck("model.dynamic_shapes", "Vela 5.2 allows only the first dimension to be dynamic and "
               "the board runtime expects static shapes; export with a fixed shape and batch 1.",
               "warning", check_dynamic_shapes, SRC_VELA + " generic"),
)

TARGET = Target(
    id="imx93",
    name="i.MX 93",
    soc="NXP i.MX 93",
    npu="Arm Ethos-U65-256 (0.5 TOPS)",
    delegate="libethosu_delegate.so",
    runtime="Vela 5.2.0 (installed) with ethos-u65-256, Arm/vela.ini Ethos_U65_High_End, "
            "Dedicated_Sram_384KB; NXP BSP lf-6.6.3_1.0.0 ships Vela 3.10.0",
    sources=(SRC_VELA, "nxp-imx/ethos-u-vela lf-6.6.3_1.0.0 (a6f6566)",
             "nxp-imx/tflite-ethosu-delegate-imx lf-6.6.3_1.0.0 (6fb32a1)", "npu-facts.md section 2"),
    supported_ops=SUPPORTED_OPS,
    constraints=CONSTRAINTS,
    model_checks=MODEL_CHECKS,
    authority="vela",
    npu_custom_ops=CUSTOM_NPU_OPS,
    recipe="a8w8_pc",
    notes=(
        "The board loads the Vela-compiled `<model>_vela.tflite`; NPU parts become custom op `ethos-u`.",
        "Vela's placement is used as is; this table is a summary of Vela's own constraint list.",
        "The installed Vela (5.2) is newer than the BSP's (3.10): a few ops (e.g. TILE, ELU, "
        "REDUCE_MAX) may be NPU here and CPU with the BSP's compiler.",
        "Latency figures are Vela estimates, not board measurements.",
    ),
)
