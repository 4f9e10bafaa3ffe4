"""Every constraint of every target with a passing and a failing hand-built case."""

from __future__ import annotations

import pytest

from workbench.targets import Reason, get_target, list_targets

from .hand_graphs import conv, one_op, t

DYN = dict(shape=(1, 8, 8, 8), sig=(-1, 8, 8, 8))


def _c(target, cid, passing, failing):
    return pytest.param(target, cid, passing, failing, id=cid)


CASES = [
    # ---------------------------------------------------------------- imx8mp (VX delegate)
    _c("imx8mp", "vx.op_map", lambda: one_op("ADD", [t(), t()]), lambda: one_op("TILE", [t(), t("INT32", (4,), const=True)])),
    _c("imx8mp", "vx.generic.int64_input", lambda: one_op("BROADCAST_TO", [t(), t("INT64", (4,), const=True)]),
       lambda: one_op("GATHER", [t(), t("INT64", (2,), const=True)])),
    _c("imx8mp", "vx.generic.string_input", lambda: one_op("GATHER", [t(), t("INT32", (2,), const=True)]),
       lambda: one_op("GATHER", [t("STRING", (4,)), t("INT32", (2,), const=True)])),
    _c("imx8mp", "vx.generic.rank", lambda: one_op("ADD", [t(shape=(1,) * 6), t(shape=(1,) * 6)]),
       lambda: one_op("ADD", [t(shape=(1,) * 7), t(shape=(1,) * 7)])),
    _c("imx8mp", "vx.generic.zero_dim", lambda: one_op("RELU", [t()]), lambda: one_op("RELU", [t(shape=(1, 0, 8, 8))])),
    _c("imx8mp", "vx.generic.max_dim", lambda: one_op("RELU", [t(shape=(70000, 8))]),
       lambda: one_op("RELU", [t(shape=(1, 70000))])),
    _c("imx8mp", "vx.generic.int16_output", lambda: one_op("RELU", [t()]), lambda: one_op("RELU", [t()], [t("INT16")])),
    _c("imx8mp", "vx.generic.int64_output", lambda: one_op("ARG_MAX", [t(), t("INT32", (1,), const=True)], [t("INT32", (1, 8, 8))]),
       lambda: one_op("ARG_MAX", [t(), t("INT32", (1,), const=True)], [t("INT64", (1, 8, 8))])),
    _c("imx8mp", "vx.generic.fused_activation", lambda: conv(fused_activation="RELU6"),
       lambda: conv(fused_activation="SIGN_BIT")),
    _c("imx8mp", "vx.conv.hybrid", lambda: conv(), lambda: conv(x=t("FLOAT32"))),
    _c("imx8mp", "vx.conv_2d.grouped_batch", lambda: conv(x=t(shape=(1, 8, 8, 16))),
       lambda: conv(x=t(shape=(2, 8, 8, 16)))),
    _c("imx8mp", "vx.fully_connected.int16", lambda: one_op("FULLY_CONNECTED", [t(shape=(1, 8)), t(shape=(4, 8), const=True)]),
       lambda: one_op("FULLY_CONNECTED", [t("INT16", (1, 8)), t("INT16", (4, 8), const=True)])),
    _c("imx8mp", "vx.fully_connected.shuffled", lambda: one_op("FULLY_CONNECTED", [t(shape=(1, 8)), t(shape=(4, 8), const=True)], options={"weightsFormat": 0}),
       lambda: one_op("FULLY_CONNECTED", [t(shape=(1, 8)), t(shape=(4, 8), const=True)], options={"weightsFormat": 1})),
    _c("imx8mp", "vx.const_input", lambda: one_op("RESHAPE", [t(), t("INT32", (2,), const=True)], [t(shape=(1, 512))]),
       lambda: one_op("RESHAPE", [t(), t("INT32", (2,))], [t(shape=(1, 512))])),
    _c("imx8mp", "vx.output_rank0", lambda: one_op("PAD", [t(), t("INT32", (4, 2), const=True)]),
       lambda: one_op("PAD", [t(), t("INT32", (4, 2), const=True)], [t(shape=())])),
    _c("imx8mp", "vx.dynamic_shape", lambda: one_op("TRANSPOSE", [t(), t("INT32", (4,), const=True)]),
       lambda: one_op("TRANSPOSE", [t(**DYN), t("INT32", (4,), const=True)])),
    _c("imx8mp", "vx.strided_slice.masks", lambda: one_op("STRIDED_SLICE", [t()] + [t("INT32", (4,), const=True)] * 3, options={"newAxisMask": 0, "ellipsisMask": 0}),
       lambda: one_op("STRIDED_SLICE", [t()] + [t("INT32", (4,), const=True)] * 3, options={"newAxisMask": 1, "ellipsisMask": 0})),
    _c("imx8mp", "vx.quant_params", lambda: one_op("SPLIT", [t(), t()]),
       lambda: one_op("RESIZE_BILINEAR", [t(scales=(), zps=()), t("INT32", (2,), const=True)])),
    _c("imx8mp", "vx.space_depth.int_input", lambda: one_op("DEPTH_TO_SPACE", [t()]), lambda: one_op("DEPTH_TO_SPACE", [t("INT32")])),
    _c("imx8mp", "vx.batch_space.rank", lambda: one_op("SPACE_TO_BATCH_ND", [t()]),
       lambda: one_op("SPACE_TO_BATCH_ND", [t(shape=(1, 8, 8))])),
    _c("imx8mp", "vx.select.types", lambda: one_op("SELECT_V2", [t("BOOL"), t("FLOAT32"), t("FLOAT32")], [t("FLOAT32")]),
       lambda: one_op("SELECT_V2", [t("BOOL"), t(), t()])),
    _c("imx8mp", "vx.dequantize.input", lambda: one_op("DEQUANTIZE", [t()], [t("FLOAT32")]),
       lambda: one_op("DEQUANTIZE", [t(scales=(0.1, 0.2), zps=(0, 0))], [t("FLOAT32")])),
    _c("imx8mp", "vx.quantize.types", lambda: one_op("QUANTIZE", [t("FLOAT32")], [t()]),
       lambda: one_op("QUANTIZE", [t("FLOAT32")], [t(scales=(0.1, 0.2), zps=(0, 0))])),
    _c("imx8mp", "vx.elementwise.int16_to_int8", lambda: one_op("ADD", [t(), t()]),
       lambda: one_op("ADD", [t("INT16"), t("INT16")], [t()])),
    _c("imx8mp", "vx.batch_matmul.types", lambda: one_op("BATCH_MATMUL", [t(), t()]),
       lambda: one_op("BATCH_MATMUL", [t(), t()], options={"adjX": True, "adjY": True})),
    # NXP's fork (npu-facts.md §1.2): FLOAT32 input 0 with INT8 input 1 is accepted, the reverse is not
    _c("imx8mp", "vx.batch_matmul.types", lambda: one_op("BATCH_MATMUL", [t("FLOAT32"), t()], [t("FLOAT32")]),
       lambda: one_op("BATCH_MATMUL", [t(), t("FLOAT32")], [t("FLOAT32")])),
    _c("imx8mp", "vx.squared_difference.types", lambda: one_op("SQUARED_DIFFERENCE", [t(), t()]),
       lambda: one_op("SQUARED_DIFFERENCE", [t(), t("UINT8")])),
    _c("imx8mp", "vx.squared_difference.types", lambda: one_op("SQUARED_DIFFERENCE", [t("FLOAT32"), t("FLOAT32")], [t("FLOAT32")]),
       lambda: one_op("SQUARED_DIFFERENCE", [t("INT16"), t("INT16")], [t("INT16")])),
    _c("imx8mp", "vx.squared_difference.types", lambda: one_op("SQUARED_DIFFERENCE", [t("UINT8"), t("UINT8")], [t("UINT8")]),
       lambda: one_op("SQUARED_DIFFERENCE", [t(), t()], [t(scales=(0.1, 0.2), zps=(0, 0))])),
    _c("imx8mp", "vx.conv_3d.dilation",
       lambda: one_op("CONV_3D", [t(shape=(1, 4, 8, 8, 8)), t(shape=(3, 3, 3, 8, 8), const=True)], [t(shape=(1, 4, 8, 8, 8))],
                      {"dilationDFactor": 1, "dilationHFactor": 1, "dilationWFactor": 1}),
       lambda: one_op("CONV_3D", [t(shape=(1, 4, 8, 8, 8)), t(shape=(3, 3, 3, 8, 8), const=True)], [t(shape=(1, 4, 8, 8, 8))],
                      {"dilationDFactor": 1, "dilationHFactor": 2, "dilationWFactor": 1})),
    _c("imx8mp", "vx.slice.batch",
       lambda: one_op("SLICE", [t(shape=(2, 8, 8, 8)), t("INT32", (4,), const=True), t("INT32", (4,), const=True)], [t(shape=(2, 4, 8, 8))]),
       lambda: one_op("SLICE", [t(shape=(2, 8, 8, 8)), t("INT32", (4,), const=True), t("INT32", (4,), const=True)], [t(shape=(1, 8, 8, 8))])),
    _c("imx8mp", "vx.mirror_pad.mode", lambda: one_op("MIRROR_PAD", [t(), t("INT32", (4, 2), const=True)], options={"mode": 1}),
       lambda: one_op("MIRROR_PAD", [t(), t("INT32", (4, 2), const=True)], options={"mode": 7})),
    _c("imx8mp", "vx.split.dynamic", lambda: one_op("SPLIT", [t("INT32", (), const=True), t()], [t(shape=(1, 8, 8, 4)), t(shape=(1, 8, 8, 4))]),
       lambda: one_op("SPLIT", [t("INT32", ()), t()], [t(shape=(1, 8, 8, 4)), t(shape=(1, 8, 8, 4))])),
    _c("imx8mp", "vx.split.dynamic",
       lambda: one_op("SPLIT_V", [t(), t("INT32", (2,), const=True), t("INT32", (), const=True)], [t(shape=(1, 8, 8, 4))] * 2),
       lambda: one_op("SPLIT_V", [t(), t("INT32", (2,), const=True), t("INT32", (), const=True)],
                      [t(shape=(1, 8, 8, 4), sig=(1, 8, 8, -1)), t(shape=(1, 8, 8, 4))])),
    _c("imx8mp", "vx.batch_space.block_shape",
       lambda: one_op("SPACE_TO_BATCH_ND", [t(), t("INT32", (2,), const=True), t("INT32", (2, 2), const=True)], [t(shape=(4, 4, 4, 8))]),
       lambda: one_op("BATCH_TO_SPACE_ND", [t(), t("INT32", (3,), const=True), t("INT32", (3, 2), const=True)], [t(shape=(1, 16, 16, 8))])),
    _c("imx8mp", "vx.select.condition_rank", lambda: one_op("SELECT", [t("BOOL"), t("FLOAT32"), t("FLOAT32")], [t("FLOAT32")]),
       lambda: one_op("SELECT_V2", [t("BOOL", (1, 8)), t("FLOAT32"), t("FLOAT32")], [t("FLOAT32")])),
    _c("imx8mp", "vx.pow.int32", lambda: one_op("POW", [t("FLOAT32"), t("FLOAT32")], [t("FLOAT32")]),
       lambda: one_op("POW", [t("INT32"), t("INT32")], [t("INT32")])),
    _c("imx8mp", "vx.elementwise.relu_n1_int32",
       lambda: one_op("ADD", [t("INT32"), t("INT32")], [t("INT32")], {"fused_activation": "RELU"}),
       lambda: one_op("MUL", [t("INT32"), t("INT32")], [t("INT32")], {"fused_activation": "RELU_N1_TO_1"})),
    _c("imx8mp", "vx.embedding_lookup.types",
       lambda: one_op("EMBEDDING_LOOKUP", [t("INT32", (4,)), t(shape=(10, 8), const=True)], [t(shape=(4, 8))]),
       lambda: one_op("EMBEDDING_LOOKUP", [t("INT32", (4,)), t("UINT8", (10, 8), const=True)], [t(shape=(4, 8))])),
    _c("imx8mp", "vx.one_hot.bool",
       lambda: one_op("ONE_HOT", [t("INT32", (4,)), t("INT32", (), const=True), t("FLOAT32", ()), t("FLOAT32", ())], [t("FLOAT32", (4, 10))]),
       lambda: one_op("ONE_HOT", [t("INT32", (4,)), t("INT32", (), const=True), t("BOOL", ()), t("BOOL", ())], [t("BOOL", (4, 10))])),
    _c("imx8mp", "vx.cast.types", lambda: one_op("CAST", [t()], [t("FLOAT32")]),
       lambda: one_op("CAST", [t("UINT16")], [t("FLOAT32")])),
    _c("imx8mp", "vx.cast.types", lambda: one_op("CAST", [t("INT32")], [t("FLOAT32")]),
       lambda: one_op("CAST", [t("FLOAT32")], [t("COMPLEX64")])),
    _c("imx8mp", "vx.lstm.states",
       lambda: one_op("UNIDIRECTIONAL_SEQUENCE_LSTM", [t(shape=(1, 4, 8))] + [None] * 17 + [t(shape=(1, 8)), t("INT16", (1, 8))], [t(shape=(1, 4, 8))]),
       lambda: one_op("UNIDIRECTIONAL_SEQUENCE_LSTM", [t(shape=(1, 4, 8))] + [None] * 17 + [t(shape=(1, 8)), t("INT8", (1, 8))], [t(shape=(1, 4, 8))])),
    _c("imx8mp", "vx.lstm.states",
       lambda: one_op("UNIDIRECTIONAL_SEQUENCE_LSTM", [t("FLOAT32", (1, 4, 8))] + [None] * 17 + [t("FLOAT32", (1, 8)), t("FLOAT16", (1, 8))], [t("FLOAT32", (1, 4, 8))]),
       lambda: one_op("UNIDIRECTIONAL_SEQUENCE_LSTM", [t(shape=(1, 4, 8))] + [None] * 17 + [t("INT16", (1, 8)), t("INT16", (1, 8))], [t(shape=(1, 4, 8))])),
    _c("imx8mp", "vx.rnn.weights",
       lambda: one_op("UNIDIRECTIONAL_SEQUENCE_RNN", [t("FLOAT32", (1, 4, 8)), t("FLOAT32", (8, 8), const=True), t("FLOAT32", (8, 8), const=True)], [t("FLOAT32", (1, 4, 8))]),
       lambda: one_op("UNIDIRECTIONAL_SEQUENCE_RNN", [t("FLOAT32", (1, 4, 8)), t("INT8", (8, 8), const=True), t("FLOAT32", (8, 8), const=True)], [t("FLOAT32", (1, 4, 8))])),
    _c("imx8mp", "vx.rnn.weights",
       lambda: one_op("BIDIRECTIONAL_SEQUENCE_RNN", [t("FLOAT32", (1, 4, 8))] + [t("FLOAT32", (8, 8), const=True)] * 8, [t("FLOAT32", (1, 4, 8))]),
       lambda: one_op("BIDIRECTIONAL_SEQUENCE_RNN", [t("FLOAT32", (1, 4, 8))] + [t("FLOAT32", (8, 8), const=True)] * 10, [t("FLOAT32", (1, 4, 8))])),
    _c("imx8mp", "vx.pack.input", lambda: one_op("PACK", [t(), t()], [t(shape=(2, 1, 8, 8, 8))]),
       lambda: one_op("PACK", [t("INT32", ()), t("INT32", ())], [t("INT32", (2,))])),
    _c("imx8mp", "vx.lstm.quantized", lambda: one_op("UNIDIRECTIONAL_SEQUENCE_LSTM", [t(shape=(1, 4, 8))]),
       lambda: one_op("UNIDIRECTIONAL_SEQUENCE_LSTM", [t("FLOAT32", (1, 4, 8))])),
    # ---------------------------------------------------------------- imx93 (Vela table)
    _c("imx93", "ethosu.op_type", lambda: one_op("ADD", [t(), t()]), lambda: one_op("FLOOR_MOD", [t(), t()])),
    _c("imx93", "ethosu.generic.dtype", lambda: one_op("ADD", [t(), t()]), lambda: one_op("ADD", [t("FLOAT32"), t("FLOAT32")], [t("FLOAT32")])),
    _c("imx93", "ethosu.generic.static_shape", lambda: one_op("ADD", [t(), t()]), lambda: one_op("ADD", [t(**DYN), t()])),
    _c("imx93", "ethosu.generic.quant_params", lambda: one_op("ADD", [t(), t()]),
       lambda: one_op("ADD", [t(scales=(), zps=()), t()])),
    _c("imx93", "ethosu.generic.per_axis", lambda: conv(w=t(shape=(8, 3, 3, 8), scales=(0.1,) * 8, zps=(0,) * 8, const=True)),
       lambda: one_op("ADD", [t(scales=(0.1, 0.2), zps=(0, 0)), t()])),
    _c("imx93", "ethosu.generic.int64", lambda: one_op("ARG_MAX", [t(), t("INT32", (1,), const=True)], [t("INT64", (1, 8, 8))]),
       lambda: one_op("ADD", [t("INT64"), t("INT64")], [t("INT64")])),
    _c("imx93", "ethosu.generic.int32", lambda: one_op("ADD", [t("INT32"), t("INT32")], [t("INT32")]),
       lambda: one_op("MAXIMUM", [t("INT32"), t("INT32")], [t("INT32")])),
    _c("imx93", "ethosu.generic.batch_1", lambda: one_op("FULLY_CONNECTED", [t(shape=(2, 8)), t(shape=(4, 8), const=True)], [t(shape=(2, 4))]),
       lambda: one_op("ADD", [t(shape=(2, 8, 8, 8)), t(shape=(2, 8, 8, 8))], [t(shape=(2, 8, 8, 8))])),
    _c("imx93", "ethosu.generic.fused_activation", lambda: conv(fused_activation="RELU6"),
       lambda: conv(fused_activation="SIGN_BIT")),
    _c("imx93", "ethosu.stride", lambda: conv("DEPTHWISE_CONV_2D", strideH=3, strideW=3),
       lambda: conv("DEPTHWISE_CONV_2D", strideH=4, strideW=4)),
    # the reference model's pool: stride 4 from 8x8 to 2x2 (Vela 3.10.0 puts it on the CPU)
    _c("imx93", "ethosu.stride",
       lambda: one_op("AVERAGE_POOL_2D", [t(shape=(1, 8, 8, 64))], [t(shape=(1, 1, 1, 64))],
                      {"strideH": 8, "strideW": 8, "filterHeight": 8, "filterWidth": 8, "padding": "VALID"}),
       lambda: one_op("AVERAGE_POOL_2D", [t(shape=(1, 8, 8, 64))], [t(shape=(1, 2, 2, 64))],
                      {"strideH": 4, "strideW": 4, "filterHeight": 4, "filterWidth": 4, "padding": "VALID"})),
    _c("imx93", "ethosu.weights_8bit", lambda: conv(), lambda: conv(w=t("INT16", (8, 3, 3, 8), const=True))),
    _c("imx93", "ethosu.bias_const", lambda: conv(), lambda: conv(b=t("INT32", (8,), scales=(0.125,), zps=(0,)))),
    # ---------------------------------------------------------------- imx95 (Neutron-S)
    _c("imx95", "neutron.op_list", lambda: one_op("ADD", [t(), t()]), lambda: one_op("SOFTMAX", [t()])),
    _c("imx95", "neutron.delegate.serialisable", lambda: one_op("PAD", [t(), t("INT32", (4, 2), const=True)]),
       lambda: one_op("PADV2", [t(), t("INT32", (4, 2), const=True), t(shape=(), const=True)])),
    _c("imx95", "neutron.delegate.serialisable", lambda: one_op("MEAN", [t(), t("INT32", (2,), const=True)], [t(shape=(1, 1, 1, 8))]),
       lambda: one_op("SUM", [t(), t("INT32", (2,), const=True)], [t(shape=(1, 1, 1, 8))])),
    _c("imx95", "neutron.generic.dtype", lambda: one_op("RELU", [t()]), lambda: one_op("RELU", [t("FLOAT32")], [t("FLOAT32")])),
    _c("imx95", "neutron.generic.dtype", lambda: one_op("RESHAPE", [t(), t("INT32", (2,), const=True)], [t(shape=(1, 512))]),
       lambda: one_op("RELU", [t("INT16", scales=(0.001,))], [t("INT16", scales=(0.001,))])),
    _c("imx95", "neutron.generic.dtype", lambda: conv(),
       lambda: one_op("ADD", [t("INT32"), t("INT32")], [t("INT32")])),
    _c("imx95", "neutron.generic.dtype", lambda: one_op("PAD", [t(), t("INT32", (4, 2), const=True)]),
       lambda: one_op("PAD", [t(), t("INT64", (4, 2), const=True)])),
    _c("imx95", "neutron.types.int8_io", lambda: conv(), lambda: conv(b=t("INT64", (8,), scales=(0.125,), zps=(0,), const=True))),
    _c("imx95", "neutron.types.int8_io", lambda: one_op("ADD", [t("UINT8"), t("UINT8")], [t("UINT8")]),
       lambda: one_op("ADD", [t(), t()], [t("INT16", scales=(0.001,))])),
    _c("imx95", "neutron.types.int8_io", lambda: one_op("FULLY_CONNECTED", [t(shape=(1, 8)), t(shape=(4, 8), const=True), t("INT32", (4,), const=True)], [t(shape=(1, 4))]),
       lambda: one_op("FULLY_CONNECTED", [t("INT16", (1, 8), scales=(0.01,)), t(shape=(4, 8), const=True), t("INT64", (4,), const=True)], [t("INT16", (1, 4), scales=(0.01,))])),
    _c("imx95", "neutron.types.int8_io", lambda: conv("DEPTHWISE_CONV_2D"),
       lambda: conv("DEPTHWISE_CONV_2D", w=t("INT16", (1, 3, 3, 8), const=True))),
    _c("imx95", "neutron.conv.4d", lambda: conv(),
       lambda: one_op("CONV_2D", [t(shape=(1, 8, 8)), t(shape=(8, 3, 3, 8), const=True), t("INT32", (8,), const=True)], [t(shape=(1, 8, 8))])),
    _c("imx95", "neutron.max_pool.padding",
       lambda: one_op("MAX_POOL_2D", [t(shape=(1, 16, 16, 16))], [t(shape=(1, 8, 8, 16))],
                      {"strideH": 2, "strideW": 2, "filterHeight": 2, "filterWidth": 2, "padding": "SAME"}),
       # hand-built: a 1x1 kernel whose output shape implies one row/column of padding per side
       lambda: one_op("MAX_POOL_2D", [t(shape=(1, 4, 4, 16))], [t(shape=(1, 6, 6, 16))],
                      {"strideH": 1, "strideW": 1, "filterHeight": 1, "filterWidth": 1, "padding": "SAME"})),
    _c("imx95", "neutron.pool.shape", lambda: one_op("AVERAGE_POOL_2D", [t(shape=(1, 8, 8, 32))], [t(shape=(1, 4, 4, 32))]),
       lambda: one_op("AVERAGE_POOL_2D", [t(shape=(1, 8, 8, 8))], [t(shape=(1, 4, 4, 8))])),
    _c("imx95", "neutron.pool.shape", lambda: one_op("MAX_POOL_2D", [t(shape=(1, 8, 8, 16))], [t(shape=(1, 4, 4, 16))]),
       lambda: one_op("MAX_POOL_2D", [t(shape=(8, 8, 16))], [t(shape=(4, 4, 16))])),
    _c("imx95", "neutron.generic.static_shape", lambda: one_op("RELU", [t()]), lambda: one_op("RELU", [t(**DYN)])),
    _c("imx95", "neutron.generic.batch_1", lambda: one_op("RELU", [t()]), lambda: one_op("RELU", [t(shape=(2, 8, 8, 8))], [t(shape=(2, 8, 8, 8))])),
    _c("imx95", "neutron.generic.positive_scale", lambda: one_op("RELU", [t()]), lambda: one_op("RELU", [t(scales=(0.0,))])),
    _c("imx95", "neutron.generic.symmetric_weights", lambda: conv(),
       lambda: conv(w=t(shape=(8, 3, 3, 8), scales=(0.25,), zps=(3,), const=True))),
    _c("imx95", "neutron.generic.bias_scale", lambda: conv(), lambda: conv(b=t("INT32", (8,), scales=(0.3,), zps=(0,), const=True))),
    _c("imx95", "neutron.const_weights", lambda: conv(), lambda: conv(w=t(shape=(8, 3, 3, 8), scales=(0.25,)))),
    _c("imx95", "neutron.conv.dilation", lambda: conv(), lambda: conv(dilationHFactor=2, dilationWFactor=2)),
    _c("imx95", "neutron.depthwise.multiplier", lambda: conv("DEPTHWISE_CONV_2D"), lambda: conv("DEPTHWISE_CONV_2D", depthMultiplier=2)),
    _c("imx95", "neutron.stride", lambda: conv("DEPTHWISE_CONV_2D", strideH=2, strideW=2),
       lambda: conv("DEPTHWISE_CONV_2D", strideH=3, strideW=3)),
    _c("imx95", "neutron.add.no_constant", lambda: one_op("ADD", [t(), t()]), lambda: one_op("ADD", [t(), t(const=True)])),
    _c("imx95", "neutron.pad.channels", lambda: one_op("PAD", [t(shape=(1, 8, 8, 8)), t("INT32", (4, 2), const=True)], [t(shape=(1, 8, 8, 16))]),
       lambda: one_op("PAD", [t(shape=(1, 8, 8, 8)), t("INT32", (4, 2), const=True)], [t(shape=(1, 10, 10, 8))])),
    _c("imx95", "neutron.reshape.shape", lambda: one_op("RESHAPE", [t(), t("INT32", (2,), const=True)], [t(shape=(1, 512))]),
       lambda: one_op("RESHAPE", [t(), t("INT32", (2,))], [t(shape=(1, 512))])),
]


def test_every_constraint_cites_npu_facts():
    for tg in list_targets():
        for c in tg.constraints:
            assert "npu-facts.md" in c.source, (tg.id, c.id, c.source)
        for r in tg.bsp_releases:
            for c in r.constraints or ():
                assert "npu-facts.md" in c.source, (tg.id, r.id, c.id, c.source)


@pytest.mark.parametrize("target, cid, passing, failing", CASES)
def test_constraint_passes_and_fails(target, cid, passing, failing):
    constraint = get_target(target).constraint(cid)
    good = passing()
    assert constraint.evaluate(good, good.ops[0]) is None
    bad = failing()
    reason = constraint.evaluate(bad, bad.ops[0])
    assert isinstance(reason, Reason) and reason.constraint == cid
    assert f"{bad.ops[0].type} #0" in reason.detail          # the detail names the op


def test_every_constraint_has_a_case():
    covered = {(p.values[0], p.values[1]) for p in CASES}
    declared = {(tg.id, c.id) for tg in list_targets() for c in tg.constraints}
    assert declared == covered


def test_all_violations_are_collected():
    graph = conv(x=t("FLOAT32", **DYN), w=t(shape=(8, 3, 3, 8), scales=(0.25,), zps=(3,), const=True),
                 dilationHFactor=2)
    ids = {r.constraint for r in get_target("imx95").evaluate_op(graph, graph.ops[0])}
    assert {"neutron.generic.dtype", "neutron.generic.static_shape",
            "neutron.generic.symmetric_weights", "neutron.conv.dilation"} <= ids


def test_precompiled_custom_op_is_npu_for_its_target_only():
    graph = one_op("ethos-u", [t()], custom=True)
    assert get_target("imx93").evaluate_op(graph, graph.ops[0]) == ()
    assert get_target("imx8mp").evaluate_op(graph, graph.ops[0])[0].constraint == "vx.op_map"


@pytest.mark.parametrize("target, check_id, graph_factory", [
    ("imx8mp", "vx.model.per_channel", lambda: conv(w=t(shape=(8, 3, 3, 8), scales=(0.1,) * 8, zps=(0,) * 8, const=True))),
    ("imx95", "neutron.model.asymmetric_weights", lambda: conv(w=t(shape=(8, 3, 3, 8), scales=(0.25,), zps=(5,), const=True))),
    ("imx93", "ethosu.model.full_integer", lambda: one_op("ADD", [t("FLOAT32"), t("FLOAT32")], [t("FLOAT32")])),
    ("imx95", "model.dynamic_shapes", lambda: one_op("RELU", [t(**DYN)])),
])
def test_model_checks_flag_and_pass(target, check_id, graph_factory):
    tgt = get_target(target)
    found = [f for f in tgt.evaluate_model(graph_factory()) if f.check == check_id]
    assert len(found) == 1 and found[0].detail
    assert not [f for f in tgt.evaluate_model(conv()) if f.check == check_id]


def test_int16_activations_count_as_integer_not_float():
    """A 16x8 model (recipe a16w8_pc) is quantized: each target's rules decide, it is not 'float'."""
    from workbench.targets._constraints import has_integer_activations
    sixteen = conv(x=t("INT16", scales=(0.001,)), out=t("INT16", scales=(0.001,)),
                   b=t("INT64", (8,), scales=(0.001,), zps=(0,), const=True))
    floating = conv(x=t("FLOAT32"), w=t("FLOAT32", (8, 3, 3, 8), const=True),
                    b=t("FLOAT32", (8,), const=True), out=t("FLOAT32"))
    unquantized16 = conv(x=t("INT16", scales=(), zps=()), out=t("INT16", scales=(), zps=()))
    assert has_integer_activations(sixteen)
    assert not has_integer_activations(floating)
    assert not has_integer_activations(unquantized16)
