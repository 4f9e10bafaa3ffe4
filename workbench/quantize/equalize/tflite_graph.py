"""``+cle`` on a float ``.tflite``: the channels of a depthwise output equalised on the calibration data.

A float ``.tflite`` is quantized as it is (AI Edge Quantizer), with one scale per activation tensor.  In a
MobileNet/BlazeFace block a ``DEPTHWISE_CONV_2D`` without a fused activation feeds a ``CONV_2D`` and nothing
else; a single channel of the depthwise output can span a range far wider than the others (BlazeFace's
``depthwise_conv2d_15``: channel 38 reaches -343, the median channel spans 4.9), so the tensor's one scale
leaves the other channels a few INT8 steps.  Nothing between the two ops is non-linear, so output channel
``i`` of the depthwise (its weights and bias) can be multiplied by ``s_i`` and input channel ``i`` of the
convolution divided by it: the float function is unchanged.  Unlike Nagel et al.'s data-free equalisation of
weight ranges (the Keras/ONNX ``+cle``), the scales come from the activation ranges the float model reaches on
the calibration samples (LiteRT), since a bias can make a channel wide whatever its weights:
``s_i = min(1, ratio * median_j(r_j) / r_i)``, ``r`` the channel's range including 0; only channels wider than
``ratio`` times the median are narrowed.  A pair's ``range_ratio_before/after`` are the largest over the median
channel range of the depthwise output, before and after.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .report import EqualizedPair

#: a channel wider than this many times the median channel range of its tensor is narrowed to it
ACTIVATION_RATIO = 1.0


def _tflite_transform(source: Path, out: Path, transforms: tuple[str, ...], calibration: np.ndarray,
                      ratio: float = ACTIVATION_RATIO) -> dict[str, Any]:
    from ..tflite_prepare import prepare_float_tflite
    prepared = prepare_float_tflite(source.read_bytes(), source=str(source))   # float16 weights -> float32
    data, pairs = equalize_depthwise(prepared.data, calibration, ratio=ratio)
    out.write_bytes(data)
    return {"folded_batch_norms": (), "pairs": tuple(pairs), "relu6_to_relu": (), "bias_corrected": (),
            "skipped": ()}


def _builtin(model: Any, op: Any) -> int:
    code = model.operatorCodes[op.opcodeIndex]
    return int(max(code.builtinCode, code.deprecatedBuiltinCode))


def depthwise_pairs(model: Any) -> list[tuple[int, int, int]]:
    """``(depthwise op, conv op, tensor between)`` for every ``DEPTHWISE_CONV_2D`` (no fused activation, depth
    multiplier 1, float32 constant weights) whose output only a ``CONV_2D`` reads, as its input."""
    from ai_edge_litert import schema_py_generated as fb
    sg = model.subgraphs[0]
    readers: dict[int, list[int]] = {}
    for i, op in enumerate(sg.operators):
        for t in op.inputs if op.inputs is not None else ():
            if t >= 0:
                readers.setdefault(int(t), []).append(i)
    outputs = {int(i) for i in sg.outputs}

    def constant_float(t: int) -> bool:
        tensor = sg.tensors[t]
        buf = model.buffers[tensor.buffer]
        return tensor.type == fb.TensorType.FLOAT32 and buf.data is not None and len(buf.data) > 0

    found = []
    for i, op in enumerate(sg.operators):
        if _builtin(model, op) != fb.BuiltinOperator.DEPTHWISE_CONV_2D:
            continue
        opts = op.builtinOptions
        if opts is None or opts.fusedActivationFunction != 0 or opts.depthMultiplier not in (0, 1):
            continue
        t = int(op.outputs[0])
        if t in outputs or len(readers.get(t, ())) != 1:
            continue
        j = readers[t][0]
        nxt = sg.operators[j]
        if _builtin(model, nxt) != fb.BuiltinOperator.CONV_2D or int(nxt.inputs[0]) != t:
            continue
        weights = [int(op.inputs[1]), int(nxt.inputs[1])] + [int(b) for b in op.inputs[2:3] if b >= 0]
        if all(constant_float(w) for w in weights):
            found.append((i, j, t))
    return found


def channel_ranges(data: bytes, x: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
    """Per channel (last axis) ``max(v, 0) - min(v, 0)`` of each named tensor over the samples ``x``."""
    import warnings

    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = Interpreter(model_content=data, experimental_preserve_all_tensors=True, num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    index = {d["name"]: d["index"] for d in it.get_tensor_details()}
    inp = it.get_input_details()[0]
    lo: dict[str, np.ndarray] = {}
    hi: dict[str, np.ndarray] = {}
    for k in range(len(x)):
        it.set_tensor(inp["index"], np.ascontiguousarray(x[k:k + 1], np.float32).reshape(inp["shape"]))
        it.invoke()
        for n in names:
            v = np.asarray(it.get_tensor(index[n]), np.float32)
            v = v.reshape(-1, v.shape[-1])
            lo[n] = np.minimum(lo.get(n, 0.0), v.min(0))
            hi[n] = np.maximum(hi.get(n, 0.0), v.max(0))
    return {n: (hi[n] - lo[n]).astype(np.float64) for n in names}


def equalize_depthwise(data: bytes, x: np.ndarray, *, ratio: float = ACTIVATION_RATIO
                       ) -> tuple[bytes, list[EqualizedPair]]:
    """The float flatbuffer ``data`` with every depthwise -> conv pair's activation channels equalised on ``x``
    (model inputs), and the pairs changed."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu
    model = fu.read_model_from_bytearray(bytearray(data))
    sg = model.subgraphs[0]
    found = depthwise_pairs(model)

    def name(t: int) -> str:
        value = sg.tensors[t].name
        return value.decode() if isinstance(value, bytes) else str(value)

    ranges = channel_ranges(data, x, [name(t) for _, _, t in found]) if found else {}

    def array(t: int) -> np.ndarray:
        tensor = sg.tensors[t]
        raw = bytes(np.asarray(model.buffers[tensor.buffer].data, np.uint8))
        return np.frombuffer(raw, np.float32).reshape(tuple(tensor.shape)).astype(np.float64)

    def store(t: int, values: np.ndarray) -> None:      # a new buffer: weights shared with another op stay
        buf = fb.BufferT()
        buf.data = np.frombuffer(values.astype(np.float32).tobytes(), np.uint8)
        model.buffers.append(buf)
        sg.tensors[t].buffer = len(model.buffers) - 1

    pairs = []
    for i, j, t in found:
        r = ranges[name(t)]
        median = float(np.median(r))
        if median <= 0:
            continue
        s = np.minimum(1.0, ratio * median / np.maximum(r, 1e-30))
        if np.all(s == 1.0):
            continue
        dw, conv = sg.operators[i], sg.operators[j]
        store(int(dw.inputs[1]), array(int(dw.inputs[1])) * s.reshape(1, 1, 1, -1))
        if len(dw.inputs) > 2 and dw.inputs[2] >= 0:
            store(int(dw.inputs[2]), array(int(dw.inputs[2])) * s)
        store(int(conv.inputs[1]), array(int(conv.inputs[1])) / s.reshape(1, 1, 1, -1))
        pairs.append(EqualizedPair(first=name(t), second=name(int(conv.outputs[0])), through=(),
                                   channels=int((s < 1).sum()), range_ratio_before=round(float(r.max()) / median, 2),
                                   range_ratio_after=round(float((r * s).max()) / median, 2)))
    return bytes(fu.convert_object_to_bytearray(model)), pairs
