"""Reading and writing a ``.tflite`` flatbuffer for the passes (:mod:`~workbench.models.tflite_passes`,
:mod:`~workbench.models.tflite_fold`, the custom-op rewrite of :mod:`~workbench.models.tflite_custom_ops`): op codes,
constant buffers as arrays, op names, and dropping the tensors a rewrite left unused."""

from __future__ import annotations

from typing import Any

import numpy as np


def _read(data: bytes) -> Any:
    from ai_edge_litert.tools import flatbuffer_utils as fu
    return fu.read_model_from_bytearray(bytearray(data))


def _write(model: Any) -> bytes:
    from ai_edge_litert.tools import flatbuffer_utils as fu
    return bytes(fu.convert_object_to_bytearray(model))


def _code(model: Any, op: Any) -> int:
    c = model.operatorCodes[op.opcodeIndex]
    return int(max(c.builtinCode, c.deprecatedBuiltinCode))


def _opcode(model: Any, builtin: int, version: int) -> int:
    from ai_edge_litert import schema_py_generated as fb
    for i, c in enumerate(model.operatorCodes):
        if max(c.builtinCode, c.deprecatedBuiltinCode) == builtin:
            c.version = max(int(c.version), version)
            return i
    code = fb.OperatorCodeT()
    code.builtinCode = builtin
    code.deprecatedBuiltinCode = min(builtin, 127)
    code.version = version
    model.operatorCodes.append(code)
    return len(model.operatorCodes) - 1


def _buffer_array(model: Any, tensor: Any, dtype: Any) -> np.ndarray | None:
    buf = model.buffers[tensor.buffer]
    if buf.data is None or not len(buf.data):
        return None
    return np.frombuffer(bytes(np.asarray(buf.data, np.uint8)), dtype).reshape([int(d) for d in tensor.shape])


_NP = {0: np.float32, 1: np.float16, 9: np.int8, 3: np.uint8, 7: np.int16, 2: np.int32}


def _graph(sg: Any) -> tuple[dict[int, Any], dict[int, list[Any]], set[int]]:
    """A subgraph's index, built afresh: the op writing each tensor, the ops reading each tensor (in op
    order; an op reading a tensor twice is listed twice, so ``len`` counts the reads) and its outputs."""
    producer = {int(o): op for op in sg.operators for o in op.outputs}
    readers: dict[int, list[Any]] = {}
    for op in sg.operators:
        for i in op.inputs:
            readers.setdefault(int(i), []).append(op)
    return producer, readers, {int(o) for o in sg.outputs}


def _op_names() -> dict[int, str]:
    from ai_edge_litert import schema_py_generated as fb
    return {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_") and isinstance(v, int)}


def _drop_unused_tensors(model: Any, sg: Any) -> None:
    """Remove tensors no op, graph input/output or signature refers to (LiteRT leaves them unallocated,
    and AI Edge Quantizer's calibration reads every tensor), renumbering the references."""
    used = {int(i) for op in sg.operators for i in list(op.inputs) + list(op.outputs) if int(i) >= 0}
    used |= {int(i) for i in sg.inputs} | {int(i) for i in sg.outputs}
    for op in sg.operators:
        if op.intermediates is not None:
            used |= {int(i) for i in op.intermediates if int(i) >= 0}
    index = {old: new for new, old in enumerate(sorted(used))}
    if len(index) == len(sg.tensors):
        return
    sg.tensors = [sg.tensors[old] for old in sorted(used)]
    for op in sg.operators:
        op.inputs = [index[int(i)] if int(i) >= 0 else -1 for i in op.inputs]
        op.outputs = [index[int(i)] for i in op.outputs]
        if op.intermediates is not None:
            op.intermediates = [index[int(i)] if int(i) >= 0 else -1 for i in op.intermediates]
    sg.inputs = np.asarray([index[int(i)] for i in sg.inputs], np.int32)
    sg.outputs = np.asarray([index[int(i)] for i in sg.outputs], np.int32)
    position = model.subgraphs.index(sg)
    for sig in model.signatureDefs or []:
        if int(sig.subgraphIndex) == position:
            for tm in list(sig.inputs or []) + list(sig.outputs or []):
                tm.tensorIndex = index[int(tm.tensorIndex)]
