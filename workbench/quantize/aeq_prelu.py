"""Integer PRELU for what AI Edge Quantizer leaves in float.

AI Edge Quantizer 0.10 has no quantization rule for ``PRELU``: it leaves each one in float between a
``DEQUANTIZE`` and a ``QUANTIZE`` (MediaPipe's face and hand landmark models have 23 of them), and the
"full integer" recipes then refuse the model.  LiteRT and the NPU compilers have an INT8 ``PRELU``
(int8 input, int8 alpha, int8 output; the TFLite converter writes it as version 1 of the op, the only
version LiteRT registers).  This pass finishes the job the way the TFLite converter does (checked on a
Keras ``PReLU``: the alpha symmetric INT8 per tensor, zero point 0, scale max|alpha| / 127):

    int8 x -> DEQUANTIZE -> PRELU(float alpha) -> QUANTIZE -> int8 y
    becomes  int8 x -> PRELU(int8 alpha) -> int8 y

with ``x``'s and ``y``'s scales exactly as AI Edge Quantizer calibrated them.  A PRELU the recipe
excludes, one whose output is also a graph output or feeds anything but one ``QUANTIZE``, or one at
16 bits (LiteRT's PRELU has no int16 kernel) stays as it is.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _alpha_int8(alpha: np.ndarray) -> tuple[np.ndarray, float, int]:
    """Symmetric per-tensor INT8 of a constant alpha (what the TFLite converter writes)."""
    scale = float(np.max(np.abs(alpha))) / 127.0 or 1.0
    q = np.clip(np.round(alpha / scale), -127, 127).astype(np.int8)
    return q, scale, 0


def quantize_prelu(data: bytes, *, keep_float: frozenset[str] = frozenset()) -> tuple[bytes, list[str]]:
    """``data`` with every eligible float PRELU made INT8, and the names of the PRELUs it changed.

    ``keep_float``: output tensor names (or ``"PRELU"``) the recipe excludes from quantization."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu

    from .tflite_prepare import _builtin, _name
    if "PRELU" in keep_float:
        return data, []
    model = fu.read_model_from_bytearray(bytearray(data))
    sg = model.subgraphs[0]

    producer = {int(o): op for op in sg.operators for o in op.outputs}
    consumers: dict[int, list[Any]] = {}
    for op in sg.operators:
        for i in op.inputs:
            if int(i) >= 0:
                consumers.setdefault(int(i), []).append(op)
    graph_outputs = {int(i) for i in sg.outputs}
    drop: set[int] = set()      # id() of the DEQUANTIZE/QUANTIZE ops made redundant
    changed: list[str] = []
    for op in sg.operators:
        if _builtin(model, op) != fb.BuiltinOperator.PRELU or len(op.inputs) != 2:
            continue
        x_f, alpha_i, y_f = int(op.inputs[0]), int(op.inputs[1]), int(op.outputs[0])
        deq = producer.get(x_f)
        users = consumers.get(y_f, [])
        alpha_t = sg.tensors[alpha_i]
        alpha_buf = model.buffers[alpha_t.buffer].data if alpha_t.buffer else None
        if (_name(sg.tensors[y_f].name) in keep_float or deq is None
                or _builtin(model, deq) != fb.BuiltinOperator.DEQUANTIZE or y_f in graph_outputs
                or len(users) != 1 or _builtin(model, users[0]) != fb.BuiltinOperator.QUANTIZE
                or alpha_t.type != fb.TensorType.FLOAT32 or alpha_buf is None or alpha_i in producer):
            continue
        x_q, y_q = int(deq.inputs[0]), int(users[0].outputs[0])
        if sg.tensors[x_q].type != fb.TensorType.INT8 or sg.tensors[y_q].type != fb.TensorType.INT8:
            continue
        alpha = np.frombuffer(bytes(np.asarray(alpha_buf, np.uint8)), np.float32)
        q, scale, zero_point = _alpha_int8(alpha)
        buffer = fb.BufferT()
        buffer.data = np.frombuffer(q.tobytes(), np.uint8)
        model.buffers.append(buffer)
        t = fb.TensorT()
        t.name = f"{_name(alpha_t.name)}_int8"
        t.shape = np.array(alpha_t.shape, np.int32)
        t.type = fb.TensorType.INT8
        t.buffer = len(model.buffers) - 1
        t.quantization = fb.QuantizationParametersT()
        t.quantization.scale = [scale]
        t.quantization.zeroPoint = [zero_point]
        sg.tensors.append(t)
        op.inputs = [x_q, len(sg.tensors) - 1]
        op.outputs = [y_q]
        drop.add(id(users[0]))
        if all(u is op for u in consumers.get(x_f, [])) and x_f not in graph_outputs:
            drop.add(id(deq))
        changed.append(_name(sg.tensors[y_f].name))
    if not changed:
        return data, []
    sg.operators = [op for op in sg.operators if id(op) not in drop]
    return bytes(fu.convert_object_to_bytearray(model)), changed

