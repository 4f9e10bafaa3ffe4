"""``+cle``/``+bc`` on an ONNX model: Conv/Gemm initializers equalised, biases corrected with the mean
inputs ONNX Runtime measures on the calibration samples."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np

from .numeric import CLE_ITERATIONS, CLE_TOLERANCE, _ratio, channel_range, equalize_pair, fake_quant_weights
from .report import EqualizedPair

_ONNX_PASS = ("Relu", "MaxPool", "AveragePool", "GlobalAveragePool", "Identity", "Resize", "Flatten",
              "Squeeze", "Reshape", "Pad", "Transpose")


def _onnx_transform(source: Path, out: Path, transforms: tuple[str, ...], weights: str,
                    calibration: np.ndarray | None) -> dict[str, Any]:
    import onnx
    from onnx import numpy_helper
    model = onnx.load(str(source))
    graph = model.graph
    init = {i.name: i for i in graph.initializer}
    arrays = {name: numpy_helper.to_array(t).astype(np.float64) for name, t in init.items()
              if t.data_type == onnx.TensorProto.FLOAT}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    graph_outputs = {o.name for o in graph.output}

    def weight_of(node: Any) -> str | None:
        if node.op_type == "Conv" and len(node.input) > 1 and node.input[1] in arrays:
            return node.input[1]
        if node.op_type == "Gemm" and node.input[1] in arrays:
            return node.input[1]
        if node.op_type == "MatMul" and node.input[1] in arrays and arrays[node.input[1]].ndim == 2:
            return node.input[1]
        return None

    def attr(node: Any, name: str, default: Any) -> Any:
        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    def out_axis(node: Any) -> int:
        if node.op_type == "Conv":
            return 0
        if node.op_type == "Gemm":
            return 0 if attr(node, "transB", 0) else 1
        return 1

    def in_axis(node: Any) -> int:
        if node.op_type == "Conv":
            w = arrays[node.input[1]]
            return 0 if attr(node, "group", 1) == w.shape[0] and w.shape[1] == 1 and attr(node, "group", 1) > 1 else 1
        if node.op_type == "Gemm":
            return 1 if attr(node, "transB", 0) else 0
        return 0

    def is_grouped(node: Any) -> bool:
        if node.op_type != "Conv":
            return False
        g = attr(node, "group", 1)
        return g > 1 and not (g == arrays[node.input[1]].shape[0] and arrays[node.input[1]].shape[1] == 1)

    def clip_is_relu6(node: Any) -> bool:
        vals = [arrays.get(n) for n in node.input[1:3]] if len(node.input) >= 3 else []
        lo = vals[0] if vals else attr(node, "min", None)
        hi = vals[1] if len(vals) > 1 else attr(node, "max", None)
        return lo is not None and hi is not None and float(np.ravel(lo)[0]) == 0.0 and float(np.ravel(hi)[0]) == 6.0

    pairs: list[tuple[Any, Any, tuple[str, ...]]] = []
    relu6: list[Any] = []
    for node in graph.node:
        if weight_of(node) is None or is_grouped(node):
            continue
        cur = node.output[0]
        path: list[Any] = []
        end = None
        while True:
            nxt = consumers.get(cur, [])
            if len(nxt) != 1 or cur in graph_outputs:
                break
            n = nxt[0]
            if weight_of(n) is not None and n.input[0] == cur:
                end = n
                break
            if n.op_type == "Transpose" or (n.op_type in ("Flatten", "Squeeze", "Reshape")
                                            and not any(p.op_type == "GlobalAveragePool" for p in path)):
                break
            if n.op_type == "Clip" and clip_is_relu6(n):
                path.append(n)
            elif n.op_type in _ONNX_PASS:
                path.append(n)
            else:
                break
            cur = n.output[0]
        if end is None or is_grouped(end):
            continue
        pairs.append((node, end, tuple(p.op_type for p in path)))
        relu6.extend(p for p in path if p.op_type == "Clip")

    before = {}
    for a, _, _ in pairs:
        before[a.name or a.output[0]] = _ratio(channel_range(arrays[weight_of(a)], out_axis(a)))
    if "cle" in transforms:
        for _ in range(CLE_ITERATIONS if pairs else 0):
            change = 0.0
            for a, b, _ in pairs:
                wa, wb = arrays[weight_of(a)], arrays[weight_of(b)]
                bias_name = a.input[2] if len(a.input) > 2 and a.input[2] in arrays else None
                s = equalize_pair(wa, arrays[bias_name] if bias_name else None, wb, a_axis=out_axis(a),
                                  b_axis=in_axis(b))
                change = max(change, float(np.max(np.abs(np.log(s)))))
            if change < CLE_TOLERANCE:
                break
        for clip in relu6:   # ReLU6 -> ReLU inside an equalised pair
            clip.op_type = "Relu"
            del clip.input[1:]
            for a in list(clip.attribute):
                clip.attribute.remove(a)
    corrected: list[str] = []
    if "bc" in transforms:
        assert calibration is not None   # equalize() refuses +bc without calibration samples
        corrected = _onnx_bias_correction(model, arrays, weight_of, out_axis, weights, calibration)
    for name, t in init.items():
        if name in arrays:
            t.CopyFrom(numpy_helper.from_array(arrays[name].astype(np.float32), name))
    onnx.save(model, str(out))
    report_pairs = tuple(EqualizedPair(first=a.name or a.output[0], second=b.name or b.output[0], through=path,
                                       channels=int(arrays[weight_of(a)].shape[out_axis(a)]),
                                       range_ratio_before=before[a.name or a.output[0]],
                                       range_ratio_after=_ratio(channel_range(arrays[weight_of(a)], out_axis(a))))
                         for a, b, path in pairs) if "cle" in transforms else ()
    return {"folded_batch_norms": (), "pairs": report_pairs, "skipped": (),
            "relu6_to_relu": tuple(c.name or c.output[0] for c in relu6) if "cle" in transforms else (),
            "bias_corrected": tuple(corrected)}


def _onnx_bias_correction(model: Any, arrays: dict[str, np.ndarray], weight_of: Any, out_axis: Any,
                          weights: str, calibration: np.ndarray) -> list[str]:
    """Subtract (Q(W) - W) . E[x] from every Conv/Gemm bias, E[x] measured with ONNX Runtime."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    nodes = [n for n in model.graph.node if weight_of(n) is not None and n.op_type in ("Conv", "Gemm")
             and len(n.input) > 2 and n.input[2] in arrays]
    if not nodes:
        return []
    probe = copy.deepcopy(model)
    for t in probe.graph.initializer:
        if t.name in arrays:
            t.CopyFrom(numpy_helper.from_array(arrays[t.name].astype(np.float32), t.name))
    known = {o.name for o in probe.graph.output}
    for n in nodes:
        if n.input[0] not in known:
            probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(n.input[0]))
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    fixed = [d if isinstance(d, int) else None for d in inp.shape]
    x = np.asarray(calibration, np.float32)
    if len(fixed) == 4 and fixed[1] == x.shape[-1] and fixed[3] != x.shape[-1]:
        x = x.transpose(0, 3, 1, 2)
    names = list(dict.fromkeys(n.input[0] for n in nodes))   # one tensor may feed several convs
    sums: dict[str, np.ndarray] = {}   # input name -> its per-channel sum over the samples
    step = 1 if fixed and fixed[0] == 1 else 64
    for start in range(0, len(x), step):
        outs = session.run(names, {inp.name: x[start:start + step]})
        for k, o in zip(names, outs):
            o = np.asarray(o, np.float64)
            per_channel = (o.reshape(o.shape[0], o.shape[1], -1).mean(axis=2).sum(axis=0) if o.ndim > 2
                           else o.sum(axis=0))
            sums[k] = sums[k] + per_channel if k in sums else per_channel
    done = []
    for n in nodes:
        mean_in = sums[n.input[0]] / len(x)
        w = arrays[weight_of(n)]
        ax = out_axis(n)
        eps = fake_quant_weights(w, axis=ax if weights == "per_channel" else None) - w
        if n.op_type == "Conv":
            g = 1
            for a in n.attribute:
                if a.name == "group":
                    g = a.i
            if g > 1:
                shift = eps.reshape(eps.shape[0], -1).sum(axis=1) * mean_in
            else:
                shift = np.einsum("oihw,i->o", eps, mean_in)
        else:
            shift = (eps @ mean_in) if ax == 0 else (mean_in @ eps)
        arrays[n.input[2]] = arrays[n.input[2]] - shift
        done.append(n.name or n.output[0])
    return done
