"""The :class:`Predictor` every runtime shares: batches, the input contract, the batch-free twin and its check.

A backend (``runtime_tflite``, ``runtime_onnx``, ``runtime_tf``) provides ``_run_one``, ``_open_batched``,
``_run_batch`` and, for integer models, ``_encode``/``_decode``; this module does the rest.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np

from ...errors import ModelError, WorkbenchWarning

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
