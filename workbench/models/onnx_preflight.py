"""Checks an ONNX file passes before the converter (or anything that allocates) sees it.

``preflight(path)`` is called first by :func:`workbench.models.convert.convert_onnx` and by
``quantize`` for an ``.onnx`` source.  In order, each a :class:`~workbench.errors.ModelError` naming
the file, the tensor or the op and what to do (exit code 2):

1. **the protobuf reads** (``onnx.load`` without external data: no tensor bytes are read yet);
2. **external data** (``model.onnx`` + ``weights.bin``, how PyTorch saves models over 2 GB or with
   ``save_as_external_data``): every referenced file must be a relative path inside the model's folder
   (``../`` or an absolute path is refused: a model must not read other files of this machine), exist,
   and hold the bytes the tensor declares;
3. **declared sizes**: every graph input and output dimension at most :data:`MAX_DIM`, an input at
   most :data:`MAX_INPUT_BYTES` at batch 1, every initializer at most :data:`MAX_TOTAL_BYTES` together,
   checked on the declared numbers before any array exists (a ``[1, 3, 200000, 200000]`` input is
   refused with its 447 GiB, not allocated);
4. **``onnx.checker``** on the graph (its first complaint, with the node);
5. **the op inventory** (``ops=``): every node's op must be one onnx2tf converts (the module names
   of the installed onnx2tf's ``ops`` package), in the default ONNX domain; the unsupported ops are
   listed with their counts and first node.

A model with external data is then written once as a single self-contained file in the cache
(content-keyed by the model and its data files), so the model's folder travels with it: the converter,
ONNX Runtime and the cache key all see the weights.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from .._io import atomic_path, cache_dir, sha256_file, stable_hash
from ..errors import ModelError

MAX_DIM = 1 << 16                     # a declared dimension above this is not an image model's
MAX_INPUT_BYTES = 1 << 30             # one input at batch 1 (float32): 1 GiB
MAX_TOTAL_BYTES = (1 << 31) - 1       # weights: a single ONNX protobuf's limit (2 GiB)
_BYTES = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}  # TensorProto types


def _gib(n: int | float) -> str:
    return f"{n / (1 << 30):.3g} GiB"


def for_onnx2tf(path: str | os.PathLike) -> Path:
    """:func:`preflight` with the op inventory of the onnx2tf tool environment (installed on first need)."""
    from .. import toolenv
    # an environment without the ops folder: onnx2tf itself will say what it cannot convert
    return preflight(path, ops=onnx2tf_ops(toolenv.ensure("onnx2tf")) or None)


def preflight(path: str | os.PathLike, *, ops: frozenset[str] | None = None) -> Path:
    """Check the ONNX file at ``path``; returns the path the converter should read.

    That is ``path`` itself, or for a model with external data a self-contained copy in the cache.
    ``ops``: the op types the converter supports (None: the op inventory is not checked)."""
    import onnx
    source = Path(path)
    if not source.is_file():
        raise ModelError(f"ONNX model {str(source)!r} does not exist. Next: check the path.")
    try:
        model = onnx.load(str(source), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - DecodeError and friends: truncated or not ONNX
        raise ModelError(f"{source}: the ONNX file is corrupt or truncated ({type(exc).__name__}: {exc}). "
                         "Re-export or re-copy the model.") from None
    external = _external_files(source, model)
    _check_sizes(source, model)
    if ops is not None:
        check_ops(source, model, ops)
    _check_graph(source, model, external)
    return _inlined(source, external) if external else source


# -- external data -----------------------------------------------------------------------------
def _external_files(source: Path, model: Any) -> dict[str, int]:
    """``{relative file: bytes the model reads from it}``; refuses paths outside the model's folder."""
    import onnx
    folder = source.resolve().parent
    needed: dict[str, int] = {}
    for tensor in _all_tensors(model):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in tensor.external_data}
        location = info.get("location", "")
        target = (folder / location).resolve()
        if (not location or os.path.isabs(location) or ".." in Path(location).parts
                or not target.is_relative_to(folder)):
            raise ModelError(f"{source}: tensor {tensor.name!r} reads its data from {location!r}, outside the "
                             "model's folder; the workbench reads external data only from files beside the "
                             "model. Next: re-export with the data file beside the .onnx (torch.onnx.export "
                             "does this).")
        if not target.is_file():
            raise ModelError(f"{source}: tensor {tensor.name!r} keeps its data in {location!r}, which is not "
                             f"beside the model ({target.parent}). Next: copy the whole folder the model was "
                             "exported to (the .onnx and its data files) and convert from there.")
        try:
            offset, length = int(info.get("offset", 0)), int(info.get("length", -1))
        except ValueError:
            raise ModelError(f"{source}: tensor {tensor.name!r} has an unreadable external-data offset or length "
                             f"({info}). Next: re-export the model.") from None
        declared = _declared_bytes(tensor)
        size = target.stat().st_size
        if length < 0:
            length = declared if declared is not None else size - offset
        if offset < 0 or offset + length > size or (declared is not None and length != declared):
            raise ModelError(f"{source}: tensor {tensor.name!r} declares {declared if declared is not None else '?'} "
                             f"bytes at offset {offset} (length {length}) of {location!r}, which has {size} bytes: "
                             "the data file is truncated or from another export. Next: copy it again or re-export.")
        needed[location] = max(needed.get(location, 0), offset + length)
    return needed


def _all_tensors(model: Any) -> list[Any]:
    out = list(model.graph.initializer)
    stack = list(model.graph.node)
    while stack:
        node = stack.pop()
        for attr in node.attribute:
            if attr.HasField("t"):
                out.append(attr.t)
            out.extend(attr.tensors)
            if attr.HasField("g"):
                out.extend(attr.g.initializer)
                stack.extend(attr.g.node)
            for g in attr.graphs:
                out.extend(g.initializer)
                stack.extend(g.node)
    return out


def _declared_bytes(tensor: Any) -> int | None:
    width = _BYTES.get(tensor.data_type)
    if width is None or any(d < 0 for d in tensor.dims):
        return None
    n = 1
    for d in tensor.dims:
        n *= int(d)
    return n * width


def _inlined(source: Path, external: dict[str, int]) -> Path:
    """A single-file copy of a model with external data, cached by the content of all its files."""
    import onnx
    total = sum(external.values())
    if total > MAX_TOTAL_BYTES:
        raise ModelError(f"{source}: its external data holds {_gib(total)}, more than a single ONNX file can "
                         f"(2 GiB); a model that large does not fit an i.MX NPU. Next: convert a smaller model.")
    key = stable_hash({"model": sha256_file(source),
                       "data": {name: sha256_file(source.parent / name) for name in sorted(external)}})
    out = cache_dir("convert", "inlined", key[:24]) / source.name
    if out.is_file():
        return out
    try:
        model = onnx.load(str(source), load_external_data=True)
    except Exception as exc:  # noqa: BLE001 - onnx raises many types for a bad data file
        raise ModelError(f"{source}: its external data cannot be read ({type(exc).__name__}: {exc}). "
                         "Next: copy the model's folder again, or re-export.") from None
    with atomic_path(out) as tmp:
        onnx.save(model, str(tmp))
    return out


# -- declared sizes ------------------------------------------------------------------------------
def _dims(value: Any) -> list[int | None]:
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return []
    # Paddle2ONNX writes a dynamic dimension as dim_value -1 (PaddleOCR's models): dynamic, not huge
    return [int(d.dim_value) if d.HasField("dim_value") and d.dim_value >= 0 else None for d in tensor.shape.dim]


def _check_sizes(source: Path, model: Any) -> None:
    init = {i.name for i in model.graph.initializer}
    for kind, values in (("input", [v for v in model.graph.input if v.name not in init]),
                         ("output", list(model.graph.output))):
        for value in values:
            dims = _dims(value)
            for i, d in enumerate(dims):
                if d is not None and not 0 <= d <= MAX_DIM:
                    raise ModelError(
                        f"{source}: {kind} {value.name!r} declares dimension {i} = {d} (shape "
                        f"{tuple('?' if x is None else x for x in dims)}); the workbench takes dimensions up to "
                        f"{MAX_DIM} and allocates nothing for a larger one. Next: export with the input size the "
                        "model is trained for.")
            width = _BYTES.get(value.type.tensor_type.elem_type, 4)
            n = width
            for d in dims[1:]:
                n *= d if d is not None else 1
            if kind == "input" and n > MAX_INPUT_BYTES:
                raise ModelError(
                    f"{source}: input {value.name!r} of shape {tuple('?' if x is None else x for x in dims)} needs "
                    f"{_gib(n)} per sample, more than {_gib(MAX_INPUT_BYTES)}; nothing was allocated. Next: export "
                    "with the input size the model is trained for.")
    total = sum(b for b in (_declared_bytes(t) for t in model.graph.initializer) if b is not None)
    if total > MAX_TOTAL_BYTES:
        raise ModelError(f"{source}: its initializers declare {_gib(total)} of weights, more than "
                         f"{_gib(MAX_TOTAL_BYTES)}; nothing was allocated. A model that large does not fit an "
                         "i.MX NPU. Next: convert a smaller model.")


# -- the graph and the ops ------------------------------------------------------------------------
def _check_graph(source: Path, model: Any, external: dict[str, int]) -> None:
    import onnx
    try:
        if external:
            onnx.checker.check_model(str(source))     # reads the data files by path, without loading them here
        else:
            onnx.checker.check_model(model)
    except Exception as exc:  # noqa: BLE001 - ValidationError, and C++ errors for odd protobufs
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{source}: the ONNX checker refuses the graph: {first[:400]}. The model is malformed "
                         "(no converter can read it reliably). Next: re-export it (torch.onnx.export, or "
                         "onnx.checker.check_model(model) to see every complaint).") from None


def check_ops(source: Path, model: Any, supported: frozenset[str]) -> None:
    """Refuse ops onnx2tf has no converter for (or in a custom domain), listing them with a first node."""
    bad: Counter[str] = Counter()
    first: dict[str, str] = {}
    stack = list(model.graph.node)
    while stack:
        node = stack.pop(0)
        domain = node.domain or ""
        name = node.op_type if domain in ("", "ai.onnx") else f"{domain}:{node.op_type}"
        if domain not in ("", "ai.onnx") or node.op_type not in supported:
            bad[name] += 1
            first.setdefault(name, node.name or (node.output[0] if node.output else "?"))
        for attr in node.attribute:
            if attr.HasField("g"):
                stack.extend(attr.g.node)
            for g in attr.graphs:
                stack.extend(g.node)
    if bad:
        listed = ", ".join(f"{op} x{n} (first: {first[op]!r})" for op, n in sorted(bad.items()))
        raise ModelError(f"{source}: onnx2tf cannot convert these op(s): {listed}. Nothing was converted. Next: "
                         "export without them (another opset, or replace the custom op), or quantize with "
                         "--backend onnx (ONNX Runtime quantization; no NPU placement then).")


def onnx2tf_ops(env: Any) -> frozenset[str]:
    """The op types the onnx2tf of tool environment ``env`` converts: its ``onnx2tf/ops/<Op>.py`` modules."""
    found = sorted(env.root.glob("lib/python*/site-packages/onnx2tf/ops"))
    if not found:
        return frozenset()
    return frozenset(p.stem for p in found[0].glob("*.py") if p.stem[:1].isupper())
