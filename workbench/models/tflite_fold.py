"""Passes that fold a data-moving op into the compute op beside it, on a quantized ``.tflite``.

Two ops a conversion leaves that Neutron-S (i.MX 95) runs on its CPU (``neutron.pad.channels``,
``neutron.op_list``), although the arithmetic they stand for fits in the op next to them:

* :func:`fold_pad_into_conv`: ``PAD`` (height/width only) -> ``CONV_2D``/``DEPTHWISE_CONV_2D`` with
  ``VALID`` padding becomes the convolution alone with ``SAME`` padding.  PyTorch and Paddle pad a
  3x3 stride-2 convolution 1 on both sides; on an even size TFLite's ``SAME`` pads 0 before and 1
  after, so the converter writes the padding as a ``PAD``.  With the kernel grown by zero taps (3x3 ->
  4x4 at stride 2) ``SAME`` pads 1 before and 1 after and every output reads the same inputs with the
  same weights; the extra taps are zero weights (the weight zero point), the padded inputs are the
  input zero point in both forms (real 0), so the integer sums are the same: outputs identical bit
  for bit.  The cost is the zero taps' multiply-adds (16/9 of that layer's MACs for 3x3 -> 4x4), which
  the pass reports.  When ``SAME`` already pads as the ``PAD`` does, only the padding mode changes;
* :func:`fold_requantize`: a requantizing ``QUANTIZE`` (int8 -> int8, one scale each side) whose
  input comes from a ``CONV_2D``/``DEPTHWISE_CONV_2D``/``FULLY_CONNECTED``/``ADD``/``SUB``/``MUL``
  through ops that keep the scale (``RESHAPE``, ``SQUEEZE``, ``EXPAND_DIMS``), each read only there:
  the producer writes the ``QUANTIZE``'s scale and zero point directly.  AI Edge Quantizer does this
  itself when the producer is the ``QUANTIZE``'s direct input (``_eliminate_requantization_for_
  nonconstrained_provider``) but not through a ``RESHAPE``; BlazeFace's two output ``CONCATENATION``
  branches are such chains.  Not bit-exact: one rounding instead of two (``round(v / s2)`` instead
  of ``round(round(v / s1) * s1 / s2)``), so a value can move by one step of the output scale, towards
  the exact value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .tflite_flatbuffer import _NP, _buffer_array, _code, _drop_unused_tensors, _graph, _op_names, _read, _write

_SAME, _VALID = 0, 1
_CONVS = ("CONV_2D", "DEPTHWISE_CONV_2D")


def _same_padding(size: int, out: int, stride: int, kernel: int) -> tuple[int, int]:
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def _grown_kernel(size: int, out: int, stride: int, kernel: int, before: int) -> tuple[int, int] | None:
    """(zero taps in front, zero taps behind) that make ``SAME`` read what ``before`` rows of padding and a
    ``VALID`` ``kernel`` read, smallest kernel first; None when no growth up to ``2 * stride`` does."""
    if -(-size // stride) != out:                      # SAME's output size is ceil(size / stride)
        return None
    for extra in range(2 * stride + 1):
        for front in range(extra + 1):
            if _same_padding(size, out, stride, kernel + extra)[0] == before + front:
                return front, extra - front
    return None


def _pad_amounts(model: Any, sg: Any, op: Any) -> list[tuple[int, int]] | None:
    if len(op.inputs) < 2:
        return None
    t = sg.tensors[int(op.inputs[1])]
    dtype = {2: np.int32, 4: np.int64}.get(int(t.type))
    arr = _buffer_array(model, t, dtype) if dtype is not None else None
    if arr is None or arr.shape != (4, 2):
        return None
    return [(int(a), int(b)) for a, b in arr]


def _same_quant(a: Any, b: Any) -> bool:
    qa, qb = a.quantization, b.quantization
    if qa is None or qb is None or qa.scale is None or qb.scale is None:
        return (qa is None or qa.scale is None) and (qb is None or qb.scale is None)
    return list(qa.scale) == list(qb.scale) and list(qa.zeroPoint) == list(qb.zeroPoint)


def _grow_weights(model: Any, sg: Any, conv: Any, grow: tuple[tuple[int, int], ...]) -> bool:
    """Give ``conv`` a copy of its filter with zero taps around it (``grow`` = ((front, behind) for H, W))."""
    from ai_edge_litert import schema_py_generated as fb
    w = sg.tensors[int(conv.inputs[1])]
    dtype = _NP.get(int(w.type))
    arr = _buffer_array(model, w, dtype) if dtype is not None else None
    if arr is None or arr.ndim != 4:
        return False
    q = w.quantization
    zps = np.asarray(q.zeroPoint if q is not None and q.zeroPoint is not None and len(q.zeroPoint) else [0])
    axis = int(q.quantizedDimension) if q is not None and len(zps) > 1 else None
    (hf, hb), (wf, wb) = grow
    shape = [arr.shape[0], arr.shape[1] + hf + hb, arr.shape[2] + wf + wb, arr.shape[3]]
    zero = np.zeros(shape, arr.dtype)
    if axis is None:
        zero[...] = zps[0]
    else:
        index = [1, 1, 1, 1]
        index[axis] = len(zps)
        zero[...] = zps.astype(arr.dtype).reshape(index)
    zero[:, hf:hf + arr.shape[1], wf:wf + arr.shape[2], :] = arr
    buf = fb.BufferT()
    buf.data = np.frombuffer(np.ascontiguousarray(zero).tobytes(), np.uint8)
    model.buffers.append(buf)
    import copy
    grown = copy.deepcopy(w)
    grown.shape = np.asarray(shape, np.int32)
    grown.shapeSignature = None
    grown.buffer = len(model.buffers) - 1
    sg.tensors.append(grown)
    conv.inputs = [int(conv.inputs[0]), len(sg.tensors) - 1, *[int(i) for i in conv.inputs[2:]]]
    return True


def _macs(sg: Any, conv: Any, depthwise: bool) -> int:
    out = [int(d) for d in sg.tensors[int(conv.outputs[0])].shape]
    w = [int(d) for d in sg.tensors[int(conv.inputs[1])].shape]
    return out[1] * out[2] * out[3] * w[1] * w[2] * (1 if depthwise else w[3])


def _clear_unused_buffers(model: Any) -> None:
    """Empty the buffers no tensor refers to any more (their bytes would stay in the file)."""
    used = {int(t.buffer) for sg in model.subgraphs for t in sg.tensors}
    for i, buf in enumerate(model.buffers):
        if i and i not in used and buf.data is not None and len(buf.data):
            buf.data = None


def fold_pad_into_conv(data: bytes) -> tuple[bytes, list[dict[str, Any]]]:
    """``PAD`` (H/W only) -> ``VALID`` ``CONV_2D``/``DEPTHWISE_CONV_2D`` read only by it becomes the
    convolution with ``SAME`` padding (its kernel grown by zero taps where ``SAME`` alone pads otherwise).
    Returns the new bytes and one record per fold (kernel before/after, MACs before/after)."""
    model = _read(data)
    names = _op_names()
    done: list[dict[str, Any]] = []
    for sg in model.subgraphs:
        _, users, outputs = _graph(sg)
        drop: list[Any] = []
        for pad in sg.operators:
            if names.get(_code(model, pad)) != "PAD" or len(pad.outputs) != 1:
                continue
            y = int(pad.outputs[0])
            readers = users.get(y, [])
            if len(readers) != 1 or y in outputs:
                continue
            conv = readers[0]
            kind = names.get(_code(model, conv))
            opts = conv.builtinOptions
            if kind not in _CONVS or int(conv.inputs[0]) != y or len(conv.inputs) < 2 or opts is None \
                    or int(opts.padding) != _VALID or int(opts.dilationHFactor) != 1 or int(opts.dilationWFactor) != 1:
                continue
            x_t, y_t = sg.tensors[int(pad.inputs[0])], sg.tensors[y]
            amounts = _pad_amounts(model, sg, pad)
            if amounts is None or len(x_t.shape) != 4 or amounts[0] != (0, 0) or amounts[3] != (0, 0) \
                    or not _same_quant(x_t, y_t) or min(min(a) for a in amounts) < 0:
                continue
            w_t = sg.tensors[int(conv.inputs[1])]
            out_t = sg.tensors[int(conv.outputs[0])]
            if len(w_t.shape) != 4 or len(out_t.shape) != 4 or model.buffers[w_t.buffer].data is None:
                continue
            grow = []
            for axis, stride in ((1, int(opts.strideH)), (2, int(opts.strideW))):
                k = int(w_t.shape[axis])
                g = _grown_kernel(int(x_t.shape[axis]), int(out_t.shape[axis]), stride, k, amounts[axis][0])
                if g is None:
                    break
                grow.append(g)
            if len(grow) != 2:
                continue
            kernel = (int(w_t.shape[1]), int(w_t.shape[2]))
            macs = _macs(sg, conv, kind == "DEPTHWISE_CONV_2D")
            if any(grow[0] + grow[1]) and not _grow_weights(model, sg, conv, (grow[0], grow[1])):
                continue
            w2 = sg.tensors[int(conv.inputs[1])]
            opts.padding = _SAME
            conv.inputs = [int(pad.inputs[0]), *[int(i) for i in conv.inputs[1:]]]
            drop.append(pad)
            done.append({"op": kind, "kernel": kernel, "folded_kernel": (int(w2.shape[1]), int(w2.shape[2])),
                         "macs": macs, "folded_macs": _macs(sg, conv, kind == "DEPTHWISE_CONV_2D")})
        if drop:
            sg.operators = [op for op in sg.operators if all(op is not d for d in drop)]
            _drop_unused_tensors(model, sg)
    if not done:
        return data, []
    _clear_unused_buffers(model)
    return _write(model), done


def model_macs(data: bytes) -> int:
    """Multiply-adds of a model's CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED ops (per inference)."""
    model = _read(data)
    names = _op_names()
    total = 0
    for sg in model.subgraphs:
        for op in sg.operators:
            kind = names.get(_code(model, op))
            if kind in _CONVS and len(op.inputs) > 1 and len(sg.tensors[int(op.inputs[1])].shape) == 4:
                total += _macs(sg, op, kind == "DEPTHWISE_CONV_2D")
            elif kind == "FULLY_CONNECTED" and len(op.inputs) > 1:
                w = [int(d) for d in sg.tensors[int(op.inputs[1])].shape]
                rows = int(np.prod([int(d) for d in sg.tensors[int(op.outputs[0])].shape[:-1]] or [1]))
                total += rows * (w[0] * w[1] if len(w) == 2 else 0)
    return total


_PASS_THROUGH = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
_FREE_OUTPUT = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL")


def _quant(t: Any) -> tuple[list[float], list[int]] | None:
    q = t.quantization
    if q is None or q.scale is None or len(q.scale) != 1 or q.zeroPoint is None or len(q.zeroPoint) != 1:
        return None
    return [float(q.scale[0])], [int(q.zeroPoint[0])]


def fold_requantize(data: bytes) -> tuple[bytes, int]:
    """A requantizing int8 -> int8 ``QUANTIZE`` after ``_FREE_OUTPUT`` op (through ``_PASS_THROUGH`` ops,
    each tensor read once) folded into that op's output scale; returns the new bytes and the count."""
    from ai_edge_litert import schema_py_generated as fb
    model = _read(data)
    names = _op_names()
    folded = 0
    for sg in model.subgraphs:
        producer, readers, outputs = _graph(sg)
        drop: list[Any] = []
        for q in sg.operators:
            if names.get(_code(model, q)) != "QUANTIZE" or len(q.inputs) != 1 or len(q.outputs) != 1:
                continue
            src, dst = sg.tensors[int(q.inputs[0])], sg.tensors[int(q.outputs[0])]
            if int(src.type) != fb.TensorType.INT8 or int(dst.type) != fb.TensorType.INT8:
                continue
            new = _quant(dst)
            if new is None or _quant(src) is None:
                continue
            chain: list[int] = []           # tensors from the QUANTIZE's input back to the producer's output
            t = int(q.inputs[0])
            ok = False
            while True:
                op = producer.get(t)
                if op is None or len(readers.get(t, ())) != 1 or t in outputs or _quant(sg.tensors[t]) is None:
                    break
                chain.append(t)
                kind = names.get(_code(model, op))
                if kind in _FREE_OUTPUT:
                    ok = True
                    break
                if kind not in _PASS_THROUGH or _quant(sg.tensors[int(op.inputs[0])]) != _quant(sg.tensors[t]):
                    break
                t = int(op.inputs[0])
            if not ok:
                continue
            for index in chain:
                tq = sg.tensors[index].quantization
                tq.scale, tq.zeroPoint = np.asarray(new[0], np.float32), np.asarray(new[1], np.int64)
            last = producer[int(q.inputs[0])]
            last.outputs = [int(q.outputs[0])]          # the chain's last op writes the QUANTIZE's tensor
            drop.append(q)
            folded += 1
        if drop:
            sg.operators = [op for op in sg.operators if all(op is not d for d in drop)]
            _drop_unused_tensors(model, sg)
    return (_write(model), folded) if folded else (data, 0)


def fold_lines(data: bytes) -> tuple[bytes, list[str]]:
    """:func:`fold_pad_into_conv` then :func:`fold_requantize`; one line per pass that changed something
    (the PAD fold's with the multiply-adds its zero taps cost)."""
    lines = []
    before = model_macs(data)
    data, folds = fold_pad_into_conv(data)
    if folds:
        grown = [f for f in folds if f["folded_kernel"] != f["kernel"]]
        extra = sum(f["folded_macs"] - f["macs"] for f in folds)
        kernels = sorted({f"{f['kernel'][0]}x{f['kernel'][1]} -> {f['folded_kernel'][0]}x{f['folded_kernel'][1]}"
                          for f in grown})
        cost = (f"; {len(grown)} kernel(s) grown by zero taps ({', '.join(kernels)}): +{extra} MACs, "
                f"{100 * extra / before:+.1f}% of the model's" if grown and before else "")
        lines.append(f"PAD folded into the convolution's SAME padding: {len(folds)} op(s){cost}")
    data, n = fold_requantize(data)
    if n:
        lines.append(f"requantizing QUANTIZE folded into its producer's output scale: {n} op(s)")
    return data, lines
