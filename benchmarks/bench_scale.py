"""Evaluating a held-out set of real size from disk: peak memory and speed against a plain loop.

Generates ``--n`` JPEG frames of ``--size`` x ``--size`` x 3 (default 20,000 at 224x224) into a
folder dataset ``ROOT/test/daylight/<class>/<i>.jpg`` (temporary unless ``--folder``), and an
INT8 MobileNetV2 (alpha 0.35, ``weights=None``: no download) whose model card says RGB, range
[-1, 1].  Then, each in its own process (so each has its own peak RSS):

  1. plain loop: list the files, and per batch of ``--batch``: Pillow decode, the card's
     preprocessing (float, /255, x2-1), quantize to the model's int8 input, one batched LiteRT
     ``invoke()``, dequantize; top-1 against the folder's labels;
  2. workbench: ``load_dataset(folder)`` (lazy image files) and ``compare_accuracy(model, [], data)``
     with the card: the same decode/preprocess/invoke, batch by batch, plus the contract's pixel
     checks, the bootstrap CIs and the contract guards (a probe of other contracts on 256 samples).

Prints both times, both peak RSS, the accuracies (they must be equal), and on its last line::

    peak_rss_mb=... ratio_vs_plain_loop=...

    .venv/bin/python benchmarks/bench_scale.py [--n 20000] [--size 224] [--batch 32] [--folder DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CLASSES = 10
CARD = "color: rgb\nrange: [-1, 1]\nresize: stretch\ntask: classification\n"


def generate(folder: Path, n: int, size: int) -> Path:
    """``n`` JPEGs (smooth random colour fields, one of ``CLASSES`` tints each) and the INT8 model."""
    import numpy as np
    from PIL import Image
    done = folder / "generated.json"
    if done.is_file() and json.loads(done.read_text()) == {"n": n, "size": size}:
        return folder / "model_int8.tflite"
    rng = np.random.default_rng(0)
    for c in range(CLASSES):
        (folder / "data" / "test" / "daylight" / f"c{c}").mkdir(parents=True, exist_ok=True)
    tints = rng.uniform(0.2, 1.0, size=(CLASSES, 3))
    for i in range(n):
        c = i % CLASSES
        coarse = rng.uniform(0, 1, size=(8, 8, 3)) * 0.5 + tints[c] * 0.5
        img = Image.fromarray((coarse * 255).astype(np.uint8)).resize((size, size), Image.Resampling.BILINEAR)
        img.save(folder / "data" / "test" / "daylight" / f"c{c}" / f"{i:06d}.jpg", quality=90)
    model = folder / "model_int8.tflite"
    _make_model(model, size, folder)
    (folder / "model_int8.card.yaml").write_text(CARD)
    done.write_text(json.dumps({"n": n, "size": size}))
    return model


def _make_model(path: Path, size: int, folder: Path) -> None:
    import keras
    import numpy as np
    import tensorflow as tf
    keras.utils.set_random_seed(0)
    net = keras.applications.MobileNetV2(input_shape=(size, size, 3), alpha=0.35, weights=None, classes=CLASSES)
    files = sorted((folder / "data").glob("test/daylight/*/*.jpg"))[:64]
    from PIL import Image
    calib = np.stack([np.asarray(Image.open(f), np.float32) / 255.0 * 2 - 1 for f in files])
    conv = tf.lite.TFLiteConverter.from_keras_model(net)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([calib[i:i + 1]] for i in range(len(calib)))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()):       # Keras prints the exported signature
        path.write_bytes(conv.convert())


def plain_loop(folder: Path, model: Path, batch: int) -> dict:
    """The same work without the workbench: decode, preprocess, quantize, batched invoke, top-1."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter
    from PIL import Image
    start = time.perf_counter()
    files = sorted((folder / "data" / "test" / "daylight").glob("*/*.jpg"))
    labels = np.array([int(f.parent.name[1:]) for f in files])
    interp = Interpreter(model_path=str(model), num_threads=os.cpu_count() or 1)
    inp, out = interp.get_input_details()[0], interp.get_output_details()[0]
    in_scale, in_zp = inp["quantization"]
    out_scale, out_zp = out["quantization"]
    interp.resize_tensor_input(inp["index"], [batch, *inp["shape"][1:]], strict=False)
    interp.allocate_tensors()
    correct = 0
    for b in range(0, len(files), batch):
        chunk = files[b:b + batch]
        x = np.stack([np.asarray(Image.open(f).convert("RGB")) for f in chunk]).astype(np.float32) / 255.0
        x = x * 2.0 - 1.0                                              # the card: range [-1, 1]
        v = x / np.float32(in_scale)
        q = np.clip(np.trunc(v + np.copysign(np.float32(0.5), v)) + in_zp, -128, 127).astype(np.int8)  # as TFLite
        if len(q) < batch:
            q = np.concatenate([q, np.zeros((batch - len(q), *q.shape[1:]), np.int8)])
        interp.set_tensor(inp["index"], q)
        interp.invoke()
        y = (interp.get_tensor(out["index"])[:len(chunk)].astype(np.float32) - out_zp) * out_scale
        correct += int(np.sum(y.argmax(axis=1) == labels[b:b + len(chunk)]))
    return {"seconds": time.perf_counter() - start, "accuracy": correct / len(files), "n": len(files)}


def workbench(folder: Path, model: Path, batch: int) -> dict:
    import warnings

    from workbench.data.loaders import load_dataset
    from workbench.evaluate.accuracy import compare_accuracy
    start = time.perf_counter()
    data = load_dataset(folder / "data")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # an untrained model near chance is flagged: expected here
        report = compare_accuracy(model, [], data, cache=False, batch_size=batch)
    row = report.rows[0]
    return {"seconds": time.perf_counter() - start, "accuracy": row.accuracy, "n": row.n,
            "issues": [i.code for i in report.issues], "contract": report.contract.summary()}


def _peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM: counted from its own exec, unlike ru_maxrss)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _child(phase: str, folder: Path, batch: int, extra: list[str] | None = None) -> dict:
    cmd = [sys.executable, __file__, "--phase", phase, "--folder", str(folder), "--batch", str(batch),
           *(extra or [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"{phase} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="images (default 20000)")
    parser.add_argument("--size", type=int, default=224, help="image side (default 224)")
    parser.add_argument("--batch", type=int, default=32, help="images per invoke (default 32)")
    parser.add_argument("--folder", help="keep the generated set here (reused when it matches --n/--size)")
    parser.add_argument("--phase", choices=("generate", "plain", "workbench"), help=argparse.SUPPRESS)
    parser.add_argument("--order", choices=("plain-first", "workbench-first"), default="plain-first",
                        help="which pass runs first (the page cache warms for the second)")
    args = parser.parse_args()

    if args.phase == "generate":
        generate(Path(args.folder), args.n, args.size)
        print(json.dumps({}))
        return 0
    if args.phase:
        folder = Path(args.folder)
        model = folder / "model_int8.tflite"
        result = (plain_loop if args.phase == "plain" else workbench)(folder, model, args.batch)
        result["peak_rss_mb"] = _peak_rss_mb()
        print(json.dumps(result))
        return 0

    with tempfile.TemporaryDirectory(prefix="wb-bench-scale-") as tmp:
        folder = Path(args.folder) if args.folder else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        _child("generate", folder, args.batch, ["--n", str(args.n), "--size", str(args.size)])
        print(f"{args.n} JPEGs {args.size}x{args.size}x3 and an INT8 MobileNetV2 0.35 in {folder} "
              f"({time.perf_counter() - start:.0f} s)")
        if args.order == "plain-first":
            plain = _child("plain", folder, args.batch)
            wb = _child("workbench", folder, args.batch)
        else:
            wb = _child("workbench", folder, args.batch)
            plain = _child("plain", folder, args.batch)
    same = abs(plain["accuracy"] - wb["accuracy"]) < 1e-9 and plain["n"] == wb["n"]
    print(f"  plain loop   {plain['seconds']:8.1f} s  {plain['n'] / plain['seconds']:7.1f} img/s  "
          f"peak RSS {plain['peak_rss_mb']:7.0f} MB  top-1 {plain['accuracy']:.4f}")
    print(f"  workbench    {wb['seconds']:8.1f} s  {wb['n'] / wb['seconds']:7.1f} img/s  "
          f"peak RSS {wb['peak_rss_mb']:7.0f} MB  top-1 {wb['accuracy']:.4f}  ({wb['contract']}; "
          f"issues: {', '.join(wb['issues']) or 'none'})")
    print(f"  same top-1 as the plain loop: {same}")
    print(f"peak_rss_mb={wb['peak_rss_mb']:.0f} ratio_vs_plain_loop={wb['seconds'] / plain['seconds']:.3f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
