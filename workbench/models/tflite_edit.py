"""Edit a .tflite file as data: make intermediate tensors model outputs.

The board bisection (``workbench bisect``) compares chosen intermediate tensors of an
INT8 model on the host and on a board.  A runtime only hands out a model's outputs
(a delegate keeps everything inside its partition to itself), so the workbench
rewrites the flatbuffer: the chosen tensors are appended to the main subgraph's
output list, and nothing else changes (same operators, same weights, same
quantization).  It is an edit of the file the user has, never a re-conversion.

The schema is the one that ships in ``ai_edge_litert`` (its generated object API);
``flatbuffers`` packs the edited model.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ModelError


def expose_tensors(content: bytes, tensors: Iterable[int], *, source: str = "model") -> bytes:
    """``content`` with ``tensors`` (indices of the main subgraph) appended to its outputs.

    The model's own outputs stay first and in their order; a tensor that already is an
    output is not added twice.  Refused, naming the tensor: an index out of range, a
    constant (weights are not computed, so there is nothing to compare), a model input.
    """
    import flatbuffers
    import numpy as np
    from ai_edge_litert import schema_py_generated as schema

    try:
        model = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
    except Exception as exc:  # the generated reader raises struct/index errors on damaged files
        raise ModelError(f"{source}: not a readable .tflite flatbuffer ({exc}). Next: pass the INT8 "
                         ".tflite file the workbench wrote.") from None
    if not model.subgraphs:
        raise ModelError(f"{source}: the .tflite file has no subgraph. Next: pass a real model.")
    graph = model.subgraphs[0]
    n = len(graph.tensors or ())
    inputs = {int(i) for i in (graph.inputs if graph.inputs is not None else ())}
    outputs = [int(i) for i in (graph.outputs if graph.outputs is not None else ())]
    for index in tensors:
        index = int(index)
        if not 0 <= index < n:
            raise ModelError(f"{source}: tensor index {index} is out of range (the main subgraph has {n} "
                             "tensors). Next: pick a tensor from `workbench bisect --list`.")
        tensor = graph.tensors[index]
        name = tensor.name.decode() if isinstance(tensor.name, bytes) else str(tensor.name)
        buffer = model.buffers[tensor.buffer] if model.buffers and tensor.buffer < len(model.buffers) else None
        if buffer is not None and buffer.data is not None and len(buffer.data):
            raise ModelError(f"{source}: tensor {index} ({name!r}) is a constant (weights or a shape): "
                             "it is not computed, so a board cannot disagree on it. Next: pick an "
                             "operator's output.")
        if index in inputs:
            raise ModelError(f"{source}: tensor {index} ({name!r}) is a model input; the host sends it. "
                             "Next: pick an operator's output.")
        if index not in outputs:
            outputs.append(index)
    graph.outputs = np.asarray(outputs, dtype=np.int32)
    builder = flatbuffers.Builder(len(content) + 4096)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
