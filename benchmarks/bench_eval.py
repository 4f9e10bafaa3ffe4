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
overhead).

On a shared machine one warm/raw pair alone swings by +-30% (0.86-1.47 was seen at load 5 on 2 cores),
so the measurement is built to survive load: ``--repeat`` pairs (default 25), each timing ``--passes``
consecutive passes over the data, their order alternating (warm first, then raw first: a drift in load
hits both sides equally); the ratio is the median of the per-pair ratios, with its interquartile range,
a bootstrap 95% interval of that median, the ratio of the fastest warm to the fastest raw pass (the
least disturbed pair of measurements), and the ratio of process CPU times (nearly blind to other
processes).  The load average before and after is printed beside the numbers.

    .venv/bin/python benchmarks/bench_eval.py [--model INT8.tflite] [--data DATASET] [--batch N] [--repeat 25]
        [--passes 2] [--same-interpreter]

``--same-interpreter`` runs the raw loop on the predictor's own batch interpreter: the two sides then
differ only by the workbench's work around ``invoke`` (a second interpreter instance adds a few percent).

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
    parser.add_argument("--repeat", type=int, default=25, help="alternating warm/raw pairs (default 25)")
    parser.add_argument("--passes", type=int, default=2, help="passes over the data per timing (default 2)")
    parser.add_argument("--same-interpreter", action="store_true",
                        help="time the raw loop on the predictor's own batch interpreter instead of a second one")
    args = parser.parse_args()

    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from workbench.data.loaders import load_dataset
    from workbench.models.contract import resolve_contract
    from workbench.models.predict import batch_free_tflite, dequantize_output, load_predictor, quantize_input

    warnings.simplefilter("ignore")
    load_before = os.getloadavg()
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

        # 3. raw batched loop on the same batch-free bytes; --same-interpreter: on the predictor's own batch
        #    interpreter (then the ratio holds only the workbench's work around invoke, no instance effects)
        raw = getattr(predictor, "_batch_interp", None) if args.same_interpreter else None
        if raw is None:
            twin = content if inp["shape_signature"][0] == -1 else batch_free_tflite(content)
            raw = Interpreter(model_content=twin, num_threads=threads)
            raw.resize_tensor_input(inp["index"], [args.batch, *inp["shape"][1:]], strict=False)
            raw.allocate_tensors()
        inp = {**inp, "index": raw.get_input_details()[0]["index"]}
        out = {**out, "index": raw.get_output_details()[0]["index"]}
        pad = (-len(x)) % args.batch
        xq = quantize_input(x, *inp["quantization"], inp["dtype"]) if quantized else x
        xq = np.concatenate([xq, np.zeros((pad, *xq.shape[1:]), xq.dtype)])
        def raw_loop() -> tuple[float, float]:
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(args.passes):
                for b in range(0, len(xq), args.batch):
                    raw.set_tensor(inp["index"], xq[b:b + args.batch])
                    raw.invoke()
                    raw.get_tensor(out["index"])
            return time.perf_counter() - start, time.process_time() - cpu

        def warm() -> tuple[float, float]:
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(args.passes):
                predictor.predict(x)
            return time.perf_counter() - start, time.process_time() - cpu

        warm(), raw_loop()                                   # one unmeasured pair: caches, allocator
        pairs = []
        for i in range(max(1, args.repeat)):
            if i % 2:
                r = raw_loop()
                w = warm()
            else:
                w = warm()
                r = raw_loop()
            pairs.append((*w, *r))
        timing = np.array(pairs) / args.passes                # per pass: warm wall, warm cpu, raw wall, raw cpu
        ratios = timing[:, 0] / timing[:, 2]
        t_warm = float(np.median(timing[:, 0]))
        t_raw = float(np.median(timing[:, 2]))
        ratio = float(np.median(ratios))
        q25, q75 = (float(v) for v in np.percentile(ratios, [25, 75]))
        boot = np.random.default_rng(0).choice(ratios, (2000, len(ratios)))
        ci_low, ci_high = (float(v) for v in np.percentile(np.median(boot, axis=1), [2.5, 97.5]))
        best = float(timing[:, 0].min() / timing[:, 2].min())
        cpu_ratio = float(np.median(timing[:, 1] / np.maximum(timing[:, 3], 1e-9)))
    load_after = os.getloadavg()

    n = len(x)
    same = bool(np.array_equal(scores.argmax(1), per_sample.argmax(1)))
    print(f"model {model.name}, {n} images {dataset.input_shape}, batch {args.batch}, {threads} thread(s), "
          f"workbench mode {predictor.mode}, same decisions as the per-sample loop: {same}")
    for label, t in (("per-sample loop", t_per_sample), ("workbench cold (load+twin+verify)", t_cold),
                     ("workbench warm", t_warm), ("raw batched invoke()", t_raw)):
        print(f"  {label:<36}{t:8.3f} s  {n / t:10.0f} samples/s")
    print(f"  warm/raw per pair: {', '.join(f'{v:.2f}' for v in ratios)}")
    print(f"  {len(ratios)} pairs x {args.passes} passes: median {ratio:.3f}, IQR {q25:.2f}-{q75:.2f}, bootstrap 95% "
          f"interval of the median {ci_low:.3f}-{ci_high:.3f}; fastest warm / fastest raw {best:.3f}; "
          f"CPU time warm/raw {cpu_ratio:.3f}")
    load = f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after, {os.cpu_count()} cores"
    print(f"  {load}")
    print(f"speedup_vs_per_sample={t_per_sample / t_cold:.2f} overhead_vs_raw={ratio:.2f} "
          f"(95% {ci_low:.2f}-{ci_high:.2f}, best {best:.2f}, cpu {cpu_ratio:.2f}; {load})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
