"""Cold vs warm time of an identical quantization (the content-addressed cache).

Run: .venv/bin/python benchmarks/bench_cache.py [--model PATH] [--recipe a8w8_pc] [--backend tflite|onnx]
Without --model a small CNN (the reference architecture, untrained) is built in a temp folder.
Prints the cold and warm seconds and their ratio; the cache is a fresh temp folder.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--recipe", default="a8w8_pc")
    parser.add_argument("--backend", choices=("tflite", "onnx"))
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    os.environ["NPU_WORKBENCH_CACHE"] = str(tmp / "cache")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from workbench.quantize.engine import quantize
    model = args.model
    if model is None:
        from workbench.models.reference import build_model
        m = build_model((32, 32, 1), 10, batch_size=1)
        model = str(tmp / "cnn.keras")
        with contextlib.redirect_stdout(io.StringIO()):
            m.save(model)
    x = np.random.default_rng(0).random((args.samples, 32, 32, 1), dtype=np.float32)
    start = time.perf_counter()
    cold = quantize(model, args.recipe, x, backend=args.backend)
    t_cold = time.perf_counter() - start
    start = time.perf_counter()
    warm = quantize(model, args.recipe, x, backend=args.backend)
    t_warm = time.perf_counter() - start
    assert warm.cache_hit and warm.sha256 == cold.sha256
    print(f"recipe {args.recipe} ({cold.backend}), {args.samples} samples: cold {t_cold:.2f} s, "
          f"warm {t_warm:.3f} s, cold/warm ratio {t_cold / t_warm:.0f}x")


if __name__ == "__main__":
    main()
