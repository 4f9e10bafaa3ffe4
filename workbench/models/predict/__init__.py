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

Layout: ``base`` (the :class:`Predictor` every runtime shares), ``quantization`` (float <-> integer),
one module per runtime (``runtime_tflite``, ``runtime_onnx``, ``runtime_tf`` for Keras and SavedModel);
this module picks the runtime by the model's format.
"""

from __future__ import annotations

from typing import Any

from ...errors import ModelError
from ..formats import model_format
from .base import DEFAULT_BATCH, Predictor, resolve_model_path
from .quantization import dequantize_output, quantize_input, quantize_scratch
from .runtime_onnx import QDQ_OPS, OnnxPredictor, batch_free_onnx, is_qdq, ort_session_options
from .runtime_tf import KerasPredictor, SavedModelPredictor
from .runtime_tflite import TFLitePredictor, batch_free_tflite

__all__ = ["DEFAULT_BATCH", "QDQ_OPS", "KerasPredictor", "OnnxPredictor", "Predictor", "SavedModelPredictor",
           "TFLitePredictor", "batch_free_onnx", "batch_free_tflite", "dequantize_output", "is_qdq",
           "load_predictor", "ort_session_options", "quantize_input", "quantize_scratch", "resolve_model_path"]

_BACKENDS = {"tflite": TFLitePredictor, "onnx": OnnxPredictor, "keras": KerasPredictor,
             "saved_model": SavedModelPredictor}


def load_predictor(model: Any, *, batch_size: int = DEFAULT_BATCH, num_threads: int | None = None,
                   contract: Any = None) -> Predictor:
    """A :class:`Predictor` for a model path, a ``QuantizedModel``-like or a ``ReferenceModel``-like.

    ``contract``: an :class:`~workbench.models.contract.InputContract` applied to every batch
    (``predict`` then takes pixels); ``None`` feeds ``x`` as it is.
    """
    from ..._validation import check_positive_int
    check_positive_int("batch_size", batch_size, error=ModelError)
    path = resolve_model_path(model)
    return _BACKENDS[model_format(path)](path, batch_size=batch_size, num_threads=num_threads, contract=contract)
