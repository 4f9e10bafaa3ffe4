"""Read a .tflite file as data, without TensorFlow.

``read_tflite(path)`` parses the flatbuffer with the schema that ships in
``ai_edge_litert`` and returns a :class:`TFLiteGraph`: every op of the main
subgraph in execution order, and every tensor with its dtype, static and
signature shape, quantization parameters and whether it holds constant data.
Quantization checks, placement rules and the Vela wrapper all read models
through this one module, so "inspect the file, never trust the conversion" has
one implementation.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import ModelError, missing_file

TFLITE_IDENTIFIER = b"TFL3"


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the graph."""

    index: int
    name: str
    dtype: str                      # "INT8", "FLOAT32", ... (schema spelling)
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...]  # -1 marks a dynamic dimension
    scales: tuple[float, ...] = ()
    zero_points: tuple[int, ...] = ()
    quantized_dimension: int = 0
    is_constant: bool = False       # holds data in the file (weights, biases, shapes)
    is_variable: bool = False

    @property
    def is_quantized(self) -> bool:
        return len(self.scales) > 0

    @property
    def per_channel(self) -> bool:
        return len(self.scales) > 1

    @property
    def is_dynamic(self) -> bool:
        return any(d < 0 for d in self.shape_signature) or (len(self.shape) == 0 and not self.is_constant
                                                           and len(self.shape_signature) > 0)


@dataclass(frozen=True)
class OpInfo:
    """One operator in execution order."""

    index: int
    type: str                       # builtin name (CONV_2D) or the custom code (ethos-u)
    name: str                       # the first output tensor's name
    inputs: tuple[int, ...]         # tensor indices, -1 for an omitted optional input
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    is_custom: bool = False


@dataclass(frozen=True)
class TFLiteGraph:
    """The main subgraph of a .tflite file."""

    path: str
    ops: tuple[OpInfo, ...]
    tensors: tuple[TensorInfo, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    n_subgraphs: int = 1
    version: int = 3
    description: str = ""

    def tensor(self, index: int) -> TensorInfo | None:
        return None if index < 0 else self.tensors[index]

    def op_inputs(self, op: OpInfo) -> list[TensorInfo]:
        return [self.tensors[i] for i in op.inputs if i >= 0]

    def op_outputs(self, op: OpInfo) -> list[TensorInfo]:
        return [self.tensors[i] for i in op.outputs if i >= 0]

    def input_tensors(self) -> list[TensorInfo]:
        return [self.tensors[i] for i in self.inputs]

    def output_tensors(self) -> list[TensorInfo]:
        return [self.tensors[i] for i in self.outputs]

    def op_types(self) -> list[str]:
        return [op.type for op in self.ops]


def _enum_names(cls: type) -> dict[int, str]:
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


@lru_cache(maxsize=1)
def _schema() -> Any:
    from ai_edge_litert import schema_py_generated as schema
    return schema


@lru_cache(maxsize=1)
def _names() -> tuple[dict[int, str], dict[int, str], dict[int, str], dict[int, str]]:
    s = _schema()
    return (_enum_names(s.BuiltinOperator), _enum_names(s.TensorType),
            _enum_names(s.ActivationFunctionType), _enum_names(s.Padding))


def _options_dict(options: Any) -> dict[str, Any]:
    if options is None:
        return {}
    _, _, activations, paddings = _names()
    out: dict[str, Any] = {}
    for key, value in vars(options).items():
        if key == "fusedActivationFunction":
            out["fused_activation"] = activations.get(value, str(value))
        elif key == "padding":
            out["padding"] = paddings.get(value, str(value))
        elif isinstance(value, (int, float, bool, str)) or value is None:
            out[key] = value
        elif hasattr(value, "tolist"):
            out[key] = value.tolist()
        elif isinstance(value, (list, tuple)):
            out[key] = list(value)
    return out


def read_tflite(path: str | os.PathLike) -> TFLiteGraph:
    """Parse a .tflite file.  Raises :class:`ModelError` naming the file when it is not one."""
    path = Path(path)
    if not path.is_file():
        raise missing_file("model file", path, "check the path (a .tflite file is expected)", ModelError)
    data = path.read_bytes()
    return parse_tflite_bytes(data, source=str(path))


def parse_tflite_bytes(data: bytes, *, source: str = "<bytes>") -> TFLiteGraph:
    if len(data) < 8 or data[4:8] != TFLITE_IDENTIFIER:
        raise ModelError(
            f"{source}: not a TFLite flatbuffer (file identifier {data[4:8]!r}, expected b'TFL3'). "
            "Give a .tflite file produced by the TFLite converter or Vela.")
    schema = _schema()
    builtins, dtypes, _, _ = _names()
    try:
        model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
        subgraph = model.subgraphs[0]
    except Exception as exc:  # truncated or corrupt flatbuffer
        raise ModelError(f"{source}: the TFLite file is corrupt or truncated ({type(exc).__name__}: {exc}). "
                         "Re-export or re-copy the model.") from exc
    buffers = model.buffers or []

    def has_data(buffer_index: int) -> bool:
        if buffer_index <= 0 or buffer_index >= len(buffers):
            return False
        buf = buffers[buffer_index]
        return (buf.data is not None and len(buf.data) > 0) or bool(getattr(buf, "size", 0))

    tensors = []
    for i, t in enumerate(subgraph.tensors or []):
        q = t.quantization
        scales = tuple(float(s) for s in (q.scale if q is not None and q.scale is not None else ()))
        zps = tuple(int(z) for z in (q.zeroPoint if q is not None and q.zeroPoint is not None else ()))
        shape = tuple(int(d) for d in (t.shape if t.shape is not None else ()))
        sig = tuple(int(d) for d in (t.shapeSignature if t.shapeSignature is not None else shape))
        name = t.name.decode("utf-8", "replace") if isinstance(t.name, bytes) else str(t.name or "")
        tensors.append(TensorInfo(
            index=i, name=name, dtype=dtypes.get(t.type, str(t.type)), shape=shape,
            shape_signature=sig, scales=scales, zero_points=zps,
            quantized_dimension=int(q.quantizedDimension) if q is not None else 0,
            is_constant=has_data(t.buffer), is_variable=bool(t.isVariable)))

    codes = model.operatorCodes or []
    ops = []
    for i, op in enumerate(subgraph.operators or []):
        code = codes[op.opcodeIndex]
        builtin = max(int(code.builtinCode), int(code.deprecatedBuiltinCode))
        is_custom = builtins.get(builtin) == "CUSTOM"
        if is_custom:
            custom = code.customCode
            op_type = custom.decode() if isinstance(custom, bytes) else str(custom)
        else:
            op_type = builtins.get(builtin, f"BUILTIN_{builtin}")
        outputs = tuple(int(x) for x in (op.outputs if op.outputs is not None else ()))
        name = tensors[outputs[0]].name if outputs and outputs[0] >= 0 else f"op{i}"
        ops.append(OpInfo(
            index=i, type=op_type, name=name,
            inputs=tuple(int(x) for x in (op.inputs if op.inputs is not None else ())),
            outputs=outputs, options=_options_dict(op.builtinOptions), is_custom=is_custom))

    description = (model.description.decode("utf-8", "replace") if isinstance(model.description, bytes)
                   else str(model.description or ""))
    return TFLiteGraph(
        path=source, ops=tuple(ops), tensors=tuple(tensors),
        inputs=tuple(int(x) for x in subgraph.inputs), outputs=tuple(int(x) for x in subgraph.outputs),
        n_subgraphs=len(model.subgraphs), version=int(model.version), description=description)


def tflite_metadata(path: str | os.PathLike) -> dict[str, bytes]:
    """The model's metadata entries (``min_runtime_version`` ...) as ``{name: bytes}``."""
    path = Path(path)
    data = path.read_bytes()
    if len(data) < 8 or data[4:8] != TFLITE_IDENTIFIER:
        raise ModelError(f"{path}: not a TFLite flatbuffer (file identifier {data[4:8]!r}, expected b'TFL3').")
    schema = _schema()
    try:
        model = schema.Model.GetRootAs(data, 0)
        out: dict[str, bytes] = {}
        for i in range(model.MetadataLength()):
            entry = model.Metadata(i)
            buf = model.Buffers(entry.Buffer())
            name = entry.Name()
            out[name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)] = (
                buf.DataAsNumpy().tobytes() if buf is not None and buf.DataLength() else b"")
        return out
    except Exception as exc:
        raise ModelError(f"{path}: the TFLite file's metadata is unreadable ({type(exc).__name__}: {exc}).") from exc


def check_no_custom_ops(source: Path) -> None:
    """Refuse a float .tflite holding custom ops the workbench cannot rewrite into builtin ops, naming each
    and why, from the file's operator codes (no conversion runs first): calibration runs the float model,
    and no runtime here has a custom op's kernel.  MediaPipe's ``Convolution2DTransposeBias`` passes: it
    is rewritten (:mod:`~workbench.models.tflite_custom_ops`)."""
    graph = read_tflite(source)
    if not any(op.is_custom for op in graph.ops):
        return
    from .tflite_custom_ops import REWRITES, custom_op_problems
    problems = custom_op_problems(Path(source).read_bytes())
    custom = [op for op in graph.ops if op.is_custom and op.index in problems]
    if not custom:
        return
    kinds = sorted({op.type for op in custom})
    shown = ", ".join(f"#{op.index} {op.type!r} (output {op.name!r}) {problems[op.index]}" for op in custom[:6])
    more = f" and {len(custom) - 6} more" if len(custom) > 6 else ""
    known = ", ".join(f"{k} -> {v}" for k, v in REWRITES.items())
    raise ModelError(
        f"{source}: {len(custom)} custom op(s) ({', '.join(map(repr, kinds))}): {shown}{more}. Quantization runs "
        "the float model on the calibration samples and neither LiteRT here nor the NPU compilers have a kernel "
        f"for a custom op; the workbench rewrites only {known}. Next: export the model without it (replace it "
        "by builtin ops), or quantize the source model it came from.")
