"""TensorFlow formats: Keras (.keras/.h5, rebuilt with a free batch) and SavedModel folders (their signature)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ModelError
from .base import Predictor


class KerasPredictor(Predictor):
    format = "keras"

    def __init__(self, path: str, **kwargs: Any):
        super().__init__(path, **kwargs)
        import keras
        try:
            self._model = keras.models.load_model(path, compile=False)
        except Exception as exc:  # noqa: BLE001 - Keras raises many types
            raise ModelError(f"{path}: Keras cannot load this model ({exc}).") from exc
        if len(self._model.inputs) != 1:
            raise ModelError(f"{path}: the model has {len(self._model.inputs)} inputs; evaluation feeds one "
                             "image tensor.")
        shape = tuple(self._model.inputs[0].shape)
        self._fixed_batch = shape[0]
        self.n_outputs = len(self._model.outputs)
        self.output_names = tuple(getattr(o, "name", f"output_{i}") for i, o in enumerate(self._model.outputs))
        self.input_shape = tuple(None if d is None else int(d) for d in shape[1:])
        self._free: Any = None   # the Keras model with a free batch, made on first need

    @staticmethod
    def _outputs(y: Any, n: int) -> list[np.ndarray]:
        ys = list(y.values()) if isinstance(y, dict) else list(y) if isinstance(y, (list, tuple)) else [y]
        return [np.asarray(o, np.float32).reshape(n, -1) for o in ys]

    def _run_one(self, x1: np.ndarray) -> list[np.ndarray]:
        return self._outputs(self._model(x1, training=False), 1)

    def _open_batched(self) -> bool:
        if self._fixed_batch is None:
            self._free = self._model
            return True
        import keras
        config = self._model.get_config()
        for layer in config.get("layers", ()):
            if layer.get("class_name") == "InputLayer":
                cfg = layer["config"]
                key = "batch_shape" if "batch_shape" in cfg else "batch_input_shape"
                cfg[key] = [None, *list(cfg[key])[1:]]
                cfg.pop("batch_size", None)
        free = type(self._model).from_config(config) if type(self._model) in (keras.Model, keras.Sequential) \
            else keras.Model.from_config(config)
        free.set_weights(self._model.get_weights())
        self._free = free
        return True

    def _run_batch(self, xb: np.ndarray) -> list[np.ndarray]:
        return self._outputs(self._free(xb, training=False), len(xb))


# -- SavedModel ------------------------------------------------------------------------------

class SavedModelPredictor(Predictor):
    format = "saved_model"

    def __init__(self, path: str, **kwargs: Any):
        super().__init__(path, **kwargs)
        import tensorflow as tf
        try:
            loaded = tf.saved_model.load(path)
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"{path}: TensorFlow cannot load this SavedModel ({exc}).") from exc
        self._loaded = loaded
        signatures = getattr(loaded, "signatures", {}) or {}
        if not signatures:
            raise ModelError(f"{path}: the SavedModel has no signatures; export it with a serving signature.")
        name = "serving_default" if "serving_default" in signatures else sorted(signatures)[0]
        self._fn = signatures[name]
        specs = self._fn.structured_input_signature[1]
        if len(specs) != 1:
            raise ModelError(f"{path}: signature {name!r} takes {len(specs)} inputs ({', '.join(specs)}); "
                             "evaluation feeds one image tensor.")
        self._in_name, spec = next(iter(specs.items()))
        dims = spec.shape.as_list()
        self._batch_dim = dims[0]
        self.input_shape = tuple(dims[1:])
        self._out_keys = sorted(self._fn.structured_outputs)
        self.n_outputs = len(self._out_keys)
        self.output_names = tuple(self._out_keys)

    def _call(self, x: np.ndarray) -> list[np.ndarray]:
        import tensorflow as tf
        out = self._fn(**{self._in_name: tf.constant(x)})
        return [np.asarray(out[k], np.float32).reshape(len(x), -1) for k in self._out_keys]

    def _run_one(self, x1: np.ndarray) -> list[np.ndarray]:
        return self._call(x1)

    def _open_batched(self) -> bool:
        return self._batch_dim is None

    def _run_batch(self, xb: np.ndarray) -> list[np.ndarray]:
        return self._call(xb)
