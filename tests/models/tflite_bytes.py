"""Helpers shared by the flatbuffer pass tests: op histogram and one LiteRT run of model bytes."""

from __future__ import annotations

import collections

import numpy as np


def ops(data):
    from workbench.models.tflite_graph import parse_tflite_bytes
    return collections.Counter(o.type for o in parse_tflite_bytes(data).ops)


def run(data, x):
    from ai_edge_litert.interpreter import Interpreter
    interp = Interpreter(model_content=data)
    interp.allocate_tensors()
    d = interp.get_input_details()[0]
    if d["dtype"] != np.float32:
        s, z = d["quantization"]
        x = np.clip(np.round(x / s) + z, -128, 127).astype(d["dtype"])
    interp.set_tensor(d["index"], x)
    interp.invoke()
    return [interp.get_tensor(o["index"]).copy() for o in interp.get_output_details()]
