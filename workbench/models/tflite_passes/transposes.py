"""Passes on layout ``TRANSPOSE`` ops a converter added: pairs that cancel around a layout-free region, a
``TRANSPOSE`` before a reduction folded into its axes, and a channel shuffle taken through NCHW done on NHWC."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tflite_flatbuffer import _NP, _buffer_array, _code, _drop_unused_tensors, _graph, _op_names, _read, _write

_UNARY = {"HARD_SWISH", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LOGISTIC", "TANH", "LEAKY_RELU", "ABS",
          "NEG", "EXP", "SQRT", "RSQRT", "ELU", "GELU", "QUANTIZE", "DEQUANTIZE", "CAST", "FLOOR", "CEIL",
          "ROUND", "SQUARE", "SIN", "COS", "LOG"}
_BINARY = {"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "POW", "FLOOR_DIV"}


def cancel_transpose_pairs(data: bytes) -> tuple[bytes, int]:
    """Remove layout TRANSPOSEs around a region that does not care about layout.

    A region starts at ``TRANSPOSE(p)`` ops (entries) and ends at ``TRANSPOSE(q)`` ops with ``q`` undoing
    ``p`` (exits); inside are only element-wise ops (their other operands constants of one element, or
    4-D constants, permuted with the region), and CONCATENATION (its axis is renumbered).  onnx2tf makes
    such regions around PP-OCRv4's learnable affine blocks (``CONV -> TRANSPOSE -> HARD_SWISH -> MUL ->
    ADD -> TRANSPOSE -> CONV``).  Entries and exits are removed and the region's tensors take the
    entries' layout: the same values in the same order of operations, so every number is kept."""
    model = _read(data)
    names = _op_names()
    removed = 0
    for sg in model.subgraphs:
        while True:
            region = _find_region(model, sg, names)
            if region is None:
                break
            removed += _rewrite_region(model, sg, names, *region)
    return (_write(model), removed) if removed else (data, 0)


def _perm(model: Any, sg: Any, op: Any) -> list[int] | None:
    if len(op.inputs) < 2:
        return None
    t = sg.tensors[int(op.inputs[1])]
    v = _buffer_array(model, t, _NP.get(int(t.type), np.int32))
    return None if v is None else [int(a) for a in v.ravel()]


def _find_region(model: Any, sg: Any, names: dict[int, str]) -> tuple[Any, ...] | None:
    producer, users, graph_outputs = _graph(sg)

    def kind(op: Any) -> str:
        return names.get(_code(model, op), "?")

    def is_const(t: int) -> bool:
        buf = model.buffers[sg.tensors[t].buffer]
        return buf.data is not None and len(buf.data) > 0

    for start in sg.operators:
        if kind(start) != "TRANSPOSE":
            continue
        p = _perm(model, sg, start)
        if p is None or len(p) != 4 or p == [0, 1, 2, 3]:
            continue
        entries: list[Any] = [start]
        exits: list[Any] = []
        ops: list[Any] = []
        tensors = {int(start.outputs[0])}
        queue = [int(start.outputs[0])]
        ok = True
        while queue and ok:
            t = queue.pop()
            if t in graph_outputs:
                ok = False
                break
            for user in users.get(t, []):
                if any(user is o for o in ops) or any(user is o for o in exits):
                    continue
                k = kind(user)
                if k == "TRANSPOSE":
                    q = _perm(model, sg, user)
                    if q is None or len(q) != 4 or [p[i] for i in q] != [0, 1, 2, 3] or int(user.inputs[0]) != t:
                        ok = False
                        break
                    exits.append(user)
                    continue
                if k not in _UNARY and k not in _BINARY and k != "CONCATENATION":
                    ok = False
                    break
                if k in _UNARY and len([i for i in user.inputs if int(i) >= 0]) != 1:
                    ok = False
                    break
                for i in (int(v) for v in user.inputs if int(v) >= 0):
                    if i in tensors:
                        continue
                    src = producer.get(i)
                    shape = sg.tensors[i].shape
                    size = int(np.prod(shape)) if shape is not None and len(shape) else 1
                    if is_const(i) and (size == 1 or (shape is not None and len(shape) == 4)):
                        continue
                    if src is not None and kind(src) == "TRANSPOSE" and _perm(model, sg, src) == p \
                            and not any(src is e for e in entries):
                        entries.append(src)          # another entry in the same layout
                        tensors.add(i)
                        queue.append(i)
                        continue
                    ok = False
                    break
                if not ok:
                    break
                ops.append(user)
                for o in user.outputs:
                    tensors.add(int(o))
                    queue.append(int(o))
        if not ok or not exits:
            continue
        # every region tensor is read only inside the region or by exits
        inside = {id(o) for o in ops} | {id(o) for o in exits}
        if any(id(u) not in inside for t in tensors for u in users.get(t, [])):
            continue
        if any(int(e.outputs[0]) in graph_outputs for e in exits):
            continue
        return p, entries, exits, ops, tensors
    return None


def _rewrite_region(model: Any, sg: Any, names: dict[int, str], p: list[int], entries: list[Any],
                    exits: list[Any], ops: list[Any], tensors: set[int]) -> int:
    from ai_edge_litert import schema_py_generated as fb
    inv = [p.index(i) for i in range(4)]            # NCHW-like region layout -> the entries' input layout
    rewire = {int(e.outputs[0]): int(e.inputs[0]) for e in entries}
    for t in tensors:
        if t in rewire:
            continue
        tensor = sg.tensors[t]
        if tensor.shape is not None and len(tensor.shape) == 4:
            tensor.shape = np.asarray([int(tensor.shape[i]) for i in inv], np.int32)
        if tensor.shapeSignature is not None and len(tensor.shapeSignature) == 4:
            tensor.shapeSignature = np.asarray([int(tensor.shapeSignature[i]) for i in inv], np.int32)
    done_consts: set[int] = set()
    for op in ops:
        k = names.get(_code(model, op), "?")
        if k == "CONCATENATION":
            op.builtinOptions.axis = p[int(op.builtinOptions.axis) % 4]
        new_inputs = []
        for i in (int(v) for v in op.inputs):
            i = rewire.get(i, i)
            tt = sg.tensors[i] if i >= 0 else None
            if (tt is not None and i not in tensors and i not in rewire.values() and tt.shape is not None
                    and len(tt.shape) == 4 and int(np.prod(tt.shape)) > 1 and i not in done_consts):
                dtype = _NP.get(int(tt.type))
                values = _buffer_array(model, tt, dtype) if dtype is not None else None
                if values is not None:       # a 4-D constant operand: permuted like the region
                    moved = np.ascontiguousarray(values.transpose(inv))
                    buf = fb.BufferT()
                    buf.data = np.frombuffer(moved.tobytes(), np.uint8)
                    model.buffers.append(buf)
                    tt.buffer = len(model.buffers) - 1
                    tt.shape = np.asarray(moved.shape, np.int32)
                    done_consts.add(i)
            new_inputs.append(i)
        op.inputs = new_inputs
    exit_map = {int(x.outputs[0]): int(x.inputs[0]) for x in exits}
    drop = {id(o) for o in entries} | {id(o) for o in exits}
    sg.operators = [op for op in sg.operators if id(op) not in drop]
    for op in sg.operators:
        op.inputs = [exit_map.get(int(i), int(i)) for i in op.inputs]
    return len(entries) + len(exits)


_REDUCE = ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD")


def fold_transpose_into_reduce(data: bytes) -> tuple[bytes, int]:
    """``TRANSPOSE(p) -> MEAN(axes)`` (or SUM / REDUCE_MAX / REDUCE_MIN / REDUCE_PROD, ``keep_dims`` off)
    becomes ``MEAN(p[axes])`` on the transpose's input when the kept axes stay in the same order
    (onnx2tf writes a PyTorch ``x.mean(dim=(2, 3))`` on NHWC data as TRANSPOSE to NCHW then MEAN over
    (2, 3): it is MEAN over (1, 2)).  The same elements are reduced; the TRANSPOSE is removed when
    nothing else reads it."""
    from ai_edge_litert import schema_py_generated as fb
    model = _read(data)
    names = _op_names()
    removed = 0
    for sg in model.subgraphs:
        producer, users, _ = _graph(sg)
        drop: list[Any] = []
        for op in sg.operators:
            if names.get(_code(model, op)) not in _REDUCE or len(op.inputs) < 2:
                continue
            if op.builtinOptions is not None and getattr(op.builtinOptions, "keepDims", False):
                continue
            first = producer.get(int(op.inputs[0]))
            if first is None or names.get(_code(model, first)) != "TRANSPOSE":
                continue
            p = _perm(model, sg, first)
            axes_t = sg.tensors[int(op.inputs[1])]
            axes = _buffer_array(model, axes_t, _NP.get(int(axes_t.type), np.int32))
            if p is None or axes is None:
                continue
            rank = len(p)
            reduced = sorted({int(a) % rank for a in axes.ravel()})
            kept = [p[i] for i in range(rank) if i not in reduced]
            if kept != sorted(kept):
                continue
            new_axes = np.asarray(sorted(p[a] for a in reduced), np.int32)
            buf = fb.BufferT()
            buf.data = np.frombuffer(new_axes.tobytes(), np.uint8)
            model.buffers.append(buf)
            t = fb.TensorT()
            t.name = (axes_t.name or b"axes") + b"_nhwc"
            t.type, t.buffer = fb.TensorType.INT32, len(model.buffers) - 1
            t.shape = np.asarray([len(new_axes)], np.int32)
            sg.tensors.append(t)
            mid = int(op.inputs[0])
            op.inputs = [int(first.inputs[0]), len(sg.tensors) - 1, *[int(v) for v in op.inputs[2:]]]
            users[mid] = [u for u in users.get(mid, []) if u is not op]
            if not users[mid] and mid not in {int(o) for o in sg.outputs}:
                drop.append(first)
                removed += 1
        if drop:
            sg.operators = [op for op in sg.operators if all(op is not d for d in drop)]
    return (_write(model), removed) if removed else (data, 0)


def nhwc_channel_shuffle(data: bytes) -> tuple[bytes, int]:
    """onnx2tf's channel shuffle ``TRANSPOSE(0,3,1,2) -> RESHAPE [n,g,c/g,h,w] -> TRANSPOSE(0,2,1,3,4) ->
    RESHAPE [n,c,h,w] -> TRANSPOSE(0,2,3,1)`` (a PyTorch/ShuffleNet shuffle taken through NCHW) becomes the
    same shuffle on NHWC data: ``RESHAPE [n,h,w,g,c/g] -> TRANSPOSE(0,1,2,4,3) -> RESHAPE [n,h,w,c]``.
    The same element lands in the same place; two TRANSPOSE ops fewer per shuffle."""
    from ai_edge_litert import schema_py_generated as fb
    model = _read(data)
    names = _op_names()
    done = 0
    for sg in model.subgraphs:
        _, users, outputs = _graph(sg)

        def only(t: int, users: dict[int, list[Any]] = users, outputs: set[int] = outputs) -> Any:
            u = users.get(t, [])
            return u[0] if len(u) == 1 and t not in outputs else None

        def kind(op: Any) -> str:
            return names.get(_code(model, op), "?") if op is not None else ""
        drop: list[Any] = []
        for t1 in list(sg.operators):
            if kind(t1) != "TRANSPOSE" or _perm(model, sg, t1) != [0, 3, 1, 2] or any(t1 is d for d in drop):
                continue
            r1: Any = only(int(t1.outputs[0]))
            t2: Any = only(int(r1.outputs[0])) if kind(r1) == "RESHAPE" else None
            r2: Any = only(int(t2.outputs[0])) if kind(t2) == "TRANSPOSE" else None
            t3: Any = only(int(r2.outputs[0])) if kind(r2) == "RESHAPE" else None
            if kind(t3) != "TRANSPOSE" or _perm(model, sg, t2) != [0, 2, 1, 3, 4] \
                    or _perm(model, sg, t3) != [0, 2, 3, 1]:
                continue
            assert r1 is not None and t2 is not None and r2 is not None and t3 is not None
            x = sg.tensors[int(t1.inputs[0])]
            s5 = [int(v) for v in sg.tensors[int(r1.outputs[0])].shape]
            if len(x.shape) != 4 or len(s5) != 5:
                continue
            n, h, w, c = (int(v) for v in x.shape)
            if s5 != [n, s5[1], c // max(s5[1], 1), h, w] or s5[1] * s5[2] != c:
                continue
            g, cg = s5[1], s5[2]

            def shape_const(values: list[int], sg: Any = sg) -> int:
                arr = np.asarray(values, np.int32)
                buf = fb.BufferT()
                buf.data = np.frombuffer(arr.tobytes(), np.uint8)
                model.buffers.append(buf)
                t = fb.TensorT()
                t.name, t.type, t.buffer = b"shuffle_shape", fb.TensorType.INT32, len(model.buffers) - 1
                t.shape = np.asarray([len(values)], np.int32)
                sg.tensors.append(t)
                return len(sg.tensors) - 1

            def set_reshape(op: Any, src: int, shape: list[int], sg: Any = sg) -> None:
                op.inputs = [src, shape_const(shape)]
                if op.builtinOptions is not None and hasattr(op.builtinOptions, "newShape"):
                    op.builtinOptions.newShape = list(shape)
                out = sg.tensors[int(op.outputs[0])]
                out.shape = np.asarray(shape, np.int32)
                out.shapeSignature = None
            set_reshape(r1, int(t1.inputs[0]), [n, h, w, g, cg])
            t2.inputs = [int(t2.inputs[0]), shape_const([0, 1, 2, 4, 3])]
            mid = sg.tensors[int(t2.outputs[0])]
            mid.shape, mid.shapeSignature = np.asarray([n, h, w, cg, g], np.int32), None
            set_reshape(r2, int(t2.outputs[0]), [n, h, w, c])
            final = int(t3.outputs[0])
            for op in users.get(final, []):
                op.inputs = [int(r2.outputs[0]) if int(i) == final else int(i) for i in op.inputs]
            if final in outputs:
                continue
            drop += [t1, t3]
            done += 1
        if drop:
            sg.operators = [op for op in sg.operators if all(op is not d for d in drop)]
            _drop_unused_tensors(model, sg)
    return (_write(model), 2 * done) if done else (data, 0)
