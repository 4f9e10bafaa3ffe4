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
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .._io import atomic_path, cache_dir, read_json, sha256_file, stable_hash, to_json
from .._results import Result
from ..errors import ModelError
from . import onnx_preflight

TOOL = "onnx2tf"
CALIBRATION_FILE = "calibration_image_sample_data_20x128x128x3_float32.npy"
RECORD = "conversion.json"
FLOAT_TFLITE = "model_float32.tflite"
SAVED_MODEL = "saved_model"
CONVERTER_VERSION = 5          # bump when the command line or the record changes
DRIVER = "run_onnx2tf.py"
# onnx2tf writes its SavedModel, then makes the .tflite files with TFLiteConverter.from_keras_model, which
# saves the Keras model once more with its Keras metadata: every folded constant printed as JSON text,
# single-threaded (ResNet-50: 2+ CPU minutes per .tflite, 3.6 GB; over 20 min on a loaded machine).
# The driver runs onnx2tf's own command line with from_keras_model answered by from_saved_model on the
# SavedModel it has just written (the same function: ResNet-50 converts in 10 s).
DRIVER_SOURCE = """\
import sys

import tensorflow as tf

saved_model = sys.argv[sys.argv.index("-o") + 1]
from_saved_model = tf.lite.TFLiteConverter.from_saved_model
tf.lite.TFLiteConverter.from_keras_model = staticmethod(lambda model, *a, **k: from_saved_model(saved_model))
from onnx2tf import main

sys.argv[0] = "onnx2tf"
sys.exit(main())
"""
DEFAULT_MAX_REL_ERROR = 1e-3   # max |onnx - tflite| / max |onnx|, per output
DEFAULT_MIN_COSINE = 0.9999
CLOSE_COSINE, CLOSE_REL_ERROR = 0.99999, 1e-2
NEGLIGIBLE = 1e-5              # an output whose max |value| is below this is compared by absolute error only
CHECK_SAMPLES = 8
LAYOUTS = ("auto", "nchw", "nhwc")
TIMEOUT_S = 1800


@dataclass(frozen=True)
class TensorLayout:
    """One graph input or output: its shape in ONNX and in the converted model."""

    name: str
    onnx_shape: tuple[int, ...]
    tflite_shape: tuple[int, ...]
    transposed: bool            # NCHW (ONNX) became NHWC (TFLite)
    tflite_name: str = ""       # its name in the converted model's signature (when onnx2tf changed it)


@dataclass(frozen=True)
class OutputAgreement:
    """ONNX Runtime vs converted FP32 TFLite on the check samples, for one output."""

    name: str
    max_abs_error: float
    max_abs_reference: float
    cosine: float
    ok: bool

    @property
    def relative_error(self) -> float:
        return self.max_abs_error / self.max_abs_reference if self.max_abs_reference > 0 else self.max_abs_error


@dataclass(frozen=True)
class ConvertedModel(Result):
    """An ONNX model converted to a SavedModel and an FP32 ``.tflite``, with how it was checked."""

    source_path: str
    source_sha256: str
    saved_model: str
    tflite: str
    inputs: tuple[TensorLayout, ...]
    outputs: tuple[TensorLayout, ...]
    agreement: tuple[OutputAgreement, ...]
    check_samples: int
    tools: dict[str, str]
    lock_sha256: str
    seconds: float
    cache_key: str
    cache_hit: bool = False
    rewrites: tuple[str, ...] = ()   # exact graph rewrites made before onnx2tf ("Sum -> Add: 16 nodes")

    @property
    def transposed_inputs(self) -> tuple[str, ...]:
        """Names of the ONNX inputs that were NCHW and are NHWC in the converted model."""
        return tuple(t.name for t in self.inputs if t.transposed)

    def manifest_entry(self) -> dict[str, Any]:
        """What a quantized model's manifest records about the conversion."""
        return {"tool": TOOL, "versions": dict(self.tools), "lock_sha256": self.lock_sha256,
                "transposed_inputs": list(self.transposed_inputs),
                "transposed_outputs": [t.name for t in self.outputs if t.transposed],
                "inputs": [{"name": t.name, "onnx_shape": list(t.onnx_shape), "tflite_shape": list(t.tflite_shape)}
                           for t in self.inputs],
                "agreement": [{"output": a.name, "max_abs_error": a.max_abs_error, "cosine": a.cosine}
                              for a in self.agreement],
                "check_samples": self.check_samples, "cache_key": self.cache_key, "rewrites": list(self.rewrites)}

    def summary(self) -> str:
        worst = max(self.agreement, key=lambda a: a.relative_error, default=None)
        check = (f"worst output {worst.name!r}: max abs error {worst.max_abs_error:.3g}, cosine {worst.cosine:.6f}"
                 if worst else "not checked")
        layout = (f"NCHW->NHWC for {', '.join(self.transposed_inputs)}" if self.transposed_inputs
                  else "layout unchanged") + "".join(f"; {r}" for r in self.rewrites)
        return (f"{Path(self.source_path).name} -> FP32 TFLite with onnx2tf {self.tools.get('onnx2tf', '?')}: "
                f"{layout}; {check} on {self.check_samples} samples"
                + (" (cache hit)" if self.cache_hit else f" ({self.seconds:.1f} s)"))

    def _repr_html_(self) -> str:
        from .. import display
        io_rows = [(kind, t.name, str(t.onnx_shape), str(t.tflite_shape), "NCHW->NHWC" if t.transposed else "-")
                   for kind, group in (("input", self.inputs), ("output", self.outputs)) for t in group]
        check_rows = [(a.name, a.max_abs_error, a.max_abs_reference, a.cosine, "ok" if a.ok else "DIVERGES")
                      for a in self.agreement]
        styles = ["" if a.ok else display.BAD_STYLE for a in self.agreement]
        return (display.heading("Converted model (ONNX -> TFLite)") + display.paragraph(self.summary())
                + display.table(("", "name", "ONNX shape", "TFLite shape", "layout"), io_rows)
                + display.table(("output", "max abs error", "max |ONNX|", "cosine", ""), check_rows,
                                row_styles=styles, caption="ONNX Runtime vs converted FP32 TFLite")
                + display.table(("tool", "version"), sorted(self.tools.items())))


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
    from .. import toolenv
    from .._validation import check_choice
    check_choice("input_layout", input_layout, LAYOUTS, error=ModelError)
    source = Path(path)
    if size is None:
        size = card_size(source)
    source = onnx_preflight.for_onnx2tf(source)   # file, external data, sizes, checker, ops: before anything runs
    graph = read_onnx_io(source, size=size)
    keep = nhwc_inputs(graph, input_layout)
    env = toolenv.ensure(TOOL)
    source_sha = sha256_file(source)
    key = stable_hash({"onnx": source_sha, "lock": env.lock_sha256, "converter": CONVERTER_VERSION,
                       "keep_nhwc": list(keep), "inputs": [list(shape) for _, shape, _ in graph.inputs]})
    folder = cache_dir("convert") / key[:2] / key
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


@dataclass(frozen=True)
class _OnnxIO:
    inputs: tuple[tuple[str, tuple[int, ...], bool], ...]   # name, batch-1 shape, batch was dynamic
    outputs: tuple[str, ...]
    fixed: tuple[str, ...] = ()   # inputs whose dynamic H/W were fixed by `size` ("x: H, W = 48, 192")


def card_size(source: Path) -> tuple[int, int] | None:
    """The ``size:`` of the card beside ``source`` (``<model>.card.yaml``), or None."""
    from .contract import card_path, read_card
    path = card_path(source)
    if not path.is_file():
        return None
    value = read_card(path).get("size")
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) and v > 0 for v in value):
        return int(value[0]), int(value[1])
    return None


def _fix_spatial(dims: list[int], size: tuple[int, int] | None) -> tuple[list[int], bool]:
    """An image input's dynamic H and W (NCHW, or NHWC when the last dimension is the channels) set
    to ``size``; other dynamic dimensions stay -1."""
    if size is None or len(dims) != 4:
        return dims, False
    channels = (1, 2, 3, 4)
    hw = (1, 2) if dims[3] in channels and dims[1] not in channels else (2, 3)
    if not any(dims[i] < 0 for i in hw):
        return dims, False
    out = list(dims)
    for i, v in zip(hw, size):
        if out[i] >= 0 and out[i] != v:
            return dims, False     # a fixed dimension that disagrees with the card: left to the error below
        out[i] = v
    return out, True


def read_onnx_io(path: Path, size: tuple[int, int] | None = None) -> _OnnxIO:
    """The graph inputs (static batch-1 shapes) and output names of an ONNX file; ``size`` fixes a
    dynamic image height/width."""
    from ..quantize.inspect import load_onnx
    model = load_onnx(path)
    init = {i.name for i in model.graph.initializer}
    inputs = []
    fixed: list[str] = []
    for value in model.graph.input:
        if value.name in init:
            continue
        tensor = value.type.tensor_type
        if tensor.elem_type != 1:   # onnx.TensorProto.FLOAT
            raise ModelError(f"{path}: input {value.name!r} is not float32 (ONNX element type {tensor.elem_type}); "
                             "the workbench converts models with float image inputs.")
        dims = [int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in tensor.shape.dim]
        if not dims:
            raise ModelError(f"{path}: input {value.name!r} is a scalar; an image input (N, C, H, W) is expected.")
        declared = tuple(dims)
        dims, was_fixed = _fix_spatial(dims, size)
        if was_fixed:
            fixed.append(f"{value.name}: {declared} -> {(1, *dims[1:])} (size {list(size or ())})")
        if any(d < 0 for d in dims[1:]):
            hint = (f" The size {list(size)} given does not fit this input." if size is not None else
                    " Give the input size in the model's card (`size: [H, W]` in <model>.card.yaml), or")
            raise ModelError(
                f"{path}: input {value.name!r} has dynamic shape {declared}; only the batch dimension may be "
                f"unknown.{hint} export with a fixed input size (torch.onnx.export with a concrete example input "
                "and no dynamic_axes besides the batch), then convert that.")
        inputs.append((value.name, (1, *dims[1:]), dims[0] < 0))
    if not inputs:
        raise ModelError(f"{path}: the ONNX graph has no inputs.")
    outputs = tuple(o.name for o in model.graph.output)
    return _OnnxIO(inputs=tuple(inputs), outputs=outputs, fixed=tuple(fixed))


def _load_entry(folder: Path) -> dict[str, Any] | None:
    """The record of a complete cache entry, or None (a damaged entry is removed)."""
    if not folder.exists():
        return None
    try:
        record = read_json(folder / RECORD)
        ok = (record.get("converter") == CONVERTER_VERSION and (folder / FLOAT_TFLITE).is_file()
              and (folder / SAVED_MODEL / "saved_model.pb").is_file()
              and sha256_file(folder / FLOAT_TFLITE) == record.get("tflite_sha256"))
    except (OSError, ValueError, AttributeError):
        ok = False
    if ok:
        return record
    shutil.rmtree(folder, ignore_errors=True)
    return None


def calibration_file(samples: np.ndarray | None, dst: Path) -> Path:
    """onnx2tf's ``calibration_image_sample_data_20x128x128x3_float32.npy`` from our own samples.

    onnx2tf loads this file at start-up (and downloads it when absent); it is only used by
    onnx2tf's own quantization, which the workbench does not use.  It holds 20 of the
    given samples resized to 128x128 RGB (or seeded noise), never zeros."""
    if samples is not None and np.asarray(samples).ndim == 4 and len(samples):
        x = np.asarray(samples, np.float32)
        x = x[np.arange(20) % len(x)]
        if x.shape[-1] == 1:
            x = np.repeat(x, 3, axis=-1)
        elif x.shape[-1] != 3:
            x = x[..., :3] if x.shape[-1] > 3 else np.repeat(x[..., :1], 3, axis=-1)
        from PIL import Image
        out = np.stack([np.stack([np.asarray(Image.fromarray(img[..., c]).resize((128, 128), Image.Resampling.BILINEAR))
                                  for c in range(3)], axis=-1) for img in x]).astype(np.float32)
    else:
        out = np.random.default_rng(0).uniform(0.0, 1.0, (20, 128, 128, 3)).astype(np.float32)
    np.save(dst / CALIBRATION_FILE, out)
    return dst / CALIBRATION_FILE


def nhwc_inputs(graph: _OnnxIO, layout: str) -> tuple[str, ...]:
    """The inputs onnx2tf must keep as they are because they are NHWC already."""
    if layout == "nchw":
        return ()
    channels = (1, 2, 3, 4)
    out = []
    for name, shape, _ in graph.inputs:
        if len(shape) != 4:
            continue
        if layout == "nhwc" or (shape[3] in channels and shape[1] not in channels):
            out.append(name)
    return tuple(out)


def _convert_fresh(source: Path, graph: _OnnxIO, env: Any, key: str, folder: Path, samples: np.ndarray | None,
                   timeout: float, keep: tuple[str, ...]) -> dict[str, Any]:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="wb-onnx2tf-") as tmp:
        work = Path(tmp)
        rewrites = exact_rewrites(source, work / "model.onnx", graph)
        calibration_file(samples, work)
        (work / DRIVER).write_text(DRIVER_SOURCE, encoding="utf-8")
        cmd = ["python", DRIVER, "-i", "model.onnx", "-o", "out", "-coion", "-osd", "-v", "error"]
        if graph.fixed:   # dynamic H/W fixed by the card's size: onnx2tf's own shape overwrite, batch 1 included
            cmd += ["-ois", *(f"{name}:{','.join(map(str, shape))}" for name, shape, _ in graph.inputs)]
        elif any(dynamic for _, _, dynamic in graph.inputs):
            cmd += ["-b", "1"]
        if keep:   # onnx2tf matches names after its own renaming (":" -> "__"): give every spelling
            cmd += ["-kt", *sorted({v for k in keep for v in (k, k.replace(":", "__"), _sanitized(k))})]
        try:
            proc = env.run(cmd, cwd=work, timeout=timeout)
        except Exception as exc:   # a timeout or a tool that cannot start
            raise ModelError(f"{source}: onnx2tf did not finish ({type(exc).__name__}: {exc}).") from exc
        out = work / "out"
        tflite = out / FLOAT_TFLITE
        if proc.returncode != 0 or not tflite.is_file() or not (out / "saved_model.pb").is_file():
            tail = "\n".join((proc.stdout + "\n" + proc.stderr).strip().splitlines()[-15:])
            raise ModelError(f"{source}: onnx2tf could not convert the model (exit {proc.returncode}). Its last "
                             f"lines:\n{tail}\nIf an op is unsupported, simplify the export (opset 13-17, "
                             "constant folding) or quantize with --backend onnx (no NPU placement then).")
        layouts = _layouts(source, graph, tflite)
        with atomic_path(folder) as entry:
            entry.mkdir(parents=True)
            saved = entry / SAVED_MODEL
            saved.mkdir()
            for name in ("saved_model.pb", "variables", "assets", "fingerprint.pb"):
                if (out / name).is_dir():
                    shutil.copytree(out / name, saved / name)
                elif (out / name).is_file():
                    shutil.copyfile(out / name, saved / name)
            shutil.copyfile(tflite, entry / FLOAT_TFLITE)
            record = {"converter": CONVERTER_VERSION, "cache_key": key, "source_sha256": sha256_file(source),
                      "tflite_sha256": sha256_file(entry / FLOAT_TFLITE), "command": cmd,
                      "seconds": round(time.perf_counter() - start, 2), "tools": dict(env.versions),
                      "lock_sha256": env.lock_sha256, "rewrites": rewrites, **layouts}
            (entry / RECORD).write_text(to_json(record, indent=2) + "\n", encoding="utf-8")
    return json.loads(to_json(record))


def exact_rewrites(source: Path, dst: Path, graph: _OnnxIO | None = None) -> list[str]:
    """Write ``source`` to ``dst`` with nodes onnx2tf turns into ops the NPUs cannot run in INT8 replaced
    by the same arithmetic in other ops; returns what was replaced (empty: ``dst`` is a plain copy).

    ``Sum`` (opset <= 7 residual adds, e.g. ResNet-50 and ShuffleNet of ``onnx/backend/test/data/light``)
    becomes TFLite ``ADD_N``, which has no INT8 kernel: the TFLite converter leaves it in float between
    DEQUANTIZE/QUANTIZE and the full-integer model is refused.  ``Sum(a, b, c)`` is ``Add(Add(a, b), c)``
    (both broadcast the same way, float addition in the same order), which quantizes to INT8 ``ADD``.
    Node names TensorFlow refuses as scope names (Paddle2ONNX's ``Conv@0``, ``Softmax@0``: onnx2tf died
    after a minute with "'Softmax@0' is not a valid scope name") are renamed; dynamic input H/W fixed by
    the card's ``size`` are written into the graph's inputs.
    The agreement check compares the converted model with ONNX Runtime on the original file."""
    import onnx
    from onnx import helper
    model = onnx.load(str(source))
    done: list[str] = []
    renamed = sanitize_node_names(model)
    if renamed:
        done.append(f"node names TensorFlow refuses renamed: {renamed} node(s)")
    if graph is not None and graph.fixed:
        shapes = dict((name, shape) for name, shape, _ in graph.inputs)
        for value in model.graph.input:
            if value.name in shapes:
                for dim, v in zip(value.type.tensor_type.shape.dim[1:], shapes[value.name][1:]):
                    dim.Clear()
                    dim.dim_value = int(v)
        del model.graph.value_info[:]     # shapes inferred from the dynamic input; onnx2tf infers them again
        done.append("dynamic input size fixed: " + "; ".join(graph.fixed))
    pools = ceil_pools_as_same(model)
    if pools:
        done.append(f"ceil-mode MaxPool -> SAME padding (no float32-lowest pad): {pools} node(s)")
    sums = [n for n in model.graph.node if n.op_type == "Sum" and n.domain in ("", "ai.onnx")]
    if not sums:
        if done:
            onnx.save(model, str(dst))
        else:
            shutil.copyfile(source, dst)
        return done
    nodes, replaced = [], {id(n) for n in sums}
    for node in model.graph.node:
        if id(node) not in replaced:
            nodes.append(node)
            continue
        name = node.name or node.output[0]
        if len(node.input) == 1:
            nodes.append(helper.make_node("Identity", [node.input[0]], [node.output[0]], name=name))
            continue
        acc = node.input[0]
        for i, term in enumerate(node.input[1:], start=1):
            out = node.output[0] if i == len(node.input) - 1 else f"{node.output[0]}__sum{i}"
            nodes.append(helper.make_node("Add", [acc, term], [out], name=f"{name}__add{i}"))
            acc = out
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    onnx.save(model, str(dst))
    return [*done, f"Sum -> Add: {len(sums)} node(s)"]


def ceil_pools_as_same(model: Any) -> int:
    """``MaxPool(ceil_mode=1)`` whose windows are exactly TensorFlow's ``SAME`` ones (same output size,
    the extra padding at the end) becomes ``MaxPool(auto_pad=SAME_UPPER)``.

    onnx2tf otherwise writes a ceil-mode pool as ``PADV2`` with float32's lowest value (-3.4e38) then a
    VALID pool; calibration takes that value in (activation scale ~1e36) and the INT8 model ignores
    its input (MTCNN ONet/RNet).  In both forms padded positions never win the max, so the rewrite is
    exact; TFLite's SAME max-pool needs no pad op at all.  Returns how many nodes were rewritten."""
    import math

    import onnx
    from onnx import helper
    try:
        shapes = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - a model shape inference cannot read keeps its pools
        return 0
    known = {v.name: [d.dim_value if d.HasField("dim_value") else -1 for d in v.type.tensor_type.shape.dim]
             for v in list(shapes.graph.value_info) + list(shapes.graph.input)}
    count = 0
    for node in model.graph.node:
        if node.op_type != "MaxPool" or len(node.output) != 1:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if not attrs.get("ceil_mode") or attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            continue
        if any(d != 1 for d in attrs.get("dilations", [1, 1])) or attrs.get("storage_order", 0):
            continue
        dims = known.get(node.input[0])
        kernel = list(attrs.get("kernel_shape", []))
        if not dims or len(dims) != 4 or any(d <= 0 for d in dims[2:]) or len(kernel) != 2:
            continue
        strides = list(attrs.get("strides", [1, 1]))
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
        same = True
        for i, size in enumerate(dims[2:]):
            k, st, begin, end = kernel[i], strides[i], pads[i], pads[i + 2]
            ceil_out = math.ceil((size + begin + end - k) / st) + 1
            if (ceil_out - 1) * st >= size + begin:     # ONNX/PyTorch drop a last window that starts in the pad
                ceil_out -= 1
            same_out = math.ceil(size / st)
            total = max((same_out - 1) * st + k - size, 0)
            if ceil_out != same_out or begin != total // 2:
                same = False
        if not same:
            continue
        kept = [a for a in node.attribute if a.name not in ("ceil_mode", "pads", "auto_pad")]
        del node.attribute[:]
        node.attribute.extend(kept)
        node.attribute.append(helper.make_attribute("auto_pad", "SAME_UPPER"))
        count += 1
    return count


_SCOPE_OK = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*$")   # TensorFlow's valid scope name
_ONNX2TF_FIXES = re.compile(r"^[A-Za-z0-9_.\\/>:-]*$")          # a leading "/" and ":" onnx2tf renames itself


def sanitize_node_names(model: Any) -> int:
    """Rename nodes whose names TensorFlow refuses as scope names (characters outside
    ``[A-Za-z0-9_.\\/>-]``, e.g. ``Conv@0``): invalid characters become ``_``, kept unique.
    Tensor names are untouched (inputs/outputs keep their names).  Returns how many were renamed."""
    taken = {n.name for n in model.graph.node}
    count = 0
    for node in model.graph.node:
        if not node.name or _SCOPE_OK.match(node.name) or _ONNX2TF_FIXES.match(node.name):
            continue
        base = re.sub(r"[^A-Za-z0-9_.\\/>-]", "_", node.name)
        base = base if re.match(r"^[A-Za-z0-9.]", base) else f"n{base}"
        name, i = base, 1
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        taken.add(name)
        node.name = name
        count += 1
    return count


def _is_nchw_to_nhwc(onnx_shape: tuple[int, ...], tflite_shape: tuple[int, ...]) -> bool:
    return (len(onnx_shape) >= 3 and len(onnx_shape) == len(tflite_shape) and onnx_shape != tflite_shape
            and tuple(tflite_shape) == (onnx_shape[0], *onnx_shape[2:], onnx_shape[1]))


def signature_io(interp: Any) -> tuple[dict[str, int], dict[str, int]]:
    """``({input name: tensor index}, {output name: tensor index})`` of a LiteRT interpreter.

    onnx2tf's ``-coion`` writes the ONNX names into the ``serving_default`` signature (the tensors
    themselves are called ``serving_default_x:0`` / ``PartitionedCall:N``, in another order)."""
    signatures = interp._get_full_signature_list() or {}
    if signatures:
        sig = signatures.get("serving_default") or next(iter(signatures.values()))
        return dict(sig["inputs"]), dict(sig["outputs"])
    return ({d["name"]: d["index"] for d in interp.get_input_details()},
            {d["name"]: d["index"] for d in interp.get_output_details()})


def _tflite_io(tflite: Path) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    from ai_edge_litert.interpreter import Interpreter
    interp = Interpreter(model_path=str(tflite))
    ins, outs = signature_io(interp)
    shapes = {d["index"]: tuple(int(v) for v in d["shape"]) for d in interp.get_tensor_details()}
    return {k: shapes[i] for k, i in ins.items()}, {k: shapes[i] for k, i in outs.items()}


def _layouts(source: Path, graph: _OnnxIO, tflite: Path) -> dict[str, list[dict[str, Any]]]:
    """Match the converted model's inputs/outputs to the ONNX ones by name; record transposes."""
    ins, outs = _tflite_io(tflite)
    onnx_out_shapes = _onnx_output_shapes(source, graph)
    in_names = _match_names(source, "input", [n for n, _, _ in graph.inputs], list(ins))
    out_names = _match_names(source, "output", list(graph.outputs), list(outs))
    inputs = []
    for name, shape, _ in graph.inputs:
        got = ins[in_names[name]]
        inputs.append({"name": name, "tflite_name": in_names[name], "onnx_shape": list(shape),
                       "tflite_shape": list(got), "transposed": _is_nchw_to_nhwc(shape, got)})
    outputs = []
    for name in graph.outputs:
        got = outs[out_names[name]]
        shape = onnx_out_shapes.get(name, got)
        outputs.append({"name": name, "tflite_name": out_names[name], "onnx_shape": list(shape),
                        "tflite_shape": list(got), "transposed": _is_nchw_to_nhwc(tuple(shape), got)})
    return {"inputs": inputs, "outputs": outputs}


def _sanitized(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", name)


def _match_names(source: Path, kind: str, onnx_names: list[str], tflite_names: list[str]) -> dict[str, str]:
    """ONNX name -> converted name: the same name, or the same once onnx2tf replaced characters TF does
    not allow in names (``Identity:0`` -> ``Identity_0``); a single tensor matches the single one; the
    SavedModel signature's ``output_0``, ``output_1``... are the outputs in the ONNX graph's order (a
    mismatch shows in the agreement check)."""
    out = {}
    positional = [f"output_{i}" for i in range(len(onnx_names))]
    if kind == "output" and sorted(tflite_names) == sorted(positional) and not set(onnx_names) & set(tflite_names):
        return dict(zip(onnx_names, positional))
    for name in onnx_names:
        if name in tflite_names:
            out[name] = name
            continue
        same = [t for t in tflite_names if _sanitized(t) == _sanitized(name)
                or _sanitized(t).replace("__", "_") == _sanitized(name).replace("__", "_")]
        if len(same) == 1:
            out[name] = same[0]
        elif len(onnx_names) == 1 and len(tflite_names) == 1:
            out[name] = tflite_names[0]
        else:
            raise ModelError(f"{source}: the converted model has no {kind} named {name!r} (it has "
                             f"{', '.join(tflite_names)}); onnx2tf did not keep the ONNX names.")
    return out


def _onnx_output_shapes(source: Path, graph: _OnnxIO) -> dict[str, tuple[int, ...]]:
    """Output shapes from one ONNX Runtime run on zeros (exact, whatever shape inference says)."""
    session = _ort_session(source)
    feed = {name: np.zeros(shape, np.float32) for name, shape, _ in graph.inputs}
    values = session.run(list(graph.outputs), feed)
    return {name: tuple(int(d) for d in np.shape(v)) for name, v in zip(graph.outputs, values)}


def _ort_session(source: Path) -> Any:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - ORT raises its own types
        raise ModelError(f"{source}: ONNX Runtime cannot load this model ({exc}).") from exc


# -- the agreement check -----------------------------------------------------------------------
def check_agreement(converted: ConvertedModel, samples: np.ndarray | None = None, *,
                    max_rel_error: float = DEFAULT_MAX_REL_ERROR, min_cosine: float = DEFAULT_MIN_COSINE,
                    n: int = CHECK_SAMPLES) -> tuple[tuple[OutputAgreement, ...], int]:
    """Compare ONNX Runtime on the ONNX file with LiteRT on the converted FP32 ``.tflite``.

    Returns one :class:`OutputAgreement` per output (by ONNX name) and the number of
    samples; raises :class:`ModelError` naming the first output beyond tolerance."""
    from ai_edge_litert.interpreter import Interpreter
    source = Path(converted.source_path)
    feeds = _check_feeds(converted, samples, n)
    session = _ort_session(source)
    interp = Interpreter(model_path=converted.tflite)
    interp.allocate_tensors()
    in_idx, out_idx = signature_io(interp)
    in_idx = {t.name: in_idx[t.tflite_name or t.name] for t in converted.inputs}
    out_idx = {t.name: out_idx[t.tflite_name or t.name] for t in converted.outputs}
    names = [t.name for t in converted.outputs]
    ref: dict[str, list[np.ndarray]] = {k: [] for k in names}
    got: dict[str, list[np.ndarray]] = {k: [] for k in names}
    for feed in feeds:
        onnx_feed = {t.name: np.ascontiguousarray(np.moveaxis(feed[t.name], -1, 1)) if t.transposed else feed[t.name]
                     for t in converted.inputs}
        for name, value in zip(names, session.run(names, onnx_feed)):
            ref[name].append(np.asarray(value, np.float32))
        for t in converted.inputs:
            interp.set_tensor(in_idx[t.name], feed[t.name])
        interp.invoke()
        for t in converted.outputs:
            value = np.asarray(interp.get_tensor(out_idx[t.name]), np.float32)
            if t.transposed:   # NHWC back to the ONNX NCHW
                value = np.moveaxis(value, -1, 1)
            got[t.name].append(value)
    results = []
    for t in converted.outputs:
        a = np.concatenate([r.reshape(1, -1) for r in ref[t.name]]).astype(np.float64)
        b = np.concatenate([g.reshape(1, -1) for g in got[t.name]]).astype(np.float64)
        if a.shape != b.shape:
            raise ModelError(f"{source}: output {t.name!r} has {a.shape[1]} values per sample in ONNX but "
                             f"{b.shape[1]} in the converted model.")
        err = float(np.max(np.abs(a - b))) if a.size else 0.0
        top = float(np.max(np.abs(a))) if a.size else 0.0
        cos = _cosine(a.ravel(), b.ravel())
        # an output that is ~0 on every sample (a sigmoid map of noise: max 6e-8) has no direction: cosine
        # is rounding noise there, the absolute error decides
        # float reassociation (grouped convs split per group, reductions in another order) moves a
        # value by a few 1e-3 of the largest one while the outputs keep their direction: tolerated up to
        # CLOSE_REL_ERROR when the cosine is CLOSE_COSINE or better
        allowed = (CLOSE_REL_ERROR if cos >= CLOSE_COSINE else max_rel_error) * top + 1e-6
        ok = bool(np.isfinite(err) and np.isfinite(cos) and err <= allowed
                  and (cos >= min_cosine or top <= NEGLIGIBLE))
        results.append(OutputAgreement(name=t.name, max_abs_error=err, max_abs_reference=top, cosine=cos, ok=ok))
    bad = [r for r in results if not r.ok]
    if bad:
        first = bad[0]
        raise ModelError(
            f"{source}: the converted TFLite model diverges from ONNX Runtime at output {first.name!r}: max abs "
            f"error {first.max_abs_error:.4g} (max |ONNX| {first.max_abs_reference:.4g}, allowed "
            f"{max_rel_error:g} of it), cosine {first.cosine:.6f} (at least {min_cosine} required) on "
            f"{len(feeds)} samples. onnx2tf mis-converted an op on the way to this output; try another "
            "opset or simplify the export, or quantize with --backend onnx.")
    return tuple(results), len(feeds)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


def _check_feeds(converted: ConvertedModel, samples: np.ndarray | None, n: int) -> list[dict[str, np.ndarray]]:
    """``n`` batch-1 feeds in the converted (TFLite) layout: the given samples when the model has
    one input of their shape, else seeded uniform noise in [0, 1]."""
    rng = np.random.default_rng(0)
    one = converted.inputs[0] if len(converted.inputs) == 1 else None
    if samples is not None and one is not None:
        x = np.asarray(samples, np.float32)
        if x.ndim == len(one.tflite_shape) and tuple(x.shape[1:]) == tuple(one.tflite_shape[1:]) and len(x):
            step = max(1, len(x) // n)
            return [{one.name: np.ascontiguousarray(x[i:i + 1])} for i in range(0, len(x), step)][:n]
    return [{t.name: rng.uniform(0.0, 1.0, t.tflite_shape).astype(np.float32) for t in converted.inputs}
            for _ in range(n)]


# -- TensorFlow formats -> ONNX (tf2onnx, in the workbench's own environment) --------------------
def tf_to_onnx(path: str | os.PathLike, fmt: str, *, opset: int = 17, cache: bool = True
               ) -> tuple[Path, dict[str, Any]]:
    """An ``.onnx`` file converted from a Keras file, a SavedModel folder or an FP32 ``.tflite``.

    tf2onnx runs in the workbench's environment (``from_keras`` does not work with Keras 3:
    Keras goes through a batch-1 SavedModel).  Cached by content; returns the ONNX path and
    what the manifest records about the conversion."""
    from ..models.reference import export_onnx
    source = Path(path)
    versions = _tf2onnx_versions()
    key = stable_hash({"source": sha256_file(source), "format": fmt, "opset": opset, "tools": versions,
                       "converter": CONVERTER_VERSION})
    target = cache_dir("convert", "tf2onnx") / f"{key[:32]}.onnx"
    entry = {"tool": "tf2onnx", "versions": versions, "from_format": fmt, "opset": opset}
    if cache and target.is_file():
        return target, entry
    with tempfile.TemporaryDirectory(prefix="wb-tf2onnx-") as tmp:
        work = Path(tmp)
        out = work / "model.onnx"
        if fmt == "tflite":
            _run_tf2onnx(["--tflite", str(source)], out, opset, source)
        elif fmt == "saved_model":
            export_onnx(source, out, opset=opset)
        elif fmt == "keras":
            export_onnx(_keras_to_saved_model(source, work / "saved_model"), out, opset=opset)
        else:
            raise ModelError(f"{source}: tf2onnx converts Keras, SavedModel or .tflite models; got {fmt!r}.")
        with atomic_path(target) as tmp_target:
            shutil.copyfile(out, tmp_target)
    return target, entry


def _tf2onnx_versions() -> dict[str, str]:
    from importlib import metadata
    out = {}
    for dist in ("tf2onnx", "tensorflow-cpu", "onnx"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def _run_tf2onnx(args: list[str], out: Path, opset: int, source: Path) -> None:
    import subprocess
    import sys
    cmd = [sys.executable, "-m", "tf2onnx.convert", *args, "--output", str(out), "--opset", str(opset)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
    if proc.returncode != 0 or not out.is_file():
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise ModelError(f"{source}: tf2onnx could not convert the model to ONNX (exit {proc.returncode}):\n{tail}")


def _keras_to_saved_model(source: Path, dst: Path) -> Path:
    import contextlib
    import io
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            model = keras.models.load_model(str(source), compile=False)
    except Exception as exc:  # noqa: BLE001 - Keras raises many types
        raise ModelError(f"{source}: Keras cannot load this model ({type(exc).__name__}: {exc}).") from exc
    if len(model.inputs) != 1:
        raise ModelError(f"{source}: the model has {len(model.inputs)} inputs; one image input is expected.")
    spec = tf.TensorSpec((1, *model.inputs[0].shape[1:]), tf.float32, name="image")
    with contextlib.redirect_stdout(io.StringIO()):
        model.export(str(dst), format="tf_saved_model", input_signature=[spec])
    return dst


def conversion_toolchain(fmt: str, backend: str) -> dict[str, str]:
    """Versions of the converters a ``fmt`` source goes through on the way to ``backend``
    (empty when the backend reads it directly); they enter the quantize cache key and manifest."""
    tools: dict[str, str] = {}
    if backend == "tflite" and fmt == "tflite":   # quantized as it is: AI Edge Quantizer, no converter
        from ..quantize.aeq_backend import AEQ_VERSION, toolchain
        return {f"aeq/{k}": v for k, v in toolchain().items()} | {"aeq-route": str(AEQ_VERSION)}
    if backend == "tflite" and fmt == "onnx":
        from .. import toolenv
        env = toolenv.ensure(TOOL)
        tools.update({f"{TOOL}-env/{k}": v for k, v in sorted(env.versions.items())})
        tools[f"{TOOL}-env/lock_sha256"] = env.lock_sha256
        tools[TOOL] = env.versions.get(TOOL, "?")
        tools[f"{TOOL}-converter"] = str(CONVERTER_VERSION)   # the workbench's own steps around it (driver, rewrites)
    if backend == "onnx" and fmt != "onnx":
        tools.update({f"tf2onnx-path/{k}": v for k, v in _tf2onnx_versions().items()})
    return tools
