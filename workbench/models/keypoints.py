"""The built-in keypoint model: a non-classification example (a regression head on the reference trunk).

On the built-in ``digits-keypoints`` dataset (the digits of ``digits-conditions``
labelled with three keypoints: the ink's centroid and the corners of its bounding
box, ``(y, x)`` in [0, 1]) the reference architecture (same ops, so every target can
run it) regresses the six coordinates with a mean-squared error.  It is exported
with a batch of 1 as ``.keras``, SavedModel and FP32 ``.tflite``, each with its model
card (``task: keypoints``, one ``keypoints`` output) beside it, and cached under a content
key like every built-in model: it is the ``keypoints`` entry of :mod:`workbench.models.builtin` (with
its card); this module holds its architecture, its augmentation and :func:`keypoint_model`.  Its task
metric is PCK (:func:`workbench.evaluate.metrics.pck`).

Like the reference model its weights are shipped (``weights/keypoints.npz`` with its sha256,
recipe and the PCK measured when it was trained, in ``weights/keypoints.json``) and used by
default; ``retrain=True`` trains again and reports the distance from the shipped PCK.
"""

from __future__ import annotations

import os
from typing import cast

import numpy as np

from .builtin import KeypointModel

__all__ = ["KeypointModel", "augment", "build_model", "keypoint_model"]

NAME = "keypoints"
#: the reference trunk with the first release's dense head: the 4x4-conv head the reference model now
#: has (for Vela 3.10.0) regresses keypoints far worse in few epochs (daylight PCK 0.09 vs > 0.2 after 6)
HEAD = "dense"


def build_model(input_shape: tuple[int, ...], n_outputs: int, *, batch_size: int | None = None):
    """The reference trunk with the ``HEAD`` head regressing ``n_outputs`` values."""
    from .reference import build_model as trunk
    return trunk(input_shape, n_outputs, batch_size=batch_size, head=HEAD)


def augment(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exposure gain 0.45..1.1 and light Gaussian noise: neither moves a keypoint."""
    gain = rng.uniform(0.45, 1.1, size=(len(x), 1, 1, 1)).astype(np.float32)
    noise = rng.normal(0.0, 0.03, size=x.shape).astype(np.float32)
    return np.clip(x * gain + noise, 0.0, 1.0)


def keypoint_model(*, seed: int = 0, epochs: int | None = None, cache: bool = True,
                   cache_root: str | os.PathLike | None = None, retrain: bool = False) -> KeypointModel:
    """The keypoint model on ``digits-keypoints``: the shipped weights, or trained.

    With the shipped recipe (seed 0, 40 epochs) the weights shipped with the package are used;
    ``retrain=True`` or another seed or epoch count trains (about 2 minutes for 40 epochs on 2 cores).
    """
    from .builtin import builtin_model
    return cast(KeypointModel, builtin_model(NAME, seed=seed, epochs=epochs, cache=cache, cache_root=cache_root,
                                             retrain=retrain))
