"""The model's input contract: what a model expects to be fed, and the one function that feeds it.

Every dataset of the workbench holds *pixels*: float32 NHWC in [0, 1] (or uint8
0..255, read as /255), grayscale (1 channel) or RGB (3 channels), as the camera
gave them.  A model wants something else: its own size, RGB or BGR or one
channel, and values in its own range ([0, 1], [-1, 1], ImageNet mean/std, ...).
:class:`InputContract` says which, and :meth:`InputContract.apply` is the only
code that turns pixels into model inputs: calibration, evaluation, layer errors,
the explorer and the board runner all call it (the board runner gets
:meth:`InputContract.to_params` as plain JSON and repeats the same arithmetic).

The contract comes from, in this order:

1. ``--input-spec FILE`` / ``input_spec=`` (a YAML file, a dict or an ``InputContract``);
2. the **model card** beside the model: ``<model>.card.yaml`` for ``model.onnx``,
   ``model.keras``, ``model.tflite`` ... (the model's file name with its suffix replaced),
   or ``card.yaml`` inside a SavedModel folder;
3. inference from the model's input tensor: size and channels (1 -> grayscale, 3 -> RGB),
   everything else at its default (NHWC, stretch, range [0, 1]).  The result records
   which fields were inferred, so a report can say "range [0, 1] assumed".

A card (every key optional)::

    layout: NHWC            # NHWC | NCHW: the model's input tensor layout
    color: rgb              # grayscale | rgb | bgr
    size: [224, 224]        # height, width (default: the model's input)
    resize: stretch         # stretch | center-crop | letterbox | none
    range: [-1, 1]          # the model's input range for pixels 0..1; or
    # mean: [123.68, 116.78, 103.94]  std: [58.4, 57.1, 57.4]  pixel_max: 255
    # scale: 0.00392  offset: 0        (input = pixel * scale + offset, pixel in [0, 1])
    task: classification    # classification | keypoints | detection | other
    classes: [cat, dog]     # or classes_file: labels.txt (one per line, beside the card)
    outputs:                # what each output tensor means (in the model's output order)
      - {name: logits, kind: class_scores}
"""

from __future__ import annotations

from .cards import (
    CARD_SUFFIX,
    SAVED_MODEL_CARD,
    card_path,
    contract_from_mapping,
    model_input_shape,
    read_card,
    resolve_contract,
    write_card,
)
from .input_contract import COLORS, LAYOUTS, OUTPUT_KINDS, TASKS, InputContract, OutputSpec
from .pixels import RESIZE_POLICIES, ContractError, ContractIssue, check_pixels, resize_images

__all__ = ["CARD_SUFFIX", "COLORS", "LAYOUTS", "OUTPUT_KINDS", "RESIZE_POLICIES", "SAVED_MODEL_CARD", "TASKS",
           "ContractError", "ContractIssue", "InputContract", "OutputSpec", "card_path", "check_pixels",
           "contract_from_mapping", "model_input_shape", "read_card", "resize_images", "resolve_contract",
           "write_card"]
