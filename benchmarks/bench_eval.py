"""Speed of the workbench's batched evaluation against a per-sample loop and a raw batched loop.

On the same data (every test image of the dataset, all conditions) and the same INT8 model:
  1. per-sample: a raw LiteRT interpreter, one ``invoke()`` per image (quantize in, dequantize out);
  2. workbench: ``load_predictor(model, contract=...).predict(x)`` with the model's input contract
     (as ``compare_accuracy`` runs it: pixel checks, normalisation), cold (load, batch-free twin,
     verification and prediction) and warm (further ``predict`` calls on the same predictor);
  3. raw batched: a LiteRT interpreter on the same batch-free bytes, resized to the same batch,
     a bare ``set_tensor``/``invoke``/``get_tensor`` loop over pre-quantized batches.
Prints samples per second for each and ``speedup_vs_per_sample`` = per-sample time / workbench cold
time (setup included) and ``overhead_vs_raw`` = workbench warm time / raw batched time (1.0 means no
overhead).  Warm and raw runs alternate ``--repeat`` times and the ratio is the median of the
per-pair ratios: on a shared machine one pair alone swings by +-30%.

    .venv/bin/python benchmarks/bench_eval.py [--model INT8.tflite] [--data DATASET] [--batch N] [--repeat 7]

Without ``--model`` the reference model is converted to INT8 (per-channel, int8 in/out) in a
temporary folder.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def reference_int8(folder: Path, dataset) -> Path:
    import tensorflow as tf

    from workbench.models.reference import reference_model
    ref = reference_model(dataset=dataset)
    calibration = dataset.select(split="calibration").x[:100]
    converter = tf.lite.TFLiteConverter.from_saved_model(ref.saved_model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([calibration[i:i + 1]] for i in range(len(calibration)))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    path = folder / "reference_a8w8_pc.tflite"
    path.write_bytes(converter.convert())
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="INT8 or FP32 .tflite (default: the reference model, INT8 per-channel)")
    parser.add_argument("--data", default="digits-conditions")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=7, help="alternating warm/raw pairs (default 7)")
    args = parser.parse_args()

    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from workbench.data.loaders import load_dataset
    from workbench.models.contract import resolve_contract
    from workbench.models.predict import batch_free_tflite, dequantize_output, load_predictor, quantize_input

    warnings.simplefilter("ignore")
    dataset = load_dataset(args.data)
    x = dataset.select(split="test").x
    threads = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(args.model) if args.model else reference_int8(Path(tmp), dataset)
        content = model.read_bytes()

        # 1. per-sample loop
        start = time.perf_counter()
        interp = Interpreter(model_content=content, num_threads=threads)
        interp.allocate_tensors()
        inp, out = interp.get_input_details()[0], interp.get_output_details()[0]
        quantized = np.issubdtype(inp["dtype"], np.integer)
        per_sample = []
        for i in range(len(x)):
            sample = quantize_input(x[i:i + 1], *inp["quantization"], inp["dtype"]) if quantized else x[i:i + 1]
            interp.set_tensor(inp["index"], sample)
            interp.invoke()
            y = interp.get_tensor(out["index"])
            per_sample.append(dequantize_output(y, *out["quantization"]) if quantized else y)
        t_per_sample = time.perf_counter() - start
        per_sample = np.concatenate(per_sample)

        # 2. workbench, cold then warm
        start = time.perf_counter()
        predictor = load_predictor(model, batch_size=args.batch, num_threads=threads,
                                   contract=resolve_contract(model))
        scores = predictor.predict(x)
        t_cold = time.perf_counter() - start

        # 3. raw batched loop on the same batch-free bytes
        twin = content if inp["shape_signature"][0] == -1 else batch_free_tflite(content)
        raw = Interpreter(model_content=twin, num_threads=threads)
        raw.resize_tensor_input(inp["index"], [args.batch, *inp["shape"][1:]], strict=False)
        raw.allocate_tensors()
        pad = (-len(x)) % args.batch
        xq = quantize_input(x, *inp["quantization"], inp["dtype"]) if quantized else x
        xq = np.concatenate([xq, np.zeros((pad, *xq.shape[1:]), xq.dtype)])
        def raw_loop() -> float:
            start = time.perf_counter()
            for b in range(0, len(xq), args.batch):
                raw.set_tensor(inp["index"], xq[b:b + args.batch])
                raw.invoke()
                raw.get_tensor(out["index"])
            return time.perf_counter() - start

        def warm() -> float:
            start = time.perf_counter()
            predictor.predict(x)
            return time.perf_counter() - start

        warm(), raw_loop()                                   # one unmeasured pair: caches, allocator
        pairs = [(warm(), raw_loop()) for _ in range(max(1, args.repeat))]
        t_warm = float(np.median([w for w, _ in pairs]))
        t_raw = float(np.median([r for _, r in pairs]))
        ratio = float(np.median([w / r for w, r in pairs]))

    n = len(x)
    same = bool(np.array_equal(scores.argmax(1), per_sample.argmax(1)))
    print(f"model {model.name}, {n} images {dataset.input_shape}, batch {args.batch}, {threads} thread(s), "
          f"workbench mode {predictor.mode}, same decisions as the per-sample loop: {same}")
    for label, t in (("per-sample loop", t_per_sample), ("workbench cold (load+twin+verify)", t_cold),
                     ("workbench warm", t_warm), ("raw batched invoke()", t_raw)):
        print(f"  {label:<36}{t:8.3f} s  {n / t:10.0f} samples/s")
    print(f"  warm/raw per pair: {', '.join(f'{w / r:.2f}' for w, r in pairs)}")
    print(f"speedup_vs_per_sample={t_per_sample / t_cold:.2f} overhead_vs_raw={ratio:.2f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
