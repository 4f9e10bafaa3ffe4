"""i.MX 93: Arm Ethos-U65-256 through Vela and ``libethosu_delegate.so``.

Vela is the authority: :func:`workbench.placement.analyze.analyze_placement` compiles the
model with the Vela the chosen BSP release ships (npu-facts.md section 2.1: BSP
``lf-6.6.3_1.0.0`` ships Vela 3.10.0, run here from its own pinned tool environment)
and reads Vela's own CPU/NPU lists.  The op set and constraints below mirror the
Ethos-U55/U65 TFLite section of Vela 3.10.0 (``SUPPORTED_OPS.md``, npu-facts.md
section 2.2; a test keeps the op set equal to the 3.10.0 tool env's own report)
plus the ops NXP's fork adds (section 2.1).  They give a quick prediction without
Vela (``use_vela=False``), the generated docs, and a stable id for Vela's reasons.
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

#: The Vela configuration NXP's i.MX 93 build uses (passed to every Vela run).  The .ini is the
#: one shipped with the installed (newest) Vela: 3.10.0's own lacks ``Dedicated_Sram_384KB``.
VELA_CONFIG = {
    "accelerator_config": "ethos-u65-256",
    "config": "Arm/vela.ini",
    "system_config": "Ethos_U65_High_End",
    "memory_mode": "Dedicated_Sram_384KB",
}
FACTS = "npu-facts.md"
SRC_VERSIONS = f"{FACTS} §2.1"
SRC_OPS = f"{FACTS} §2.2 (Vela 3.10.0 SUPPORTED_OPS.md)"
SRC_GENERIC = f"{FACTS} §2.2 generic constraints (Vela 3.10.0)"
SRC_NUMERIC = f"{FACTS} §2.2 tflite_supported_operators.py limits (Vela 3.10.0)"
SRC_FORK = f"{FACTS} §2.1 NXP fork differences (nxp-imx/ethos-u-vela lf-6.6.3_1.0.0)"

#: Vela 3.10.0's Ethos-U55/U65 TFLite operators (npu-facts.md §2.2, 43 ops).
VELA_3_10_OPS = ops_set(
    "ABS", "ADD", "ARG_MAX", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D",
    "EXP", "EXPAND_DIMS", "FULLY_CONNECTED", "HARD_SWISH", "LEAKY_RELU", "LOGISTIC", "MAXIMUM",
    "MAX_POOL_2D", "MEAN", "MINIMUM", "MUL", "PACK", "PAD", "PRELU", "QUANTIZE", "RELU", "RELU6",
    "RELU_N1_TO_1", "RESHAPE", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "RSQRT", "SHAPE",
    "SLICE", "SOFTMAX", "SPLIT", "SPLIT_V", "SQUARED_DIFFERENCE", "SQUEEZE", "STRIDED_SLICE", "SUB",
    "TANH", "TRANSPOSE", "TRANSPOSE_CONV", "UNIDIRECTIONAL_SEQUENCE_LSTM", "UNPACK",
)
#: Ops NXP's fork of Vela 3.10 (lf-6.6.3_1.0.0) places on the NPU that upstream 3.10.0 leaves on
#: the CPU, with what the fork does (npu-facts.md §2.1, commits named there).
NXP_FORK_OPS = {
    "LOG": "NXP's Vela fork implements LOG as an NPU element-wise op (LUT, commit 33fa369)",
    "SQRT": "NXP's Vela fork implements SQRT as an NPU element-wise op (LUT, commit db32867)",
    "GELU": "NXP's Vela fork implements GELU as an NPU element-wise op (LUT, commit db32867)",
    "SPACE_TO_BATCH_ND": "NXP's Vela fork rewrites SPACE_TO_BATCH_ND into a dilated convolution "
                         "(commit a5d97b7)",
    "BATCH_TO_SPACE_ND": "NXP's Vela fork rewrites BATCH_TO_SPACE_ND into a dilated convolution "
                         "(commit a5d97b7)",
}
#: Vela 3.10.0 release notes (npu-facts.md §2.1): "New operator support: SQUARED_DIFFERENCE, TRANSPOSE".
NEW_IN_3_10 = ops_set("SQUARED_DIFFERENCE", "TRANSPOSE")

SUPPORTED_OPS = VELA_3_10_OPS | frozenset(NXP_FORK_OPS)
CUSTOM_NPU_OPS = NPU_CUSTOM_OPS["imx93"]
FM_DTYPES = ("INT16", "INT32", "INT8", "UINT8")
INT32_OPS = ops_set("ADD", "ARG_MAX", "MUL", "SHAPE", "SUB", "TRANSPOSE")
NO_QUANT_OK = ops_set("ARG_MAX", "SHAPE", "TRANSPOSE")
PER_AXIS_OK = ops_set("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV")
BATCH_ANY_OPS = ops_set("FULLY_CONNECTED", "RESHAPE", "SHAPE", "SLICE", "SOFTMAX", "SPLIT", "SPLIT_V",
                        "SQUEEZE", "STRIDED_SLICE", "UNPACK")
BINARY_OPS = ops_set("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE")
FUSED_OK = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH")
FUSED_OUT_DTYPES = ("INT16", "INT8", "UINT8")
STRIDE_RANGE = (1, 3)
HW_STRIDES = (2, 3)
WEIGHT_OPS = ops_set("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV")
STRIDED_OPS = ops_set("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D")


def _op_type(graph: TFLiteGraph, op: OpInfo) -> str | None:
    if op.type in SUPPORTED_OPS or op.type in CUSTOM_NPU_OPS:
        return None
    return f"{label(op)}: {op.type} is not in Vela 3.10's Ethos-U65 operator list"


def _dtype(graph: TFLiteGraph, op: OpInfo) -> str | None:
    if op.type == "ARG_MAX":
        return None
    return first(f"{label(op)} feature map '{t.name}' is {t.dtype}"
                 for t in activations(graph, op) if t.dtype not in FM_DTYPES)


def _int32(graph: TFLiteGraph, op: OpInfo) -> str | None:
    if op.type in INT32_OPS:
        return None
    return first(f"{label(op)} feature map '{t.name}' is INT32"
                 for t in activations(graph, op) if t.dtype == "INT32")


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


def _batch_of(shape: tuple[int, ...]) -> int:
    return shape[-4] if len(shape) >= 4 else 1


def _batch(graph: TFLiteGraph, op: OpInfo) -> str | None:
    if op.type in BATCH_ANY_OPS:
        return None
    positions = (0, 1) if op.type in BINARY_OPS else (0,)
    return first(f"{label(op)} input '{t.name}' has batch {_batch_of(t.shape)}"
                 for t in (tensor_at(graph, op, p) for p in positions)
                 if t is not None and _batch_of(t.shape) != 1)


def _fused(graph: TFLiteGraph, op: OpInfo) -> str | None:
    act = op.options.get("fused_activation")
    if act is None or act == "NONE":
        return None
    if act not in FUSED_OK:
        return f"{label(op)} has fused activation {act}"
    return first(f"{label(op)} has fused {act} with a {t.dtype} output"
                 for t in graph.op_outputs(op) if t.dtype not in FUSED_OUT_DTYPES)


def _optimised_stride(ifm_width: int, stride: int) -> int:
    """Vela 3.10's ``calc_resize_factor``: the stride left after folding a large one into the width."""
    factor = stride
    if ifm_width % factor != 0:
        divisible = [x for x in HW_STRIDES if factor % x == 0 and ifm_width % (stride // x) == 0]
        new = factor // (divisible[0] if divisible else 1)
        factor = new if factor != new else 1
    return stride // factor


def _stride(graph: TFLiteGraph, op: OpInfo) -> str | None:
    sh, sw = op.options.get("strideH", 1), op.options.get("strideW", 1)
    lo, hi = STRIDE_RANGE
    x, outs = tensor_at(graph, op, 0), graph.op_outputs(op)
    if op.type in ("DEPTHWISE_CONV_2D", "MAX_POOL_2D") or x is None or not outs \
            or len(x.shape) != 4 or len(outs[0].shape) != 4:
        ok = lo <= sh <= hi and lo <= sw <= hi
        return None if ok else f"{label(op)} has stride {sw}x{sh} (WxH)"
    ofm_h, ofm_w, ifm_w = outs[0].shape[1], outs[0].shape[2], x.shape[2]
    h_ok = ofm_h == 1 or lo <= sh <= hi
    w_ok = ofm_w == 1 or (sw >= lo and (_optimised_stride(ifm_w, sw) if sw > 1 else sw) <= hi)
    pad_ok = op.type != "AVERAGE_POOL_2D" or sw <= hi or op.options.get("padding") in (None, "VALID")
    if h_ok and w_ok and pad_ok:
        return None
    return (f"{label(op)} has stride {sw}x{sh} (WxH), input {list(x.shape)}, output "
            f"{list(outs[0].shape)}" + ("" if pad_ok else f", padding {op.options.get('padding')}"))


def _weights(graph: TFLiteGraph, op: OpInfo) -> str | None:
    w = tensor_at(graph, op, 1)
    if w is None:
        return None
    if w.dtype not in ("INT8", "UINT8"):
        return f"{label(op)} weights '{w.name}' are {w.dtype}"
    if not w.is_constant:
        return f"{label(op)} weights '{w.name}' are not constant"
    return None


def _bias(graph: TFLiteGraph, op: OpInfo) -> str | None:
    b = tensor_at(graph, op, 3 if op.type == "TRANSPOSE_CONV" else 2)
    if b is not None and not b.is_constant:
        return f"{label(op)} bias '{b.name}' is not constant"
    return None


C = Constraint
CONSTRAINTS = (
    C("ethosu.op_type", f"The op must be one of the {len(VELA_3_10_OPS)} TFLite operators Vela 3.10.0 "
      f"places on the Ethos-U65, or one of the {len(NXP_FORK_OPS)} NXP's fork adds ("
      + ", ".join(sorted(NXP_FORK_OPS)) + "); any other op is left on the CPU.", _op_type, None,
      SRC_OPS + "; " + SRC_FORK),
    C("ethosu.generic.dtype", "Feature-map data types must be one of " + ", ".join(FM_DTYPES)
      + " (ARG_MAX excepted).", _dtype, None, SRC_GENERIC),
    C("ethosu.generic.int32", "INT32 feature maps only for " + ", ".join(sorted(INT32_OPS)) + ".",
      _int32, None, SRC_GENERIC),
    C("ethosu.generic.static_shape", "Tensors must have a constant shape.", _static, None, SRC_GENERIC),
    C("ethosu.generic.quant_params", "Inputs, outputs and weights must have quantization "
      "parameters (except " + ", ".join(sorted(NO_QUANT_OK)) + ").", _quant, None, SRC_GENERIC),
    C("ethosu.generic.per_axis", "Per-axis quantization is supported only for "
      + ", ".join(sorted(PER_AXIS_OK)) + ".", _per_axis, None, SRC_GENERIC),
    C("ethosu.generic.int64", "64-bit feature maps are not supported (except ARG_MAX).", _int64, None,
      SRC_GENERIC),
    C("ethosu.generic.batch_1", "The IFM batch must be 1, except for " + ", ".join(sorted(BATCH_ANY_OPS))
      + ".", _batch, None, SRC_GENERIC),
    C("ethosu.generic.fused_activation", "A fused activation must be one of " + ", ".join(FUSED_OK)
      + ", and then the output must be " + "/".join(FUSED_OUT_DTYPES) + ".", _fused, None, SRC_GENERIC),
    C("ethosu.stride", f"Stride height must be in {STRIDE_RANGE} unless the output height is 1; "
      f"CONV_2D/AVERAGE_POOL_2D stride width above {STRIDE_RANGE[1]} only when it folds to "
      f"{STRIDE_RANGE[1]} or less (divisible by 2 or 3, input width divisible), AVERAGE_POOL_2D then "
      f"with VALID padding; DEPTHWISE_CONV_2D and MAX_POOL_2D strides in {STRIDE_RANGE}.", _stride,
      STRIDED_OPS, SRC_NUMERIC),
    C("ethosu.weights_8bit", "Weight tensors must be 8-bit and constant.", _weights, WEIGHT_OPS,
      SRC_NUMERIC),
    C("ethosu.bias_const", "Bias tensors must be constant.", _bias, WEIGHT_OPS, SRC_NUMERIC),
)

#: Vela's reason text -> the constraint id above (first match wins; else "ethosu.vela").
VELA_REASON_IDS = (
    ("Unsupported opType", "ethosu.op_type"),
    ("is a CPU only op", "ethosu.op_type"),
    ("int32 tensors", "ethosu.generic.int32"),
    ("unsupported DataType", "ethosu.generic.dtype"),
    ("dataTypes must be", "ethosu.generic.dtype"),
    ("data type", "ethosu.generic.dtype"),
    ("constant shape", "ethosu.generic.static_shape"),
    ("can be dynamic", "ethosu.generic.static_shape"),
    ("Per-axis", "ethosu.generic.per_axis"),
    ("quantization parameters", "ethosu.generic.quant_params"),
    ("64-bit", "ethosu.generic.int64"),
    ("batch size", "ethosu.generic.batch_1"),
    ("fused activation", "ethosu.generic.fused_activation"),
    ("stride", "ethosu.stride"),
    ("8-bit precision", "ethosu.weights_8bit"),
    ("Weight tensor", "ethosu.weights_8bit"),
    ("Bias tensors must be constant", "ethosu.bias_const"),
)

MODEL_CHECKS = (
    ModelCheck("ethosu.model.full_integer", "Vela places no float op on the NPU: every float op "
               "runs on the Cortex-A55 and splits the NPU graph.", "error", check_full_integer,
               SRC_GENERIC),
    ModelCheck("model.dynamic_shapes", "Vela needs static shapes and the board runtime expects "
               "them; export with a fixed shape and batch 1.", "warning", check_dynamic_shapes,
               SRC_GENERIC),
)

DELEGATE = "nxp-imx/tflite-ethosu-delegate-imx"
#: NXP BSP branch -> the Vela version stamped in that branch (npu-facts.md §2.1), oldest first.
VELA_BY_BSP = (
    ("lf-5.15.52_2.1.0", "3.3.0"),
    ("lf-5.15.71_2.2.0", "3.6.0rc1.dev11"),
    ("lf-6.1.1_1.0.0", "3.6.0"),
    ("lf-6.1.22_2.0.0", "3.7.1.dev8"),
    ("lf-6.1.36_2.1.0", "3.8.0"),
    ("lf-6.1.55_2.2.0", "3.9.1.dev7"),
    ("lf-6.6.3_1.0.0", "3.10.0"),
)
#: The closest Vela release on the package index, per BSP we can run here, and its tool env name.
TOOL_ENVS = {"lf-6.6.3_1.0.0": ("3.10.0", "vela-3.10.0"), "lf-6.1.55_2.2.0": ("3.9.0", "vela-3.9.0")}


def _release(bsp: str, vela: str) -> BspRelease:
    toolchain = [("vela", vela)]
    if bsp == "lf-6.6.3_1.0.0":
        toolchain.append(("delegate", f"{DELEGATE} lf-6.6.3_1.0.0 (6fb32a1)"))
    runs, env = TOOL_ENVS.get(bsp, ("", ""))
    if bsp == "lf-6.6.3_1.0.0":
        return BspRelease(
            id=bsp, toolchain=tuple(toolchain), source=SRC_VERSIONS, compiler="vela",
            compiler_version=runs, tool_env=env,
            notes=("Placement runs upstream Vela 3.10.0 from the package index; where NXP's fork "
                   "differs (" + ", ".join(sorted(NXP_FORK_OPS)) + ") the report says so per op.",))
    if bsp == "lf-6.1.55_2.2.0":
        return BspRelease(
            id=bsp, toolchain=tuple(toolchain), source=SRC_VERSIONS, compiler="vela",
            compiler_version=runs, tool_env=env,
            supported_ops=VELA_3_10_OPS - NEW_IN_3_10,
            constraints=tuple(
                c if c.id != "ethosu.op_type" else Constraint(
                    c.id, f"The op must be one of the {len(VELA_3_10_OPS - NEW_IN_3_10)} TFLite "
                    "operators Vela 3.9 places on the Ethos-U65 (Vela 3.10.0's list without "
                    + ", ".join(sorted(NEW_IN_3_10)) + ", which 3.10.0 added).", _op_type_3_9,
                    None, SRC_VERSIONS + " (3.10.0 release notes)")
                for c in CONSTRAINTS),
            notes=("The BSP ships Vela 3.9.1.dev7 (an NXP build); the package index has 3.9.0, "
                   "which placement runs. Other rules are Vela 3.10.0's [infer].",))
    return BspRelease(id=bsp, toolchain=tuple(toolchain), source=SRC_VERSIONS, compiler="vela",
                      compiler_version=vela, has_rules=False)


def _op_type_3_9(graph: TFLiteGraph, op: OpInfo) -> str | None:
    if op.type in VELA_3_10_OPS - NEW_IN_3_10 or op.type in CUSTOM_NPU_OPS:
        return None
    return f"{label(op)}: {op.type} is not in Vela 3.9's Ethos-U65 operator list"


BSP_RELEASES = tuple(_release(bsp, vela) for bsp, vela in VELA_BY_BSP)

TARGET = Target(
    id="imx93",
    name="i.MX 93",
    soc="NXP i.MX 93",
    npu="Arm Ethos-U65-256 (0.5 TOPS)",
    delegate="libethosu_delegate.so",
    runtime="the Vela of the chosen BSP release (default lf-6.6.3_1.0.0: Vela 3.10.0, run from its "
            "own tool env) with ethos-u65-256, Arm/vela.ini Ethos_U65_High_End, Dedicated_Sram_384KB",
    sources=(SRC_OPS, SRC_VERSIONS, "nxp-imx/ethos-u-vela lf-6.6.3_1.0.0 (a6f6566)",
             "nxp-imx/tflite-ethosu-delegate-imx lf-6.6.3_1.0.0 (6fb32a1)"),
    supported_ops=SUPPORTED_OPS,
    constraints=CONSTRAINTS,
    model_checks=MODEL_CHECKS,
    authority="vela",
    npu_custom_ops=CUSTOM_NPU_OPS,
    compiler="vela",
    compiler_estimates_latency=True,
    deploys_compiled=True,
    recipe="a8w8_pc",
    notes=(
        "The board loads the Vela-compiled `<model>_vela.tflite`; NPU parts become custom op `ethos-u`.",
        "Placement comes from the Vela the BSP ships (lf-6.6.3_1.0.0: 3.10.0); "
        "`--vela-versions 3.10.0,5.2.0` compiles with several and lists the ops they disagree on.",
        "Vela 3.10.0 allows per-axis quantization only for CONV_2D, DEPTHWISE_CONV_2D and "
        "TRANSPOSE_CONV: a per-channel FULLY_CONNECTED (recipe a8w8_pc) runs on the CPU; newer "
        "Vela (5.x) accepts it.",
        "Latency figures are Vela estimates, not board measurements.",
    ),
    bsp_releases=BSP_RELEASES,
    bsp="lf-6.6.3_1.0.0",
)
