"""Running onnx2tf in its own pinned tool environment: the driver, the calibration file it otherwise downloads,
the cache entry (renamed into the cache only when complete), and the layout record that matches the
converted model's inputs/outputs to the ONNX ones by name."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..._io import atomic_path, read_json, sha256_file, to_json
from ...errors import ModelError
from .onnx_source import _OnnxIO, exact_rewrites

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
# Two more things onnx2tf does that the workbench never reads (benchmarks/bench_zoo.py, heatnet at load ~9:
# 1.4 s of the tool process's 5.7 CPU seconds): the float16 ``.tflite`` it converts after the float32 one (the
# last step of its run without -odrqt/-oiqt: the driver stops it there, the SavedModel and the float32 file
# are complete), and the interpreter's teardown of TensorFlow at exit (1 CPU second, 3-4 s of wall time
# under load: the driver flushes, runs the exit handlers and ends the process).  The two files the workbench
# keeps are the same bytes as before (tests/models/test_convert.py).
DRIVER_SOURCE = """\
import atexit
import os
import sys

import tensorflow as tf

saved_model = sys.argv[sys.argv.index("-o") + 1]
from_saved_model = tf.lite.TFLiteConverter.from_saved_model
tf.lite.TFLiteConverter.from_keras_model = staticmethod(lambda model, *a, **k: from_saved_model(saved_model))


class Float32Done(Exception):
    pass


def stop_at_float16(convert):
    def run(self, *args, **kwargs):
        if tf.float16 in list(self.target_spec.supported_types or ()) and self.representative_dataset is None:
            raise Float32Done()
        return convert(self, *args, **kwargs)
    return run


from tensorflow.lite.python import lite as _lite

for _name in ("TFLiteSavedModelConverterV2", "TFLiteKerasModelConverterV2", "TFLiteFrozenGraphConverterV2"):
    _cls = getattr(_lite, _name, None)
    if _cls is not None and "convert" in vars(_cls):
        _cls.convert = stop_at_float16(_cls.convert)
from onnx2tf import main

sys.argv[0] = "onnx2tf"
try:
    code = main()
    code = code if isinstance(code, int) else 0
except Float32Done:
    code = 0
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if exc.code is not None and not isinstance(exc.code, int):
        print(exc.code, file=sys.stderr)
atexit._run_exitfuncs()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
"""
TIMEOUT_S = 1800


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
        fixed = _fix_cubic_shuffles(env, cmd, work, timeout)
        if fixed:
            cmd = fixed[0]
            rewrites.append(fixed[1])
        layouts = _layouts(source, graph, tflite)
        with atomic_path(folder, replace_folder=True) as entry:   # cache=False refreshes the entry
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


def _fix_cubic_shuffles(env: Any, cmd: list[str], work: Path, timeout: float) -> tuple[list[str], str] | None:
    """When onnx2tf left every channel shuffle on a cube-shaped tensor in NCHW (``shuffle_fix.py``), run it again
    with a transpose to NHWC after each; keep the new result only if it left none.  Returns (command, record line)."""
    from .shuffle_fix import cubic_shuffles, nchw_left, replacement_file
    out = work / "out"
    shuffles = cubic_shuffles(work / "model.onnx")
    if not shuffles or nchw_left((out / FLOAT_TFLITE).read_bytes()) != len(shuffles):
        return None
    first = work / "out_first"
    out.rename(first)
    again = [*cmd, "-prf", replacement_file(shuffles, work).name]
    try:
        proc = env.run(again, cwd=work, timeout=timeout)
        ok = proc.returncode == 0 and (out / FLOAT_TFLITE).is_file() and (out / "saved_model.pb").is_file() \
            and nchw_left((out / FLOAT_TFLITE).read_bytes()) == 0
    except Exception:  # noqa: BLE001 - the second run failing leaves the first result, which the check judges
        ok = False
    if not ok:
        shutil.rmtree(out, ignore_errors=True)
        first.rename(out)
        return None
    return again, (f"channel shuffle on a cube-shaped tensor, left in NCHW by onnx2tf (PINTO0309/onnx2tf#478): "
                   f"converted again with a transpose to NHWC after {len(shuffles)} Reshape node(s)")


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
    session = ort_session(source)
    feed = {name: np.zeros(shape, np.float32) for name, shape, _ in graph.inputs}
    values = session.run(list(graph.outputs), feed)
    return {name: tuple(int(d) for d in np.shape(v)) for name, v in zip(graph.outputs, values)}


def ort_session(source: Path) -> Any:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - ORT raises its own types
        raise ModelError(f"{source}: ONNX Runtime cannot load this model ({exc}).") from exc
