"""Cross-layer equalisation (``+cle``) and bias correction (``+bc``) on the float weights.

Both come from Nagel et al. 2019, "Data-Free Quantization Through Weight
Equalization and Bias Correction", and are applied in numpy to the FP32 model
before the converter sees it:

- **Batch norm folding.** Every batch norm that follows a convolution,
  depthwise convolution or dense layer is folded into its weights and bias (the
  converter would fold it anyway; CLE needs the folded weights).
- **Cross-layer equalisation.** For two consecutive layers A -> B joined through
  ops that commute with a positive per-channel scale (ReLU, ReLU6, max/average
  pooling, bilinear resize, zero padding, flatten), output channel ``i`` of A is
  divided by ``s_i`` and input channel ``i`` of B multiplied by it, with
  ``s_i = sqrt(r_A,i * r_B,i) / r_B,i`` (``r`` = largest absolute weight of the
  channel): both channels then have range ``sqrt(r_A,i * r_B,i)``, so one
  per-tensor scale fits all channels far better.  The pass is repeated over all
  pairs until the scales settle.  ReLU6 does not commute with a scale (its clip
  at 6 would move), so, as in the paper, a ReLU6 inside an equalised pair
  becomes ReLU; the FP32 function of the equalised model is otherwise unchanged.
- **Bias correction** (empirical variant): the expected output shift that
  weight quantization causes, ``(Q(W) - W) . E[x]``, is subtracted from each
  layer's bias.  ``Q`` is the recipe's weight quantization (symmetric INT8, per
  channel or per tensor, as the TFLite converter does) and ``E[x]`` the mean
  input of the layer over the calibration samples.

Keras models (``.keras``/``.h5``) are rewritten through their functional
config; ONNX models have their Conv/Gemm initializers rewritten (CLE; bias
correction runs the model through ONNX Runtime for ``E[x]``).  The transformed
model is cached under a content key, and :class:`EqualizeReport` records every
pair and the ranges before and after.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._io import (
    atomic_path,
    atomic_write_json,
    cache_dir,
    check_folder_seal,
    damaged_cache_entry,
    read_json,
    seal_folder,
    sha256_file,
    stable_hash,
)
from .._results import Result
from ..errors import QuantizationError

TRANSFORMS = ("cle", "bc")
CLE_ITERATIONS = 30
CLE_TOLERANCE = 1e-6

_CONV_LIKE = ("Conv2D", "DepthwiseConv2D", "Dense")
_PASS_THROUGH = ("Identity", "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D",
                 "ZeroPadding2D", "Dropout", "Resizing", "UpSampling2D", "Flatten")


@dataclass(frozen=True)
class EqualizedPair:
    """One equalised pair: layer ``first`` -> layer ``second`` through ``through``."""

    first: str
    second: str
    through: tuple[str, ...]
    channels: int
    range_ratio_before: float     # largest / smallest channel range of ``first`` before CLE
    range_ratio_after: float


@dataclass(frozen=True)
class EqualizeReport(Result):
    """What the transforms did to one model."""

    source: str
    output: str
    transforms: tuple[str, ...]
    weights: str
    folded_batch_norms: tuple[str, ...]
    pairs: tuple[EqualizedPair, ...]
    relu6_to_relu: tuple[str, ...]
    bias_corrected: tuple[str, ...]
    key: str
    skipped: tuple[str, ...] = ()
    cache_hit: bool = False

    def summary(self) -> str:
        worst = max((p.range_ratio_before for p in self.pairs), default=1.0)
        after = max((p.range_ratio_after for p in self.pairs), default=1.0)
        return (f"{'+'.join(self.transforms)} on {Path(self.source).name}: {len(self.folded_batch_norms)} batch "
                f"norm(s) folded, {len(self.pairs)} pair(s) equalised (worst channel range ratio "
                f"{worst:.1f} -> {after:.1f}), {len(self.relu6_to_relu)} ReLU6 -> ReLU, "
                f"{len(self.skipped)} pair(s) skipped (ReLU6 clips), "
                f"{len(self.bias_corrected)} bias(es) corrected" + (" (cached)" if self.cache_hit else ""))

    def _repr_html_(self) -> str:
        from .. import display
        rows = [(p.first, p.second, " > ".join(p.through) or "-", p.channels, f"{p.range_ratio_before:.1f}",
                 f"{p.range_ratio_after:.1f}") for p in self.pairs]
        return (display.heading("Cross-layer equalisation") + display.paragraph(self.summary())
                + display.table(("first", "second", "through", "channels", "range ratio before", "after"), rows))


# ----------------------------------------------------------------------------- the entry point

def apply_transforms(source: str | os.PathLike, fmt: str, transforms: tuple[str, ...], *, weights: str,
                     calibration: np.ndarray | None = None, cache: bool = True,
                     _iterations: int | None = None) -> tuple[Path, str, EqualizeReport]:
    """Apply ``transforms`` (``cle``, ``bc``) to the float model at ``source``.

    Returns the transformed model's path (cached), its format and the report.
    ``weights`` is the recipe's granularity (``per_channel``/``per_tensor``: what bias
    correction simulates); ``calibration`` the samples bias correction averages over.
    """
    source = Path(source)
    bad = [t for t in transforms if t not in TRANSFORMS]
    if bad:
        raise QuantizationError(f"unknown transform {bad[0]!r}; transforms are {', '.join(TRANSFORMS)} "
                                "(recipe names like 'a8w8_pt+cle' or 'a8w8_pt+cle+bc').")
    if "bc" in transforms and calibration is None:
        raise QuantizationError("bias correction (+bc) needs calibration samples for the mean layer inputs.")
    if fmt not in ("keras", "onnx"):
        raise QuantizationError(
            f"{source}: +cle/+bc rewrite Keras (.keras/.h5) or ONNX models; got a {fmt} model. Quantize the "
            ".keras file (or the .onnx export) instead of the SavedModel/.tflite.")
    key_parts = {"source": sha256_file(source), "transforms": list(transforms), "code": sha256_file(__file__),
                 "weights": weights if "bc" in transforms else None, "iterations": _iterations}
    if calibration is not None:   # bc averages over it; cle decides from it which ReLU6 pairs are safe
        key_parts["calibration"] = stable_hash([str(calibration.shape), sha256_bytes_array(calibration)])
    key = stable_hash(key_parts)[:20]
    folder = cache_dir("equalize") / key
    ext = ".keras" if fmt == "keras" else ".onnx"
    model_out, record = folder / f"model{ext}", folder / "equalize.json"
    if cache and record.is_file():
        damage = check_folder_seal(folder)      # the model and report as written, or the entry is redone
        if damage is None:
            report = EqualizeReport.from_dict({**read_json(record), "cache_hit": True})
            return model_out, fmt, report
        damaged_cache_entry(folder, damage)
    with atomic_path(folder, replace_folder=True) as tmp:
        tmp.mkdir(parents=True)
        out = tmp / f"model{ext}"
        if fmt == "keras":
            info = _keras_transform(source, out, transforms, weights, calibration,
                                    CLE_ITERATIONS if _iterations is None else _iterations)
        else:
            info = _onnx_transform(source, out, transforms, weights, calibration)
        report = EqualizeReport(source=str(source), output=str(model_out), transforms=tuple(transforms),
                                weights=weights, key=key, **info)
        atomic_write_json(tmp / "equalize.json", report.to_dict())
        seal_folder(tmp)
    return model_out, fmt, report


def sha256_bytes_array(x: np.ndarray) -> str:
    import hashlib
    return hashlib.sha256(np.ascontiguousarray(x, dtype=np.float32).tobytes()).hexdigest()


# ----------------------------------------------------------------------------- shared numpy

def equalize_pair(w_a: np.ndarray, b_a: np.ndarray | None, w_b: np.ndarray, *, a_axis: int,
                  b_axis: int, b_repeat: int = 1) -> np.ndarray:
    """Equalise one pair in place; returns the scales ``s`` (A's channel ``i`` is divided by ``s_i``).

    ``a_axis``: A's output-channel axis; ``b_axis``: B's input-channel axis;
    ``b_repeat``: B's input axis holds each channel ``b_repeat`` times (a flatten of
    H x W x C: index ``k`` is channel ``k % C``).
    """
    r_a = channel_range(w_a, a_axis)
    r_b = channel_range(w_b, b_axis, repeat=b_repeat)
    ok = (r_a > 0) & (r_b > 0)
    s = np.ones_like(r_a)
    s[ok] = np.sqrt(r_a[ok] * r_b[ok]) / r_b[ok]
    shape_a = [1] * w_a.ndim
    shape_a[a_axis] = -1
    w_a /= s.reshape(shape_a)
    if b_a is not None:
        b_a /= s
    shape_b = [1] * w_b.ndim
    shape_b[b_axis] = -1
    w_b *= np.tile(s, b_repeat).reshape(shape_b)
    return s


def channel_range(w: np.ndarray, axis: int, *, repeat: int = 1) -> np.ndarray:
    """Largest absolute weight per channel along ``axis`` (folding ``repeat`` copies of each channel)."""
    moved = np.moveaxis(np.abs(w), axis, 0).reshape(w.shape[axis], -1).max(axis=1)
    if repeat > 1:
        moved = moved.reshape(repeat, -1).max(axis=0)
    return moved


def fake_quant_weights(w: np.ndarray, *, axis: int | None) -> np.ndarray:
    """Symmetric INT8 round trip of ``w`` (per channel along ``axis``, or per tensor when ``axis`` is None)."""
    if axis is None:
        scale = np.max(np.abs(w)) / 127.0
        return np.zeros_like(w) if scale == 0 else np.clip(np.round(w / scale), -127, 127) * scale
    r = channel_range(w, axis)
    scale = np.where(r > 0, r / 127.0, 1.0)
    shape = [1] * w.ndim
    shape[axis] = -1
    scale = scale.reshape(shape)
    return np.clip(np.round(w / scale), -127, 127) * scale


def _ratio(r: np.ndarray) -> float:
    r = r[r > 0]
    return float(r.max() / r.min()) if len(r) else 1.0


# ----------------------------------------------------------------------------- Keras

def _keras_history(obj: Any) -> list[str]:
    """Producer layer names referenced by an inbound-node structure of a functional config."""
    found: list[str] = []
    if isinstance(obj, dict):
        if obj.get("class_name") == "__keras_tensor__":
            found.append(obj["config"]["keras_history"][0])
        else:
            for v in obj.values():
                found.extend(_keras_history(v))
    elif isinstance(obj, (list, tuple)):
        if len(obj) >= 3 and isinstance(obj[0], str) and isinstance(obj[1], int) and len(obj) <= 4:
            found.append(obj[0])   # legacy [name, node, tensor, kwargs] form
        else:
            for v in obj:
                found.extend(_keras_history(v))
    return found


def _relu_kind(layer_cfg: dict[str, Any]) -> str | None:
    """``relu``/``relu6`` when the layer is a positively homogeneous ReLU (or ReLU6), else None."""
    cls, cfg = layer_cfg["class_name"], layer_cfg["config"]
    if cls == "ReLU":
        if cfg.get("negative_slope", 0) or cfg.get("threshold", 0):
            return None
        mv = cfg.get("max_value")
        return "relu" if mv is None else ("relu6" if float(mv) == 6.0 else None)
    if cls == "Activation":
        act = cfg.get("activation")
        return {"relu": "relu", "relu6": "relu6", "linear": "relu"}.get(act if isinstance(act, str) else "")
    return None


def _keras_transform(source: Path, out: Path, transforms: tuple[str, ...], weights: str,
                     calibration: np.ndarray | None, iterations: int = CLE_ITERATIONS) -> dict[str, Any]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    with contextlib.redirect_stdout(io.StringIO()):
        model = keras.models.load_model(str(source), compile=False)
    config = copy.deepcopy(model.get_config())
    layers_cfg = {lc["config"]["name"] if "name" not in lc else lc["name"]: lc for lc in config["layers"]}
    inputs_of = {name: _keras_history(lc.get("inbound_nodes", [])) for name, lc in layers_cfg.items()}
    consumers: dict[str, list[str]] = {name: [] for name in layers_cfg}
    for name, producers in inputs_of.items():
        for p in producers:
            consumers.setdefault(p, []).append(name)
    outputs = set(_keras_history(config.get("output_layers", [])))
    weights_of = {layer.name: [np.array(w, dtype=np.float64) for w in layer.get_weights()] for layer in model.layers}
    shapes = {layer.name: tuple(layer.output.shape) for layer in model.layers if hasattr(layer, "output")}

    def cls(name: str) -> str:
        return layers_cfg[name]["class_name"]

    def single_next(name: str) -> str | None:
        nxt = consumers.get(name, [])
        if len(nxt) != 1 or name in outputs or len(inputs_of[nxt[0]]) != 1:
            return None
        return nxt[0]

    def conv_like(name: str) -> bool:
        c = cls(name)
        if c not in _CONV_LIKE:
            return False
        cfg = layers_cfg[name]["config"]
        if c == "Conv2D" and cfg.get("groups", 1) != 1:
            return False
        if c == "DepthwiseConv2D" and cfg.get("depth_multiplier", 1) != 1:
            return False
        return True

    # 1. fold batch norms into the conv-like layer before them
    folded: list[str] = []
    kernel: dict[str, np.ndarray] = {}
    bias: dict[str, np.ndarray] = {}
    for name in layers_cfg:
        if not conv_like(name):
            continue
        w = weights_of[name]
        kernel[name] = w[0].copy()
        n_out = w[0].shape[-1] if cls(name) != "DepthwiseConv2D" else w[0].shape[2] * w[0].shape[3]
        bias[name] = w[1].copy() if len(w) > 1 else np.zeros(n_out)
        nxt = single_next(name)
        act = layers_cfg[name]["config"].get("activation", "linear")
        if nxt is not None and cls(nxt) == "BatchNormalization" and act == "linear":
            bn_cfg = layers_cfg[nxt]["config"]
            params = list(weights_of[nxt])
            gamma = params.pop(0) if bn_cfg.get("scale", True) else np.ones(n_out)
            beta = params.pop(0) if bn_cfg.get("center", True) else np.zeros(n_out)
            mean, var = params[0], params[1]
            s = gamma / np.sqrt(var + float(bn_cfg.get("epsilon", 1e-3)))
            if cls(name) == "DepthwiseConv2D":
                kernel[name] = kernel[name] * s.reshape(1, 1, *kernel[name].shape[2:])
            else:
                kernel[name] = kernel[name] * s
            bias[name] = (bias[name] - mean) * s + beta
            layers_cfg[nxt]["class_name"] = "Identity"
            layers_cfg[nxt]["config"] = {k: v for k, v in bn_cfg.items() if k in ("name", "trainable", "dtype")}
            layers_cfg[nxt].pop("build_config", None)
            for node in layers_cfg[nxt].get("inbound_nodes", []):
                if isinstance(node, dict):
                    node["kwargs"] = {}     # BatchNormalization's mask/training arguments
            folded.append(nxt)
        layers_cfg[name]["config"]["use_bias"] = True

    # 2. pairs A -> B through scale-commuting layers
    pairs: list[tuple[str, str, tuple[str, ...], int]] = []
    relu6: list[str] = []
    skipped: tuple[str, ...] = ()
    if "cle" in transforms:
        for a in kernel:
            act_a = layers_cfg[a]["config"].get("activation", "linear")
            if act_a not in ("linear", "relu", "relu6"):
                continue
            path: list[str] = []
            repeat = 1
            cur, b = a, None
            while True:
                nxt = single_next(cur)
                if nxt is None:
                    break
                if nxt in kernel:
                    b = nxt
                    break
                c = cls(nxt)
                if c == "Flatten":
                    shape = shapes.get(cur, ())
                    repeat *= int(np.prod([d for d in shape[1:-1] if d])) if len(shape) > 2 else 1
                elif c in ("Resizing", "UpSampling2D"):
                    if layers_cfg[nxt]["config"].get("interpolation", "bilinear") not in ("bilinear", "nearest"):
                        break
                elif c not in _PASS_THROUGH and _relu_kind(layers_cfg[nxt]) is None:
                    break
                path.append(nxt)
                cur = nxt
            if b is None:
                continue
            pairs.append((a, b, tuple(path), repeat))
        pairs, skipped = _keep_unclipped(model, keras, pairs, layers_cfg, calibration)
        for a, _, through, _ in pairs:
            if layers_cfg[a]["config"].get("activation") == "relu6":
                layers_cfg[a]["config"]["activation"] = "relu"
                relu6.append(a)
            for p in through:
                if _relu_kind(layers_cfg[p]) == "relu6":
                    if layers_cfg[p]["class_name"] == "ReLU":
                        layers_cfg[p]["config"]["max_value"] = None
                    else:
                        layers_cfg[p]["config"]["activation"] = "relu"
                    if p not in relu6:
                        relu6.append(p)

    def axes(name: str) -> tuple[int, int]:
        """(output-channel axis, input-channel axis) of a conv-like kernel."""
        if cls(name) == "DepthwiseConv2D":
            return 2, 2
        return kernel[name].ndim - 1, kernel[name].ndim - 2

    before = {a: _ratio(channel_range(kernel[a], axes(a)[0])) for a, *_ in pairs}
    for _ in range(iterations if pairs else 0):
        change = 0.0
        for a, b, _, repeat in pairs:
            s = equalize_pair(kernel[a], bias[a], kernel[b], a_axis=axes(a)[0], b_axis=axes(b)[1], b_repeat=repeat)
            change = max(change, float(np.max(np.abs(np.log(s)))))
        if change < CLE_TOLERANCE:
            break
    report_pairs = tuple(EqualizedPair(first=a, second=b, through=path, channels=int(kernel[a].shape[axes(a)[0]]),
                                       range_ratio_before=before[a],
                                       range_ratio_after=_ratio(channel_range(kernel[a], axes(a)[0])))
                         for a, b, path, _ in pairs)

    # 3. rebuild with folded/equalised weights
    config["layers"] = list(layers_cfg.values())
    new = keras.Model.from_config(config)

    def set_all(target_model: Any) -> None:
        for layer in target_model.layers:
            if layer.name in kernel:
                layer.set_weights([kernel[layer.name].astype(np.float32), bias[layer.name].astype(np.float32)])
            elif layer.name in weights_of and weights_of[layer.name] and layer.name not in folded:
                layer.set_weights([w.astype(np.float32) for w in weights_of[layer.name]])

    set_all(new)

    # 4. bias correction with the mean layer inputs over the calibration samples
    corrected: list[str] = []
    if "bc" in transforms:
        names = list(kernel)
        sums: dict[int, np.ndarray] = {}   # probe output index -> its sum over the samples
        x = np.asarray(calibration, np.float32)
        batch = _batch_free(new, keras)
        probe = keras.Model(batch.inputs, [batch.get_layer(n).input for n in names])
        for start in range(0, len(x), 64):
            outs = probe(x[start:start + 64], training=False)
            outs = outs if isinstance(outs, (list, tuple)) else [outs]
            for i, o in enumerate(outs):
                o = np.asarray(o, np.float64)
                m = o.reshape(-1, o.shape[-1]).sum(axis=0)
                sums[i] = sums[i] + m if i in sums else m
        for i, n in enumerate(names):
            shape = tuple(probe.outputs[i].shape)
            per_sample = int(np.prod(shape[1:-1])) if len(shape) > 2 else 1
            mean_in = sums[i] / (len(x) * per_sample)
            k = kernel[n]
            out_axis = axes(n)[0]
            eps = fake_quant_weights(k, axis=out_axis if weights == "per_channel" else None) - k
            if cls(n) == "DepthwiseConv2D":
                shift = eps.sum(axis=(0, 1))[:, 0] * mean_in
            elif cls(n) == "Dense":
                shift = mean_in @ eps
            else:
                shift = np.einsum("hwio,i->o", eps, mean_in)
            bias[n] = bias[n] - shift
            corrected.append(n)
        set_all(new)
    with contextlib.redirect_stdout(io.StringIO()):
        new.save(str(out))
    return {"folded_batch_norms": tuple(folded), "pairs": report_pairs, "relu6_to_relu": tuple(relu6),
            "bias_corrected": tuple(corrected), "skipped": skipped}


def _keep_unclipped(model: Any, keras: Any, pairs: list[tuple[str, str, tuple[str, ...], int]],
                    layers_cfg: dict[str, Any], calibration: np.ndarray | None
                    ) -> tuple[list[tuple[str, str, tuple[str, ...], int]], tuple[str, ...]]:
    """Keep the pairs whose ReLU6 never clips at 6 on the calibration samples.

    Equalising through a ReLU6 turns it into a ReLU; where the clip is active that changes
    the float model, so such a pair is skipped (and named in the report) rather than changed.
    Without calibration samples every pair through a ReLU6 is skipped.
    """
    def relu6_of(a: str, path: tuple[str, ...]) -> list[str]:
        names = [p for p in path if _relu_kind(layers_cfg[p]) == "relu6"]
        if layers_cfg[a]["config"].get("activation") == "relu6":
            names.insert(0, a)
        return names

    needed = sorted({n for a, _, path, _ in pairs for n in relu6_of(a, path)})
    if not needed:
        return pairs, ()
    peak: dict[str, float] = {}
    if calibration is not None:
        free = _batch_free(model, keras)
        tensors = [free.get_layer(n).input if n not in {a for a, *_ in pairs} else free.get_layer(n).output
                   for n in needed]
        probe = keras.Model(free.inputs, tensors)
        x = np.asarray(calibration, np.float32)
        for start in range(0, len(x), 64):
            outs = probe(x[start:start + 64], training=False)
            outs = outs if isinstance(outs, (list, tuple)) else [outs]
            for n, o in zip(needed, outs):
                peak[n] = max(peak.get(n, -np.inf), float(np.max(np.asarray(o))))
    kept, skipped = [], []
    for pair in pairs:
        a, b, path, _ = pair
        clipping = [n for n in relu6_of(a, path) if peak.get(n, np.inf) >= 6.0]
        if clipping:
            why = ("no calibration samples to show it never clips" if calibration is None
                   else f"reaches {peak[clipping[0]]:.2f} >= 6 on the calibration samples")
            skipped.append(f"{a} -> {b}: ReLU6 {clipping[0]} {why}")
        else:
            kept.append(pair)
    return kept, tuple(skipped)


def _batch_free(model: Any, keras: Any) -> Any:
    """A copy of ``model`` with an unknown batch dimension (to average over many samples at once)."""
    config = copy.deepcopy(model.get_config())
    for lc in config["layers"]:
        if lc["class_name"] == "InputLayer":
            cfg = lc["config"]
            for k in ("batch_shape", "batch_input_shape"):
                if cfg.get(k):
                    cfg[k] = [None, *cfg[k][1:]]
    free = keras.Model.from_config(config)
    free.set_weights(model.get_weights())
    return free


# ----------------------------------------------------------------------------- ONNX

_ONNX_PASS = ("Relu", "MaxPool", "AveragePool", "GlobalAveragePool", "Identity", "Resize", "Flatten",
              "Squeeze", "Reshape", "Pad", "Transpose")


def _onnx_transform(source: Path, out: Path, transforms: tuple[str, ...], weights: str,
                    calibration: np.ndarray | None) -> dict[str, Any]:
    import onnx
    from onnx import numpy_helper
    model = onnx.load(str(source))
    graph = model.graph
    init = {i.name: i for i in graph.initializer}
    arrays = {name: numpy_helper.to_array(t).astype(np.float64) for name, t in init.items()
              if t.data_type == onnx.TensorProto.FLOAT}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    graph_outputs = {o.name for o in graph.output}

    def weight_of(node: Any) -> str | None:
        if node.op_type == "Conv" and len(node.input) > 1 and node.input[1] in arrays:
            return node.input[1]
        if node.op_type == "Gemm" and node.input[1] in arrays:
            return node.input[1]
        if node.op_type == "MatMul" and node.input[1] in arrays and arrays[node.input[1]].ndim == 2:
            return node.input[1]
        return None

    def attr(node: Any, name: str, default: Any) -> Any:
        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    def out_axis(node: Any) -> int:
        if node.op_type == "Conv":
            return 0
        if node.op_type == "Gemm":
            return 0 if attr(node, "transB", 0) else 1
        return 1

    def in_axis(node: Any) -> int:
        if node.op_type == "Conv":
            w = arrays[node.input[1]]
            return 0 if attr(node, "group", 1) == w.shape[0] and w.shape[1] == 1 and attr(node, "group", 1) > 1 else 1
        if node.op_type == "Gemm":
            return 1 if attr(node, "transB", 0) else 0
        return 0

    def is_grouped(node: Any) -> bool:
        if node.op_type != "Conv":
            return False
        g = attr(node, "group", 1)
        return g > 1 and not (g == arrays[node.input[1]].shape[0] and arrays[node.input[1]].shape[1] == 1)

    def clip_is_relu6(node: Any) -> bool:
        vals = [arrays.get(n) for n in node.input[1:3]] if len(node.input) >= 3 else []
        lo = vals[0] if vals else attr(node, "min", None)
        hi = vals[1] if len(vals) > 1 else attr(node, "max", None)
        return lo is not None and hi is not None and float(np.ravel(lo)[0]) == 0.0 and float(np.ravel(hi)[0]) == 6.0

    pairs: list[tuple[Any, Any, tuple[str, ...]]] = []
    relu6: list[Any] = []
    for node in graph.node:
        if weight_of(node) is None or is_grouped(node):
            continue
        cur = node.output[0]
        path: list[Any] = []
        end = None
        while True:
            nxt = consumers.get(cur, [])
            if len(nxt) != 1 or cur in graph_outputs:
                break
            n = nxt[0]
            if weight_of(n) is not None and n.input[0] == cur:
                end = n
                break
            if n.op_type == "Transpose" or (n.op_type in ("Flatten", "Squeeze", "Reshape")
                                            and not any(p.op_type == "GlobalAveragePool" for p in path)):
                break
            if n.op_type == "Clip" and clip_is_relu6(n):
                path.append(n)
            elif n.op_type in _ONNX_PASS:
                path.append(n)
            else:
                break
            cur = n.output[0]
        if end is None or is_grouped(end):
            continue
        pairs.append((node, end, tuple(p.op_type for p in path)))
        relu6.extend(p for p in path if p.op_type == "Clip")

    before = {}
    for a, _, _ in pairs:
        before[a.name or a.output[0]] = _ratio(channel_range(arrays[weight_of(a)], out_axis(a)))
    if "cle" in transforms:
        for _ in range(CLE_ITERATIONS if pairs else 0):
            change = 0.0
            for a, b, _ in pairs:
                wa, wb = arrays[weight_of(a)], arrays[weight_of(b)]
                bias_name = a.input[2] if len(a.input) > 2 and a.input[2] in arrays else None
                s = equalize_pair(wa, arrays[bias_name] if bias_name else None, wb, a_axis=out_axis(a),
                                  b_axis=in_axis(b))
                change = max(change, float(np.max(np.abs(np.log(s)))))
            if change < CLE_TOLERANCE:
                break
        for clip in relu6:   # ReLU6 -> ReLU inside an equalised pair
            clip.op_type = "Relu"
            del clip.input[1:]
            for a in list(clip.attribute):
                clip.attribute.remove(a)
    corrected: list[str] = []
    if "bc" in transforms:
        assert calibration is not None   # equalize() refuses +bc without calibration samples
        corrected = _onnx_bias_correction(model, arrays, weight_of, out_axis, weights, calibration)
    for name, t in init.items():
        if name in arrays:
            t.CopyFrom(numpy_helper.from_array(arrays[name].astype(np.float32), name))
    onnx.save(model, str(out))
    report_pairs = tuple(EqualizedPair(first=a.name or a.output[0], second=b.name or b.output[0], through=path,
                                       channels=int(arrays[weight_of(a)].shape[out_axis(a)]),
                                       range_ratio_before=before[a.name or a.output[0]],
                                       range_ratio_after=_ratio(channel_range(arrays[weight_of(a)], out_axis(a))))
                         for a, b, path in pairs) if "cle" in transforms else ()
    return {"folded_batch_norms": (), "pairs": report_pairs, "skipped": (),
            "relu6_to_relu": tuple(c.name or c.output[0] for c in relu6) if "cle" in transforms else (),
            "bias_corrected": tuple(corrected)}


def _onnx_bias_correction(model: Any, arrays: dict[str, np.ndarray], weight_of: Any, out_axis: Any,
                          weights: str, calibration: np.ndarray) -> list[str]:
    """Subtract (Q(W) - W) . E[x] from every Conv/Gemm bias, E[x] measured with ONNX Runtime."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    nodes = [n for n in model.graph.node if weight_of(n) is not None and n.op_type in ("Conv", "Gemm")
             and len(n.input) > 2 and n.input[2] in arrays]
    if not nodes:
        return []
    probe = copy.deepcopy(model)
    for t in probe.graph.initializer:
        if t.name in arrays:
            t.CopyFrom(numpy_helper.from_array(arrays[t.name].astype(np.float32), t.name))
    known = {o.name for o in probe.graph.output}
    for n in nodes:
        if n.input[0] not in known:
            probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(n.input[0]))
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    fixed = [d if isinstance(d, int) else None for d in inp.shape]
    x = np.asarray(calibration, np.float32)
    if len(fixed) == 4 and fixed[1] == x.shape[-1] and fixed[3] != x.shape[-1]:
        x = x.transpose(0, 3, 1, 2)
    names = list(dict.fromkeys(n.input[0] for n in nodes))   # one tensor may feed several convs
    sums: dict[str, np.ndarray] = {}   # input name -> its per-channel sum over the samples
    step = 1 if fixed and fixed[0] == 1 else 64
    for start in range(0, len(x), step):
        outs = session.run(names, {inp.name: x[start:start + step]})
        for k, o in zip(names, outs):
            o = np.asarray(o, np.float64)
            per_channel = (o.reshape(o.shape[0], o.shape[1], -1).mean(axis=2).sum(axis=0) if o.ndim > 2
                           else o.sum(axis=0))
            sums[k] = sums[k] + per_channel if k in sums else per_channel
    done = []
    for n in nodes:
        mean_in = sums[n.input[0]] / len(x)
        w = arrays[weight_of(n)]
        ax = out_axis(n)
        eps = fake_quant_weights(w, axis=ax if weights == "per_channel" else None) - w
        if n.op_type == "Conv":
            g = 1
            for a in n.attribute:
                if a.name == "group":
                    g = a.i
            if g > 1:
                shift = eps.reshape(eps.shape[0], -1).sum(axis=1) * mean_in
            else:
                shift = np.einsum("oihw,i->o", eps, mean_in)
        else:
            shift = (eps @ mean_in) if ax == 0 else (mean_in @ eps)
        arrays[n.input[2]] = arrays[n.input[2]] - shift
        done.append(n.name or n.output[0])
    return done


# ----------------------------------------------------------------------------- a demonstration model

def make_imbalanced(source: str | os.PathLike, output: str | os.PathLike, *, spread: float = 100.0,
                    seed: int = 0) -> EqualizeReport:
    """Write a copy of the Keras model ``source`` whose channel ranges are imbalanced, same FP32 function.

    Batch norms are folded and every equalisable pair A -> B (as ``+cle`` finds them) gets
    channel ``i`` of A multiplied by ``f_i`` and input channel ``i`` of B divided by it, with
    ``f_i`` log-uniform in ``[1/sqrt(spread), sqrt(spread)]``: the per-channel spread that
    batch-norm folding leaves in MobileNet-style networks, made on purpose.  For
    demonstrations and tests of ``+cle``; the report lists the pairs.
    """
    import keras
    source, output = Path(source), Path(output)
    folded, _, report = apply_transforms(source, "keras", ("cle",), weights="per_tensor", cache=False,
                                         _iterations=0)
    with contextlib.redirect_stdout(io.StringIO()):
        model = keras.models.load_model(str(folded), compile=False)
    rng = np.random.default_rng(seed)
    half = np.log(np.sqrt(spread))
    for pair in report.pairs:
        a, b = model.get_layer(pair.first), model.get_layer(pair.second)
        wa, ba = [np.array(w, np.float64) for w in a.get_weights()]
        wb, *rest = [np.array(w, np.float64) for w in b.get_weights()]
        f = np.exp(rng.uniform(-half, half, size=pair.channels))
        a_axis = 2 if type(a).__name__ == "DepthwiseConv2D" else wa.ndim - 1
        b_axis = 2 if type(b).__name__ == "DepthwiseConv2D" else wb.ndim - 2
        shape = [1] * wa.ndim
        shape[a_axis] = -1
        wa *= f.reshape(shape)
        ba *= f
        repeat = wb.shape[b_axis] // pair.channels
        shape = [1] * wb.ndim
        shape[b_axis] = -1
        wb /= np.tile(f, repeat).reshape(shape)
        a.set_weights([wa.astype(np.float32), ba.astype(np.float32)])
        b.set_weights([wb.astype(np.float32), *[r.astype(np.float32) for r in rest]])
    if output.suffix != ".keras":
        raise QuantizationError(f"{output}: the imbalanced model is a Keras file; name it *.keras.")
    with atomic_path(output) as tmp, contextlib.redirect_stdout(io.StringIO()):
        model.save(str(tmp))
    return report
