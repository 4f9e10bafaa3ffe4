"""The ONNX graph before onnx2tf sees it: its inputs (a dynamic batch fixed to 1, a dynamic H/W fixed by the
card's ``size``) and outputs, which inputs are NHWC already, and the exact rewrites of nodes onnx2tf would
turn into ops the NPUs cannot run in INT8 (``Sum``, ceil-mode ``MaxPool``, node names TensorFlow refuses)."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ModelError


@dataclass(frozen=True)
class _OnnxIO:
    inputs: tuple[tuple[str, tuple[int, ...], bool], ...]   # name, batch-1 shape, batch was dynamic
    outputs: tuple[str, ...]
    fixed: tuple[str, ...] = ()   # inputs whose dynamic H/W were fixed by `size` ("x: H, W = 48, 192")


def card_size(source: Path) -> tuple[int, int] | None:
    """The ``size:`` of the card beside ``source`` (``<model>.card.yaml``), or None."""
    from ..contract import card_path, read_card
    path = card_path(source)
    if not path.is_file():
        return None
    value = read_card(path).get("size")
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) and v > 0 for v in value):
        return int(value[0]), int(value[1])
    return None


def _fix_spatial(dims: list[int], size: tuple[int, int] | None) -> tuple[list[int], bool]:
    """An image input's dynamic H and W (NCHW, or NHWC when the last dimension is the channels) set
    to ``size``; other dynamic dimensions stay -1."""
    if size is None or len(dims) != 4:
        return dims, False
    channels = (1, 2, 3, 4)
    hw = (1, 2) if dims[3] in channels and dims[1] not in channels else (2, 3)
    if not any(dims[i] < 0 for i in hw):
        return dims, False
    out = list(dims)
    for i, v in zip(hw, size):
        if out[i] >= 0 and out[i] != v:
            return dims, False     # a fixed dimension that disagrees with the card: left to the error below
        out[i] = v
    return out, True


def read_onnx_io(path: Path, size: tuple[int, int] | None = None) -> _OnnxIO:
    """The graph inputs (static batch-1 shapes) and output names of an ONNX file; ``size`` fixes a
    dynamic image height/width."""
    from ...quantize.inspect import load_onnx
    model = load_onnx(path)
    init = {i.name for i in model.graph.initializer}
    inputs = []
    fixed: list[str] = []
    for value in model.graph.input:
        if value.name in init:
            continue
        tensor = value.type.tensor_type
        if tensor.elem_type != 1:   # onnx.TensorProto.FLOAT
            raise ModelError(f"{path}: input {value.name!r} is not float32 (ONNX element type {tensor.elem_type}); "
                             "the workbench converts models with float image inputs.")
        dims = [int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in tensor.shape.dim]
        if not dims:
            raise ModelError(f"{path}: input {value.name!r} is a scalar; an image input (N, C, H, W) is expected.")
        declared = tuple(dims)
        dims, was_fixed = _fix_spatial(dims, size)
        if was_fixed:
            fixed.append(f"{value.name}: {declared} -> {(1, *dims[1:])} (size {list(size or ())})")
        if any(d < 0 for d in dims[1:]):
            hint = (f" The size {list(size)} given does not fit this input." if size is not None else
                    " Give the input size in the model's card (`size: [H, W]` in <model>.card.yaml), or")
            raise ModelError(
                f"{path}: input {value.name!r} has dynamic shape {declared}; only the batch dimension may be "
                f"unknown.{hint} export with a fixed input size (torch.onnx.export with a concrete example input "
                "and no dynamic_axes besides the batch), then convert that.")
        inputs.append((value.name, (1, *dims[1:]), dims[0] < 0))
    if not inputs:
        raise ModelError(f"{path}: the ONNX graph has no inputs.")
    outputs = tuple(o.name for o in model.graph.output)
    return _OnnxIO(inputs=tuple(inputs), outputs=outputs, fixed=tuple(fixed))


def nhwc_inputs(graph: _OnnxIO, layout: str) -> tuple[str, ...]:
    """The inputs onnx2tf must keep as they are because they are NHWC already."""
    if layout == "nchw":
        return ()
    channels = (1, 2, 3, 4)
    out = []
    for name, shape, _ in graph.inputs:
        if len(shape) != 4:
            continue
        if layout == "nhwc" or (shape[3] in channels and shape[1] not in channels):
            out.append(name)
    return tuple(out)


def exact_rewrites(source: Path, dst: Path, graph: _OnnxIO | None = None) -> list[str]:
    """Write ``source`` to ``dst`` with nodes onnx2tf turns into ops the NPUs cannot run in INT8 replaced
    by the same arithmetic in other ops; returns what was replaced (empty: ``dst`` is a plain copy).

    ``Sum`` (opset <= 7 residual adds, e.g. ResNet-50 and ShuffleNet of ``onnx/backend/test/data/light``)
    becomes TFLite ``ADD_N``, which has no INT8 kernel: the TFLite converter leaves it in float between
    DEQUANTIZE/QUANTIZE and the full-integer model is refused.  ``Sum(a, b, c)`` is ``Add(Add(a, b), c)``
    (both broadcast the same way, float addition in the same order), which quantizes to INT8 ``ADD``.
    Node names TensorFlow refuses as scope names (Paddle2ONNX's ``Conv@0``, ``Softmax@0``: onnx2tf died
    after a minute with "'Softmax@0' is not a valid scope name") are renamed; dynamic input H/W fixed by
    the card's ``size`` are written into the graph's inputs.
    The agreement check compares the converted model with ONNX Runtime on the original file."""
    import onnx
    from onnx import helper
    model = onnx.load(str(source))
    done: list[str] = []
    renamed = sanitize_node_names(model)
    if renamed:
        done.append(f"node names TensorFlow refuses renamed: {renamed} node(s)")
    if graph is not None and graph.fixed:
        shapes = dict((name, shape) for name, shape, _ in graph.inputs)
        for value in model.graph.input:
            if value.name in shapes:
                for dim, v in zip(value.type.tensor_type.shape.dim[1:], shapes[value.name][1:]):
                    dim.Clear()
                    dim.dim_value = int(v)
        del model.graph.value_info[:]     # shapes inferred from the dynamic input; onnx2tf infers them again
        done.append("dynamic input size fixed: " + "; ".join(graph.fixed))
    pools = ceil_pools_as_same(model)
    if pools:
        done.append(f"ceil-mode MaxPool -> SAME padding (no float32-lowest pad): {pools} node(s)")
    sums = [n for n in model.graph.node if n.op_type == "Sum" and n.domain in ("", "ai.onnx")]
    if not sums:
        if done:
            onnx.save(model, str(dst))
        else:
            shutil.copyfile(source, dst)
        return done
    nodes, replaced = [], {id(n) for n in sums}
    for node in model.graph.node:
        if id(node) not in replaced:
            nodes.append(node)
            continue
        name = node.name or node.output[0]
        if len(node.input) == 1:
            nodes.append(helper.make_node("Identity", [node.input[0]], [node.output[0]], name=name))
            continue
        acc = node.input[0]
        for i, term in enumerate(node.input[1:], start=1):
            out = node.output[0] if i == len(node.input) - 1 else f"{node.output[0]}__sum{i}"
            nodes.append(helper.make_node("Add", [acc, term], [out], name=f"{name}__add{i}"))
            acc = out
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    onnx.save(model, str(dst))
    return [*done, f"Sum -> Add: {len(sums)} node(s)"]


def ceil_pools_as_same(model: Any) -> int:
    """``MaxPool(ceil_mode=1)`` whose windows are exactly TensorFlow's ``SAME`` ones (same output size,
    the extra padding at the end) becomes ``MaxPool(auto_pad=SAME_UPPER)``.

    onnx2tf otherwise writes a ceil-mode pool as ``PADV2`` with float32's lowest value (-3.4e38) then a
    VALID pool; calibration takes that value in (activation scale ~1e36) and the INT8 model ignores
    its input (MTCNN ONet/RNet).  In both forms padded positions never win the max, so the rewrite is
    exact; TFLite's SAME max-pool needs no pad op at all.  Returns how many nodes were rewritten."""
    import math

    import onnx
    from onnx import helper
    try:
        shapes = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - a model shape inference cannot read keeps its pools
        return 0
    known = {v.name: [d.dim_value if d.HasField("dim_value") else -1 for d in v.type.tensor_type.shape.dim]
             for v in list(shapes.graph.value_info) + list(shapes.graph.input)}
    count = 0
    for node in model.graph.node:
        if node.op_type != "MaxPool" or len(node.output) != 1:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if not attrs.get("ceil_mode") or attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            continue
        if any(d != 1 for d in attrs.get("dilations", [1, 1])) or attrs.get("storage_order", 0):
            continue
        dims = known.get(node.input[0])
        kernel = list(attrs.get("kernel_shape", []))
        if not dims or len(dims) != 4 or any(d <= 0 for d in dims[2:]) or len(kernel) != 2:
            continue
        strides = list(attrs.get("strides", [1, 1]))
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
        same = True
        for i, size in enumerate(dims[2:]):
            k, st, begin, end = kernel[i], strides[i], pads[i], pads[i + 2]
            ceil_out = math.ceil((size + begin + end - k) / st) + 1
            if (ceil_out - 1) * st >= size + begin:     # ONNX/PyTorch drop a last window that starts in the pad
                ceil_out -= 1
            same_out = math.ceil(size / st)
            total = max((same_out - 1) * st + k - size, 0)
            if ceil_out != same_out or begin != total // 2:
                same = False
        if not same:
            continue
        kept = [a for a in node.attribute if a.name not in ("ceil_mode", "pads", "auto_pad")]
        del node.attribute[:]
        node.attribute.extend(kept)
        node.attribute.append(helper.make_attribute("auto_pad", "SAME_UPPER"))
        count += 1
    return count


_SCOPE_OK = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*$")   # TensorFlow's valid scope name
_ONNX2TF_FIXES = re.compile(r"^[A-Za-z0-9_.\\/>:-]*$")          # a leading "/" and ":" onnx2tf renames itself


def sanitize_node_names(model: Any) -> int:
    """Rename nodes whose names TensorFlow refuses as scope names (characters outside
    ``[A-Za-z0-9_.\\/>-]``, e.g. ``Conv@0``): invalid characters become ``_``, kept unique.
    Tensor names are untouched (inputs/outputs keep their names).  Returns how many were renamed."""
    taken = {n.name for n in model.graph.node}
    count = 0
    for node in model.graph.node:
        if not node.name or _SCOPE_OK.match(node.name) or _ONNX2TF_FIXES.match(node.name):
            continue
        base = re.sub(r"[^A-Za-z0-9_.\\/>-]", "_", node.name)
        base = base if re.match(r"^[A-Za-z0-9.]", base) else f"n{base}"
        name, i = base, 1
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        taken.add(name)
        node.name = name
        count += 1
    return count
