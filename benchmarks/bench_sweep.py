"""Sweep speed: warm vs cold, Dask on one worker vs a plain serial loop, two workers vs one, on cold cells.

Run: .venv/bin/python benchmarks/bench_sweep.py [--model tradeoff|reference|PATH] [--scaling-cells 36|12] [--quick]

The default sweep is 36 cells: 3 targets x 3 recipes (a8w8_pc, a8w8_pt, a8w8_pt+cle) x 2
calibration strategies (random, stratified) x 2 sizes (64, 256) on the built-in trade-off model:
12 quantizations, each placed on 3 targets (the sweep runs a quantization's cells as one Dask task).
The model is trained (or taken from the user cache) first.  Every phase that computes runs against
its own fresh cache folder (``NPU_WORKBENCH_CACHE``, set before its process or workers start; the
tool environments stay where they are installed, ``NPU_WORKBENCH_TOOLS``), so its cells are cold:
quantize, evaluate, place, time on the host CPU.

1. cold: the default sweep on a LocalCluster of one worker per core (the sweep's default);
2. warm: the same sweep again in the same cache (every cell a cache hit: no cluster starts);
3. serial: the scaling cells (``--scaling-cells``: the 36, or 12 = imx8mp and imx93 x 3 recipes x
   2 strategies x size 64, 6 quantizations) cold as a plain loop (``executor="serial"``) in a fresh
   process;
4. Dask, 1 worker: the same cells cold on a LocalCluster of one worker;
5. Dask, 2 workers: the same with two workers (with 36 scaling cells on a 2-core machine, the cold
   phase is this measurement and is not run twice).

Start-up is timed apart from the cells.  Serial: the process start, imports, the dataset and the
warm-up below, i.e. the process's wall time minus the ``sweep()`` call.  Dask: the LocalCluster's
start and the same warm-up run on every worker (``client.run``), then the ``sweep()`` call against
that cluster's scheduler (which scatters the dataset, submits the tasks and collects the results:
the engine), then the close.  The warm-up pays what every fresh process pays once before its first
cell: TensorFlow, LiteRT and the workbench stages imported, the model loaded for its input contract.
Each phase line prints start-up, cells and total seconds, the sum of the cells' own seconds and the
1-minute load average at the phase's start and end.  First, a CPU probe prints what the machine gives two
CPU-bound processes right now (two pure-Python loops at once against one: 2.00 = two free cores); two
Dask workers cannot scale beyond it.

The last line prints the ratios with their goals (warm/cold < 0.10, dask1/serial <= 1.2,
dask1/dask2 >= 1.6).  The goal ratios use the cells' time (start-up excluded: the engine on real
work); the same ratios with start-up included follow in brackets.  On a shared 2-core machine the
load average decides whether two workers can scale: read it with the numbers.
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
from typing import Any

SERIAL = """
import json, os, sys, time, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[2])
from bench_sweep import warm_up
from workbench.sweep.plan import SweepSpec
from workbench.sweep.run import sweep
from workbench.data.loaders import load_dataset
spec = SweepSpec.from_dict(json.loads(sys.argv[1]))
load_dataset(spec.dataset)
warm_up(spec.model)
t = time.perf_counter()
r = sweep(spec.model, spec=spec, executor="serial", progress=False)
cells_s = time.perf_counter() - t
print(json.dumps({"cells_s": cells_s, "n": len(r.cells), "failed": len(r.failed), "hits": r.cache_hits,
                  "busy_s": sum(c.seconds for c in r.cells), "where": r.scheduler}))
"""


def warm_up(model_path: str) -> float:
    """What a fresh process pays once before its first cell: imports, the model loaded for its contract."""
    t = time.perf_counter()
    import warnings
    warnings.filterwarnings("ignore")
    import ai_edge_litert.interpreter  # noqa: F401
    import tensorflow  # noqa: F401

    import workbench.calibration.curate  # noqa: F401
    import workbench.evaluate.accuracy  # noqa: F401
    import workbench.placement.analyze  # noqa: F401
    import workbench.quantize.engine  # noqa: F401
    from workbench.models.contract import resolve_contract
    resolve_contract(model_path)
    return time.perf_counter() - t


def _burn(n: int = 10_000_000) -> float:
    t = time.perf_counter()
    total = 0
    for i in range(n):
        total += i * i
    return time.perf_counter() - t


def cpu_scaling() -> float:
    """What the machine gives two CPU-bound processes right now: their speed-up over one (2.0 = two free cores)."""
    import multiprocessing
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(_burn, [1000, 1000])                 # the processes started before the clock
        one = min(pool.apply(_burn) for _ in range(2))            # one loop alone (the best of two)
        two = []
        for _ in range(2):                                          # two at once (the best of two)
            t = time.perf_counter()
            pool.map(_burn, [10_000_000] * 2, chunksize=1)
            two.append(time.perf_counter() - t)
    return 2 * one / min(two)


def _fresh_cache(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    os.environ["NPU_WORKBENCH_CACHE"] = str(folder)       # the client's lookups, the subprocess, new workers
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tradeoff")
    parser.add_argument("--scaling-cells", type=int, choices=(36, 12), default=36,
                        help="the cells of the serial / Dask(1) / Dask(2) phases: the default 36, or 12 "
                             "(imx8mp, imx93 x 3 recipes x 2 strategies x size 64)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 2 cells (imx93 x a8w8_pc, a8w8_pt x stratified/64) in every phase")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import warnings
    warnings.filterwarnings("ignore")
    from workbench.sweep.plan import SweepSpec
    from workbench.sweep.run import quantization_groups, resolve_model, sweep, worker_env
    from workbench.toolenv import TOOLS_ENV, tools_dir
    os.environ[TOOLS_ENV] = str(tools_dir())      # the installed tool environments (Vela), not a reinstall per cache
    model = resolve_model(args.model, "digits-conditions")          # user cache: trained once
    spec = SweepSpec(model=model, targets=("imx8mp", "imx93", "imx95"), recipes=("a8w8_pc", "a8w8_pt", "a8w8_pt+cle"),
                     sizes=(64, 256))
    scaling = spec if args.scaling_cells == 36 else SweepSpec(
        model=model, targets=("imx8mp", "imx93"), recipes=spec.recipes, sizes=(64,))
    if args.quick:
        spec = scaling = SweepSpec(model=model, targets=("imx93",), recipes=("a8w8_pc", "a8w8_pt"),
                                   strategies=("stratified",), sizes=(64,))
    from workbench.data.loaders import load_dataset
    from workbench.sweep.plan import plan_cells
    load_dataset(spec.dataset)          # in memory for this process's sweeps (the serial process loads its own)
    n_groups = len(quantization_groups(plan_cells(scaling)))
    cores = os.cpu_count() or 1
    root = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    print(f"{spec.n_cells} cells (cold/warm), {scaling.n_cells} cells in {n_groups} quantization task(s) "
          f"(serial/Dask); caches under {root}; {cores} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    probe = cpu_scaling()
    print(f"CPU probe: two pure-Python processes at once {probe:.2f}x one (2.00 = two free cores)", flush=True)
    loads: list[float] = []
    rows: dict[str, dict[str, float]] = {}

    def report(name: str, row: dict[str, float], load0: float, extra: str = "") -> None:
        load1 = os.getloadavg()[0]
        loads.extend((load0, load1))
        rows[name] = row
        print(f"{name:<34} start-up {row['start']:6.1f} s  cells {row['cells']:7.1f} s  total {row['total']:7.1f} s"
              f"  (cells' own {row['busy']:7.1f} s)  load {load0:.1f} -> {load1:.1f}{extra}", flush=True)

    def dask_phase(name: str, the_spec: SweepSpec, n: int, cache_name: str) -> Any:
        from distributed import Client, LocalCluster
        folder = _fresh_cache(root, cache_name)
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                               env={**worker_env(n), "NPU_WORKBENCH_CACHE": str(folder)})
        client = Client(cluster)
        client.run(warm_up, model)
        t1 = time.perf_counter()
        result = sweep(model, spec=the_spec, scheduler=cluster.scheduler_address, progress=False)
        t2 = time.perf_counter()
        client.close()
        cluster.close()
        t3 = time.perf_counter()
        row = {"start": t1 - t0, "cells": t2 - t1, "close": t3 - t2, "total": t3 - t0,
               "busy": sum(c.seconds for c in result.cells)}
        report(name, row, load0, f"; close {t3 - t2:.1f} s")
        print(f"  {len(result.cells)} cells, {len(result.failed)} failed, {result.cache_hits} hits, "
              f"{result.scheduler} ({result.workers} worker(s))", flush=True)
        return result

    # 1-2. cold and warm: the default sweep
    cold = dask_phase(f"cold (LocalCluster, {cores} workers)", spec, cores, "cold")
    cold_s = rows[f"cold (LocalCluster, {cores} workers)"]["total"]
    t = time.perf_counter()
    load0 = os.getloadavg()[0]
    warm = sweep(model, spec=spec, progress=False)
    warm_s = time.perf_counter() - t
    report("warm (same cache)", {"start": 0.0, "cells": warm_s, "total": warm_s,
                                 "busy": sum(c.seconds for c in warm.cells)}, load0)
    print(f"  {warm.cache_hits}/{len(warm.cells)} cache hits, {warm.scheduler}", flush=True)
    if [c.cell for c in warm.cells] != [c.cell for c in cold.cells]:
        raise SystemExit("the warm sweep planned other cells than the cold one")
    if warm.cache_hits < len(warm.cells):     # a cell's key holds the sha256 of the sweep's and placement's code
        print("  NOT all hits: a file in a cell's key (workbench/sweep/cell.py, plan.py, placement/analyze.py, ops.py, "
              "compilers.py, vela.py, the toolchain) changed during the cold phase; the warm time is not a rerun: run again",
              flush=True)

    # 3. serial, cold, in a fresh process
    _fresh_cache(root, "serial")
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", SERIAL, json.dumps(scaling.to_dict()), str(Path(__file__).parent)],
                         check=True, env=os.environ.copy(), capture_output=True, text=True)
    total = time.perf_counter() - t
    info = json.loads(out.stdout.strip().splitlines()[-1])
    report("serial loop (fresh process)", {"start": total - info["cells_s"], "cells": info["cells_s"],
                                           "total": total, "busy": info["busy_s"]}, load0)
    print(f"  {info['n']} cells, {info['failed']} failed, {info['hits']} hits, {info['where']}", flush=True)

    # 4-5. Dask with one and two workers, cold
    dask_phase("Dask LocalCluster, 1 worker", scaling, 1, "dask1")
    d2_name = "Dask LocalCluster, 2 workers"
    if scaling == spec and cores == 2:
        rows[d2_name] = rows[f"cold (LocalCluster, {cores} workers)"]
        print(f"{d2_name:<34} = the cold phase (the same cells on 2 workers)", flush=True)
    else:
        dask_phase(d2_name, scaling, 2, "dask2")
    serial, d1, d2 = rows["serial loop (fresh process)"], rows["Dask LocalCluster, 1 worker"], rows[d2_name]
    print(f"warm/cold {warm_s / cold_s:.3f} (goal < 0.10); cells only: dask1/serial {d1['cells'] / serial['cells']:.3f} "
          f"(goal <= 1.2), dask1/dask2 {d1['cells'] / d2['cells']:.3f} (goal >= 1.6) [with start-up: "
          f"{d1['total'] / serial['total']:.3f}, {d1['total'] / d2['total']:.3f}]; {scaling.n_cells} scaling cells; "
          f"load avg {min(loads):.1f}..{max(loads):.1f} on {cores} cores; CPU probe {probe:.2f}x")


if __name__ == "__main__":
    main()
