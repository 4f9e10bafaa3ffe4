"""Cold vs warm `make run`: the batch for every target twice into one output folder.

Run: .venv/bin/python benchmarks/bench_batch.py [--targets imx8mp,imx93,imx95] [--jobs 2]

Cold: an empty output folder and an empty workbench cache (the pinned tool environments stay where
`make tools` put them), exactly what `make run` does on a fresh clone after set-up. Warm: the same
command again, as a second `make run` does; executed notebooks whose inputs did not change are
reused (workbench/batch/reuse.py). The goal is warm <= 0.15 of cold.
Last line: `cold_s=<s> warm_s=<s> warm_over_cold=<ratio>`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="imx8mp,imx93,imx95")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    from workbench.toolenv import tools_dir
    tmp = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    env = {**os.environ, "NPU_WORKBENCH_CACHE": str(tmp / "cache"), "NPU_WORKBENCH_TOOLS": str(tools_dir())}
    cmd = [str(Path(sys.executable).with_name("workbench")), "batch", "--targets", args.targets,
           "--out", str(tmp / "reports"), "--jobs", str(args.jobs), "--run-id", "latest"]
    seconds = []
    for label in ("cold", "warm"):
        start = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        seconds.append(time.perf_counter() - start)
        reused = proc.stderr.count(" reused ")
        print(f"{label}: {seconds[-1]:.1f} s, exit {proc.returncode}, {reused} notebook(s) reused", flush=True)
        if proc.returncode not in (0, 1):        # 1: a gate or a target failed, still a full batch
            sys.exit(f"batch failed:\n{proc.stderr[-2000:]}")
    cold, warm = seconds
    print(f"cold_s={cold:.1f} warm_s={warm:.1f} warm_over_cold={warm / cold:.3f}")


if __name__ == "__main__":
    main()
