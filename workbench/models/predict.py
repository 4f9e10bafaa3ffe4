"""Run any model format on arrays: the one place that turns images into logits.

``load_predictor(model)`` returns a :class:`Predictor` whose ``predict(x)`` takes
float32 NHWC images in [0, 1] and returns float32 logits/scores ``(N, classes)``
for Keras ``.keras``/``.h5`` files, SavedModel folders, ``.tflite`` files (LiteRT)
and ``.onnx`` files (ONNX Runtime).  ``model`` may also be a ``QuantizedModel``-like
object (anything with ``.path``) or a ``ReferenceModel``-like one (its ``.keras``).

Speed without trusting a shortcut:

- Models are run in batches.  A model exported with a fixed batch of 1 (the
  deployable form) gets an in-memory *batch-free twin*: the batch dimension of
  its input is freed and the reshapes that hard-code a batch of 1 get ``-1``
  (Keras: the same graph rebuilt with a free batch; TFLite: the flatbuffer
  patched; ONNX: the graph patched).  The file on disk is never changed.
- Before the twin is used, its outputs on the first samples are compared with
  one-sample runs of the original model; if they differ, or the twin cannot be
  built or resized, the predictor falls back to one run per sample, with a
  :class:`~workbench.errors.WorkbenchWarning` when a twin was built but disagreed.
- Integer inputs (INT8/UINT8/INT16) are quantized and integer outputs dequantized
  with the model's own scale and zero point.
"""

from __future__ import annotations

import functools
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError, WorkbenchWarning
from .formats import model_format

DEFAULT_BATCH = 128
_VERIFY_SAMPLES = 4
_GROUP_BYTES = 8 << 20    # model inputs prepared ahead of running them (see Predictor.predict_outputs)


def resolve_model_path(model: Any) -> str:
    """The file or folder behind ``model``: a path, a ``QuantizedModel``-like (``.path``)
    or a ``ReferenceModel``-like (``.keras``)."""
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    for attr in ("path", "keras"):
        value = getattr(model, attr, None)
        if isinstance(value, (str, os.PathLike)):
            return str(value)
    raise ModelError(f"cannot evaluate a {type(model).__name__}: expected a model path (.keras, .h5, SavedModel "
                     "folder, .tflite, .onnx), a QuantizedModel or a ReferenceModel.")


_SIGN_BIT, _HALF_BITS, _INF_BITS = np.uint32(0x80000000), np.uint32(0x3F000000), np.uint32(0x7F800000)
# float32 bit patterns: the sign bit, 0.5, +infinity


def quantize_input(x: np.ndarray, scale: float, zero_point: int, dtype: np.dtype, *,
                   out: np.ndarray | None = None, scratch: tuple[np.ndarray, ...] | None = None) -> np.ndarray:
    """Float to integer with the model's input parameters, as TFLite's QUANTIZE does:
    ``round(x / scale) + zero_point`` (half away from zero), clipped to the type's range.

    Computed in float32 as ``trunc(v + copysign(0.5, v)) + zero_point`` clipped, ``v = x / scale``,
    in as few passes over the data as that allows (the same numbers every way):

    - the clip is taken before the truncation (``trunc`` is monotone and the bounds are integers,
      so the result is the same) and the truncation is the float-to-int cast itself;
    - one reduction tells whether any ``v`` is negative and finds the largest (read as unsigned
      32-bit integers, float32 values from +0 up keep their order and every negative one lies
      above them).  With none negative, ``copysign`` is just 0.5, the clip is needed only if the
      largest value lands above the range, and the cast writes the unsigned type of the same size,
      to which the zero point is added with wrap-around: exactly the signed sum, as it is in range;
    - otherwise ``copysign`` is two bit operations and the cast goes through a wider integer.

    ``out`` (an integer array of ``x``'s shape, e.g. an interpreter's own input buffer) receives
    the result; ``scratch`` (from :func:`quantize_scratch`) holds intermediate values between
    calls.  Both only spare allocations.
    """
    dtype = np.dtype(dtype)
    info = _int_range(dtype)
    low, high = info.min - zero_point, info.max - zero_point             # the clip, before adding the zero point
    x = np.asarray(x, np.float32)
    v, half, whole = scratch if scratch is not None else quantize_scratch(x.shape, dtype)
    if out is None:
        out = np.empty(x.shape, dtype)
    np.divide(x, np.float32(scale), out=v)
    top = v.view(np.uint32).max() if v.size else np.uint32(0)
    if top <= _INF_BITS:                                              # no value negative (nor -0.0, nor NaN)
        v += np.float32(0.5)
        if top.view(np.float32) + np.float32(0.5) >= high + 1:
            np.clip(v, np.float32(0), _bound(dtype, high), out=v)
        unsigned = out.view(np.dtype(f"u{dtype.itemsize}"))
        np.copyto(unsigned, v, casting="unsafe")                     # float -> int truncates toward zero
        np.add(unsigned, unsigned.dtype.type(zero_point % (1 << 8 * dtype.itemsize)), out=unsigned)
        return out
    np.bitwise_and(v.view(np.uint32), _SIGN_BIT, out=half)          # copysign(0.5, v) ...
    np.bitwise_or(half, _HALF_BITS, out=half)
    v += half.view(np.float32)                                       # ... added to v
    np.clip(v, _bound(dtype, low), _bound(dtype, high), out=v)
    np.copyto(whole, v, casting="unsafe")                            # float -> int truncates toward zero
    np.add(whole, zero_point, out=out, casting="unsafe")             # in range after the clip
    return out


def _bound(dtype: np.dtype, value: int) -> Any:
    """A clip bound: float32 for 8- and 16-bit types (exact, and a faster clip), else a Python float."""
    return np.float32(value) if dtype.itemsize <= 2 else float(value)


@functools.cache
def _int_range(dtype: np.dtype) -> np.iinfo:
    return np.iinfo(dtype)                                           # built once per type: it costs microseconds


def quantize_scratch(shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Work arrays for :func:`quantize_input` on inputs of ``shape`` quantized to ``dtype``."""
    wide = np.int16 if np.dtype(dtype).itemsize == 1 else np.int64
    return np.empty(shape, np.float32), np.empty(shape, np.uint32), np.empty(shape, wide)


def dequantize_output(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Integer to float32: ``(q - zero_point) * scale``, in float32 (a new array)."""
    y = q.astype(np.float32)
    y -= np.float32(zero_point)
    y *= np.float32(scale)
    return y


class Predictor:
    """A loaded model that maps images to float32 outputs.

    ``predict(x)`` returns the first output as ``(N, values)``; ``predict_outputs(x)`` every
    output tensor, in the model's order, each ``(N, values)`` (flattened per sample).
    ``x`` is pixels (float32 NHWC in [0, 1], or uint8) when the predictor has an input
    ``contract`` (:class:`~workbench.models.contract.InputContract`): each batch then goes
    through ``contract.apply``; without one, ``x`` is fed as it is (float32 model inputs).
    ``x`` may be any sequence of images that slices into arrays (a lazy dataset view): it is
    read one batch at a time.

    Attributes: ``path``, ``format``, ``input_shape`` (per-sample shape the model takes,
    ``None`` for a free dimension, in the dataset's NHWC layout), ``input_dtype``,
    ``mode`` (``"batched"`` or ``"per-sample"``, known after the first ``predict``),
    ``contract``, ``n_outputs``.
    """

    format = "?"

    def __init__(self, path: str, *, batch_size: int = DEFAULT_BATCH, num_threads: int | None = None,
                 contract: Any = None):
        self.path = str(path)
        self.batch_size = int(batch_size)
        self.num_threads = int(num_threads or os.cpu_count() or 1)
        self.input_shape: tuple[int | None, ...] = ()
        self.input_dtype = "float32"
        self.mode: str | None = None
        self.contract = contract
        self.n_outputs = 1
        self.output_names: tuple[str, ...] = ()
        self._batched_ready: bool | None = None   # None: not tried yet
        self._lut: tuple[tuple[int, Any], np.ndarray, list[int]] | None = None   # see _from_pixels

    # -- what backends provide -------------------------------------------------------------
    def _run_one(self, x1: np.ndarray) -> list[np.ndarray]:     # (1, ...) -> [(1, V0), (1, V1), ...]
        raise NotImplementedError

    def _open_batched(self) -> bool:                             # build the batch path; False if impossible
        return False

    def _run_batch(self, xb: np.ndarray) -> list[np.ndarray]:   # (B, ...) -> [(B, V0), ...], B <= batch_size
        raise NotImplementedError

    def _encode(self, x: np.ndarray) -> np.ndarray:             # model inputs -> what the backend is fed
        return x

    def _decode(self, outputs: list[np.ndarray]) -> list[np.ndarray]:   # backend outputs -> float32
        return [np.asarray(o, np.float32) for o in outputs]

    # -- the shared pipeline ---------------------------------------------------------------
    def check_input(self, x: np.ndarray) -> np.ndarray:
        return self._check_shape(np.asarray(x, dtype=np.float32))

    def _check_shape(self, x: np.ndarray) -> np.ndarray:
        if x.ndim != 1 + len(self.input_shape) or any(
                want is not None and want != got for want, got in zip(self.input_shape, x.shape[1:])):
            shown = tuple("?" if d is None else d for d in self.input_shape)
            raise ModelError(f"{self.path}: the model takes images of shape {shown} (NHWC, batch excluded) "
                             f"but got {tuple(x.shape[1:])}; use a dataset made for this model or resize it "
                             "(load_dataset(..., resize=(height, width))).")
        return x

    def prepare(self, x: Any, ids: Any = None) -> np.ndarray:
        """One batch of images -> model inputs (the contract, then the shape check)."""
        if self.contract is not None:
            pixels = x.uint8() if hasattr(x, "uint8") else np.asarray(x)   # lazy image files: 8-bit decode
            x = self.contract.apply(pixels, ids=ids, where=self.path)
        return self.check_input(x)

    def _inputs(self, x: Any, ids: Any = None) -> np.ndarray:
        """One batch as the backend runs it: lazy 8-bit pixels may go straight to the model's integer
        input through a lookup table (bit-identical to contract then quantize); else :meth:`prepare`."""
        if self.contract is not None and hasattr(x, "uint8"):
            pixels = x.uint8()
            fast = self._from_pixels(pixels)
            if fast is not None:
                return self._check_shape(fast)
            return self.check_input(self.contract.apply(pixels, ids=ids, where=self.path))
        return self.prepare(x, ids)

    def _from_pixels(self, pixels: np.ndarray) -> np.ndarray | None:
        """uint8 pixels -> model input by one lookup per value: the table is ``contract.apply(v)``
        for v = 0..255 (quantized with the model's input parameters for an integer input), so the
        result equals the float path bit for bit.  Only where each input channel maps one pixel
        channel (no resize, no RGB -> gray); otherwise ``None``."""
        c = self.contract
        if pixels.ndim != 4:
            return None
        n, h, w, ch = pixels.shape
        if (c.size is not None and (h, w) != tuple(c.size)) or ch not in (1, 3) or (ch == 3 and c.channels == 1):
            return None
        if self._lut is None or self._lut[0] != (ch, c):
            ramp = np.repeat(np.arange(256, dtype=np.uint8).reshape(1, 1, 256, 1), ch, axis=3)
            import dataclasses
            per_value = dataclasses.replace(c, size=None).apply(ramp)                    # no resize of the ramp
            table = self._pixel_table(per_value)[0, 0]                                  # (256, C)
            source = list(range(c.channels)) if ch == c.channels else [0] * c.channels
            if c.color == "bgr" and ch == 3:
                source = source[::-1]
            self._lut = ((ch, c), np.ascontiguousarray(table.T), source)
        _, table, source = self._lut
        out = np.empty((n, h, w, len(source)), table.dtype)
        for k, src in enumerate(source):
            np.take(table[k], pixels[..., src], out=out[..., k])
        return out

    def _pixel_table(self, per_value: np.ndarray) -> np.ndarray:     # backends with integer inputs quantize
        return per_value

    def predict(self, x: Any, *, ids: Any = None) -> np.ndarray:
        """float32 ``(N, values)`` of the first output for the images ``x``."""
        return self.predict_outputs(x, ids=ids)[0]

    def predict_outputs(self, x: Any, *, ids: Any = None) -> list[np.ndarray]:
        """Every output tensor, ``[(N, V0), (N, V1), ...]`` float32, for the images ``x``.

        Batches are prepared (contract, checks, input quantization) a group at a time, up to
        8 MB of model inputs, and the group is then run back to back: the preparation's code and
        the model's kernels each stay warm in the CPU caches instead of evicting each other every
        batch (on the reference model, 6% of the evaluation time).  Integer outputs are
        dequantized once, at the end.
        """
        n = len(x)
        if n == 0:
            raise ModelError(f"{self.path}: nothing to predict (0 images).")
        step = self.batch_size
        ids_of = (lambda a, b: None) if ids is None else (lambda a, b: ids[a:b])  # noqa: E731
        parts: list[list[np.ndarray]] = []
        start = 0
        if self._batched_ready is None:
            first_in = self._encode(self._inputs(x[:step], ids_of(0, step)))
            first = self._try_batched(first_in)
            self._batched_ready = first is not None
            self.mode = "batched" if self._batched_ready else "per-sample"
            parts.append(first if first is not None else self._per_sample(first_in))
            start = len(first_in)
        group: list[np.ndarray] = []
        group_bytes = 0
        for b in range(start, n, step):
            xb = self._encode(self._inputs(x[b:b + step], ids_of(b, b + step)))
            group.append(xb)
            group_bytes += xb.nbytes
            if group_bytes >= _GROUP_BYTES or b + step >= n:
                parts.extend(self._run_batch(g) if self._batched_ready else self._per_sample(g) for g in group)
                group, group_bytes = [], 0
        merged = parts[0] if len(parts) == 1 else [np.concatenate([p[k] for p in parts]) for k in range(len(parts[0]))]
        return self._decode(merged)

    def _per_sample(self, xb: np.ndarray) -> list[np.ndarray]:
        runs = [self._run_one(xb[i:i + 1]) for i in range(len(xb))]
        return [np.concatenate([r[k] for r in runs]).astype(np.float32) for k in range(len(runs[0]))]

    def _try_batched(self, first: np.ndarray) -> list[np.ndarray] | None:
        """Open the batch path and run the first batch; its first samples are checked against
        one-sample runs of the original model.  Returns the first batch's outputs (as
        ``_run_batch`` gives them), or ``None``."""
        try:
            if not self._open_batched():
                return None
            batched = self._run_batch(first)
        except Exception:  # noqa: BLE001 - a twin that cannot run means: run per sample
            return None
        probe = first[:_VERIFY_SAMPLES]
        single = self._per_sample(probe)
        agree = len(batched) == len(single)
        for k, (b, s) in enumerate(zip(self._decode(batched), single)):
            scale = float(np.max(np.abs(s))) + 1e-6
            if b.shape != (len(first), s.shape[1]) or not np.allclose(
                    b[:len(probe)], s, rtol=1e-3, atol=1e-3 * scale + self._atol(k)):
                agree = False
        if not agree:
            warnings.warn(f"{self.path}: the batch-free twin of this batch-1 model disagrees with one-sample "
                          "runs; evaluating one sample at a time (slower, same numbers as the file).",
                          WorkbenchWarning, stacklevel=3)
            return None
        return batched

    def _atol(self, k: int = 0) -> float:
        return 0.0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, mode={self.mode})"


# -- TFLite (LiteRT) --------------------------------------------------------------------------

class TFLitePredictor(Predictor):
    format = "tflite"

    def __init__(self, path: str, **kwargs: Any):
        super().__init__(path, **kwargs)
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
        self._Interpreter: Any = Interpreter
        self._content = Path(path).read_bytes()
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


# -- ONNX Runtime ----------------------------------------------------------------------------

QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})


def is_qdq(content: bytes) -> bool:
    """Whether the serialized ONNX model holds QuantizeLinear/DequantizeLinear nodes."""
    import onnx
    return any(n.op_type in QDQ_OPS for n in onnx.load_from_string(content).graph.node)


def ort_session_options(content: bytes) -> Any:
    """ONNX Runtime session options that measure the model, not this host's int8 kernels.

    For a QDQ model, graph optimisation stops at the basic level: every op runs as the
    integer arithmetic its DequantizeLinear -> op -> QuantizeLinear group stands for.  The
    extended level fuses those groups into ORT's own int8 kernels, and on x86 CPUs without
    VNNI those use VPMADDUBSW, whose 16-bit intermediate sums saturate (ONNX Runtime's
    quantization docs say so).  Measured on this project's reference model, a8w8_pc: daylight
    top-1 64.8% with the fused kernels, 100.0% at the basic level (the TFLite model: 100.0%).
    """
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if is_qdq(content):
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return options


class OnnxPredictor(Predictor):
    format = "onnx"

    def __init__(self, path: str, **kwargs: Any):
        super().__init__(path, **kwargs)
        import onnxruntime as ort
        self._ort = ort
        try:
            self._one = self._session(Path(path).read_bytes())
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
            raise ModelError(f"{path}: ONNX Runtime cannot load this model ({exc}).") from exc
        inputs = self._one.get_inputs()
        if len(inputs) != 1:
            raise ModelError(f"{path}: the model has {len(inputs)} inputs "
                             f"({', '.join(i.name for i in inputs)}); evaluation feeds one image tensor.")
        inp = inputs[0]
        if inp.type != "tensor(float)":
            raise ModelError(f"{path}: input {inp.name!r} is {inp.type}; the workbench evaluates ONNX models "
                             "with float inputs (QDQ models keep float inputs: quantize with the ORT backend "
                             "and its default QDQ format).")
        self._in_name = inp.name
        self.output_names = tuple(o.name for o in self._one.get_outputs())
        self.n_outputs = len(self.output_names)
        dims = [d if isinstance(d, int) and d > 0 else None for d in inp.shape]
        self._dims = dims
        self._nchw = False
        self.input_shape = tuple(dims[1:])
        self._batch_session: Any = None   # an onnxruntime session with a free batch, opened on first need

    def adapt_layout(self, data_shape: tuple[int, ...]) -> None:
        """Feed NCHW if the model takes channels first and the data (NHWC) fits only that way."""
        shape = self.input_shape
        if len(shape) != 3 or len(data_shape) != 3:
            return
        fits = lambda want, got: all(w is None or w == g for w, g in zip(want, got))  # noqa: E731
        nchw = (shape[1], shape[2], shape[0])
        if not fits(shape, data_shape) and fits(nchw, data_shape):
            self._nchw = True
            self.input_shape = nchw

    def _session(self, content: bytes):
        options = ort_session_options(content)
        options.intra_op_num_threads = self.num_threads
        return self._ort.InferenceSession(content, options, providers=["CPUExecutionProvider"])

    def _feed(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return {self._in_name: np.ascontiguousarray(x.transpose(0, 3, 1, 2) if self._nchw else x)}

    def _run_one(self, x1: np.ndarray) -> list[np.ndarray]:
        return [np.asarray(o, np.float32).reshape(1, -1) for o in self._one.run(None, self._feed(x1))]

    def _open_batched(self) -> bool:
        if self._dims and self._dims[0] is None:
            self._batch_session = self._one
            return True
        content = batch_free_onnx(self.path)
        if content is None:
            return False
        self._batch_session = self._session(content)
        return True

    def _run_batch(self, xb: np.ndarray) -> list[np.ndarray]:
        return [np.asarray(o, np.float32).reshape(len(xb), -1) for o in self._batch_session.run(None, self._feed(xb))]


def batch_free_onnx(path: str) -> bytes | None:
    """A copy of a batch-1 ONNX graph with a symbolic batch: input/output dim 0 become ``N``
    and constant Reshape targets starting with 1 start with -1.  ``None`` if not applicable."""
    import onnx
    from onnx import numpy_helper
    try:
        model = onnx.load(path)
    except Exception:  # noqa: BLE001
        return None
    graph = model.graph
    for value in list(graph.input) + list(graph.output):
        dims = value.type.tensor_type.shape.dim
        if len(dims) == 0:
            return None
        dims[0].ClearField("dim_value")
        dims[0].dim_param = "N"
    del graph.value_info[:]
    inits = {t.name: t for t in graph.initializer}
    consumers: dict[str, list[str]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node.op_type)
    constants = {node.output[0]: node for node in graph.node if node.op_type == "Constant"}
    for node in graph.node:
        if node.op_type != "Reshape" or len(node.input) < 2:
            continue
        name = node.input[1]
        if set(consumers.get(name, ())) != {"Reshape"}:
            continue
        if name in inits:
            values = numpy_helper.to_array(inits[name]).copy()
            if values.ndim == 1 and len(values) and values[0] == 1 and -1 not in values:
                values[0] = -1
                inits[name].CopyFrom(numpy_helper.from_array(values, name))
        elif name in constants:
            for attr in constants[name].attribute:
                if attr.name == "value":
                    values = numpy_helper.to_array(attr.t).copy()
                    if values.ndim == 1 and len(values) and values[0] == 1 and -1 not in values:
                        values[0] = -1
                        attr.t.CopyFrom(numpy_helper.from_array(values, attr.t.name))
    return model.SerializeToString()


# -- Keras -----------------------------------------------------------------------------------

class KerasPredictor(Predictor):
    format = "keras"

    def __init__(self, path: str, **kwargs: Any):
        super().__init__(path, **kwargs)
        import keras
        try:
            self._model = keras.models.load_model(path, compile=False)
        except Exception as exc:  # noqa: BLE001 - Keras raises many types
            raise ModelError(f"{path}: Keras cannot load this model ({exc}).") from exc
        if len(self._model.inputs) != 1:
            raise ModelError(f"{path}: the model has {len(self._model.inputs)} inputs; evaluation feeds one "
                             "image tensor.")
        shape = tuple(self._model.inputs[0].shape)
        self._fixed_batch = shape[0]
        self.n_outputs = len(self._model.outputs)
        self.output_names = tuple(getattr(o, "name", f"output_{i}") for i, o in enumerate(self._model.outputs))
        self.input_shape = tuple(None if d is None else int(d) for d in shape[1:])
        self._free: Any = None   # the Keras model with a free batch, made on first need

    @staticmethod
    def _outputs(y: Any, n: int) -> list[np.ndarray]:
        ys = list(y.values()) if isinstance(y, dict) else list(y) if isinstance(y, (list, tuple)) else [y]
        return [np.asarray(o, np.float32).reshape(n, -1) for o in ys]

    def _run_one(self, x1: np.ndarray) -> list[np.ndarray]:
        return self._outputs(self._model(x1, training=False), 1)

    def _open_batched(self) -> bool:
        if self._fixed_batch is None:
            self._free = self._model
            return True
        import keras
        config = self._model.get_config()
        for layer in config.get("layers", ()):
            if layer.get("class_name") == "InputLayer":
                cfg = layer["config"]
                key = "batch_shape" if "batch_shape" in cfg else "batch_input_shape"
                cfg[key] = [None, *list(cfg[key])[1:]]
                cfg.pop("batch_size", None)
        free = type(self._model).from_config(config) if type(self._model) in (keras.Model, keras.Sequential) \
            else keras.Model.from_config(config)
        free.set_weights(self._model.get_weights())
        self._free = free
        return True

    def _run_batch(self, xb: np.ndarray) -> list[np.ndarray]:
        return self._outputs(self._free(xb, training=False), len(xb))


# -- SavedModel ------------------------------------------------------------------------------

class SavedModelPredictor(Predictor):
    format = "saved_model"

    def __init__(self, path: str, **kwargs: Any):
        super().__init__(path, **kwargs)
        import tensorflow as tf
        try:
            loaded = tf.saved_model.load(path)
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"{path}: TensorFlow cannot load this SavedModel ({exc}).") from exc
        self._loaded = loaded
        signatures = getattr(loaded, "signatures", {}) or {}
        if not signatures:
            raise ModelError(f"{path}: the SavedModel has no signatures; export it with a serving signature.")
        name = "serving_default" if "serving_default" in signatures else sorted(signatures)[0]
        self._fn = signatures[name]
        specs = self._fn.structured_input_signature[1]
        if len(specs) != 1:
            raise ModelError(f"{path}: signature {name!r} takes {len(specs)} inputs ({', '.join(specs)}); "
                             "evaluation feeds one image tensor.")
        self._in_name, spec = next(iter(specs.items()))
        dims = spec.shape.as_list()
        self._batch_dim = dims[0]
        self.input_shape = tuple(dims[1:])
        self._out_keys = sorted(self._fn.structured_outputs)
        self.n_outputs = len(self._out_keys)
        self.output_names = tuple(self._out_keys)

    def _call(self, x: np.ndarray) -> list[np.ndarray]:
        import tensorflow as tf
        out = self._fn(**{self._in_name: tf.constant(x)})
        return [np.asarray(out[k], np.float32).reshape(len(x), -1) for k in self._out_keys]

    def _run_one(self, x1: np.ndarray) -> list[np.ndarray]:
        return self._call(x1)

    def _open_batched(self) -> bool:
        return self._batch_dim is None

    def _run_batch(self, xb: np.ndarray) -> list[np.ndarray]:
        return self._call(xb)


_BACKENDS = {"tflite": TFLitePredictor, "onnx": OnnxPredictor, "keras": KerasPredictor,
             "saved_model": SavedModelPredictor}


def load_predictor(model: Any, *, batch_size: int = DEFAULT_BATCH, num_threads: int | None = None,
                   contract: Any = None) -> Predictor:
    """A :class:`Predictor` for a model path, a ``QuantizedModel``-like or a ``ReferenceModel``-like.

    ``contract``: an :class:`~workbench.models.contract.InputContract` applied to every batch
    (``predict`` then takes pixels); ``None`` feeds ``x`` as it is.
    """
    from .._validation import check_positive_int
    check_positive_int("batch_size", batch_size, error=ModelError)
    path = resolve_model_path(model)
    return _BACKENDS[model_format(path)](path, batch_size=batch_size, num_threads=num_threads, contract=contract)
