"""Exact structural passes on a ``.tflite`` flatbuffer: undo what a converter added, never change a number.

onnx2tf writes an ONNX depthwise convolution (``Conv`` with ``group == channels``) as a grouped
``CONV_2D`` whenever its strides differ along H and W (TensorFlow's CPU depthwise kernel refuses
unequal strides; TFLite's does not), and layout changes around some ops as ``TRANSPOSE`` pairs.
The NPUs run ``DEPTHWISE_CONV_2D`` and few run grouped ``CONV_2D``; a ``TRANSPOSE`` is a CPU island
on most targets.  These passes rewrite the (FP32 or quantized) flatbuffer:

* :func:`grouped_conv_to_depthwise`: a ``CONV_2D`` whose filter is ``[C, kh, kw, 1]`` on a C-channel
  input is a depthwise convolution with multiplier 1: the filter becomes ``[1, kh, kw, C]`` (per-channel
  scales move from dimension 0 to 3), strides/padding/dilation/activation are kept.  Integer arithmetic
  is the same sum over the same products, so the outputs are identical;
* :func:`cancel_transpose_pairs`: ``TRANSPOSE(p)`` feeding only ``TRANSPOSE(q)`` with ``q`` after ``p``
  the identity (and the same quantization on both ends) is removed; the consumers read the first one's
  input.

:func:`apply_passes` runs both and returns what it did (recorded in the manifest).
"""

from __future__ import annotations

from typing import Any

import numpy as np

PASSES_VERSION = 4     # bump when a pass (or tflite_fold) changes (enters the quantize cache key)


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


def grouped_conv_to_depthwise(data: bytes) -> tuple[bytes, int]:
    """``CONV_2D`` with a ``[C, kh, kw, 1]`` filter on a C-channel input -> ``DEPTHWISE_CONV_2D``."""
    from ai_edge_litert import schema_py_generated as fb
    model = _read(data)
    changed = 0
    for sg in model.subgraphs:
        users: dict[int, int] = {}
        for op in sg.operators:
            for i in op.inputs:
                users[int(i)] = users.get(int(i), 0) + 1
        for op in sg.operators:
            if _code(model, op) != fb.BuiltinOperator.CONV_2D or len(op.inputs) < 2:
                continue
            x, w = sg.tensors[int(op.inputs[0])], sg.tensors[int(op.inputs[1])]
            if x.shape is None or w.shape is None or len(x.shape) != 4 or len(w.shape) != 4:
                continue
            c = int(x.shape[3])
            if c <= 1 or int(w.shape[3]) != 1 or int(w.shape[0]) != c or users.get(int(op.inputs[1]), 0) != 1:
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


_UNARY = {"HARD_SWISH", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LOGISTIC", "TANH", "LEAKY_RELU", "ABS",
          "NEG", "EXP", "SQRT", "RSQRT", "ELU", "GELU", "QUANTIZE", "DEQUANTIZE", "CAST", "FLOOR", "CEIL",
          "ROUND", "SQUARE", "SIN", "COS", "LOG"}
_BINARY = {"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "POW", "FLOOR_DIV"}


def _op_names() -> dict[int, str]:
    from ai_edge_litert import schema_py_generated as fb
    return {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_") and isinstance(v, int)}


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
    graph_outputs = {int(i) for i in sg.outputs}
    producer = {int(o): op for op in sg.operators for o in op.outputs}
    users: dict[int, list[Any]] = {}
    for op in sg.operators:
        for i in op.inputs:
            users.setdefault(int(i), []).append(op)

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
        producer = {int(o): op for op in sg.operators for o in op.outputs}
        users: dict[int, int] = {}
        for op in sg.operators:
            for i in op.inputs:
                users[int(i)] = users.get(int(i), 0) + 1
        outputs = {int(o) for o in sg.outputs}
        rename: dict[int, int] = {}
        drop: list[Any] = []
        for op in sg.operators:
            act = _ACTIVATIONS.get(names.get(_code(model, op), ""))
            if act is None or len(op.inputs) != 1:
                continue
            src = int(op.inputs[0])
            prod = producer.get(src)
            if prod is None or names.get(_code(model, prod)) not in _FUSABLE or users.get(src, 0) != 1:
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
        producer = {int(o): op for op in sg.operators for o in op.outputs}
        users: dict[int, list[Any]] = {}
        for op in sg.operators:
            for i in op.inputs:
                users.setdefault(int(i), []).append(op)
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
        users: dict[int, list[Any]] = {}
        for op in sg.operators:
            for i in op.inputs:
                users.setdefault(int(i), []).append(op)
        outputs = {int(o) for o in sg.outputs}

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


def apply_passes(data: bytes) -> tuple[bytes, list[str]]:
    """Both passes; returns the new bytes and one line per pass that changed something."""
    done = []
    data, n = grouped_conv_to_depthwise(data)
    if n:
        done.append(f"grouped CONV_2D (group == channels) -> DEPTHWISE_CONV_2D: {n} op(s)")
    data, n = cancel_transpose_pairs(data)
    if n:
        done.append(f"layout TRANSPOSEs that cancel removed: {n} op(s)")
    data, n = fold_transpose_into_reduce(data)
    if n:
        done.append(f"TRANSPOSE before a reduction folded into its axes: {n} op(s)")
    data, n = nhwc_channel_shuffle(data)
    if n:
        done.append(f"channel shuffle taken through NCHW done on NHWC: {n} TRANSPOSE op(s) fewer")
    return data, done
