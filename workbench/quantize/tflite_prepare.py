"""A float ``.tflite`` made ready for AI Edge Quantizer and the float-.tflite passes (+cle): float16 weights
folded to float32, MediaPipe's custom ops rewritten to builtin ones, a ``serving_default`` signature added
when the file has none, RELU/RELU6 fused as the TFLite converter does (see :func:`prepare_float_tflite`).
Its own module so that the quantizer (``aeq_backend``) and the equalisation (``equalize.tflite_graph``)
both read it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelError

SIGNATURE = "serving_default"


@dataclass(frozen=True)
class Prepared:
    """The float flatbuffer AI Edge Quantizer reads, and what was changed to get it."""

    data: bytes
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    changes: tuple[str, ...]


def _builtin(model: Any, op: Any) -> int:
    code = model.operatorCodes[op.opcodeIndex]
    return int(max(code.builtinCode, code.deprecatedBuiltinCode))


def _name(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


def prepare_float_tflite(data: bytes, *, source: str = "<bytes>") -> Prepared:
    """Fold float16 constant weights to float32, rewrite the custom ops that have a builtin equivalent
    (:mod:`~workbench.models.tflite_custom_ops`) and add a ``serving_default`` signature when absent."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu
    model = fu.read_model_from_bytearray(bytearray(data))
    if len(model.subgraphs) != 1:
        raise ModelError(f"{source}: the .tflite file has {len(model.subgraphs)} subgraphs (control flow); the "
                         "workbench quantizes single-graph models.")
    sg = model.subgraphs[0]
    changes = []
    # 0. files written before schema 3a name ops only in deprecated_builtin_code (builtin_code reads 0 = ADD);
    #    AI Edge Quantizer reads builtin_code and would take every CONV_2D for an ADD
    stale = [c for c in model.operatorCodes if c.deprecatedBuiltinCode > c.builtinCode]
    for code in stale:
        code.builtinCode = code.deprecatedBuiltinCode
    if stale:
        changes.append(f"operator codes: builtin_code set from deprecated_builtin_code for {len(stale)} op type(s)")
    # 1. DEQUANTIZE(float16 constant) -> float32 constant
    producers = {o: i for i, op in enumerate(sg.operators) for o in (op.outputs if op.outputs is not None else ())}
    remove: set[int] = set()
    for i, op in enumerate(sg.operators):
        if _builtin(model, op) != fb.BuiltinOperator.DEQUANTIZE:
            continue
        src = sg.tensors[op.inputs[0]]
        buf = model.buffers[src.buffer]
        if src.type != fb.TensorType.FLOAT16 or op.inputs[0] in producers or buf.data is None or not len(buf.data):
            continue
        values = np.frombuffer(bytes(np.asarray(buf.data, np.uint8)), np.float16).astype(np.float32)
        out = sg.tensors[op.outputs[0]]
        new_buf = fb.BufferT()
        new_buf.data = np.frombuffer(values.tobytes(), np.uint8)
        model.buffers.append(new_buf)
        out.buffer = len(model.buffers) - 1
        remove.add(i)
    if remove:
        sg.operators = [op for i, op in enumerate(sg.operators) if i not in remove]
        changes.append(f"float16 weights -> float32: {len(remove)} DEQUANTIZE op(s) folded")
    # 2. custom ops with a builtin equivalent (MediaPipe's Convolution2DTransposeBias -> TRANSPOSE_CONV)
    from ..models.tflite_custom_ops import rewrite_custom_ops_model
    changes.extend(rewrite_custom_ops_model(model))
    in_names = tuple(_name(sg.tensors[i].name) for i in sg.inputs)
    out_names = tuple(_name(sg.tensors[i].name) for i in sg.outputs)
    if not model.signatureDefs:
        sig = fb.SignatureDefT()
        sig.signatureKey = SIGNATURE
        sig.subgraphIndex = 0
        sig.inputs, sig.outputs = [], []
        for names, indices, target in ((in_names, sg.inputs, sig.inputs), (out_names, sg.outputs, sig.outputs)):
            for name, idx in zip(names, indices):
                tm = fb.TensorMapT()
                tm.name = name
                tm.tensorIndex = int(idx)
                target.append(tm)
        model.signatureDefs = [sig]
        changes.append(f"signature {SIGNATURE!r} added over {len(in_names)} input(s), {len(out_names)} output(s)")
    else:
        sig = model.signatureDefs[0]
        by_index = {int(t.tensorIndex): _name(t.name) for t in (sig.inputs or [])}
        in_names = tuple(by_index.get(int(i), n) for i, n in zip(sg.inputs, in_names))
        by_index = {int(t.tensorIndex): _name(t.name) for t in (sig.outputs or [])}
        out_names = tuple(by_index.get(int(i), n) for i, n in zip(sg.outputs, out_names))
    out = bytes(fu.convert_object_to_bytearray(model)) if changes else bytes(data)
    from ..models.tflite_passes import fuse_activations
    out, n = fuse_activations(out)
    if n:
        changes.append(f"RELU/RELU6 fused into the op before them: {n} op(s) (the TFLite converter's fusion)")
    return Prepared(data=out, input_names=in_names, output_names=out_names, changes=tuple(changes))
