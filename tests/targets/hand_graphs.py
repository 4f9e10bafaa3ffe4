"""Build one-op ``TFLiteGraph`` objects by hand, to give each constraint a passing and a failing case."""

from __future__ import annotations

from workbench.models.tflite_graph import OpInfo, TensorInfo, TFLiteGraph


def t(dtype="INT8", shape=(1, 8, 8, 8), *, sig=None, scales=(0.1,), zps=(0,), const=False,
      name=None):
    """A tensor spec (index filled in by :func:`one_op`)."""
    if dtype in ("FLOAT32", "INT32", "INT64", "BOOL", "STRING") and scales == (0.1,):
        scales, zps = (), ()
    return dict(dtype=dtype, shape=tuple(shape), shape_signature=tuple(sig or shape),
                scales=tuple(scales), zero_points=tuple(zps), is_constant=const, name=name)


def one_op(op_type, inputs, outputs=None, options=None, *, custom=False):
    """A graph with one op; ``inputs`` items may be None (an omitted optional input)."""
    outputs = outputs if outputs is not None else [t()]
    tensors, in_idx, out_idx = [], [], []
    for spec in inputs:
        if spec is None:
            in_idx.append(-1)
            continue
        in_idx.append(len(tensors))
        tensors.append(spec)
    for spec in outputs:
        out_idx.append(len(tensors))
        tensors.append(spec)
    infos = tuple(TensorInfo(index=i, name=s["name"] or f"t{i}", dtype=s["dtype"], shape=s["shape"],
                             shape_signature=s["shape_signature"], scales=s["scales"],
                             zero_points=s["zero_points"], is_constant=s["is_constant"])
                  for i, s in enumerate(tensors))
    op = OpInfo(index=0, type=op_type, name=infos[out_idx[0]].name, inputs=tuple(in_idx),
                outputs=tuple(out_idx), options=dict(options or {}), is_custom=custom)
    graph_inputs = tuple(i for i in in_idx if i >= 0 and not infos[i].is_constant)
    return TFLiteGraph(path="<hand-built>", ops=(op,), tensors=infos, inputs=graph_inputs,
                       outputs=tuple(out_idx))


def conv(op_type="CONV_2D", *, x=None, w=None, b=None, out=None, **options):
    opts = {"strideH": 1, "strideW": 1, "dilationHFactor": 1, "dilationWFactor": 1,
            "padding": "SAME", "fused_activation": "NONE"}
    if op_type == "DEPTHWISE_CONV_2D":
        opts["depthMultiplier"] = 1
    opts.update(options)
    x = x or t(scales=(0.5,))
    w = w or t(shape=(8, 3, 3, 8), scales=(0.25,), const=True)
    b = b or t("INT32", (8,), scales=(0.125,), zps=(0,), const=True)
    return one_op(op_type, [x, w, b], [out or t()], opts)
