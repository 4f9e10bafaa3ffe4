"""LiteRT (.tflite): the predictor, integer inputs and outputs, and the batch-free flatbuffer twin."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ModelError, WorkbenchWarning
from .base import Predictor
from .quantization import dequantize_output, quantize_input, quantize_scratch


class TFLitePredictor(Predictor):
    format = "tflite"

    def __init__(self, path: str, **kwargs: Any):
        super().__init__(path, **kwargs)
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
        self._Interpreter: Any = Interpreter
        from ..tflite_custom_ops import runnable_tflite
        self._content = runnable_tflite(Path(path).read_bytes())   # MediaPipe's custom op -> its builtin twin
        self.kernels = "LiteRT default runtime (XNNPACK)"
        try:
            self._one = Interpreter(model_content=self._content, num_threads=self.num_threads)
            self._one.allocate_tensors()
        except (RuntimeError, ValueError) as exc:
            if "xnnpack" not in str(exc).lower():
                raise ModelError(f"{path}: LiteRT cannot load this model ({exc}).") from exc
            # XNNPACK refuses some INT8 files (`failed to create XNNPACK runtime`) that the builtin kernels run
            self._Interpreter = functools.partial(
                Interpreter, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
            try:
                self._one = self._Interpreter(model_content=self._content, num_threads=self.num_threads)
                self._one.allocate_tensors()
            except (RuntimeError, ValueError) as exc2:
                raise ModelError(f"{path}: LiteRT cannot load this model ({exc}; without XNNPACK: {exc2}).") from exc2
            self.kernels = "LiteRT builtin kernels (XNNPACK refused the model)"
            warnings.warn(f"{path}: LiteRT's default runtime refuses this model (XNNPACK: "
                          f"{' '.join(str(exc).split())[:200]}); running it with the builtin kernels instead "
                          "(numbers are the same arithmetic; speed is not XNNPACK's).", WorkbenchWarning, stacklevel=3)
        inputs, outputs = self._one.get_input_details(), self._one.get_output_details()
        if len(inputs) != 1:
            raise ModelError(f"{path}: the model has {len(inputs)} inputs "
                             f"({', '.join(i['name'] for i in inputs)}); evaluation feeds one image tensor.")
        self._in, self._outs = inputs[0], outputs
        self.input_shape = tuple(None if d < 0 else int(d) for d in self._in["shape_signature"][1:])
        self.input_dtype = np.dtype(self._in["dtype"]).name
        self.output_dtypes = tuple(np.dtype(o["dtype"]).name for o in outputs)
        self._in_q = self._quant(self._in)
        self._out_qs = [self._quant(o) for o in outputs]
        self.n_outputs = len(outputs)
        self.output_names = tuple(o["name"] for o in outputs)
        self._batch_interp: Any = None   # a LiteRT interpreter with a free batch, opened on first need
        self._batch_rows = 0
        self._scratch_buffers: tuple[np.ndarray, ...] | None = None   # see _scratch

    def _quant(self, detail: dict) -> tuple[float, int] | None:
        if not np.issubdtype(np.dtype(detail["dtype"]), np.integer):
            return None
        scale, zp = detail["quantization"]
        if not scale:
            raise ModelError(f"{self.path}: tensor {detail['name']!r} is {np.dtype(detail['dtype']).name} "
                             "without quantization parameters; cannot map images to it.")
        return float(scale), int(zp)

    def _atol(self, k: int = 0) -> float:
        q = self._out_qs[k] if k < len(self._out_qs) else None
        return 2.0 * q[0] if q else 0.0

    def _encode(self, x: np.ndarray) -> np.ndarray:
        if x.dtype == self._in["dtype"] and self._in_q:   # already quantized (pixel lookup table)
            return x
        if self._in_q:
            return quantize_input(x, *self._in_q, np.dtype(self._in["dtype"]), scratch=self._scratch(x.shape))
        return x.astype(self._in["dtype"], copy=False)

    def _scratch(self, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
        """:func:`quantize_scratch` for inputs of ``shape``, kept between batches: made for the
        largest batch so far, a smaller one uses its first rows."""
        rows = shape[0] if shape else 1
        if self._scratch_buffers is None or self._scratch_buffers[0].shape[1:] != shape[1:] \
                or len(self._scratch_buffers[0]) < rows:
            self._scratch_buffers = quantize_scratch(shape, np.dtype(self._in["dtype"]))
        return tuple(a[:rows] for a in self._scratch_buffers)

    def _decode(self, outputs: list[np.ndarray]) -> list[np.ndarray]:
        return [dequantize_output(y, *q) if q and np.issubdtype(y.dtype, np.integer) else np.asarray(y, np.float32)
                for y, q in zip(outputs, self._out_qs)]

    def _pixel_table(self, per_value: np.ndarray) -> np.ndarray:
        return quantize_input(per_value, *self._in_q, np.dtype(self._in["dtype"])) if self._in_q else per_value

    def _finish(self, interp: Any, n: int) -> list[np.ndarray]:
        out = []
        for detail, q in zip(self._outs, self._out_qs):
            y = interp.get_tensor(detail["index"])[:n]
            y = y.reshape(len(y), -1)
            out.append(dequantize_output(y, *q) if q else y.astype(np.float32))
        return out

    def _run_one(self, x1: np.ndarray) -> list[np.ndarray]:
        self._one.set_tensor(self._in["index"], self._encode(x1))
        self._one.invoke()
        return self._finish(self._one, 1)

    def _open_batched(self) -> bool:
        content: bytes | None = self._content
        if int(self._in["shape_signature"][0]) != -1:
            content = batch_free_tflite(self._content)
            if content is None:
                return False
        self._batch_interp = self._Interpreter(model_content=content, num_threads=self.num_threads)
        self._resize(self.batch_size)
        return True

    def _resize(self, rows: int) -> None:
        interp = self._batch_interp
        interp.resize_tensor_input(self._in["index"], [rows, *self._in["shape"][1:]], strict=False)
        interp.allocate_tensors()
        self._batch_rows = rows

    def _run_batch(self, xb: np.ndarray) -> list[np.ndarray]:
        n = len(xb)
        if n != self._batch_rows and not (n < self._batch_rows == self.batch_size):
            self._resize(n)                       # a short last batch is padded instead (zeros, outputs dropped)
        interp = self._batch_interp
        buffer = interp.tensor(self._in["index"])()   # the input tensor's own memory: written in place
        if buffer.shape[1:] != xb.shape[1:]:
            raise ModelError(f"{self.path}: the model takes {tuple(buffer.shape[1:])} per sample, got "
                             f"{tuple(xb.shape[1:])}.")
        buffer[:n] = self._encode(xb)
        buffer[n:] = 0
        del buffer                                # LiteRT refuses to invoke while a view of its memory is held
        interp.invoke()
        outputs = [interp.get_tensor(d["index"])[:n] for d in self._outs]              # raw: see _decode
        return [y.reshape(len(y), -1) for y in outputs]


def batch_free_tflite(content: bytes) -> bytes | None:
    """A copy of a batch-1 .tflite flatbuffer whose batch dimension can be resized.

    Frees the batch dimension of the graph input's signature and replaces the leading
    ``1`` of each RESHAPE target shape that carries the batch (its input's leading dim
    is 1 too) by ``-1``.  Returns ``None`` when the model cannot be rewritten this way.
    """
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema
    try:
        model = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
    except Exception:  # noqa: BLE001
        return None
    if not model.subgraphs or len(model.subgraphs) != 1:
        return None
    graph = model.subgraphs[0]
    for index in graph.inputs:
        tensor = graph.tensors[index]
        sig = np.array(tensor.shapeSignature if tensor.shapeSignature is not None else tensor.shape, np.int32)
        if len(sig) == 0 or sig[0] not in (1, -1):
            return None
        sig[0] = -1
        tensor.shapeSignature = sig
    for op in graph.operators or ():
        code = model.operatorCodes[op.opcodeIndex]
        builtin = max(int(code.builtinCode), int(code.deprecatedBuiltinCode))
        if builtin != schema.BuiltinOperator.RESHAPE:
            continue
        src = graph.tensors[op.inputs[0]]
        if src.shape is None or len(src.shape) == 0 or int(src.shape[0]) != 1:
            continue
        if len(op.inputs) > 1 and op.inputs[1] >= 0:
            shape_tensor = graph.tensors[op.inputs[1]]
            buffer = model.buffers[shape_tensor.buffer]
            if buffer.data is None or len(buffer.data) == 0:
                continue            # computed at run time (SHAPE/PACK): already batch-aware
            values = np.frombuffer(bytes(bytearray(buffer.data)), dtype=np.int32).copy()
            if len(values) == 0 or values[0] != 1 or -1 in values:
                continue
            values[0] = -1
            buffer.data = np.frombuffer(values.tobytes(), dtype=np.uint8)
        options = op.builtinOptions
        if options is not None and getattr(options, "newShape", None) is not None and len(options.newShape):
            new_shape = np.array(options.newShape, np.int32)
            if new_shape[0] == 1 and -1 not in new_shape:
                new_shape[0] = -1
                options.newShape = new_shape
    builder = flatbuffers.Builder(len(content) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
