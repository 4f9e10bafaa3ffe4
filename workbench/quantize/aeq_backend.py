"""FP32 ``.tflite`` -> INT8 ``.tflite`` as it is, with AI Edge Quantizer (no conversion round trip).

The TFLite converter cannot quantize a flatbuffer, so a float ``.tflite`` used to go through
tf2onnx and onnx2tf and came back with layout transposes and grouped convolutions it did not
have.  AI Edge Quantizer (``ai-edge-quantizer``, on the ``ai-edge-litert`` the workbench runs)
reads the flatbuffer, calibrates it with LiteRT and writes the quantized flatbuffer op for op.
The steps:

1. prepare the float file: constant weights stored as float16 behind a ``DEQUANTIZE`` op
   (MediaPipe's models) are folded into float32 constants and the ``DEQUANTIZE`` ops removed;
   MediaPipe's custom ``Convolution2DTransposeBias`` becomes the builtin ``TRANSPOSE_CONV`` with its bias;
   a model without a ``SignatureDef`` gets ``serving_default`` over its inputs and outputs
   (AI Edge Quantizer calibrates through signatures);
2. translate the workbench recipe into an AI Edge Quantizer recipe: 8 or 16-bit activations
   (asymmetric int8, symmetric int16 as the 16x8 mode), symmetric int8 weights per channel or
   per tensor, excluded op types / output tensor names left in float (``no_quantize``);
3. calibrate on the calibration samples (min/max, as the TFLite converter) and quantize;
4. set the model's input/output types the recipe asks for: AI Edge Quantizer makes the graph's
   inputs/outputs the quantized tensors themselves; ``float32`` I/O adds ``QUANTIZE``/``DEQUANTIZE``
   at the edges, ``uint8`` a ``QUANTIZE`` uint8 <-> int8 (zero point + 128), as the converter does.

What a recipe asks that this route cannot do is refused naming the recipe part
(:func:`check_recipe`).
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError, QuantizationError
from .recipe import QuantRecipe
from .tflite_prepare import SIGNATURE, Prepared, _builtin, _name, prepare_float_tflite

TOOL = "ai-edge-quantizer"
AEQ_VERSION = 5      # bump when the workbench's steps around AI Edge Quantizer change (cache key)


def toolchain() -> dict[str, str]:
    """Versions that enter the cache key (read from the installed distributions)."""
    from importlib import metadata
    out = {"numpy": np.__version__}
    for dist in (TOOL, "ai-edge-litert"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "missing"
    return out


def check_recipe(recipe: QuantRecipe, source: str | os.PathLike) -> None:
    """Refuse what AI Edge Quantizer cannot do for ``recipe``, naming the recipe part."""
    where = f"{source}: recipe {recipe.name!r}"
    if "bc" in recipe.transforms:   # +cle was applied to the file before (equalize/tflite_graph.py)
        raise QuantizationError(
            f"{where}: +bc rewrites Keras or ONNX weights; an FP32 .tflite takes +cle only (its depthwise outputs "
            "equalised on the calibration data). Quantize the .keras/.onnx the .tflite came from with +bc, or drop "
            "the transform.")
    if recipe.calibrator not in ("minmax", "minmax-global", "percentile"):
        raise QuantizationError(f"{where}: calibrator {recipe.calibrator!r} is not available for a .tflite source "
                                "(min/max calibration, narrowed by 'percentile'). Use calibrator='minmax' or "
                                "'percentile'.")
    if recipe.activation_bits == 16 and "uint8" in (recipe.input_dtype, recipe.output_dtype):
        raise QuantizationError(f"{where}: uint8 inputs/outputs with 16-bit activations do not exist.")


def aeq_recipe(recipe: QuantRecipe) -> list[dict[str, Any]]:
    """The AI Edge Quantizer recipe (a list of rules, later rules win) for a workbench recipe."""
    a16 = recipe.activation_bits == 16
    rules: list[dict[str, Any]] = [{
        "regex": ".*", "operation": "*", "algorithm_key": "min_max_uniform_quantize",
        "op_config": {
            "activation_tensor_config": {"num_bits": 16 if a16 else 8, "symmetric": a16,
                                         "granularity": "TENSORWISE", "dtype": "INT"},
            "weight_tensor_config": {"num_bits": 8, "symmetric": True, "dtype": "INT",
                                     "granularity": "CHANNELWISE" if recipe.per_channel else "TENSORWISE"},
            "compute_precision": "INTEGER", "explicit_dequantize": False, "skip_checks": False,
            "min_weight_elements": 0}}]
    from .tflite_backend import _denylists
    ops, nodes = _denylists(recipe)
    for op in ops:
        rules.append({"regex": ".*", "operation": op, "algorithm_key": "no_quantize"})
    for node in nodes:
        import re
        rules.append({"regex": re.escape(node), "operation": "*", "algorithm_key": "no_quantize"})
    return rules


def quantize_float_tflite(path: str | os.PathLike, recipe: QuantRecipe, x: np.ndarray, *,
                          input_range: tuple[float, float] | None = None) -> tuple[bytes, dict[str, Any]]:
    """INT8 (or 16x8) ``.tflite`` bytes for the FP32 ``.tflite`` at ``path``, and what the manifest records.
    ``input_range``: the model-input values pixels 0 and 1 map to (the input contract's), the graph input's
    range; without it, the calibration samples' own min/max."""
    source = Path(path)
    check_recipe(recipe, source)
    prepared = prepare_float_tflite(source.read_bytes(), source=str(source))
    if len(prepared.input_names) != 1:
        raise ModelError(f"{source}: the model has {len(prepared.input_names)} inputs; one image input is expected.")
    import warnings

    from ai_edge_quantizer import quantizer as aeq
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            q = aeq.Quantizer(bytearray(prepared.data), aeq_recipe(recipe))
            name = prepared.input_names[0]
            data = {SIGNATURE: [{name: np.ascontiguousarray(x[i:i + 1], np.float32)} for i in range(len(x))]}
            calibration = q.calibrate(data, num_threads=1)
            calibration, ranges = _edit_ranges(prepared, calibration, x, recipe, input_range)
            result = q.quantize(calibration, enable_progress_report=False)
        except (QuantizationError, ModelError):
            raise
        except Exception as exc:  # noqa: BLE001 - AEQ raises ValueError/RuntimeError for unsupported ops
            message = " ".join(str(exc).split())[:600]
            raise QuantizationError(
                f"{source}: AI Edge Quantizer failed for recipe {recipe.name!r}: {message}. If an op cannot be "
                "quantized, exclude it (--exclude OP, float fallback) or choose another recipe.") from exc
    out = drop_identity_requantize(inline_buffers(bytes(result.quantized_model)))
    from .aeq_prelu import quantize_prelu  # AI Edge Quantizer 0.10 leaves PRELU in float
    from .tflite_backend import _denylists
    out, prelus = quantize_prelu(out, keep_float=frozenset(sum(_denylists(recipe), [])))
    out = set_io_types(out, recipe.input_dtype, recipe.output_dtype, source=str(source))
    entry = {"tool": TOOL, "versions": toolchain(), "route": "tflite as it is (no conversion)",
             "prepared": list(prepared.changes) + ([f"PRELU quantized to INT8 (AI Edge Quantizer leaves it in float): "
                                                    f"{len(prelus)} op(s)"] if prelus else []),
             "ranges": ranges}
    return out, entry


def _edit_ranges(prepared: Prepared, calibration: dict[str, Any], x: np.ndarray, recipe: QuantRecipe,
                 input_range: tuple[float, float] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The calibrated min/max set to the data's percentiles (``calibrator='percentile'``), and what the
    data says of the calibrated ranges (ranges.py: the tensors far wider than their 0.1..99.9 percentiles).

    The graph input's range is the whole range the input contract maps pixels to (else the samples' min/max),
    whatever the calibrator: AI Edge Quantizer's moving average of each sample's min/max clips the input
    itself (MediaPipe selfie segmentation, range [0, 1]: [0, 0.914] on the zoo's crops, every pixel above
    233/255 one code, an overexposed frame's highlights gone), and a [0, 1] input calibrated to exactly
    [0, 1] gives 8-bit pixels one INT8 code each (scale 1/255)."""
    from .ranges import range_edit
    ranges = {n: (float(np.min(v["min"])), float(np.max(v["max"]))) for n, v in calibration.items()
              if isinstance(v, dict) and "min" in v and "max" in v and np.size(v["min"]) == 1}
    input_tensors = _graph_inputs(prepared.data)
    calibration, inputs = _input_ranges(input_tensors, calibration, x, input_range)
    # minmax-global: the data's 0..100th percentiles (the exact min/max over every sample) in place of
    # AI Edge Quantizer's moving average of each sample's min/max
    percentile = {"percentile": recipe.percentile, "minmax-global": 100.0}.get(recipe.calibrator)
    channels = _depthwise_outputs(prepared.data)      # their range per channel, measured in the same pass
    edited, outliers, clipped = range_edit(prepared.data, x, ranges, set(input_tensors), percentile,
                                           channels=channels)
    changed = 0
    if percentile is not None:
        calibration = dict(calibration)
        for n, (lo, hi) in edited.items():
            if (lo, hi) != ranges[n]:
                changed += 1
                v = calibration[n]
                calibration[n] = {**v, "min": np.full_like(np.asarray(v["min"]), lo),
                                  "max": np.full_like(np.asarray(v["max"]), hi)}
    percentile = percentile if recipe.calibrator == "percentile" else None
    return calibration, {"calibrator": recipe.calibrator, "percentile": percentile, "tensors": len(ranges),
                         "changed": changed, "outliers": outliers[:12], "n_outliers": len(outliers),
                         "depthwise_spread": depthwise_spread(channels), "inputs": inputs,
                         "clipped": clipped[:12], "n_clipped": len(clipped)}


def _graph_inputs(data: bytes) -> list[str]:
    """The names of the graph's input tensors (the keys of AI Edge Quantizer's calibration, not the signature's)."""
    from ai_edge_litert.tools import flatbuffer_utils as fu
    sg = fu.read_model_from_bytearray(bytearray(data)).subgraphs[0]
    return [_name(sg.tensors[int(i)].name) for i in sg.inputs]


def _input_ranges(input_tensors: list[str], calibration: dict[str, Any], x: np.ndarray,
                  input_range: tuple[float, float] | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The graph input's calibrated range replaced by ``input_range`` (or the samples' global min/max), and
    one record per input: ``{tensor, calibrated, set}``."""
    lo, hi = input_range if input_range is not None else (float(np.min(x)), float(np.max(x)))
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)         # a quantized range holds 0
    out, rows = dict(calibration), []
    for name in input_tensors:
        v = out.get(name)
        if not (isinstance(v, dict) and "min" in v and "max" in v) or hi <= lo:
            continue
        calibrated = [round(float(np.min(v["min"])), 6), round(float(np.max(v["max"])), 6)]
        origin = "input contract" if input_range is not None else "calibration samples"
        rows.append({"tensor": name, "calibrated": calibrated, "set": [lo, hi], "from": origin})
        out[name] = {**v, "min": np.full_like(np.asarray(v["min"]), lo), "max": np.full_like(np.asarray(v["max"]), hi)}
    return out, rows


#: a depthwise output channel this many times wider than its tensor's median channel (quantize.depthwise-spread)
DEPTHWISE_SPREAD = 10.0


def _depthwise_outputs(data: bytes) -> dict[str, np.ndarray]:
    """``{name: empty}`` for the depthwise outputs +cle could equalise (equalize/tflite_graph.py)."""
    from ai_edge_litert.tools import flatbuffer_utils as fu

    from .equalize.tflite_graph import depthwise_pairs
    model = fu.read_model_from_bytearray(bytearray(data))
    sg = model.subgraphs[0]
    return {_name(sg.tensors[t].name): np.zeros(0) for _, _, t in depthwise_pairs(model)}


def depthwise_spread(channels: dict[str, np.ndarray], *, ratio: float = DEPTHWISE_SPREAD) -> list[dict[str, Any]]:
    """The depthwise outputs whose widest channel spans at least ``ratio`` times the median one, widest first."""
    rows: list[dict[str, Any]] = []
    for name, widths in channels.items():
        median = float(np.median(widths)) if np.size(widths) else 0.0
        if median > 0 and float(np.max(widths)) >= ratio * median:
            rows.append({"tensor": name, "channel": int(np.argmax(widths)), "widest": round(float(np.max(widths)), 4),
                         "median": round(median, 4), "ratio": round(float(np.max(widths)) / median, 1)})
    return sorted(rows, key=lambda r: -float(r["ratio"]))[:12]


def set_io_types(data: bytes, input_dtype: str, output_dtype: str, *, source: str = "<bytes>") -> bytes:
    """The model's edges as the recipe asks.  AI Edge Quantizer makes the graph's inputs and outputs the
    quantized tensors themselves (int8, or int16 in the 16x8 mode); ``float32`` puts a QUANTIZE before the
    input / a DEQUANTIZE after the output, ``uint8`` a QUANTIZE uint8 -> int8 (zero point + 128) and
    int8 -> uint8, as the TFLite converter does.  An edge left in float (an excluded first/last op) stays
    float, whatever the recipe says (the recipe check then reports it)."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu
    model = fu.read_model_from_bytearray(bytearray(data))
    sg = model.subgraphs[0]
    want_type = {"float32": fb.TensorType.FLOAT32, "uint8": fb.TensorType.UINT8, "int8": fb.TensorType.INT8,
                 "int16": fb.TensorType.INT16}
    quantized = (fb.TensorType.INT8, fb.TensorType.INT16)
    remap: dict[int, int] = {}
    before, after = [], []

    def edge_tensor(old: int, dtype: str) -> int:
        t = sg.tensors[old]
        new = fb.TensorT()
        new.name = t.name
        new.shape = np.array(t.shape, np.int32) if t.shape is not None else None
        new.shapeSignature = (np.array(t.shapeSignature, np.int32) if t.shapeSignature is not None else None)
        new.type = want_type[dtype]
        new.buffer = 0
        if dtype == "uint8":
            qp = fb.QuantizationParametersT()
            qp.scale = [float(v) for v in t.quantization.scale]
            qp.zeroPoint = [int(z) + 128 for z in t.quantization.zeroPoint]
            new.quantization = qp
        t.name = _name(t.name).encode() + (b"_int16" if t.type == fb.TensorType.INT16 else b"_int8")
        sg.tensors.append(new)
        return len(sg.tensors) - 1

    def op(code: int, src: int, dst: int) -> Any:
        o = fb.OperatorT()
        o.opcodeIndex = _opcode(model, code)
        o.inputs, o.outputs = [src], [dst]
        return o

    for idx in [int(i) for i in sg.inputs]:
        t = sg.tensors[idx]
        if t.type not in quantized or t.type == want_type[input_dtype]:
            continue
        if input_dtype == "int16" or (input_dtype in ("int8", "uint8") and t.type == fb.TensorType.INT16):
            continue
        new = edge_tensor(idx, input_dtype)
        before.append(op(fb.BuiltinOperator.QUANTIZE, new, idx))
        remap[idx] = new
    for idx in [int(i) for i in sg.outputs]:
        t = sg.tensors[idx]
        if t.type not in quantized or t.type == want_type[output_dtype]:
            continue
        if output_dtype == "int16" or (output_dtype in ("int8", "uint8") and t.type == fb.TensorType.INT16):
            continue
        new = edge_tensor(idx, output_dtype)
        code = fb.BuiltinOperator.DEQUANTIZE if output_dtype == "float32" else fb.BuiltinOperator.QUANTIZE
        after.append(op(code, idx, new))
        remap[idx] = new
    if not remap:
        return data
    sg.operators = before + list(sg.operators) + after
    sg.inputs = np.asarray([remap.get(int(i), int(i)) for i in sg.inputs], np.int32)
    sg.outputs = np.asarray([remap.get(int(i), int(i)) for i in sg.outputs], np.int32)
    for sig in model.signatureDefs or []:
        for tm in list(sig.inputs or []) + list(sig.outputs or []):
            tm.tensorIndex = remap.get(int(tm.tensorIndex), int(tm.tensorIndex))
    return bytes(fu.convert_object_to_bytearray(model))


def inline_buffers(data: bytes) -> bytes:
    """``data`` with every constant stored inside the flatbuffer.  AI Edge Quantizer writes constants after
    the flatbuffer, found by ``Buffer.offset``/``size`` (the TFLite format for files over 2 GB, read by LiteRT
    and Vela 5.2).  Vela 3.10.0, the compiler of BSP lf-6.6.3_1.0.0, reads such a constant as empty and puts
    its op on the CPU ("Constant tensors should not have NoneType-values": 44 of MediaPipe's hand landmark
    model's 65 ops on imx93)."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu
    raw = fb.Model.GetRootAs(data, 0)
    if not any(raw.Buffers(i).Offset() > 1 for i in range(raw.BuffersLength())):
        return data
    return bytes(fu.convert_object_to_bytearray(fu.read_model_from_bytearray(bytearray(data))))


def drop_identity_requantize(data: bytes) -> bytes:
    """Remove QUANTIZE ops AI Edge Quantizer puts before a CONCATENATION input whose scale already is the
    output's (same type, scale and zero point in and out: the op copies bytes); the others requantize."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu
    model = fu.read_model_from_bytearray(bytearray(data))
    sg = model.subgraphs[0]
    outputs = {int(i) for i in sg.outputs}

    def params(t: Any) -> tuple[Any, ...]:
        q = t.quantization
        return (t.type, tuple(np.asarray(q.scale).tolist()) if q is not None and q.scale is not None else (),
                tuple(np.asarray(q.zeroPoint).tolist()) if q is not None and q.zeroPoint is not None else ())
    rewire: dict[int, int] = {}
    keep = []
    for op in sg.operators:
        if (_builtin(model, op) == fb.BuiltinOperator.QUANTIZE and int(op.outputs[0]) not in outputs
                and params(sg.tensors[int(op.inputs[0])]) == params(sg.tensors[int(op.outputs[0])])
                and params(sg.tensors[int(op.inputs[0])])[1]):
            rewire[int(op.outputs[0])] = int(op.inputs[0])
            continue
        keep.append(op)
    if not rewire:
        return data
    for op in keep:
        op.inputs = [rewire.get(int(i), int(i)) for i in op.inputs]
    sg.operators = keep
    return bytes(fu.convert_object_to_bytearray(model))


def _opcode(model: Any, builtin: int) -> int:
    from ai_edge_litert import schema_py_generated as fb
    for i, code in enumerate(model.operatorCodes):
        if max(code.builtinCode, code.deprecatedBuiltinCode) == builtin:
            return i
    code = fb.OperatorCodeT()
    code.builtinCode = builtin
    code.deprecatedBuiltinCode = min(builtin, 127)
    code.version = 1
    model.operatorCodes.append(code)
    return len(model.operatorCodes) - 1
