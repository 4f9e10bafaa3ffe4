"""``+cle``/``+bc`` on a Keras model, through its functional config: batch norms folded, pairs equalised
(a ReLU6 pair kept only when it never clips), biases corrected with the mean layer inputs."""

from __future__ import annotations

import contextlib
import copy
import io
import os
from pathlib import Path
from typing import Any

import numpy as np

from .numeric import CLE_ITERATIONS, CLE_TOLERANCE, _ratio, channel_range, equalize_pair, fake_quant_weights
from .report import EqualizedPair

_CONV_LIKE = ("Conv2D", "DepthwiseConv2D", "Dense")
_PASS_THROUGH = ("Identity", "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D",
                 "ZeroPadding2D", "Dropout", "Resizing", "UpSampling2D", "Flatten")


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
