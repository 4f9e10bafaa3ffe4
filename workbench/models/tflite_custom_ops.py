"""Custom ops of a float ``.tflite`` rewritten into the builtin ops every runtime here knows.

MediaPipe's models end their decoders in ``Convolution2DTransposeBias``, a custom op whose kernel
lives in MediaPipe only: LiteRT, AI Edge Quantizer, Vela and Neutron have none, so the workbench
refused these models.  The op is TFLite's transposed convolution with a bias input, and TFLite's
builtin ``TRANSPOSE_CONV`` takes that bias as its optional fourth input, so the rewrite is one op for
one op, on the same tensors:

* inputs ``(x, weights [O, kh, kw, I], bias [O])`` -> ``(output_shape, weights, x, bias)``; the
  output tensor is kept (its name and shape do not change);
* the custom options are MediaPipe's ``TfLiteTransposeConvParams`` as raw bytes: three little-endian
  int32, ``padding`` (``TfLitePadding``: 1 SAME, 2 VALID), ``stride_width``, ``stride_height``
  (anything after them is ignored, as MediaPipe's kernel ignores it);
* the output size is MediaPipe's own (SAME: ``s * (in - 1) + k - pad`` with ``pad = max(0, k -
  (in - 1) % s - 1)``, its first half before the data; VALID: ``s * (in - 1) + k``), written as the
  builtin's constant ``output_shape``, and the rewrite checks that the builtin's padding rule gives the
  same offset for that size (it does for every size; an op where it would not is left alone).

An op that does not fit (another dtype, a dynamic shape, a padding value other than SAME/VALID) is
left as it is; :func:`custom_op_problems` says why and the caller refuses the model naming it.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from .tflite_flatbuffer import _opcode, _read, _write

TRANSPOSE_CONV_BIAS = "Convolution2DTransposeBias"
REWRITES = {TRANSPOSE_CONV_BIAS: "TRANSPOSE_CONV"}     # custom code -> the builtin op it becomes
_PADDING = {1: "SAME", 2: "VALID"}                        # TfLitePadding (kTfLitePaddingUnknown = 0)


def _custom_code(model: Any, op: Any) -> str | None:
    from ai_edge_litert import schema_py_generated as fb
    code = model.operatorCodes[op.opcodeIndex]
    if max(code.builtinCode, code.deprecatedBuiltinCode) != fb.BuiltinOperator.CUSTOM:
        return None
    custom = code.customCode
    return custom.decode() if isinstance(custom, bytes) else str(custom or "")


def transpose_conv_params(options: Any) -> tuple[str, int, int]:
    """``(padding, stride_w, stride_h)`` from a ``Convolution2DTransposeBias`` op's custom options.
    Raises ``ValueError`` naming what does not fit."""
    raw = bytes(np.asarray(options if options is not None else [], np.uint8))
    if len(raw) < 12:
        raise ValueError(f"custom options of {len(raw)} bytes (MediaPipe writes 12: padding, stride_w, stride_h)")
    padding, stride_w, stride_h = struct.unpack("<3i", raw[:12])
    if padding not in _PADDING:
        raise ValueError(f"padding {padding} (TfLitePadding: 1 SAME, 2 VALID)")
    if stride_w < 1 or stride_h < 1:
        raise ValueError(f"stride {stride_w}x{stride_h}")
    return _PADDING[padding], stride_w, stride_h


def mediapipe_output_size(size: int, kernel: int, stride: int, padding: str) -> tuple[int, int]:
    """(output size, padding before the data) of MediaPipe's kernel along one axis."""
    total = max(0, kernel - (size - 1) % stride - 1) if padding == "SAME" else 0
    return stride * (size - 1) + kernel - total, total // 2


def builtin_padding_before(size: int, kernel: int, stride: int, out: int, padding: str) -> int:
    """The padding before the data that TFLite's ``TRANSPOSE_CONV`` uses for an output of ``out``."""
    conv_out = (out + stride - 1) // stride if padding == "SAME" else (out + stride - kernel) // stride
    return max(0, (conv_out - 1) * stride + kernel - out) // 2 if conv_out == size else -1


def _plan(model: Any, sg: Any, op: Any) -> tuple[list[int], Any]:
    """(output shape, TransposeConvOptionsT) for the builtin op, or ValueError saying why not."""
    from ai_edge_litert import schema_py_generated as fb
    if len(op.inputs) != 3 or len(op.outputs) != 1:
        raise ValueError(f"{len(op.inputs)} inputs and {len(op.outputs)} outputs (3 and 1 expected)")
    x, w, b = (sg.tensors[int(i)] for i in op.inputs)
    y = sg.tensors[int(op.outputs[0])]
    for role, t in (("input", x), ("weights", w), ("bias", b), ("output", y)):
        if int(t.type) != fb.TensorType.FLOAT32:
            raise ValueError(f"its {role} is not float32")
    shapes = [list(t.shape) if t.shape is not None else [] for t in (x, w, b)]
    if len(shapes[0]) != 4 or len(shapes[1]) != 4 or len(shapes[2]) != 1 or any(d < 1 for d in shapes[0][1:]):
        raise ValueError(f"input {shapes[0]}, weights {shapes[1]}, bias {shapes[2]} (static NHWC, OHWI, [O] expected)")
    (n, h, wd, c), (o, kh, kw, i) = shapes[0], shapes[1]
    if i != c or shapes[2][0] != o:
        raise ValueError(f"weights {shapes[1]} do not fit input {shapes[0]} and bias {shapes[2]}")
    padding, sw, sh = transpose_conv_params(op.customOptions)
    (oh, ph), (ow, pw) = mediapipe_output_size(h, kh, sh, padding), mediapipe_output_size(wd, kw, sw, padding)
    if (builtin_padding_before(h, kh, sh, oh, padding), builtin_padding_before(wd, kw, sw, ow, padding)) != (ph, pw):
        raise ValueError("TRANSPOSE_CONV would pad it differently")
    if y.shape is not None and len(y.shape) == 4 and list(y.shape)[1:] != [oh, ow, o]:
        raise ValueError(f"output {list(y.shape)} is not MediaPipe's {[n, oh, ow, o]}")
    opts = fb.TransposeConvOptionsT()
    opts.padding = fb.Padding.SAME if padding == "SAME" else fb.Padding.VALID
    opts.strideW, opts.strideH = sw, sh
    opts.fusedActivationFunction = fb.ActivationFunctionType.NONE
    return [max(n, 1), oh, ow, o], opts


def custom_op_problems(data: bytes) -> dict[int, str]:
    """``{op index: why}`` for every custom op the workbench cannot rewrite (unknown ones included)."""
    model = _read(data)
    out: dict[int, str] = {}
    for sg in model.subgraphs[:1]:
        for index, op in enumerate(sg.operators):
            code = _custom_code(model, op)
            if code is None:
                continue
            if code not in REWRITES:
                out[index] = "no rewrite into builtin ops is known"
                continue
            try:
                _plan(model, sg, op)
            except ValueError as exc:
                out[index] = f"not rewritable: {exc}"
    return out


def rewrite_custom_ops_model(model: Any) -> list[str]:
    """Rewrite the custom ops of ``model`` (a ``ModelT``, in place) that fit; one line per op rewritten."""
    from ai_edge_litert import schema_py_generated as fb
    done: list[str] = []
    for sg in model.subgraphs[:1]:
        for index, op in enumerate(sg.operators):
            if _custom_code(model, op) != TRANSPOSE_CONV_BIAS:
                continue
            try:
                shape, opts = _plan(model, sg, op)
            except ValueError:
                continue            # left as it is: check_no_custom_ops names it
            buf = fb.BufferT()
            buf.data = np.frombuffer(np.asarray(shape, np.int32).tobytes(), np.uint8)
            model.buffers.append(buf)
            out_name = sg.tensors[int(op.outputs[0])].name
            out_name = out_name.decode() if isinstance(out_name, bytes) else str(out_name)
            t = fb.TensorT()
            t.shape, t.type, t.buffer = np.asarray([4], np.int32), fb.TensorType.INT32, len(model.buffers) - 1
            t.name = f"{out_name}/output_shape"
            sg.tensors.append(t)
            x, w, b = (int(i) for i in op.inputs)
            op.inputs = [len(sg.tensors) - 1, w, x, b]
            op.opcodeIndex = _opcode(model, fb.BuiltinOperator.TRANSPOSE_CONV, 3)   # v3: the bias input
            op.builtinOptionsType, op.builtinOptions = fb.BuiltinOptions.TransposeConvOptions, opts
            op.customOptions, op.customOptionsFormat = None, 0
            padding = "SAME" if opts.padding == fb.Padding.SAME else "VALID"
            done.append(f"custom op {TRANSPOSE_CONV_BIAS} #{index} (output {out_name!r}) -> TRANSPOSE_CONV "
                        f"with its bias, stride {opts.strideH}x{opts.strideW}, padding {padding}")
    if done:
        _drop_unused_codes(model)
    return done


def _drop_unused_codes(model: Any) -> None:
    used = sorted({int(op.opcodeIndex) for sg in model.subgraphs for op in sg.operators})
    if len(used) == len(model.operatorCodes):
        return
    index = {old: new for new, old in enumerate(used)}
    model.operatorCodes = [model.operatorCodes[i] for i in used]
    for sg in model.subgraphs:
        for op in sg.operators:
            op.opcodeIndex = index[int(op.opcodeIndex)]


def rewrite_custom_ops(data: bytes) -> tuple[bytes, list[str]]:
    """:func:`rewrite_custom_ops_model` on flatbuffer bytes (the same bytes back when nothing fits)."""
    model = _read(data)
    done = rewrite_custom_ops_model(model)
    return (_write(model), done) if done else (data, done)


def runnable_tflite(data: bytes) -> bytes:
    """A float ``.tflite``'s bytes with its rewritable custom ops rewritten (the bytes as they are if
    it has none): what the workbench runs as the FP32 model."""
    from ai_edge_litert import schema_py_generated as fb
    try:
        model = fb.Model.GetRootAs(data, 0)
        customs = any(model.OperatorCodes(i).BuiltinCode() == fb.BuiltinOperator.CUSTOM
                      or model.OperatorCodes(i).DeprecatedBuiltinCode() == fb.BuiltinOperator.CUSTOM
                      for i in range(model.OperatorCodesLength()))
        return rewrite_custom_ops(data)[0] if customs else data
    except Exception:  # noqa: BLE001 - not a readable flatbuffer: the runtime that loads it says what is wrong
        return data
