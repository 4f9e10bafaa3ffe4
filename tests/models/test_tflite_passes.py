"""Exact structural passes: grouped CONV_2D (group == channels) -> DEPTHWISE_CONV_2D, cancelling TRANSPOSE pairs."""

from __future__ import annotations

import numpy as np
import pytest

from .tflite_bytes import ops as _ops
from .tflite_bytes import run as _run


def _inject_transposes(data):
    """Wrap the element-wise ops after the first CONV_2D in TRANSPOSE(0,3,1,2) ... TRANSPOSE(0,2,3,1), with
    the region's tensors in NCHW, as onnx2tf writes PP-OCRv4's affine blocks (a test of the pass's inverse)."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu

    from workbench.models.tflite_flatbuffer import _opcode
    m = fu.read_model_from_bytearray(bytearray(data))
    sg = m.subgraphs[0]
    names = {v: k for k, v in vars(fb.BuiltinOperator).items() if isinstance(v, int)}
    kinds = [names[max(m.operatorCodes[o.opcodeIndex].builtinCode,
                       m.operatorCodes[o.opcodeIndex].deprecatedBuiltinCode)] for o in sg.operators]
    first = next(i for i, k in enumerate(kinds[:-1]) if k == "CONV_2D" and kinds[i + 1] in ("HARD_SWISH", "MUL"))
    last = first + 1
    while kinds[last] in ("HARD_SWISH", "MUL", "ADD"):
        last += 1
    region = sg.operators[first + 1:last]

    def const(values):
        buf = fb.BufferT()
        buf.data = np.frombuffer(np.asarray(values, np.int32).tobytes(), np.uint8)
        m.buffers.append(buf)
        t = fb.TensorT()
        t.name, t.type, t.shape, t.buffer = b"perm", fb.TensorType.INT32, [4], len(m.buffers) - 1
        sg.tensors.append(t)
        return len(sg.tensors) - 1

    def clone(idx, perm):
        import copy
        t = copy.deepcopy(sg.tensors[idx])
        t.name = t.name + b"_t"
        t.shape = [int(t.shape[i]) for i in perm]
        t.shapeSignature = None
        sg.tensors.append(t)
        return len(sg.tensors) - 1

    def transpose(src, dst, perm):
        op = fb.OperatorT()
        op.opcodeIndex = _opcode(m, fb.BuiltinOperator.TRANSPOSE, 1)
        op.inputs, op.outputs = [src, const(perm)], [dst]
        op.builtinOptionsType = fb.BuiltinOptions.TransposeOptions
        op.builtinOptions = fb.TransposeOptionsT()
        return op
    x = int(sg.operators[first].outputs[0])
    xt = clone(x, [0, 3, 1, 2])
    mapping = {x: xt}
    for op in region:
        op.inputs = [mapping.get(int(i), int(i)) for i in op.inputs]
        out = int(op.outputs[0])
        mapping[out] = clone(out, [0, 3, 1, 2])
        op.outputs = [mapping[out]]
    y = int(region[-1].outputs[0])
    back = transpose(y, out, [0, 2, 3, 1])      # the region's last original tensor, NHWC again
    sg.operators = sg.operators[:first + 1] + [transpose(x, xt, [0, 3, 1, 2])] + region + [back] \
        + sg.operators[last:]
    return bytes(fu.convert_object_to_bytearray(m))


@pytest.fixture(scope="module")
def grouped_models():
    """A Keras net with channel-wise grouped convolutions (strides 2x1 and 1x1, one with dilation), an
    element-wise affine block wrapped in a TRANSPOSE pair that cancels, and a plain grouped conv
    (groups=2) left alone: FP32 and INT8 with the TRANSPOSE pair, the samples, and the FP32 model without it."""
    import contextlib
    import io

    import keras
    import tensorflow as tf
    inp = keras.Input((12, 10, 8), batch_size=1)
    h = keras.layers.Conv2D(8, 3, strides=(2, 1), padding="same", groups=8)(inp)
    h = keras.layers.Conv2D(8, 3, padding="same", groups=8, dilation_rate=2)(h)
    h = keras.layers.Activation("hard_swish")(h)
    h = keras.layers.Rescaling(0.7, offset=0.2)(h)
    h = keras.layers.Conv2D(8, 1, groups=2)(h)
    model = keras.Model(inp, h)
    x = np.random.default_rng(0).uniform(-1, 1, (30, 12, 10, 8)).astype(np.float32)
    with contextlib.redirect_stdout(io.StringIO()):
        fp32 = tf.lite.TFLiteConverter.from_keras_model(model).convert()
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: ([x[i:i + 1]] for i in range(len(x)))
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = conv.inference_output_type = tf.int8
        int8 = conv.convert()
    return _inject_transposes(fp32), _inject_transposes(int8), x, fp32


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fp32", "int8"])
def test_passes_keep_every_number(grouped_models, kind):
    from workbench.models.tflite_passes import apply_passes
    fp32, int8, x, _ = grouped_models
    data = fp32 if kind == "fp32" else int8
    before = _ops(data)
    assert before["CONV_2D"] == 3 and not before["DEPTHWISE_CONV_2D"] and before["TRANSPOSE"] == 2
    new, done = apply_passes(data)
    after = _ops(new)
    assert after["DEPTHWISE_CONV_2D"] == 2 and after["CONV_2D"] == 1 and not after["TRANSPOSE"], (after, done)
    assert len(done) == 2
    assert apply_passes(new) == (new, [])          # nothing left to do: a second run changes nothing
    for i in range(3):
        for a, b in zip(_run(data, x[i:i + 1]), _run(new, x[i:i + 1])):
            assert a.dtype == b.dtype and np.array_equal(a, b)
    if kind == "int8":
        from workbench.models.tflite_graph import parse_tflite_bytes
        g = parse_tflite_bytes(new)
        for op in g.ops:
            if op.type == "DEPTHWISE_CONV_2D":
                w = g.tensors[op.inputs[1]]
                assert w.shape[0] == 1 and w.quantized_dimension == 3 and len(w.scales) == 8


def _transpose_before_mean(data):
    """MEAN over (1, 2) of NHWC rewritten as onnx2tf writes PyTorch's mean(dim=(2, 3)): TRANSPOSE to NCHW,
    then MEAN over (2, 3)."""
    import copy

    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu

    from workbench.models.tflite_flatbuffer import _opcode
    m = fu.read_model_from_bytearray(bytearray(data))
    sg = m.subgraphs[0]
    k = next(i for i, o in enumerate(sg.operators)
             if max(m.operatorCodes[o.opcodeIndex].builtinCode,
                    m.operatorCodes[o.opcodeIndex].deprecatedBuiltinCode) == fb.BuiltinOperator.MEAN)
    mean = sg.operators[k]

    def const(values):
        buf = fb.BufferT()
        buf.data = np.frombuffer(np.asarray(values, np.int32).tobytes(), np.uint8)
        m.buffers.append(buf)
        t = fb.TensorT()
        t.name, t.type, t.shape, t.buffer = b"c", fb.TensorType.INT32, [len(values)], len(m.buffers) - 1
        sg.tensors.append(t)
        return len(sg.tensors) - 1
    x = int(mean.inputs[0])
    xt = copy.deepcopy(sg.tensors[x])
    xt.name, xt.shape, xt.shapeSignature = b"x_nchw", [int(sg.tensors[x].shape[i]) for i in (0, 3, 1, 2)], None
    sg.tensors.append(xt)
    xt_index = len(sg.tensors) - 1
    tr = fb.OperatorT()
    tr.opcodeIndex = _opcode(m, fb.BuiltinOperator.TRANSPOSE, 1)
    tr.inputs, tr.outputs = [x, const([0, 3, 1, 2])], [xt_index]
    tr.builtinOptionsType, tr.builtinOptions = fb.BuiltinOptions.TransposeOptions, fb.TransposeOptionsT()
    mean.inputs = [xt_index, const([2, 3])]
    sg.operators = sg.operators[:k] + [tr] + sg.operators[k:]
    return bytes(fu.convert_object_to_bytearray(m))


@pytest.mark.slow
def test_transpose_before_mean_is_folded_into_its_axes():
    import contextlib
    import io

    import keras
    import tensorflow as tf

    from workbench.models.tflite_passes import apply_passes
    inp = keras.Input((6, 5, 4), batch_size=1)
    h = keras.layers.Conv2D(8, 3, padding="same")(inp)
    model = keras.Model(inp, keras.layers.Dense(3)(keras.layers.GlobalAveragePooling2D()(h)))
    x = np.random.default_rng(3).uniform(-1, 1, (4, 6, 5, 4)).astype(np.float32)
    with contextlib.redirect_stdout(io.StringIO()):
        plain = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    data = _transpose_before_mean(plain)
    assert _ops(data)["TRANSPOSE"] == 1
    new, done = apply_passes(data)
    assert not _ops(new)["TRANSPOSE"] and _ops(new) == _ops(plain) and "reduction" in done[0]
    for i in range(len(x)):
        for a, b in zip(_run(data, x[i:i + 1]), _run(new, x[i:i + 1])):
            assert np.allclose(a, b, rtol=1e-6, atol=1e-6)


def _unfuse_relu(data):
    """The first CONV_2D with a fused RELU written as CONV_2D + a separate RELU op (as MediaPipe ships)."""
    import copy

    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu

    from workbench.models.tflite_flatbuffer import _opcode
    m = fu.read_model_from_bytearray(bytearray(data))
    sg = m.subgraphs[0]
    k = next(i for i, o in enumerate(sg.operators) if isinstance(o.builtinOptions, fb.Conv2DOptionsT)
             and o.builtinOptions.fusedActivationFunction == fb.ActivationFunctionType.RELU)
    conv = sg.operators[k]
    conv.builtinOptions.fusedActivationFunction = fb.ActivationFunctionType.NONE
    out = int(conv.outputs[0])
    pre = copy.deepcopy(sg.tensors[out])
    pre.name = b"pre_relu"
    sg.tensors.append(pre)
    conv.outputs = [len(sg.tensors) - 1]
    relu = fb.OperatorT()
    relu.opcodeIndex = _opcode(m, fb.BuiltinOperator.RELU, 1)
    relu.inputs, relu.outputs = [len(sg.tensors) - 1], [out]
    sg.operators = sg.operators[:k + 1] + [relu] + sg.operators[k + 1:]
    return bytes(fu.convert_object_to_bytearray(m))


@pytest.mark.slow
def test_separate_relu_is_fused_into_its_producer():
    import contextlib
    import io

    import keras
    import tensorflow as tf

    from workbench.models.tflite_passes import fuse_activations
    inp = keras.Input((6, 5, 4), batch_size=1)
    h = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    model = keras.Model(inp, keras.layers.Conv2D(2, 1)(h))
    with contextlib.redirect_stdout(io.StringIO()):
        plain = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    data = _unfuse_relu(plain)
    assert _ops(data)["RELU"] == 1
    new, n = fuse_activations(data)
    assert n == 1 and _ops(new) == _ops(plain)
    from workbench.models.tflite_graph import parse_tflite_bytes
    assert len(parse_tflite_bytes(new).tensors) == len(parse_tflite_bytes(plain).tensors)   # no orphan left
    x = np.random.default_rng(4).uniform(-1, 1, (3, 6, 5, 4)).astype(np.float32)
    for i in range(3):
        for a, b in zip(_run(data, x[i:i + 1]), _run(new, x[i:i + 1])):
            assert np.array_equal(a, b)
