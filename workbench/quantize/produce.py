"""A cache miss of :func:`~workbench.quantize.engine.quantize`: the float model through the recipe's backend
(converted first when the backend needs another format, ``+cle``/``+bc`` applied), the exact TFLite passes,
the inspection against the recipe, the runtime check, and the manifest, stored in the cache."""

from __future__ import annotations

import datetime as _dt
import hashlib
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .._io import portable_paths, sha256_bytes
from ..errors import CalibrationError, ModelError, QuantizationError
from .calibration_samples import Calibration
from .inspect import ModelInspection, inspect_model
from .manifest import build_manifest
from .recipe import QuantRecipe


def structure_diff(source: Path, fmt: str, model_path: Path | str, backend: str) -> dict[str, Any] | None:
    """The structural diff of a TFLite-recipe result (None for ONNX QDQ models)."""
    if backend != "tflite":
        return None
    from ..models.structure import structural_diff
    return structural_diff(source, fmt, model_path)


def backend_input_shape(source: Path, fmt: str, rec: QuantRecipe) -> tuple[tuple[int, ...], str, Any]:
    if rec.backend == "onnx":
        from .onnx_backend import input_info
        name, shape = input_info(source)
        return shape, name, None
    if fmt == "tflite":
        from ..models.tflite_graph import read_tflite
        graph = read_tflite(source)
        if len(graph.inputs) != 1:
            raise ModelError(f"{source}: the model has {len(graph.inputs)} inputs; one image input is expected.")
        tensor = graph.tensors[graph.inputs[0]]
        from .tflite_backend import _static_shape
        return _static_shape(source, tensor.name, tensor.shape_signature or tensor.shape), tensor.name, None
    from .tflite_backend import load_function
    fn, shape, name = load_function(source, fmt)
    return shape, name, fn


def backend_source(source: Path, fmt: str, rec: QuantRecipe, calib: Calibration
                   ) -> tuple[Path, str, dict[str, Any] | None]:
    """The file the backend reads, its format, and how it was converted from ``source`` (or None).

    TFLite backend: ``.onnx`` -> onnx2tf SavedModel (checked against ONNX Runtime); an FP32
    ``.tflite`` is read as it is (AI Edge Quantizer).  ONNX backend: Keras/SavedModel/FP32
    ``.tflite`` -> tf2onnx ONNX."""
    from ..models import convert
    if rec.backend == "tflite" and fmt == "tflite":   # quantized as it is (aeq_backend.py), no round trip
        return source, fmt, None
    if rec.backend == "tflite" and fmt == "onnx":
        from .tflite_backend import preload_tensorflow
        preload_tensorflow()     # the TFLite converter's import runs while onnx2tf converts (its own process)
        converted = convert.convert_onnx(source, samples=calib.x)
        return Path(converted.saved_model), "saved_model", converted.manifest_entry()
    if rec.backend == "onnx" and fmt != "onnx":
        onnx_path, first = convert.tf_to_onnx(source, fmt)
        return onnx_path, "onnx", first
    return source, fmt, None


def _contract_input_range(contract: dict[str, Any] | None) -> tuple[float, float] | None:
    """The model-input values pixels 0 and 1 map to, over channels, from the manifest's contract record."""
    params = (contract or {}).get("params") or {}
    if not params.get("scale") or not params.get("offset"):
        return None
    a = np.asarray(params["offset"], np.float64)
    b = a + np.asarray(params["scale"], np.float64)
    return float(np.minimum(a, b).min()), float(np.maximum(a, b).max())


def quantize_fresh(source: Path, fmt: str, rec: QuantRecipe, calib: Calibration, toolchain: dict[str, str],
                   key: str, source_sha: str, ext: str, contract: dict[str, Any] | None = None
                   ) -> tuple[Path, Path, ModelInspection]:
    if rec.transforms:   # +cle/+bc: rewrite the float weights first (workbench/quantize/equalize/)
        from .equalize import apply_transforms
        eq_source, eq_fmt, _ = apply_transforms(source, fmt, rec.transforms, weights=rec.weights,
                                                calibration=calib.x)
        work, work_fmt, conversion = backend_source(eq_source, eq_fmt, rec, calib)
    else:
        work, work_fmt, conversion = backend_source(source, fmt, rec, calib)
    shape, input_name, fn = backend_input_shape(work, work_fmt, rec)   # fn: the SavedModel/Keras model, loaded once
    x = calib.x
    if rec.backend == "onnx" and len(shape) == 4 and tuple(x.shape[1:]) == (shape[2], shape[3], shape[1]) \
            and tuple(x.shape[1:]) != tuple(shape[1:]):
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))   # NHWC images into an NCHW ONNX input
        conversion = {**(conversion or {}), "calibration_layout": "NHWC images fed as NCHW"}
    if tuple(x.shape[1:]) != tuple(shape[1:]):
        layout = (" (the converted model takes NHWC: calibration images are (H, W, C))"
                  if conversion and conversion.get("transposed_inputs") else "")
        raise CalibrationError(
            f"calibration samples have shape {tuple(calib.x.shape[1:])} per sample but model input "
            f"{input_name!r} of {source} takes {tuple(shape)}{layout}; resize the images or pick the matching "
            "dataset.")
    if rec.backend == "onnx":
        from .onnx_backend import quantize_onnx
        data = quantize_onnx(work, rec, x)
        ranges = None
    elif work_fmt == "tflite":
        from .aeq_backend import quantize_float_tflite
        data, conversion = quantize_float_tflite(work, rec, calib.x, input_range=_contract_input_range(contract))
        ranges = conversion.pop("ranges", None)
    else:
        from .tflite_backend import quantize_tflite
        report: dict[str, Any] = {}
        data = quantize_tflite(work, work_fmt, rec, calib.x, report, fn=fn)
        ranges = report.get("ranges")
    if rec.backend == "tflite":   # exact rewrites of what a converter added (workbench/models/tflite_passes/)
        from ..models.tflite_fold import fold_lines
        from ..models.tflite_passes import apply_passes
        data, passes = apply_passes(data)
        data, folds = fold_lines(data)
        passes += folds
        if passes:
            conversion = {**(conversion or {}), "passes": passes}
    with tempfile.TemporaryDirectory(prefix="wb-quant-") as tmp:
        probe = Path(tmp) / f"model{ext}"
        probe.write_bytes(data)
        inspection = inspect_model(probe)
        structure = structure_diff(source, fmt, probe, rec.backend)
        problems = inspection.check(rec)
        if problems:
            raise QuantizationError(f"{source}: the {rec.backend} result breaks recipe {rec.name!r}: "
                                    + "; ".join(problems)
                                    + ". Exclude those ops with float fallback (--exclude), or change the model.")
        runtime, absurd = runtime_check(source, work, work_fmt, probe, data, calib.x) if ext == ".tflite" \
            else (None, [])
    manifest = build_manifest(
        file=f"model{ext}", sha256=sha256_bytes(data), size_bytes=len(data), fmt=inspection.format,
        recipe=rec.to_dict(), min_runtime=inspection.min_runtime,
        calibration={"id": calib.id, "hash": calib.hash, "strategy": calib.strategy, "n_samples": len(calib.x),
                     "sample_ids_sha256": hashlib.sha256("\0".join(calib.sample_ids).encode()).hexdigest()
                     if calib.sample_ids else None, "input_contract": contract},
        source={"path": portable_paths(str(source)), "sha256": source_sha, "format": fmt}, toolchain=toolchain,
        inspection=inspection, cache_key=key, conversion=conversion,
        created_utc=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    manifest["structure"] = structure
    if runtime is not None:
        manifest["runtime"] = runtime
        manifest["absurd_scales"] = absurd
    if ranges:
        manifest["ranges"] = ranges      # what the data says of the calibrated ranges (ranges.py)
    from .cache import store
    model_path, manifest_path = store(key, ext, data, manifest)
    return model_path, manifest_path, inspect_model(model_path)


def runtime_check(source: Path, work: Path, work_fmt: str, path: Path, data: bytes, x: np.ndarray
                  ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Load the INT8 file as LiteRT's default runtime does (XNNPACK; the builtin kernels where XNNPACK refuses
    it) and run calibration samples through it; refuse a model whose INT8 outputs ignore the input."""
    from .runtime_check import absurd_scales, cause, check_tflite, describe_absurd
    try:
        record = check_tflite(data, x, reference=lambda p: float_outputs(work, work_fmt, p))
    except (RuntimeError, ValueError) as exc:
        raise QuantizationError(f"{source}: LiteRT cannot load the quantized model, neither with its default runtime "
                                f"(XNNPACK) nor with its builtin kernels: {' '.join(str(exc).split())[:300]}. "
                                "Next: exclude the op it names (--exclude) or try another recipe.") from exc
    absurd = absurd_scales(str(path))
    if record["ignores_input"]:
        why = describe_absurd(absurd)
        raise QuantizationError(
            f"{source}: the INT8 model ignores its input: {record['distinct_inputs']} different calibration samples "
            f"give the same INT8 output(s) ({', '.join(record['constant_outputs'])}) while the float model's "
            f"differ (by up to {record.get('float_spread', float('nan')):.3g})"
            + (f"; {why}" if why else "") + ". Next: "
            + ("make the padding finite (export the max-pool without ceil_mode, with explicit padding) or exclude "
               f"{cause(absurd)['op']} (--exclude {cause(absurd)['op']})" if absurd else
               "check the calibration data and the layer ranges (`workbench quantize` with --calibrator "
               "percentile, or exclude the op that saturates)") + ".")
    return record, absurd


def float_outputs(work: Path, work_fmt: str, x: np.ndarray) -> list[np.ndarray]:
    """The float model the backend read, run on ``x`` (a list of outputs, each (N, ...))."""
    from .runtime_check import _run, load_tflite
    if work_fmt == "tflite":
        return _run(load_tflite(work.read_bytes())[0], x)
    import contextlib
    import io

    from .tflite_backend import _tf, load_function
    fn, _, _ = load_function(work, work_fmt)
    with contextlib.redirect_stdout(io.StringIO()):
        data = _tf().lite.TFLiteConverter.from_concrete_functions([fn]).convert()
    return _run(load_tflite(bytes(data))[0], x)
