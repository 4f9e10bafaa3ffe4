"""Per-layer quantization error: where the INT8 model departs from the float one.

TFLite: ``tf.lite.experimental.QuantizationDebugger`` runs the float and the
quantized op side by side on the same input and reports, per quantized tensor,
the RMSE, the largest absolute error and the scale.  ONNX Runtime:
``qdq_loss_debug`` records every activation of the float and of the QDQ model
and matches them by tensor name.  In both cases ``rmse / scale`` says how many
quantization steps the error is: about 0.29 is pure rounding, much more means
a clipped or badly calibrated range.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._results import Result
from ..errors import QuantizationError


@dataclass(frozen=True)
class LayerError:
    """The error of one quantized tensor against its float counterpart."""

    tensor: str
    op: str
    rmse: float
    max_abs_error: float
    scale: float
    rmse_over_scale: float


@dataclass(frozen=True)
class LayerErrors(Result):
    """A typed table of per-tensor errors, in graph order."""

    model: str
    recipe: str
    backend: str
    n_samples: int
    rows: tuple[LayerError, ...]

    def worst(self, n: int = 10) -> tuple[LayerError, ...]:
        """The ``n`` rows with the largest error relative to scale."""
        return tuple(sorted(self.rows, key=lambda r: -_finite(r.rmse_over_scale))[:n])

    def summary(self) -> str:
        if not self.rows:
            return f"{Path(self.model).name} {self.recipe}: no quantized tensors compared"
        w = self.worst(1)[0]
        return (f"{Path(self.model).name} {self.recipe} ({self.backend}, {self.n_samples} samples): "
                f"{len(self.rows)} tensors; worst {w.tensor} ({w.op}) RMSE {w.rmse:.3g} = "
                f"{w.rmse_over_scale:.2f} x scale")

    def plot(self, ax: Any = None, *, top: int = 15) -> Any:
        """Horizontal bars of RMSE / scale for the ``top`` worst tensors."""
        import matplotlib.pyplot as plt
        rows = self.worst(top)[::-1]
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 0.3 * max(len(rows), 3) + 1))
        labels = [f"{r.op}: {r.tensor[-40:]}" for r in rows]
        ax.barh(range(len(rows)), [_finite(r.rmse_over_scale) for r in rows], color="#c0504d")
        ax.set_yticks(range(len(rows)), labels, fontsize=10)
        ax.axvline(1 / np.sqrt(12), color="grey", ls="--", lw=1, label="rounding only (0.29)")
        ax.set_xlabel("RMSE / scale (quantization steps)")
        ax.set_title(f"Worst layers: {Path(self.model).name} {self.recipe}", fontsize=10)
        ax.legend(fontsize=10)
        return ax

    def _repr_html_(self) -> str:
        from .. import display
        rows = [(r.tensor, r.op, r.rmse, r.max_abs_error, r.scale, r.rmse_over_scale) for r in self.rows]
        worst = {r.tensor for r in self.worst(3)}
        styles = [display.BAD_STYLE if r.tensor in worst else "" for r in self.rows]
        return (display.heading("Per-layer quantization error") + display.paragraph(self.summary())
                + display.table(("tensor", "op", "RMSE", "max |err|", "scale", "RMSE/scale"), rows,
                                row_styles=styles))


def _finite(v: float) -> float:
    return v if np.isfinite(v) else 0.0


def layer_errors(model: str | os.PathLike, recipe: Any = "a8w8_pc", calibration: Any = None, *,
                 dataset: Any = None, backend: str | None = None, data: Any = None,
                 calibration_size: int | None = None, input_spec: Any = None) -> LayerErrors:
    """Per-tensor error of ``model`` quantized with ``recipe``.

    ``model`` is the float source (as for :func:`quantize`); ``calibration``/``dataset``/
    ``calibration_size``/``input_spec`` as for :func:`quantize`.  ``data`` (an array or Dataset) is
    what the errors are measured on; by default the calibration samples.  Both go through the
    model's input contract (its card beside the model, or ``input_spec``).
    """
    from ..models.formats import model_format
    from .calibration_samples import apply_contract, resolve_calibration
    from .engine import _check_backend, quantize
    from .produce import backend_input_shape, backend_source
    from .recipe import get_recipe
    rec = get_recipe(recipe, backend=backend)
    source = Path(model)
    fmt = model_format(source)
    _check_backend(source, fmt, rec)
    calib = apply_contract(resolve_calibration(calibration, dataset, calibration_size), source, input_spec)
    x = calib.x if data is None else apply_contract(resolve_calibration(data, None, None), source, input_spec).x
    work, work_fmt, _ = backend_source(source, fmt, rec, calib)   # .onnx/.tflite: converted first
    if rec.backend == "tflite":
        rows = _tflite_errors(work, work_fmt, rec, calib.x, x)
    else:
        qm = quantize(source, rec, calibration, dataset=dataset, calibration_size=calibration_size,
                      input_spec=input_spec)
        shape, name, _ = backend_input_shape(work, work_fmt, rec)
        if len(shape) == 4 and x.ndim == 4 and tuple(x.shape[1:]) == (shape[2], shape[3], shape[1]):
            x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))   # NHWC images into an NCHW ONNX input
        rows = _onnx_errors(work, Path(qm.path), name, x)
    return LayerErrors(model=str(source), recipe=rec.name, backend=rec.backend, n_samples=len(x),
                       rows=tuple(rows))


def _tflite_errors(source: Path, fmt: str, rec: Any, calib_x: np.ndarray, x: np.ndarray) -> list[LayerError]:
    from .tflite_backend import _denylists, _representative, _tf, load_function, make_converter
    tf = _tf()
    fn, _, _ = load_function(source, fmt)
    conv = make_converter(fn, rec, calib_x)
    deny_ops, deny_nodes = _denylists(rec)
    options = tf.lite.experimental.QuantizationDebugOptions(
        denylisted_ops=deny_ops or None, denylisted_nodes=deny_nodes or None)
    import warnings
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated")
            debugger = tf.lite.experimental.QuantizationDebugger(
                converter=conv, debug_dataset=_representative(x), debug_options=options)
            debugger.run()
            buf = io.StringIO()
            debugger.layer_statistics_dump(buf)
    except Exception as exc:
        raise QuantizationError(f"{source}: the TFLite QuantizationDebugger failed for recipe {rec.name!r}: "
                                f"{' '.join(str(exc).split())[:500]}") from exc
    rows = []
    for r in csv.DictReader(io.StringIO(buf.getvalue())):
        rmse = float(np.sqrt(max(float(r["mean_squared_error"]), 0.0)))
        scale = float(r["scale"])
        rows.append(LayerError(tensor=r["tensor_name"], op=r["op_name"], rmse=rmse,
                               max_abs_error=float(r["max_abs_error"]), scale=scale,
                               rmse_over_scale=rmse / scale if scale > 0 else float("nan")))
    return rows


def _onnx_errors(source: Path, quantized: Path, input_name: str, x: np.ndarray) -> list[LayerError]:
    import onnx
    from onnx import numpy_helper
    from onnxruntime.quantization.qdq_loss_debug import (
        collect_activations,
        create_activation_matching,
        modify_model_output_intermediate_tensors,
    )

    class Reader:
        def __init__(self) -> None:
            self.i = 0

        def get_next(self) -> dict[str, np.ndarray] | None:
            if self.i >= len(x):
                return None
            self.i += 1
            return {input_name: x[self.i - 1:self.i]}

        def rewind(self) -> None:
            self.i = 0

        def __iter__(self) -> Any:
            return self

        def __next__(self) -> dict[str, np.ndarray]:
            item = self.get_next()
            if item is None:
                raise StopIteration
            return item

    with tempfile.TemporaryDirectory(prefix="wb-layer-err-") as tmp:
        f_aug, q_aug = Path(tmp, "float_aug.onnx"), Path(tmp, "qdq_aug.onnx")
        from .onnx_backend import _fixed_batch
        src = _fixed_batch(source, Path(tmp, "fixed.onnx"))
        modify_model_output_intermediate_tensors(str(src), str(f_aug))
        modify_model_output_intermediate_tensors(str(quantized), str(q_aug))
        f_acts = collect_activations(str(f_aug), Reader())
        q_acts = collect_activations(str(q_aug), Reader())
    matched = create_activation_matching(q_acts, f_acts)
    qmodel = onnx.load(str(quantized))
    init = {i.name: i for i in qmodel.graph.initializer}
    scale_of: dict[str, float] = {}
    producer_op: dict[str, str] = {}
    order: dict[str, int] = {}
    for index, node in enumerate(qmodel.graph.node):
        for o in node.output:
            producer_op[o] = node.op_type
            order[o] = index
        if node.op_type == "QuantizeLinear" and node.input[1] in init:
            scale_of[node.input[0]] = float(numpy_helper.to_array(init[node.input[1]]).reshape(-1)[0])
    rows = []
    for tensor, acts in matched.items():
        if "float" not in acts or "post_qdq" not in acts or tensor not in scale_of:
            continue
        f = np.concatenate([np.asarray(a, np.float64).reshape(-1) for a in acts["float"]])
        q = np.concatenate([np.asarray(a, np.float64).reshape(-1) for a in acts["post_qdq"]])
        if f.shape != q.shape:
            continue
        err = q - f
        rmse = float(np.sqrt(np.mean(err ** 2)))
        scale = scale_of[tensor]
        rows.append(LayerError(tensor=tensor, op=producer_op.get(tensor, "input"), rmse=rmse,
                               max_abs_error=float(np.max(np.abs(err))), scale=scale,
                               rmse_over_scale=rmse / scale if scale > 0 else float("nan")))
    return sorted(rows, key=lambda r: order.get(r.tensor, -1))
