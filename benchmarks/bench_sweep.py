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
dask1/dask2 >= 1.6) and the 1-minute load average at the start and end of each phase (the machine's
load matters: on a shared 2-core machine two workers only scale when the cores are free).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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

    loads = []

    def phase(name: str, run: Any) -> tuple[float, Any]:
        load0 = os.getloadavg()[0]
        t = time.perf_counter()
        out = run()
        seconds = time.perf_counter() - t
        load1 = os.getloadavg()[0]
        loads.append((load0, load1))
        print(f"{name:<48} {seconds:8.1f} s  load {load0:.1f} -> {load1:.1f}", flush=True)
        return seconds, out

    cold_s, cold = phase("cold (LocalCluster, cores workers)", lambda: sweep(model, spec=spec, progress=False))
    print(f"  {len(cold.failed)} failed, {cold.cache_hits} hits, {cold.scheduler}")
    warm_s, warm = phase("warm (every cell cached)", lambda: sweep(model, spec=spec, progress=False))
    print(f"  {warm.cache_hits}/{len(warm.cells)} cache hits, {warm.scheduler}")
    serial_s, _ = phase("serial loop (fresh process, cell cache off)", lambda: subprocess.run(
        [sys.executable, "-c", SERIAL, model, ",".join(targets), ",".join(recipes), ",".join(map(str, sizes))],
        check=True, env=os.environ.copy()))
    dask1_s, _ = phase("Dask LocalCluster, 1 worker (cell cache off)",
                       lambda: sweep(model, spec=spec, workers=1, cache=False, progress=False))
    dask2_s, _ = phase("Dask LocalCluster, 2 workers (cell cache off)",
                       lambda: sweep(model, spec=spec, workers=2, cache=False, progress=False))
    print(f"warm/cold {warm_s / cold_s:.3f} (goal < 0.10); dask1/serial {dask1_s / serial_s:.2f} (goal <= 1.2); "
          f"dask1/dask2 {dask1_s / dask2_s:.2f} (goal >= 1.6); load avg {min(min(pair) for pair in loads):.1f}.."
          f"{max(max(pair) for pair in loads):.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
