"""MediaPipe's custom ``Convolution2DTransposeBias`` rewritten into the builtin ``TRANSPOSE_CONV``.

The models are written as flatbuffers here (no TensorFlow, no MediaPipe).  LiteRT's builtin kernels have
no kernel for the custom op (its XNNPACK delegate implements it), so the references are a numpy
transposed convolution, itself checked against TensorFlow's ``conv2d_transpose`` in a slow test, and
the XNNPACK delegate's own implementation of MediaPipe's op."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from workbench.errors import ModelError

SAME, VALID = 1, 2          # TfLitePadding


def mediapipe_transpose_conv(x, w, b, stride, padding):
    """The transposed convolution MediaPipe's kernel computes: each input pixel adds ``x * w`` to the output
    at ``in * s - pad_before + f`` (contributions outside the output dropped), starting from the bias."""
    n, h, wd, _ = x.shape
    o, kh, kw, _ = w.shape
    sh, sw = stride

    def size(sz, k, s):
        total = max(0, k - (sz - 1) % s - 1) if padding == SAME else 0
        return s * (sz - 1) + k - total, total // 2
    (oh, ph), (ow, pw) = size(h, kh, sh), size(wd, kw, sw)
    full = np.zeros((n, sh * h + kh, sw * wd + kw, o), np.float64)
    for fy in range(kh):
        for fx in range(kw):
            full[:, fy:fy + sh * h:sh, fx:fx + sw * wd:sw, :] += np.einsum(
                "nhwc,oc->nhwo", x.astype(np.float64), w[:, fy, fx, :].astype(np.float64))
    return (full[:, ph:ph + oh, pw:pw + ow, :] + b).astype(np.float32)


def custom_op_model(path: Path, *, h=7, w=5, c=3, o=2, k=(3, 3), stride=(2, 2), padding=SAME, fp16=False,
                    options: bytes | None = None, seed=0) -> tuple[Path, np.ndarray, np.ndarray]:
    """A float .tflite: image -> Convolution2DTransposeBias(image, weights, bias) -> segment (weights and
    bias stored as float16 behind DEQUANTIZE ops when ``fp16``, as MediaPipe stores them)."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu
    rng = np.random.default_rng(seed)
    weights = rng.standard_normal((o, *k, c)).astype(np.float16 if fp16 else np.float32)
    bias = rng.standard_normal(o).astype(np.float16 if fp16 else np.float32)
    out = mediapipe_transpose_conv(np.zeros((1, h, w, c), np.float32), weights, bias, stride, padding).shape
    model = fb.ModelT()
    model.version, model.buffers, model.operatorCodes = 3, [fb.BufferT()], []
    sg = fb.SubGraphT()
    sg.tensors, sg.operators = [], []

    def tensor(name, shape, dtype=fb.TensorType.FLOAT32, data=None):
        t = fb.TensorT()
        t.name, t.shape, t.type, t.buffer = name, np.array(shape, np.int32), dtype, 0
        if data is not None:
            buf = fb.BufferT()
            buf.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
            model.buffers.append(buf)
            t.buffer = len(model.buffers) - 1
        sg.tensors.append(t)
        return len(sg.tensors) - 1

    def op(code, inputs, outputs, custom=None):
        c = fb.OperatorCodeT()
        c.builtinCode = c.deprecatedBuiltinCode = code
        c.customCode, c.version = custom, 1
        model.operatorCodes.append(c)
        operator = fb.OperatorT()
        operator.opcodeIndex, operator.inputs, operator.outputs = len(model.operatorCodes) - 1, inputs, outputs
        sg.operators.append(operator)
        return operator

    image = tensor("image", [1, h, w, c])
    if fp16:
        wq, bq = tensor("kernel_fp16", weights.shape, fb.TensorType.FLOAT16, weights), \
            tensor("bias_fp16", bias.shape, fb.TensorType.FLOAT16, bias)
        wt, bt = tensor("segment/Kernel_dequantize", weights.shape), tensor("segment/Bias_dequantize", bias.shape)
        op(fb.BuiltinOperator.DEQUANTIZE, [wq], [wt])
        op(fb.BuiltinOperator.DEQUANTIZE, [bq], [bt])
    else:
        wt, bt = tensor("kernel", weights.shape, data=weights), tensor("bias", bias.shape, data=bias)
    segment = tensor("segment", out)
    conv = op(fb.BuiltinOperator.CUSTOM, [image, wt, bt], [segment], custom="Convolution2DTransposeBias")
    opts = struct.pack("<3i", padding, stride[1], stride[0]) if options is None else options
    conv.customOptions = np.frombuffer(opts, np.uint8)
    sg.inputs, sg.outputs = [image], [segment]
    model.subgraphs = [sg]
    path.write_bytes(bytes(fu.convert_object_to_bytearray(model)))
    return path, weights.astype(np.float32), bias.astype(np.float32)


def _run(data: bytes, x: np.ndarray, *, builtin: bool = True) -> np.ndarray:
    """``data`` run on ``x`` by LiteRT's builtin kernels (``builtin``) or its default runtime (XNNPACK)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    kind = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES if builtin else OpResolverType.AUTO
    it = Interpreter(model_content=data, experimental_op_resolver_type=kind)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def _op_types(data: bytes | Path) -> list[str]:
    from workbench.models.tflite_graph import parse_tflite_bytes
    return [op.type for op in parse_tflite_bytes(data.read_bytes() if isinstance(data, Path) else data).ops]


@pytest.mark.parametrize("shape", [
    dict(h=7, w=5, c=3, o=2, k=(3, 3), stride=(2, 2), padding=SAME),        # odd sizes: padding 1, half before
    dict(h=8, w=8, c=16, o=1, k=(2, 2), stride=(2, 2), padding=SAME),       # the selfie model's last op
    dict(h=6, w=9, c=4, o=2, k=(4, 3), stride=(2, 3), padding=SAME),
    dict(h=5, w=5, c=3, o=2, k=(3, 3), stride=(2, 2), padding=VALID),
    dict(h=4, w=6, c=2, o=3, k=(5, 2), stride=(3, 1), padding=SAME, fp16=True),
])
def test_the_rewrite_computes_mediapipes_transposed_convolution(tmp_path, shape):
    from workbench.models.tflite_custom_ops import rewrite_custom_ops
    path, weights, bias = custom_op_model(tmp_path / "m.tflite", **shape)
    data = path.read_bytes()
    x = np.random.default_rng(1).standard_normal((1, shape["h"], shape["w"], shape["c"])).astype(np.float32)
    with pytest.raises(RuntimeError, match="unresolved custom op: Convolution2DTransposeBias"):
        _run(data, x)                                # LiteRT's builtin kernels cannot run it
    new, done = rewrite_custom_ops(data)
    assert "TRANSPOSE_CONV" in _op_types(new) and "Convolution2DTransposeBias" not in _op_types(new)
    assert len(done) == 1 and "TRANSPOSE_CONV with its bias" in done[0] and "'segment'" in done[0]
    ref = mediapipe_transpose_conv(x, weights, bias, shape["stride"], shape["padding"])
    got = _run(new, x)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5)
    # XNNPACK's implementation of MediaPipe's op, on the file as it is: the same numbers
    np.testing.assert_allclose(got, _run(data, x, builtin=False), rtol=0, atol=1e-5)


@pytest.mark.slow
def test_the_numpy_reference_is_tensorflows_conv2d_transpose():
    """The reference the rewrite is checked against agrees with TensorFlow (filter HWOI there, OHWI here)."""
    import tensorflow as tf
    rng = np.random.default_rng(3)
    for h, w, c, o, kh, kw, sh, sw, padding in [(7, 5, 3, 4, 3, 3, 2, 2, SAME), (8, 8, 16, 1, 2, 2, 2, 2, SAME),
                                                (6, 9, 4, 2, 4, 3, 2, 3, SAME), (5, 5, 3, 2, 3, 3, 2, 2, VALID)]:
        x = rng.standard_normal((2, h, w, c)).astype(np.float32)
        k = rng.standard_normal((o, kh, kw, c)).astype(np.float32)
        b = rng.standard_normal(o).astype(np.float32)
        ref = mediapipe_transpose_conv(x, k, b, (sh, sw), padding)
        tf_out = tf.nn.conv2d_transpose(x, np.transpose(k, (1, 2, 0, 3)), output_shape=ref.shape, strides=[1, sh, sw, 1],
                                        padding="SAME" if padding == SAME else "VALID").numpy() + b
        np.testing.assert_allclose(ref, tf_out, rtol=0, atol=1e-5)


def test_the_workbench_runs_the_rewritten_model_as_the_fp32_model(tmp_path):
    """The FP32 predictor and the activation taps run the rewrite (LiteRT has no kernel for the custom op)."""
    from workbench.calibration.activations import GraphTaps
    from workbench.models.predict import load_predictor
    from workbench.models.tflite_graph import check_no_custom_ops
    path, weights, bias = custom_op_model(tmp_path / "m.tflite", fp16=True)
    check_no_custom_ops(path)                        # rewritable: not refused
    x = np.random.default_rng(2).uniform(0, 1, (3, 7, 5, 3)).astype(np.float32)
    ref = mediapipe_transpose_conv(x, weights, bias, (2, 2), SAME)
    out = load_predictor(str(path)).predict(x)
    out = out[0] if isinstance(out, list) else out
    np.testing.assert_allclose(np.asarray(out).reshape(ref.shape), ref, rtol=0, atol=1e-5)
    taps = GraphTaps(path, "tflite")
    assert "segment" in taps.tapped
    np.testing.assert_allclose(next(taps.iter_activations(x, layers=("segment",)))["segment"], ref, atol=1e-5)


def test_the_preparation_records_the_rewrite(tmp_path):
    from workbench.quantize.aeq_backend import prepare_float_tflite
    path, _, _ = custom_op_model(tmp_path / "m.tflite", fp16=True)
    prepared = prepare_float_tflite(path.read_bytes(), source=str(path))
    assert any("Convolution2DTransposeBias #" in c and "-> TRANSPOSE_CONV" in c for c in prepared.changes)
    assert _op_types(prepared.data) == ["TRANSPOSE_CONV"]        # the float16 DEQUANTIZEs folded too


@pytest.mark.parametrize("kwargs, why", [
    (dict(options=struct.pack("<3i", 0, 2, 2)), r"not rewritable: padding 0 \(TfLitePadding: 1 SAME, 2 VALID\)"),
    (dict(options=b"\x01\x00"), r"not rewritable: custom options of 2 bytes"),
    (dict(options=struct.pack("<3i", SAME, 0, 2)), r"not rewritable: stride 0x2"),
])
def test_what_cannot_be_rewritten_is_refused_naming_why(tmp_path, kwargs, why):
    from workbench.models.tflite_graph import check_no_custom_ops
    path, _, _ = custom_op_model(tmp_path / "m.tflite", **kwargs)
    with pytest.raises(ModelError, match=r"1 custom op\(s\) \('Convolution2DTransposeBias'\): #0 "
                                         r"'Convolution2DTransposeBias' \(output 'segment'\) " + why):
        check_no_custom_ops(path)


def test_an_unknown_custom_op_is_refused_and_the_known_rewrites_named(tmp_path):
    from ai_edge_litert.tools import flatbuffer_utils as fu

    from workbench.models.tflite_graph import check_no_custom_ops
    path, _, _ = custom_op_model(tmp_path / "m.tflite")
    m = fu.read_model_from_bytearray(bytearray(path.read_bytes()))
    m.operatorCodes[0].customCode = b"MyOwnOp"
    path.write_bytes(bytes(fu.convert_object_to_bytearray(m)))
    with pytest.raises(ModelError, match=r"'MyOwnOp' \(output 'segment'\) no rewrite into builtin ops is known.*"
                                         r"rewrites only Convolution2DTransposeBias -> TRANSPOSE_CONV"):
        check_no_custom_ops(path)


@pytest.mark.slow
def test_a_model_with_the_custom_op_quantizes_and_says_what_was_rewritten(tmp_path):
    from workbench.models.structure import summary_lines
    from workbench.quantize.engine import quantize
    path, _, _ = custom_op_model(tmp_path / "m.tflite", h=16, w=16, c=3, o=2, k=(2, 2), fp16=True)
    x = np.random.default_rng(4).uniform(0, 1, (60, 16, 16, 3)).astype(np.float32)
    q = quantize(path, "a8w8_pc", x, output=tmp_path / "m_int8.tflite")
    assert q.full_integer and "TRANSPOSE_CONV" in _op_types(Path(q.path))
    assert q.structure["rewritten"] == {"Convolution2DTransposeBias -> TRANSPOSE_CONV": 1}
    assert not q.structure["added"].get("TRANSPOSE_CONV")        # counted as the builtin it became
    assert any("custom ops rewritten into builtin ops: Convolution2DTransposeBias -> TRANSPOSE_CONV x1" in line
               for line in summary_lines(q.structure))
    from workbench.placement.graph import activation_sqnr  # the float op is matched with its INT8 twin
    sqnr = activation_sqnr(path, q.path, x[:8])
    assert len(sqnr) == 1 and min(sqnr.values()) > 25, sqnr
