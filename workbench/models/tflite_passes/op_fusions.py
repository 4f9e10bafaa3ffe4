"""Passes on single ops: a grouped ``CONV_2D`` that is a depthwise convolution becomes ``DEPTHWISE_CONV_2D``, and
a float model's separate ``RELU``/``RELU6`` is fused into the op that produces its input."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tflite_flatbuffer import (
    _NP,
    _buffer_array,
    _code,
    _drop_unused_tensors,
    _graph,
    _op_names,
    _opcode,
    _read,
    _write,
)


def grouped_conv_to_depthwise(data: bytes) -> tuple[bytes, int]:
    """``CONV_2D`` with a ``[C, kh, kw, 1]`` filter on a C-channel input -> ``DEPTHWISE_CONV_2D``."""
    from ai_edge_litert import schema_py_generated as fb
    model = _read(data)
    changed = 0
    for sg in model.subgraphs:
        _, readers, _ = _graph(sg)
        for op in sg.operators:
            if _code(model, op) != fb.BuiltinOperator.CONV_2D or len(op.inputs) < 2:
                continue
            x, w = sg.tensors[int(op.inputs[0])], sg.tensors[int(op.inputs[1])]
            if x.shape is None or w.shape is None or len(x.shape) != 4 or len(w.shape) != 4:
                continue
            c = int(x.shape[3])
            if c <= 1 or int(w.shape[3]) != 1 or int(w.shape[0]) != c or len(readers.get(int(op.inputs[1]), ())) != 1:
                continue
            dtype = _NP.get(int(w.type))
            values = _buffer_array(model, w, dtype) if dtype is not None else None
            if values is None:
                continue
            new = np.ascontiguousarray(values.transpose(3, 1, 2, 0))      # [C,kh,kw,1] -> [1,kh,kw,C]
            buf = fb.BufferT()
            buf.data = np.frombuffer(new.tobytes(), np.uint8)
            model.buffers.append(buf)
            w.buffer = len(model.buffers) - 1
            w.shape = np.asarray(new.shape, np.int32)
            if w.shapeSignature is not None and len(w.shapeSignature):
                w.shapeSignature = np.asarray(new.shape, np.int32)
            if w.quantization is not None and w.quantization.scale is not None and len(w.quantization.scale) > 1:
                w.quantization.quantizedDimension = 3
            old = op.builtinOptions
            opts = fb.DepthwiseConv2DOptionsT()
            opts.padding, opts.strideW, opts.strideH = old.padding, old.strideW, old.strideH
            opts.depthMultiplier = 1
            opts.fusedActivationFunction = old.fusedActivationFunction
            opts.dilationWFactor, opts.dilationHFactor = old.dilationWFactor, old.dilationHFactor
            op.builtinOptionsType = fb.BuiltinOptions.DepthwiseConv2DOptions
            op.builtinOptions = opts
            version = 5 if int(x.type) == fb.TensorType.INT16 else (3 if int(x.type) == fb.TensorType.INT8 else 2)
            op.opcodeIndex = _opcode(model, fb.BuiltinOperator.DEPTHWISE_CONV_2D, version)
            changed += 1
    return (_write(model), changed) if changed else (data, 0)


_FUSABLE = ("ADD", "SUB", "MUL", "DIV", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D",
            "MAX_POOL_2D", "CONCATENATION")
_ACTIVATIONS = {"RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}


def fuse_activations(data: bytes) -> tuple[bytes, int]:
    """A float model's ``RELU``/``RELU6``/``RELU_N1_TO_1`` op fused into the op that produces its input
    (``fused_activation_function``), when that op has none and nothing else reads its output.

    The TFLite converter fuses them; a float ``.tflite`` written without (MediaPipe's BlazeFace: 17 RELU
    after ADD) quantized as it is would give the ADD an output range with the negatives the RELU then
    drops: half the INT8 codes wasted, measured -1.1 dB on BlazeFace's scores.  Same arithmetic in float."""
    model = _read(data)
    names = _op_names()
    fused = 0
    for sg in model.subgraphs:
        producer, readers, outputs = _graph(sg)
        rename: dict[int, int] = {}
        drop: list[Any] = []
        for op in sg.operators:
            act = _ACTIVATIONS.get(names.get(_code(model, op), ""))
            if act is None or len(op.inputs) != 1:
                continue
            src = int(op.inputs[0])
            prod = producer.get(src)
            if prod is None or names.get(_code(model, prod)) not in _FUSABLE or len(readers.get(src, ())) != 1:
                continue
            if src in outputs or prod.builtinOptions is None \
                    or not hasattr(prod.builtinOptions, "fusedActivationFunction") \
                    or int(prod.builtinOptions.fusedActivationFunction) != 0:
                continue
            if any(any(d is p for d in drop) for p in (prod,)):
                continue
            prod.builtinOptions.fusedActivationFunction = act
            out = int(op.outputs[0])
            prod.outputs = [out]                 # the producer writes the activation's output tensor
            rename[src] = out
            drop.append(op)
            fused += 1
        if drop:
            sg.operators = [op for op in sg.operators if all(op is not d for d in drop)]
            _drop_unused_tensors(model, sg)
    return (_write(model), fused) if fused else (data, 0)
