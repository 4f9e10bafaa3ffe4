"""i.MX 8M Plus: VeriSilicon VIPNano-SI+ NPU through the VX delegate (``libvx_delegate.so``).

The table follows ``op_map.cc`` of the VX delegate (NXP ``lf-6.6.3_1.0.0`` and
VeriSilicon HEAD register the same 95 builtins): an op is delegated when its
builtin is registered, the generic checks of ``OpMapperBase::IsSupported`` pass
and the op's own ``IsOpSupported`` override passes.  Placement is a prediction
from this table (the delegate is not available off the board).
"""

from __future__ import annotations

from ._constraints import (
    BspRelease,
    Constraint,
    ModelCheck,
    Target,
    check_dynamic_shapes,
    check_full_integer,
    ops_set,
)
from ._imx8mp_checks import (  # noqa: F401 - the op set, limits and checks this table names
    CAST_REJECTED,
    CONST_INPUTS,
    CUSTOM_NPU_OPS,
    DYNAMIC_SHAPE_OPS,
    FUSED_OK,
    HYBRID_OPS,
    MAX_DIM,
    MAX_RANK,
    MIRROR_PAD_MODES,
    NEEDS_QUANT_OPS,
    OUTPUT_RANK0_OPS,
    RNN_EXTRA_WEIGHTS,
    RNN_OPS,
    SQDIFF_TYPES,
    SRC_13,
    SRC_14,
    SRC_FACTS,
    SRC_OPMAP,
    SUPPORTED_OPS,
    _batch_matmul,
    _batch_space_rank,
    _big_dim,
    _block_shape,
    _cast_types,
    _const_inputs,
    _conv3d_dilation,
    _dequantize,
    _dynamic,
    _elementwise_int16,
    _embedding_types,
    _fc_int16,
    _fc_shuffled,
    _fused,
    _grouped_batch,
    _hybrid,
    _input_dtype,
    _lstm_float,
    _lstm_states,
    _mirror_pad_mode,
    _needs_quant,
    _one_hot_bool,
    _op_map,
    _output_dtype,
    _output_rank0,
    _pack,
    _per_channel_weights,
    _pow_int32,
    _quantize,
    _rank,
    _relu_n1_int32,
    _rnn_weights,
    _select_rank,
    _select_types,
    _slice_batch,
    _space_depth_int,
    _split_dynamic,
    _squared_difference,
    _strided_masks,
    _zero_dim,
)

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
