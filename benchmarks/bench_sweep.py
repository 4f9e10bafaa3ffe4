"""Sweep speed: warm vs cold, Dask on one worker vs a plain serial loop, two workers vs one.

Run: .venv/bin/python benchmarks/bench_sweep.py [--model tradeoff|reference|PATH] [--quick]

The default sweep is 36 cells: 3 targets x 3 recipes (a8w8_pc, a8w8_pt, a8w8_pt+cle) x 2
calibration strategies (random, stratified) x 2 sizes (64, 256) on the built-in trade-off model.
The model is trained (or taken from the user cache) first; every sweep then runs against a fresh
cache folder, so "cold" computes every quantization, evaluation and placement.

1. cold: the sweep on a LocalCluster (one worker process per core), nothing cached;
2. warm: the same sweep again (every cell a cache hit);
3. serial vs Dask(1): the same cells with the cell cache off (the stages' own caches warm), once as a
   plain loop in a fresh process and once on a LocalCluster of one worker (cluster start included);
4. Dask(2) vs Dask(1): the same with two workers.

The last line prints the three ratios and their goals (warm/cold < 0.10, dask1/serial <= 1.2,
dask1/dask2 >= 1.6).  The machine's load matters: note it beside the numbers.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERIAL = """
import sys, time, warnings
warnings.filterwarnings("ignore")
from workbench.sweep.plan import SweepSpec
from workbench.sweep.run import sweep
spec = SweepSpec(model=sys.argv[1], targets=sys.argv[2].split(","), recipes=sys.argv[3].split(","),
                 sizes=tuple(int(s) for s in sys.argv[4].split(",")))
r = sweep(sys.argv[1], spec=spec, executor="serial", cache=False, progress=False)
print(len(r.cells), len(r.failed))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tradeoff")
    parser.add_argument("--quick", action="store_true", help="8 cells instead of 36 (a smoke run)")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import warnings
    warnings.filterwarnings("ignore")
    from workbench.sweep.plan import SweepSpec
    from workbench.sweep.run import resolve_model, sweep
    model = resolve_model(args.model, "digits-conditions")          # user cache: trained once
    targets = ("imx8mp", "imx93", "imx95")
    recipes = ("a8w8_pc", "a8w8_pt", "a8w8_pt+cle")
    sizes = (64, 256)
    if args.quick:
        targets, recipes, sizes = ("imx8mp", "imx95"), ("a8w8_pc", "a8w8_pt"), (64,)
    spec = SweepSpec(model=model, targets=targets, recipes=recipes, sizes=sizes)
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    os.environ["NPU_WORKBENCH_CACHE"] = str(tmp / "cache")        # workers inherit it
    print(f"{spec.n_cells} cells; cache {tmp / 'cache'}; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")

    t = time.perf_counter()
    cold = sweep(model, spec=spec, progress=False)
    cold_s = time.perf_counter() - t
    print(f"cold  {cold_s:8.1f} s  ({len(cold.failed)} failed, {cold.cache_hits} hits, {cold.scheduler})")
    t = time.perf_counter()
    warm = sweep(model, spec=spec, progress=False)
    warm_s = time.perf_counter() - t
    print(f"warm  {warm_s:8.1f} s  ({warm.cache_hits}/{len(warm.cells)} cache hits)")

    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", SERIAL, model, ",".join(targets), ",".join(recipes),
                    ",".join(map(str, sizes))], check=True, env=os.environ.copy())
    serial_s = time.perf_counter() - t
    print(f"serial loop (fresh process, cell cache off)  {serial_s:8.1f} s")
    t = time.perf_counter()
    sweep(model, spec=spec, workers=1, cache=False, progress=False)
    dask1_s = time.perf_counter() - t
    print(f"Dask LocalCluster, 1 worker (cell cache off) {dask1_s:8.1f} s")
    t = time.perf_counter()
    sweep(model, spec=spec, workers=2, cache=False, progress=False)
    dask2_s = time.perf_counter() - t
    print(f"Dask LocalCluster, 2 workers (cell cache off) {dask2_s:8.1f} s")
    print(f"warm/cold {warm_s / cold_s:.3f} (goal < 0.10); dask1/serial {dask1_s / serial_s:.2f} (goal <= 1.2); "
          f"dask1/dask2 {dask1_s / dask2_s:.2f} (goal >= 1.6)")


if __name__ == "__main__":
    main()
