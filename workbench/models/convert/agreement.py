"""The agreement check: ONNX Runtime on the ONNX file against LiteRT on the converted FP32 ``.tflite``, output
by output (max abs error against the output's range, cosine), on the calibration samples or seeded noise."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import ModelError
from .onnx2tf_run import ort_session, signature_io
from .result import ConvertedModel, OutputAgreement

DEFAULT_MAX_REL_ERROR = 1e-3   # max |onnx - tflite| / max |onnx|, per output
DEFAULT_MIN_COSINE = 0.9999
NEGLIGIBLE = 1e-5              # an output whose max |value| is below this is compared by absolute error only
CHECK_SAMPLES = 8


def check_agreement(converted: ConvertedModel, samples: np.ndarray | None = None, *,
                    max_rel_error: float = DEFAULT_MAX_REL_ERROR, min_cosine: float = DEFAULT_MIN_COSINE,
                    n: int = CHECK_SAMPLES) -> tuple[tuple[OutputAgreement, ...], int]:
    """Compare ONNX Runtime on the ONNX file with LiteRT on the converted FP32 ``.tflite``.

    Returns one :class:`OutputAgreement` per output (by ONNX name) and the number of
    samples; raises :class:`ModelError` naming the first output beyond tolerance."""
    from ai_edge_litert.interpreter import Interpreter
    source = Path(converted.source_path)
    feeds = _check_feeds(converted, samples, n)
    session = ort_session(source)
    interp = Interpreter(model_path=converted.tflite)
    interp.allocate_tensors()
    in_idx, out_idx = signature_io(interp)
    in_idx = {t.name: in_idx[t.tflite_name or t.name] for t in converted.inputs}
    out_idx = {t.name: out_idx[t.tflite_name or t.name] for t in converted.outputs}
    names = [t.name for t in converted.outputs]
    ref: dict[str, list[np.ndarray]] = {k: [] for k in names}
    got: dict[str, list[np.ndarray]] = {k: [] for k in names}
    for feed in feeds:
        onnx_feed = {t.name: np.ascontiguousarray(np.moveaxis(feed[t.name], -1, 1)) if t.transposed else feed[t.name]
                     for t in converted.inputs}
        for name, value in zip(names, session.run(names, onnx_feed)):
            ref[name].append(np.asarray(value, np.float32))
        for t in converted.inputs:
            interp.set_tensor(in_idx[t.name], feed[t.name])
        interp.invoke()
        for t in converted.outputs:
            value = np.asarray(interp.get_tensor(out_idx[t.name]), np.float32)
            if t.transposed:   # NHWC back to the ONNX NCHW
                value = np.moveaxis(value, -1, 1)
            got[t.name].append(value)
    results = []
    for t in converted.outputs:
        a = np.concatenate([r.reshape(1, -1) for r in ref[t.name]]).astype(np.float64)
        b = np.concatenate([g.reshape(1, -1) for g in got[t.name]]).astype(np.float64)
        if a.shape != b.shape:
            raise ModelError(f"{source}: output {t.name!r} has {a.shape[1]} values per sample in ONNX but "
                             f"{b.shape[1]} in the converted model.")
        err = float(np.max(np.abs(a - b))) if a.size else 0.0
        top = float(np.max(np.abs(a))) if a.size else 0.0
        cos = _cosine(a.ravel(), b.ravel())
        # an output that is ~0 on every sample (a sigmoid map of noise: max 6e-8) has no direction: cosine
        # is rounding noise there, the absolute error decides
        # no wider tolerance at a high cosine: the "float reassociation" once allowed for up to 1e-2 was
        # gnet's channel shuffle left in NCHW (2e-3 of the largest value, cosine 0.999997; shuffle_fix.py);
        # every zoo model now agrees within 2.3e-5 (PP-OCRv4 det), the others within 1.5e-6
        allowed = max_rel_error * top + 1e-6
        ok = bool(np.isfinite(err) and np.isfinite(cos) and err <= allowed
                  and (cos >= min_cosine or top <= NEGLIGIBLE))
        results.append(OutputAgreement(name=t.name, max_abs_error=err, max_abs_reference=top, cosine=cos, ok=ok))
    bad = [r for r in results if not r.ok]
    if bad:
        first = bad[0]
        raise ModelError(
            f"{source}: the converted TFLite model diverges from ONNX Runtime at output {first.name!r}: max abs "
            f"error {first.max_abs_error:.4g} (max |ONNX| {first.max_abs_reference:.4g}, allowed "
            f"{max_rel_error:g} of it), cosine {first.cosine:.6f} (at least {min_cosine} required) on "
            f"{len(feeds)} samples. onnx2tf mis-converted an op on the way to this output; try another "
            "opset or simplify the export, or quantize with --backend onnx.")
    return tuple(results), len(feeds)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


def _check_feeds(converted: ConvertedModel, samples: np.ndarray | None, n: int) -> list[dict[str, np.ndarray]]:
    """``n`` batch-1 feeds in the converted (TFLite) layout: the given samples when the model has
    one input of their shape, else seeded uniform noise in [0, 1]."""
    rng = np.random.default_rng(0)
    one = converted.inputs[0] if len(converted.inputs) == 1 else None
    if samples is not None and one is not None:
        x = np.asarray(samples, np.float32)
        if x.ndim == len(one.tflite_shape) and tuple(x.shape[1:]) == tuple(one.tflite_shape[1:]) and len(x):
            step = max(1, len(x) // n)
            return [{one.name: np.ascontiguousarray(x[i:i + 1])} for i in range(0, len(x), step)][:n]
    return [{t.name: rng.uniform(0.0, 1.0, t.tflite_shape).astype(np.float32) for t in converted.inputs}
            for _ in range(n)]
