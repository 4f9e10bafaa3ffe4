"""Exact structural passes on a ``.tflite`` flatbuffer: undo what a converter added, never change a number.

onnx2tf writes an ONNX depthwise convolution (``Conv`` with ``group == channels``) as a grouped
``CONV_2D`` whenever its strides differ along H and W (TensorFlow's CPU depthwise kernel refuses
unequal strides; TFLite's does not), and layout changes around some ops as ``TRANSPOSE`` pairs.
The NPUs run ``DEPTHWISE_CONV_2D`` and few run grouped ``CONV_2D``; a ``TRANSPOSE`` is a CPU island
on most targets.  These passes rewrite the (FP32 or quantized) flatbuffer:

* :func:`grouped_conv_to_depthwise`: a ``CONV_2D`` whose filter is ``[C, kh, kw, 1]`` on a C-channel
  input is a depthwise convolution with multiplier 1: the filter becomes ``[1, kh, kw, C]`` (per-channel
  scales move from dimension 0 to 3), strides/padding/dilation/activation are kept.  Integer arithmetic
  is the same sum over the same products, so the outputs are identical;
* :func:`cancel_transpose_pairs`: ``TRANSPOSE(p)`` feeding only ``TRANSPOSE(q)`` with ``q`` after ``p``
  the identity (and the same quantization on both ends) is removed; the consumers read the first one's
  input.

:func:`apply_passes` runs both and returns what it did (recorded in the manifest).
Layout: ``op_fusions`` (grouped conv -> depthwise, activation fusion), ``transposes`` (the layout TRANSPOSE
passes); this module runs them in order. Reading, writing, op codes and buffers:
:mod:`~workbench.models.tflite_flatbuffer`.
"""

from __future__ import annotations

from .op_fusions import fuse_activations, grouped_conv_to_depthwise
from .transposes import cancel_transpose_pairs, fold_transpose_into_reduce, nhwc_channel_shuffle

__all__ = ["PASSES_VERSION", "apply_passes", "cancel_transpose_pairs", "fold_transpose_into_reduce",
           "fuse_activations", "grouped_conv_to_depthwise", "nhwc_channel_shuffle"]

PASSES_VERSION = 4     # bump when a pass (or tflite_fold) changes (enters the quantize cache key)

def apply_passes(data: bytes) -> tuple[bytes, list[str]]:
    """Both passes; returns the new bytes and one line per pass that changed something."""
    done = []
    data, n = grouped_conv_to_depthwise(data)
    if n:
        done.append(f"grouped CONV_2D (group == channels) -> DEPTHWISE_CONV_2D: {n} op(s)")
    data, n = cancel_transpose_pairs(data)
    if n:
        done.append(f"layout TRANSPOSEs that cancel removed: {n} op(s)")
    data, n = fold_transpose_into_reduce(data)
    if n:
        done.append(f"TRANSPOSE before a reduction folded into its axes: {n} op(s)")
    data, n = nhwc_channel_shuffle(data)
    if n:
        done.append(f"channel shuffle taken through NCHW done on NHWC: {n} TRANSPOSE op(s) fewer")
    return data, done
