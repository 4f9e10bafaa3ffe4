"""ONNX Runtime backend: ``quantize_static`` in QDQ format.

Per-channel on/off, MinMax / Percentile / Entropy calibration, excluded node
names and op types.  Activations are signed 8-bit (asymmetric), weights signed
8-bit symmetric, inputs and outputs stay float32 (QDQ).  The model is
pre-processed with ``quant_pre_process`` (ONNX shape inference and graph
optimisation; the symbolic shape pass needs sympy and is skipped).  A dynamic
batch dimension is fixed to 1; other dynamic dimensions are an error.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError, QuantizationError
from .inspect import load_onnx
from .recipe import QuantRecipe


def toolchain() -> dict[str, str]:
    import onnx
    import onnxruntime
    return {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__, "numpy": np.__version__}


def input_info(path: str | os.PathLike) -> tuple[str, tuple[int, ...]]:
    """The single input's name and static batch-1 shape of an ONNX model."""
    path = Path(path)
    model = load_onnx(path)
    init = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in init]
    if len(inputs) != 1:
        raise ModelError(f"{path}: the model has {len(inputs)} inputs; one image input is expected.")
    dims = []
    for d in inputs[0].type.tensor_type.shape.dim:
        dims.append(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else -1)
    if any(d < 0 for d in dims[1:]):
        raise ModelError(
            f"{inputs[0].name!r} of {path} has dynamic shape {tuple(dims)}; only the batch dimension may be "
            "unknown. Export a batch-1 model with a static shape (e.g. `python -m tf2onnx.convert "
            "--saved-model DIR --inputs name:0[1,H,W,C]`), then quantize that.")
    return inputs[0].name, (1, *dims[1:])


def _fixed_batch(path: Path, dst: Path) -> Path:
    """Copy of the model with a dynamic batch fixed to 1 (the file itself when already static)."""
    import onnx
    model = load_onnx(path)
    init = {i.name for i in model.graph.initializer}
    changed = False
    for value in list(model.graph.input) + list(model.graph.output):
        if value.name in init:
            continue
        dims = value.type.tensor_type.shape.dim
        if dims and not (dims[0].HasField("dim_value") and dims[0].dim_value > 0):
            dims[0].dim_value = 1
            changed = True
    if not changed:
        return path
    onnx.save(model, str(dst))
    return dst


class _Reader:
    """An ONNX Runtime calibration data reader over an array, one sample per batch."""

    def __init__(self, name: str, x: np.ndarray) -> None:
        self.name, self.x, self.i = name, x, 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self.i >= len(self.x):
            return None
        self.i += 1
        return {self.name: self.x[self.i - 1:self.i]}

    def rewind(self) -> None:
        self.i = 0


def split_exclude(path: Path, exclude: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """``exclude`` as (node names, op types) of this model; unknown entries are an error."""
    model = load_onnx(path)
    names = {n.name for n in model.graph.node}
    types = {n.op_type for n in model.graph.node}
    nodes = [e for e in exclude if e in names]
    op_types = [e for e in exclude if e in types and e not in names]
    unknown = [e for e in exclude if e not in names and e not in types]
    if unknown:
        raise QuantizationError(
            f"{path}: nothing to exclude named {', '.join(map(repr, unknown))}: not an op type of the model "
            f"({', '.join(sorted(types))}) nor a node name. Use `workbench quantize` on the model and read "
            "the op list, or ONNX node names.")
    return nodes, op_types


@contextlib.contextmanager
def _quiet_ort_logger():
    """ONNX Runtime's quantization tools log tracebacks of errors they then re-raise (or that
    quantize_static raises again): keep them off the terminal; the workbench's message says it."""
    import logging
    log = logging.getLogger("onnxruntime")
    null = logging.NullHandler()
    propagate = log.propagate
    log.addHandler(null)
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(null)
        log.propagate = propagate


def quantize_onnx(path: str | os.PathLike, recipe: QuantRecipe, x: np.ndarray) -> bytes:
    """QDQ-quantized .onnx bytes for the ONNX model at ``path``."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry
    from onnxruntime.quantization.shape_inference import quant_pre_process
    path = Path(path)
    name, _ = input_info(path)
    method = {"minmax": CalibrationMethod.MinMax, "minmax-global": CalibrationMethod.MinMax,
              "percentile": CalibrationMethod.Percentile,
              "entropy": CalibrationMethod.Entropy}[recipe.calibrator]
    nodes, op_types = split_exclude(path, recipe.exclude)
    with tempfile.TemporaryDirectory(prefix="wb-onnx-q-") as tmp:
        tmp_dir = Path(tmp)
        src = _fixed_batch(path, tmp_dir / "fixed.onnx")
        pre = tmp_dir / "pre.onnx"
        out = tmp_dir / "quant.onnx"
        extra: dict[str, Any] = {"WeightSymmetric": True, "ActivationSymmetric": False}
        if recipe.calibrator == "percentile":
            extra["CalibPercentile"] = recipe.percentile
        quantizable = None
        if op_types:
            model_types = {n.op_type for n in load_onnx(src).graph.node}
            quantizable = sorted(((set(QDQRegistry) | set(QLinearOpsRegistry)) & model_types) - set(op_types))
        try:
            with contextlib.redirect_stdout(io.StringIO()), _quiet_ort_logger():
                quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
                quantize_static(
                    str(pre), str(out), _Reader(name, x), quant_format=QuantFormat.QDQ,
                    per_channel=recipe.per_channel, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8, calibrate_method=method,
                    nodes_to_exclude=nodes or None, op_types_to_quantize=quantizable,
                    extra_options=extra)
        except (QuantizationError, ModelError):
            raise
        except Exception as exc:
            message = " ".join(str(exc).split())[:600]
            raise QuantizationError(f"{path}: ONNX Runtime quantize_static failed for recipe "
                                    f"{recipe.name!r}: {type(exc).__name__}: {message}") from exc
        return out.read_bytes()
