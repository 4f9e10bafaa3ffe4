"""ONNX -> TensorFlow SavedModel + FP32 ``.tflite`` with onnx2tf, checked against ONNX Runtime.

``convert_onnx(path)`` is what lets an ONNX model (what a PyTorch user exports)
reach the NPUs: the TFLite recipes quantize the converted SavedModel exactly as
they quantize a Keras model.  The pipeline reads as its steps:

1. read the ONNX graph: its inputs (a dynamic batch is fixed to 1; any other
   dynamic dimension is an error) and outputs;
2. look the content key up in the cache (ONNX bytes' sha256 + the onnx2tf tool
   environment's lock sha256 + this converter's options);
3. on a miss, run ``onnx2tf`` in its own pinned virtual environment
   (:mod:`workbench.toolenv`; it needs another TensorFlow, numpy and protobuf than
   the workbench) inside a temporary folder that holds the calibration sample file
   onnx2tf otherwise downloads, with ``-coion`` so the ONNX input/output names
   survive, through a small driver that makes its ``.tflite`` files from the SavedModel it
   wrote (onnx2tf's own path re-saves the Keras model with every constant as JSON text:
   ResNet-50 never finished in 20 min); the folder is renamed into the cache only when complete;
4. record the layout change: which inputs went from NCHW to NHWC (and outputs);
5. run the ONNX model (ONNX Runtime) and the converted FP32 ``.tflite`` (LiteRT) on
   the same samples and compare every output by name (max abs error, cosine).
   Beyond tolerance is a :class:`~workbench.errors.ModelError` naming the first
   output that diverges.

Heavy imports (onnx, onnxruntime, LiteRT) happen inside the functions.
Layout: ``onnx_source`` (the graph and its exact rewrites), ``onnx2tf_run`` (the tool run and its cache
entry), ``agreement`` (the check), ``result`` (:class:`ConvertedModel`), ``from_tensorflow`` (tf2onnx for the
ONNX Runtime backend); this module holds the verb and the converter versions a quantization records.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..._io import cache_dir, entry_lock, sha256_file, stable_hash
from ...errors import ModelError
from .. import onnx_preflight
from .agreement import CHECK_SAMPLES, DEFAULT_MAX_REL_ERROR, DEFAULT_MIN_COSINE, check_agreement
from .from_tensorflow import tf2onnx_versions, tf_to_onnx
from .onnx2tf_run import (
    CALIBRATION_FILE,
    CONVERTER_VERSION,
    FLOAT_TFLITE,
    RECORD,
    SAVED_MODEL,
    TIMEOUT_S,
    TOOL,
    _convert_fresh,
    _load_entry,
    calibration_file,
    signature_io,
)
from .onnx_source import card_size, ceil_pools_as_same, exact_rewrites, nhwc_inputs, read_onnx_io, sanitize_node_names
from .result import ConvertedModel, OutputAgreement, TensorLayout

__all__ = ["CALIBRATION_FILE", "CHECK_SAMPLES", "CONVERTER_VERSION", "DEFAULT_MAX_REL_ERROR", "DEFAULT_MIN_COSINE",
           "FLOAT_TFLITE", "LAYOUTS", "RECORD", "SAVED_MODEL", "TIMEOUT_S", "TOOL", "ConvertedModel",
           "OutputAgreement", "TensorLayout", "calibration_file", "card_size", "ceil_pools_as_same", "check_agreement",
           "conversion_toolchain", "convert_onnx", "exact_rewrites", "nhwc_inputs", "read_onnx_io",
           "sanitize_node_names", "signature_io", "tf_to_onnx"]

LAYOUTS = ("auto", "nchw", "nhwc")


# -- the pipeline ------------------------------------------------------------------------------
def convert_onnx(path: str | os.PathLike, *, samples: np.ndarray | None = None, cache: bool = True,
                 input_layout: str = "auto", max_rel_error: float = DEFAULT_MAX_REL_ERROR,
                 min_cosine: float = DEFAULT_MIN_COSINE, timeout: float = TIMEOUT_S,
                 size: tuple[int, int] | None = None) -> ConvertedModel:
    """Convert the ONNX model at ``path`` to a SavedModel and an FP32 ``.tflite``.

    Parameters
    ----------
    path : an ``.onnx`` file (one or more float inputs with static shapes; a dynamic batch
        is fixed to 1).
    samples : float32 images in NHWC ``(N, H, W, C)`` as the model's single input takes them
        after conversion (calibration samples): written (resized) as onnx2tf's calibration
        file, and used to compare ONNX Runtime with the converted model.  None: seeded
        uniform noise in [0, 1].
    cache : reuse an earlier conversion of the same bytes by the same tool environment.
    input_layout : ``"auto"`` (an image input whose dimension 1 is 1, 3 or 4 channels is
        NCHW and becomes NHWC; one whose last dimension is and dimension 1 is not is already
        NHWC, e.g. exported by tf2onnx, and is kept), ``"nchw"`` or ``"nhwc"`` for every input.
    max_rel_error, min_cosine : the agreement each output must reach (max abs error over
        the ONNX output's max abs value; cosine of the flattened outputs).
    size : ``(height, width)`` fixing an image input's dynamic H/W (Paddle2ONNX exports have
        them); default the ``size:`` of the model's card (``<model>.card.yaml``), if any.
    """
    from ... import toolenv
    from ..._validation import check_choice
    check_choice("input_layout", input_layout, LAYOUTS, error=ModelError)
    source = Path(path)
    if size is None:
        size = card_size(source)
    source = onnx_preflight.for_onnx2tf(source)   # file, external data, sizes, checker, ops: before anything runs
    graph = read_onnx_io(source, size=size)
    keep = nhwc_inputs(graph, input_layout)
    env = toolenv.ensure(TOOL)
    source_sha = sha256_file(source)
    parts: dict[str, Any] = {"onnx": source_sha, "lock": env.lock_sha256, "converter": CONVERTER_VERSION,
                             "keep_nhwc": list(keep), "inputs": [list(shape) for _, shape, _ in graph.inputs]}
    from .shuffle_fix import SHUFFLE_FIX_VERSION, cubic_shuffles
    if cubic_shuffles(source):      # only these models' conversions change (shuffle_fix.py): the others stay cached
        parts["cubic_shuffle_fix"] = SHUFFLE_FIX_VERSION
    key = stable_hash(parts)
    folder = cache_dir("convert") / key[:2] / key
    # two processes converting the same model at once (a batch's targets on a cold cache: a8w8_pt and a8w8_pc
    # quantize under different keys, then both convert): one converts, the other waits and finds the entry
    with entry_lock(folder):
        record = _load_entry(folder) if cache else None
        hit = record is not None
        if record is None:
            record = _convert_fresh(source, graph, env, key, folder, samples, timeout, keep)
    converted = ConvertedModel(
        source_path=str(source), source_sha256=source_sha, saved_model=str(folder / SAVED_MODEL),
        tflite=str(folder / FLOAT_TFLITE), inputs=tuple(TensorLayout(**_tup(t)) for t in record["inputs"]),
        outputs=tuple(TensorLayout(**_tup(t)) for t in record["outputs"]), agreement=(), check_samples=0,
        rewrites=tuple(record.get("rewrites", ())),
        tools=dict(env.versions), lock_sha256=env.lock_sha256, seconds=float(record["seconds"]),
        cache_key=key, cache_hit=hit)
    agreement, n = check_agreement(converted, samples, max_rel_error=max_rel_error, min_cosine=min_cosine)
    return replace(converted, agreement=agreement, check_samples=n)


def _tup(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in entry.items()}


def conversion_toolchain(fmt: str, backend: str) -> dict[str, str]:
    """Versions of the converters a ``fmt`` source goes through on the way to ``backend``
    (empty when the backend reads it directly); they enter the quantize cache key and manifest."""
    tools: dict[str, str] = {}
    if backend == "tflite" and fmt == "tflite":   # quantized as it is: AI Edge Quantizer, no converter
        from ...quantize.aeq_backend import AEQ_VERSION, toolchain
        return {f"aeq/{k}": v for k, v in toolchain().items()} | {"aeq-route": str(AEQ_VERSION)}
    if backend == "tflite" and fmt == "onnx":
        from ... import toolenv
        env = toolenv.ensure(TOOL)
        tools.update({f"{TOOL}-env/{k}": v for k, v in sorted(env.versions.items())})
        tools[f"{TOOL}-env/lock_sha256"] = env.lock_sha256
        tools[TOOL] = env.versions.get(TOOL, "?")
        tools[f"{TOOL}-converter"] = str(CONVERTER_VERSION)   # the workbench's own steps around it (driver, rewrites)
        from .shuffle_fix import SHUFFLE_FIX_VERSION
        tools[f"{TOOL}-cubic-shuffle-fix"] = str(SHUFFLE_FIX_VERSION)
    if backend == "onnx" and fmt != "onnx":
        tools.update({f"tf2onnx-path/{k}": v for k, v in tf2onnx_versions().items()})
    return tools
