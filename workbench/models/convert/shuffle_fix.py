"""A channel shuffle on a cube-shaped tensor, which onnx2tf leaves in NCHW: found, and converted again right.

PyTorch/ShuffleNet write a channel shuffle as ``Reshape [n,g,c/g,h,w] -> Transpose(0,2,1,3,4) -> Reshape
[n,c,h,w]``.  onnx2tf takes it through NCHW (``TRANSPOSE(0,3,1,2)`` ... ``TRANSPOSE(0,2,3,1)`` back), but when
every axis but the batch is equal (``[1, 32, 32, 32]``) it cannot tell NCHW from NHWC and leaves the result
in NCHW, without the transpose back: nothing fails, the next convolution reads channels as height
(PINTO0309/onnx2tf#478: "transposition errors when all axis values except batch size are the same").
Measured on ``gnet`` of ``benchmarks/bench_convert.py``: the FP32 ``.tflite`` against ONNX Runtime at
5.5e-4 of 0.27 (51 dB SQNR), within the tolerance for "float reassociation" the agreement check then had.

:func:`cubic_shuffles` finds such shuffles in the ONNX file, :func:`nchw_left` counts the ones the
converted ``.tflite`` left in NCHW; when every one of them was, onnx2tf runs again with a parameter
replacement file (its documented ``-prf`` option) that adds ``post_process_transpose_perm [0, 2, 3, 1]``
to the shuffle's last ``Reshape``: the result agrees with ONNX Runtime to 6e-8 and the structural pass
``nhwc_channel_shuffle`` then does the shuffle on NHWC with one ``TRANSPOSE``, as for the other shuffles.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPLACEMENT_FILE = "cubic_shuffle_replace.json"
SHUFFLE_FIX_VERSION = 1     # enters the conversion cache key of a model with such a shuffle


def cubic_shuffles(onnx_path: Path) -> list[tuple[str, str]]:
    """(node name, output name) of each shuffle's last ``Reshape`` whose 4-D output has C == H == W."""
    import onnx
    from onnx import shape_inference
    try:
        model = shape_inference.infer_shapes(onnx.load(str(onnx_path)))
    except Exception:  # noqa: BLE001 - a graph shape inference cannot read: nothing to fix here
        return []
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output)}
    producer = {o: n for n in model.graph.node for o in n.output}
    found = []
    for node in model.graph.node:
        if node.op_type != "Reshape" or not node.output:
            continue
        tr = producer.get(node.input[0])
        if tr is None or tr.op_type != "Transpose":
            continue
        perm = next((list(a.ints) for a in tr.attribute if a.name == "perm"), None)
        first = producer.get(tr.input[0])
        out = shapes.get(node.output[0], [])
        if perm != [0, 2, 1, 3, 4] or first is None or first.op_type != "Reshape" or len(out) != 4 \
                or not (out[1] == out[2] == out[3] > 1):
            continue
        found.append((node.name, node.output[0]))
    return found


def nchw_left(tflite_data: bytes) -> int:
    """How many ``TRANSPOSE(0,3,1,2) -> RESHAPE 5-D -> TRANSPOSE(0,2,1,3,4) -> RESHAPE 4-D`` on a cube-shaped
    tensor end without a ``TRANSPOSE(0,2,3,1)`` reading the result (it is then read as NHWC)."""
    from ..tflite_flatbuffer import _code, _op_names, _read
    from ..tflite_passes.transposes import _perm
    model = _read(tflite_data)
    names = _op_names()
    left = 0
    for sg in model.subgraphs:
        users: dict[int, list[Any]] = {}
        for op in sg.operators:
            for i in op.inputs:
                users.setdefault(int(i), []).append(op)

        def kind(op: Any) -> str:
            return names.get(_code(model, op), "?") if op is not None else ""

        def only(t: int, users: dict[int, list[Any]] = users) -> Any:
            u = users.get(t, [])
            return u[0] if len(u) == 1 else None
        for t1 in sg.operators:
            if kind(t1) != "TRANSPOSE" or _perm(model, sg, t1) != [0, 3, 1, 2]:
                continue
            x = [int(d) for d in sg.tensors[int(t1.inputs[0])].shape]
            if len(x) != 4 or not x[1] == x[2] == x[3]:
                continue
            r1: Any = only(int(t1.outputs[0]))
            t2: Any = only(int(r1.outputs[0])) if kind(r1) == "RESHAPE" else None
            r2: Any = only(int(t2.outputs[0])) if kind(t2) == "TRANSPOSE" and _perm(model, sg, t2) == [0, 2, 1, 3, 4] \
                else None
            if kind(r2) != "RESHAPE" or len(sg.tensors[int(r1.outputs[0])].shape) != 5:
                continue
            readers = users.get(int(r2.outputs[0]), [])
            if not any(kind(op) == "TRANSPOSE" and _perm(model, sg, op) == [0, 2, 3, 1] for op in readers):
                left += 1
    return left


def replacement_file(shuffles: list[tuple[str, str]], folder: Path) -> Path:
    """onnx2tf's parameter replacement file: a transpose to NHWC after each shuffle's last ``Reshape``."""
    path = folder / REPLACEMENT_FILE
    path.write_text(json.dumps({"format_version": 1, "operations": [
        {"op_name": name, "param_target": "outputs", "param_name": output, "post_process_transpose_perm": [0, 2, 3, 1]}
        for name, output in shuffles]}, indent=1), encoding="utf-8")
    return path
