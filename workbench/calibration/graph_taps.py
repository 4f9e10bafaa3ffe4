"""Intermediate tensors of graph models: an ``.onnx`` file, an FP32 ``.tflite`` or a SavedModel.

An ``.onnx`` file runs through ONNX Runtime with the tapped tensors added as graph outputs, an
FP32 ``.tflite`` through LiteRT with all tensors preserved, a SavedModel folder through its FP32
``.tflite`` conversion.  The folding/fusion rule of :mod:`workbench.calibration.activations` decides
which tensors are tapped: an ONNX ``Conv`` followed by ``Relu`` is one quantized tensor (the
``Relu``'s); a TFLite graph is already fused, so every op output that is not a reshape is tapped.
Tensors computed from constants only (weights built at run time) are not activations.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError

INPUT = "input"
SHAPE_ONLY_ONNX = ("Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Dropout")
FUSING_ONNX = ("Conv", "ConvTranspose", "Gemm", "MatMul")
FOLDED_ONNX = ("BatchNormalization",)
FUSED_ONNX = ("Relu", "Clip", "LeakyRelu", "Add")      # Add: a MatMul's bias
SHAPE_ONLY_TFLITE = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
HEAD_ONNX = ("Softmax", "LogSoftmax", "Sigmoid")
HEAD_TFLITE = ("SOFTMAX", "LOG_SOFTMAX", "LOGISTIC")


class GraphTaps:
    """Intermediate tensors of an ``.onnx``, FP32 ``.tflite`` or SavedModel, by tensor name.

    ``tapped``: the tensors that become quantized tensors in INT8 (graph order);
    ``embedding``: the input of the model's last computing op (before a softmax).
    Images are NHWC float32; an NCHW ONNX input is fed transposed."""

    def __init__(self, path: str | os.PathLike, fmt: str) -> None:
        self.path = os.fspath(path)
        self.format = fmt
        if fmt == "onnx":
            self._init_onnx()
        elif fmt in ("tflite", "saved_model"):
            self._init_tflite(self.path if fmt == "tflite" else _saved_model_tflite(self.path))
        else:
            raise ModelError(f"{self.path}: cannot read activations of a {fmt!r} model.")

    def __repr__(self) -> str:
        return f"GraphTaps({self.path!r}, {self.format}, {len(self.tapped)} tensors)"

    # -- ONNX ------------------------------------------------------------------------------------
    def _init_onnx(self) -> None:
        import onnx

        from ..models.predict import batch_free_onnx
        from ..quantize.inspect import load_onnx
        model = load_onnx(self.path)
        graph = model.graph
        init = {i.name for i in graph.initializer}
        inputs = [i for i in graph.input if i.name not in init]
        if len(inputs) != 1:
            raise ModelError(f"{self.path}: the model has {len(inputs)} inputs; one image input is expected.")
        self._input = inputs[0].name
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                for d in inputs[0].type.tensor_type.shape.dim]
        self._input_dims = tuple(dims[1:])
        dynamic = {self._input}
        producer: dict[str, Any] = {}
        consumers: dict[str, list[Any]] = {}
        order: list[str] = []
        for node in graph.node:
            for name in node.input:
                if name:
                    consumers.setdefault(name, []).append(node)
            if any(name in dynamic for name in node.input) and node.op_type not in ("Shape", "Size"):
                for out in node.output:
                    if out:
                        dynamic.add(out)
                        producer[out] = node
                        order.append(out)
        types = {v.name: v.type.tensor_type.elem_type for v in
                 list(onnx.shape_inference.infer_shapes(model).graph.value_info) + list(graph.output)}
        tapped = []
        for name in order:
            node = producer[name]
            if types.get(name, 1) != 1 or node.op_type in SHAPE_ONLY_ONNX or node.output[0] != name:
                continue
            after = consumers.get(name, [])
            follower = after[0].op_type if len(after) == 1 else None
            if node.op_type in FUSING_ONNX and follower in FOLDED_ONNX + FUSED_ONNX:
                continue
            if node.op_type in FOLDED_ONNX and follower in FUSED_ONNX:
                continue
            tapped.append(name)
        self.tapped = tuple(tapped)
        self.embedding = _last_input(graph.output[0].name, producer, SHAPE_ONLY_ONNX, HEAD_ONNX,
                                     lambda node: [n for n in node.input if n in dynamic])
        wanted = [n for n in order if n in set(self.tapped) | {self.embedding}]
        self._session = self._onnx_session(_with_outputs(model, wanted))
        # a batch-1 export gets a batch-free twin (as the predictors do), trusted once it agrees with
        # one-sample runs on the first batch; otherwise every sample runs alone
        self._free_session = self._session if dims[0] is None else None
        self._batched: bool | None = True if dims[0] is None else None
        if dims[0] is not None:
            free = batch_free_onnx(self.path)
            if free is not None:
                try:
                    self._free_session = self._onnx_session(_with_outputs(onnx.load_from_string(free), wanted))
                except ModelError:
                    self._free_session = None
            if self._free_session is None:
                self._batched = False
        self._run = self._run_onnx

    def _onnx_session(self, model: Any) -> Any:
        import onnxruntime as ort

        from ..models.predict import ort_session_options
        content = model.SerializeToString()
        options = ort_session_options(content)   # QDQ groups as the integer arithmetic they stand for
        try:
            return ort.InferenceSession(content, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - ORT raises its own types
            raise ModelError(f"{self.path}: ONNX Runtime cannot load this model ({exc}).") from exc

    def _onnx_feed(self, batch: np.ndarray) -> np.ndarray:
        dims = self._input_dims
        # a dynamic dim (None: Paddle2ONNX's H/W) fits any size, as in the predictors' adapt_layout
        fits = lambda want, got: all(w is None or w == g for w, g in zip(want, got))  # noqa: E731
        got = tuple(batch.shape[1:])
        if len(dims) == 3 and batch.ndim == 4 and not fits(dims, got) and fits((dims[1], dims[2], dims[0]), got):
            return np.ascontiguousarray(batch.transpose(0, 3, 1, 2))
        return batch

    def _run_onnx(self, batch: np.ndarray, names: Sequence[str]) -> list[np.ndarray]:
        x = self._onnx_feed(batch)
        if self._batched is not False and self._free_session is not None:
            try:
                out = [np.asarray(v) for v in self._free_session.run(list(names), {self._input: x})]
            except Exception:  # noqa: BLE001 - a twin that cannot run means: run per sample
                out = None
            if self._batched is None and out is not None:   # verify the twin once, on 2 samples
                single = self._per_sample(x[:2], names)
                self._batched = all(np.allclose(a[:2], b, rtol=1e-4, atol=1e-5) for a, b in zip(out, single))
            if self._batched and out is not None:
                return out
            self._batched = False
        return self._per_sample(x, names)

    def _per_sample(self, x: np.ndarray, names: Sequence[str]) -> list[np.ndarray]:
        parts = [self._session.run(list(names), {self._input: x[i:i + 1]}) for i in range(len(x))]
        return [np.concatenate([p[k] for p in parts]) for k in range(len(names))]

    # -- TFLite ----------------------------------------------------------------------------------
    def _init_tflite(self, tflite: str) -> None:
        from ..models.tflite_graph import read_tflite
        graph = read_tflite(tflite)
        if len(graph.inputs) != 1:
            raise ModelError(f"{self.path}: the model has {len(graph.inputs)} inputs; one image input is expected.")
        if any(t.is_quantized and not t.is_constant and t.dtype not in ("FLOAT32",) for t in graph.tensors):
            raise ModelError(f"{self.path}: a quantized .tflite; activations are read from the FP32 model.")
        self._tflite = tflite
        by_index = {t.index: t for t in graph.tensors}
        producer: dict[str, Any] = {}
        tapped = []
        for op in graph.ops:
            for index in op.outputs:
                if index < 0:
                    continue
                tensor = by_index[index]
                producer[tensor.name] = op
                if tensor.dtype == "FLOAT32" and op.type not in SHAPE_ONLY_TFLITE:
                    tapped.append(tensor.name)
        self.tapped = tuple(dict.fromkeys(tapped))
        names = {t.index: t.name for t in graph.tensors}
        self._input = names[graph.inputs[0]]
        self.embedding = _last_input(names[graph.outputs[0]], producer, SHAPE_ONLY_TFLITE, HEAD_TFLITE,
                                     lambda op: [names[i] for i in op.inputs[:1] if i >= 0])
        from ai_edge_litert.interpreter import Interpreter
        self._Interpreter = Interpreter
        from ..models.tflite_custom_ops import runnable_tflite
        content = runnable_tflite(Path(tflite).read_bytes())     # MediaPipe's custom op -> its builtin twin
        self._interp = Interpreter(model_content=content, experimental_preserve_all_tensors=True)
        self._interp.allocate_tensors()
        detail = self._interp.get_input_details()[0]
        self._in_index = detail["index"]
        self._input_dims = tuple(int(d) for d in detail["shape"][1:])
        self._tensor_index = {d["name"]: d["index"] for d in self._interp.get_tensor_details()}
        self._rows = 1
        self._run = self._run_tflite

    def _run_tflite(self, batch: np.ndarray, names: Sequence[str]) -> list[np.ndarray]:
        parts: list[list[np.ndarray]] = []
        for i in range(len(batch)):
            self._interp.set_tensor(self._in_index, np.ascontiguousarray(batch[i:i + 1]))
            self._interp.invoke()
            parts.append([self._interp.get_tensor(self._tensor_index[n]).copy() for n in names])
        return [np.concatenate([p[k] for p in parts]) for k in range(len(names))]

    # -- shared ----------------------------------------------------------------------------------
    def iter_activations(self, x: np.ndarray, *, layers: Sequence[str] | None = None,
                         batch_size: int = 256) -> Iterator[dict[str, np.ndarray]]:
        names = tuple(layers) if layers is not None else (INPUT, *self.tapped)
        known = set(self.tapped) | {self.embedding}
        unknown = [n for n in names if n != INPUT and n not in known]
        if unknown:
            raise ModelError(f"{self.path}: no tapped tensor(s) {', '.join(unknown)}; tensors: "
                             f"{', '.join(self.tapped)}.")
        tapped = [n for n in names if n != INPUT]
        for start in range(0, len(x), batch_size):
            batch = np.ascontiguousarray(x[start:start + batch_size], dtype=np.float32)
            out = dict(zip(tapped, self._run(batch, tapped))) if tapped else {}
            if INPUT in names:
                out[INPUT] = batch
            yield {n: out[n] for n in names}

    def embeddings(self, x: np.ndarray, *, batch_size: int = 256) -> np.ndarray:
        parts = [b[self.embedding] for b in self.iter_activations(x, layers=(self.embedding,),
                                                                     batch_size=batch_size)]
        feats = np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)
        return feats.reshape(len(feats), -1).astype(np.float32, copy=False)


def _with_outputs(model: Any, names: Sequence[str]) -> Any:
    """``model`` with ``names`` added as float graph outputs (those not outputs already)."""
    import onnx
    known = {o.name for o in model.graph.output}
    for name in names:
        if name not in known:
            model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    return model


def _last_input(output: str, producer: dict[str, Any], shape_only: tuple[str, ...], head: tuple[str, ...],
                inputs: Any) -> str:
    """The input of the last computing op before ``output`` (skipping reshapes and a softmax)."""
    name = output
    for _ in range(64):
        op = producer.get(name)
        if op is None:
            return name
        kind = getattr(op, "op_type", None) or getattr(op, "type", "")
        ins = inputs(op)
        if not ins:
            return name
        if kind in shape_only or kind in head:
            name = ins[0]
            continue
        return ins[0]
    return name


def _saved_model_tflite(path: str) -> str:
    """The FP32 ``.tflite`` of a SavedModel folder (converted once, cached by content)."""
    from .._io import atomic_write_bytes, cache_dir, sha256_file, stable_hash
    from ..quantize.tflite_backend import _tf, load_function
    key = stable_hash({"saved_model": sha256_file(path), "tensorflow": _tf_version()})
    target = cache_dir("convert", "fp32") / f"{key[:32]}.tflite"
    if target.is_file():
        return str(target)
    tf = _tf()
    fn, _, _ = load_function(path, "saved_model")
    try:
        data = tf.lite.TFLiteConverter.from_concrete_functions([fn]).convert()
    except Exception as exc:  # noqa: BLE001 - the converter raises many types
        raise ModelError(f"{path}: the TFLite converter cannot convert this SavedModel to FP32 "
                         f"({type(exc).__name__}: {' '.join(str(exc).split())[:300]}).") from exc
    atomic_write_bytes(target, bytes(data))
    return str(target)


def _tf_version() -> str:
    from ..quantize.tflite_backend import toolchain
    return toolchain()["tensorflow"]
