"""Cross-layer equalisation (``+cle``) and bias correction (``+bc``) on the float weights.

Both come from Nagel et al. 2019, "Data-Free Quantization Through Weight
Equalization and Bias Correction", and are applied in numpy to the FP32 model
before the converter sees it:

- **Batch norm folding.** Every batch norm that follows a convolution,
  depthwise convolution or dense layer is folded into its weights and bias (the
  converter would fold it anyway; CLE needs the folded weights).
- **Cross-layer equalisation.** For two consecutive layers A -> B joined through
  ops that commute with a positive per-channel scale (ReLU, ReLU6, max/average
  pooling, bilinear resize, zero padding, flatten), output channel ``i`` of A is
  divided by ``s_i`` and input channel ``i`` of B multiplied by it, with
  ``s_i = sqrt(r_A,i * r_B,i) / r_B,i`` (``r`` = largest absolute weight of the
  channel): both channels then have range ``sqrt(r_A,i * r_B,i)``, so one
  per-tensor scale fits all channels far better.  The pass is repeated over all
  pairs until the scales settle.  ReLU6 does not commute with a scale (its clip
  at 6 would move), so, as in the paper, a ReLU6 inside an equalised pair
  becomes ReLU; the FP32 function of the equalised model is otherwise unchanged.
- **Bias correction** (empirical variant): the expected output shift that
  weight quantization causes, ``(Q(W) - W) . E[x]``, is subtracted from each
  layer's bias.  ``Q`` is the recipe's weight quantization (symmetric INT8, per
  channel or per tensor, as the TFLite converter does) and ``E[x]`` the mean
  input of the layer over the calibration samples.

Keras models (``.keras``/``.h5``) are rewritten through their functional
config; ONNX models have their Conv/Gemm initializers rewritten (CLE; bias
correction runs the model through ONNX Runtime for ``E[x]``).  A float ``.tflite``
takes ``+cle`` only, and there it is data-driven: the channels of each depthwise
output that feeds a convolution are equalised by the ranges the float model
reaches on the calibration samples (``tflite_graph``; BlazeFace).  The transformed
model is cached under a content key, and :class:`EqualizeReport` records every
pair and the ranges before and after.

Layout: ``numeric`` (the numpy both formats share), ``keras_graph`` and ``onnx_graph`` (one module per
source format), ``report``; this module checks the request, keys the cache and picks the format.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import numpy as np

from ..._io import (
    atomic_path,
    atomic_write_json,
    cache_dir,
    check_folder_seal,
    damaged_cache_entry,
    read_json,
    seal_folder,
    sha256_file,
    stable_hash,
)
from ...errors import QuantizationError
from .keras_graph import _keras_transform
from .numeric import CLE_ITERATIONS, CLE_TOLERANCE, channel_range, equalize_pair, fake_quant_weights
from .onnx_graph import _onnx_transform
from .report import EqualizedPair, EqualizeReport
from .tflite_graph import _tflite_transform

__all__ = ["CLE_ITERATIONS", "CLE_TOLERANCE", "TRANSFORMS", "EqualizeReport", "EqualizedPair", "apply_transforms",
           "channel_range", "equalize_pair", "fake_quant_weights", "make_imbalanced", "sha256_bytes_array"]

TRANSFORMS = ("cle", "bc")


# ----------------------------------------------------------------------------- the entry point

def apply_transforms(source: str | os.PathLike, fmt: str, transforms: tuple[str, ...], *, weights: str,
                     calibration: np.ndarray | None = None, cache: bool = True,
                     _iterations: int | None = None) -> tuple[Path, str, EqualizeReport]:
    """Apply ``transforms`` (``cle``, ``bc``) to the float model at ``source``.

    Returns the transformed model's path (cached), its format and the report.
    ``weights`` is the recipe's granularity (``per_channel``/``per_tensor``: what bias
    correction simulates); ``calibration`` the samples bias correction averages over.
    """
    source = Path(source)
    bad = [t for t in transforms if t not in TRANSFORMS]
    if bad:
        raise QuantizationError(f"unknown transform {bad[0]!r}; transforms are {', '.join(TRANSFORMS)} "
                                "(recipe names like 'a8w8_pt+cle' or 'a8w8_pt+cle+bc').")
    if "bc" in transforms and calibration is None:
        raise QuantizationError("bias correction (+bc) needs calibration samples for the mean layer inputs.")
    if fmt == "tflite" and "bc" in transforms:
        raise QuantizationError(
            f"{source}: +bc (bias correction) rewrites Keras (.keras/.h5) or ONNX models; a float .tflite takes "
            "+cle only (its depthwise outputs equalised on the calibration data). Drop +bc, or quantize the "
            ".keras/.onnx the .tflite came from.")
    if fmt == "tflite" and calibration is None:
        raise QuantizationError(f"{source}: +cle on a float .tflite equalises the activation ranges the model "
                                "reaches on the calibration samples; give calibration samples.")
    if fmt not in ("keras", "onnx", "tflite"):
        raise QuantizationError(
            f"{source}: +cle/+bc rewrite Keras (.keras/.h5), ONNX or float .tflite models; got a {fmt} model. "
            "Quantize the .keras file (or the .onnx export) instead of the SavedModel.")
    key_parts = {"source": sha256_file(source), "transforms": list(transforms), "code": _code_hash(),
                 "weights": weights if "bc" in transforms else None, "iterations": _iterations}
    if calibration is not None:   # bc averages over it; cle decides from it which ReLU6 pairs are safe
        key_parts["calibration"] = stable_hash([str(calibration.shape), sha256_bytes_array(calibration)])
    key = stable_hash(key_parts)[:20]
    folder = cache_dir("equalize") / key
    ext = {"keras": ".keras", "tflite": ".tflite"}.get(fmt, ".onnx")
    model_out, record = folder / f"model{ext}", folder / "equalize.json"
    if cache and record.is_file():
        damage = check_folder_seal(folder)      # the model and report as written, or the entry is redone
        if damage is None:
            report = EqualizeReport.from_dict({**read_json(record), "cache_hit": True})
            return model_out, fmt, report
        damaged_cache_entry(folder, damage)
    with atomic_path(folder, replace_folder=True) as tmp:
        tmp.mkdir(parents=True)
        out = tmp / f"model{ext}"
        if fmt == "keras":
            info = _keras_transform(source, out, transforms, weights, calibration,
                                    CLE_ITERATIONS if _iterations is None else _iterations)
        elif fmt == "tflite":
            assert calibration is not None
            info = _tflite_transform(source, out, transforms, calibration)
        else:
            info = _onnx_transform(source, out, transforms, weights, calibration)
        report = EqualizeReport(source=str(source), output=str(model_out), transforms=tuple(transforms),
                                weights=weights, key=key, **info)
        atomic_write_json(tmp / "equalize.json", report.to_dict())
        seal_folder(tmp)
    return model_out, fmt, report


def _code_hash() -> str:
    """The transforms' code, every module of this package: a change to any of them redoes the cached models."""
    return stable_hash([sha256_file(p) for p in sorted(Path(__file__).parent.glob("*.py"))])


def sha256_bytes_array(x: np.ndarray) -> str:
    import hashlib
    return hashlib.sha256(np.ascontiguousarray(x, dtype=np.float32).tobytes()).hexdigest()

# ----------------------------------------------------------------------------- a demonstration model

def make_imbalanced(source: str | os.PathLike, output: str | os.PathLike, *, spread: float = 100.0,
                    seed: int = 0) -> EqualizeReport:
    """Write a copy of the Keras model ``source`` whose channel ranges are imbalanced, same FP32 function.

    Batch norms are folded and every equalisable pair A -> B (as ``+cle`` finds them) gets
    channel ``i`` of A multiplied by ``f_i`` and input channel ``i`` of B divided by it, with
    ``f_i`` log-uniform in ``[1/sqrt(spread), sqrt(spread)]``: the per-channel spread that
    batch-norm folding leaves in MobileNet-style networks, made on purpose.  For
    demonstrations and tests of ``+cle``; the report lists the pairs.
    """
    import keras
    source, output = Path(source), Path(output)
    folded, _, report = apply_transforms(source, "keras", ("cle",), weights="per_tensor", cache=False,
                                         _iterations=0)
    with contextlib.redirect_stdout(io.StringIO()):
        model = keras.models.load_model(str(folded), compile=False)
    rng = np.random.default_rng(seed)
    half = np.log(np.sqrt(spread))
    for pair in report.pairs:
        a, b = model.get_layer(pair.first), model.get_layer(pair.second)
        wa, ba = [np.array(w, np.float64) for w in a.get_weights()]
        wb, *rest = [np.array(w, np.float64) for w in b.get_weights()]
        f = np.exp(rng.uniform(-half, half, size=pair.channels))
        a_axis = 2 if type(a).__name__ == "DepthwiseConv2D" else wa.ndim - 1
        b_axis = 2 if type(b).__name__ == "DepthwiseConv2D" else wb.ndim - 2
        shape = [1] * wa.ndim
        shape[a_axis] = -1
        wa *= f.reshape(shape)
        ba *= f
        repeat = wb.shape[b_axis] // pair.channels
        shape = [1] * wb.ndim
        shape[b_axis] = -1
        wb /= np.tile(f, repeat).reshape(shape)
        a.set_weights([wa.astype(np.float32), ba.astype(np.float32)])
        b.set_weights([wb.astype(np.float32), *[r.astype(np.float32) for r in rest]])
    if output.suffix != ".keras":
        raise QuantizationError(f"{output}: the imbalanced model is a Keras file; name it *.keras.")
    with atomic_path(output) as tmp, contextlib.redirect_stdout(io.StringIO()):
        model.save(str(tmp))
    return report
