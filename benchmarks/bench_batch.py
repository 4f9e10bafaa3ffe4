"""Cold vs warm `make run`: the batch for every target twice into one output folder.

Run: .venv/bin/python benchmarks/bench_batch.py [--targets imx8mp,imx93,imx95] [--jobs 2]

Cold: an empty output folder and an empty workbench cache (the pinned tool environments stay where
`make tools` put them), exactly what `make run` does on a fresh clone after set-up. Warm: the same
command again, as a second `make run` does; executed notebooks whose inputs did not change are
reused (workbench/batch/reuse.py). Goals: cold <= 60 s on 2 idle cores; warm <= 0.15 of cold.

The per-notebook overhead is what a cold notebook costs beyond its own cells: each stage's seconds
(the console line: kernel start or reset, papermill, nbclient) minus the sum of its cells' durations
(papermill's metadata in the executed notebook), averaged over the notebooks executed.  CPU seconds
(user + system) are what a shared machine does not distort: ``cold_cpu_s`` is the batch's with its
kernels and tool processes, split into ``batch_cpu_s`` (the batch process itself: building the
built-in model, HTML exports, findings, summary) and ``kernels_cpu_s`` (the notebooks' kernels and the
processes the batch starts, e.g. tf2onnx); the load average says how busy the machine was.  The
temporary folder (cache and reports) is removed at the end unless ``--keep``.
Last line: `cold_s=<s> warm_s=<s> per_notebook_overhead_s=<s> ...`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# runs `workbench batch ...` and writes its own and its children's CPU seconds to $BENCH_BATCH_RUSAGE
_WRAPPER = """
import json, os, resource, sys
from workbench.cli import main
try:
    code = main(sys.argv[1:])
finally:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.environ["BENCH_BATCH_RUSAGE"], "w") as handle:
        json.dump({"self": own.ru_utime + own.ru_stime, "children": kids.ru_utime + kids.ru_stime}, handle)
sys.exit(code)
"""
STAGE_LINE = re.compile(r"^\[(?P<target>[^\]]+?)\s*\] (?P<stage>\S+)\s+ok\s+(?P<seconds>[0-9.]+) s", re.M)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def overheads(stderr: str, reports: Path) -> list[float]:
    """Per executed notebook: its stage seconds minus the sum of its cells' durations."""
    out = []
    for m in STAGE_LINE.finditer(stderr):
        target, stage = m["target"].strip(), m["stage"]
        found = list(reports.glob(f"{target}/{stage}.ipynb")) or list(reports.glob(f"*/{stage}.ipynb"))
        if not found:
            continue
        nb = json.loads(found[0].read_text())
        cells = sum((c.get("metadata", {}).get("papermill", {}).get("duration") or 0.0)
                    for c in nb["cells"] if c["cell_type"] == "code")
        out.append(float(m["seconds"]) - cells)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="imx8mp,imx93,imx95")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the temporary cache and reports")
    args = parser.parse_args()
    from workbench.toolenv import tools_dir
    tmp = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    env = {**os.environ, "NPU_WORKBENCH_CACHE": str(tmp / "cache"), "NPU_WORKBENCH_TOOLS": str(tools_dir())}
    reports = tmp / "reports"
    cmd = [sys.executable, "-c", _WRAPPER, "batch", "--targets", args.targets,
           "--out", str(reports), "--jobs", str(args.jobs), "--run-id", "latest"]
    seconds, cpu, overhead, split = [], [], [], {}
    load_before = os.getloadavg()[0]
    for label in ("cold", "warm"):
        start, cpu_start = time.perf_counter(), _children_cpu()
        rusage = tmp / f"{label}.rusage.json"
        proc = subprocess.run(cmd, env={**env, "BENCH_BATCH_RUSAGE": str(rusage)}, capture_output=True, text=True)
        seconds.append(time.perf_counter() - start)
        cpu.append(_children_cpu() - cpu_start)
        reused = proc.stderr.count(" reused ")
        split[label] = json.loads(rusage.read_text()) if rusage.is_file() else {}
        print(f"{label}: {seconds[-1]:.1f} s, {cpu[-1]:.1f} CPU s (batch {split[label].get('self', float('nan')):.1f}, "
              f"kernels and tools {split[label].get('children', float('nan')):.1f}), exit {proc.returncode}, "
              f"{reused} notebook(s) reused, load {os.getloadavg()[0]:.1f}", flush=True)
        if proc.returncode not in (0, 1):        # 1: a gate or a target failed, still a full batch
            sys.exit(f"batch failed:\n{proc.stderr[-2000:]}")
        if label == "cold":
            overhead = overheads(proc.stderr, reports)
    cold, warm = seconds
    per_notebook = sum(overhead) / len(overhead) if overhead else float("nan")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"cold_s={cold:.1f} warm_s={warm:.1f} per_notebook_overhead_s={per_notebook:.2f} "
          f"warm_over_cold={warm / cold:.3f} cold_cpu_s={cpu[0]:.1f} "
          f"batch_cpu_s={split['cold'].get('self', float('nan')):.1f} "
          f"kernels_cpu_s={split['cold'].get('children', float('nan')):.1f} warm_cpu_s={cpu[1]:.1f} "
          f"notebooks={len(overhead)} load={load_before:.1f}->{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
