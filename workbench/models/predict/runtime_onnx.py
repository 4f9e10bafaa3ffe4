"""ONNX Runtime (.onnx): the predictor, the session options that measure the model, the batch-free graph twin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ModelError
from .base import Predictor

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
