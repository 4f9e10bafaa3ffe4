"""Overhead of the workbench's Python runner against a bare ``invoke()`` loop.

Times the same model on this machine's CPU twice:
  1. ``time_on_board(model, local=True)``: the runner script the workbench pushes to boards,
     run as a subprocess, steady-state mean after warm-up;
  2. a raw loop in this process: ``interpreter.invoke()`` timed with ``perf_counter``.
Prints both means and medians and their ratios (runner / raw; close to 1.0 means the runner adds
nothing measurable per invocation).

    .venv/bin/python benchmarks/bench_timing_overhead.py [MODEL.tflite] [--runs N]

Without MODEL a small Keras CNN (96x96x3, INT8) is built and converted in a temporary folder.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path


def build_model(folder: Path) -> Path:
    import keras
    import numpy as np
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inp = keras.Input((96, 96, 3))
    x = inp
    for filters in (16, 32, 64):
        x = keras.layers.Conv2D(filters, 3, strides=2, padding="same", activation="relu")(x)
        x = keras.layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inp, keras.layers.Dense(10)(x))
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    rng = np.random.default_rng(0)
    conv.representative_dataset = lambda: ([rng.random((1, 96, 96, 3), dtype=np.float32)]
                                           for _ in range(16))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = conv.inference_output_type = tf.int8
    path = folder / "bench_cnn_int8.tflite"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path.write_bytes(conv.convert())
    return path


def raw_loop(model: Path, runs: int, warmup: int) -> list[float]:
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(model))
    interp.allocate_tensors()
    for d in interp.get_input_details():
        interp.set_tensor(d["index"], np.zeros(d["shape"], dtype=d["dtype"]))
    for _ in range(warmup + 1):
        interp.invoke()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        interp.invoke()
        times.append((time.perf_counter() - start) * 1e6)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=None)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from workbench.board.timing import time_on_board

    with tempfile.TemporaryDirectory() as tmp:
        model = Path(args.model) if args.model else build_model(Path(tmp))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = time_on_board(model, local=True, runs=args.runs, warmup=args.warmup)
        raw = raw_loop(model, args.runs, args.warmup)
    runner_mean = result.latency_us.mean
    raw_mean = statistics.fmean(raw)
    print(f"model: {model.name}  runs: {args.runs}  warm-up: {args.warmup}  ({result.where})")
    print(f"python runner steady-state mean : {runner_mean:10.1f} us  "
          f"(p50 {result.latency_us.p50:.1f}, p99 {result.latency_us.p99:.1f})")
    print(f"raw invoke() loop mean          : {raw_mean:10.1f} us  "
          f"(p50 {statistics.median(raw):.1f})")
    print(f"ratio runner / raw (mean)       : {runner_mean / raw_mean:10.3f}")
    print(f"ratio runner / raw (p50)        : {result.latency_us.p50 / statistics.median(raw):10.3f}"
          "  (robust to other load on a shared machine)")
    print(f"runner cold start {result.cold_start_us / 1000:.2f} ms, first inference "
          f"{result.first_inference_us / 1000:.2f} ms (kept out of the steady state)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
