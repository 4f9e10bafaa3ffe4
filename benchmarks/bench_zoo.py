"""The test zoo's real models: conversion + quantization time against onnx2tf alone, peak RSS, fidelity.

For each zoo model (``tests/zoo/fetch.py``; default: every one):

  1. **onnx2tf alone** (ONNX models): the pinned onnx2tf tool environment converting and quantizing the
     model itself, ``onnx2tf -i model.onnx -o out -osd -oiqt -cind <input> calib.npy 0 1`` (its own
     full-integer quantization, from the same calibration images preprocessed by the card;
     ``-ois`` fixes a dynamic H/W to the card's size). It gets the ONNX file after the workbench's
     exact rewrites (``convert.exact_rewrites``: on the raw Paddle2ONNX file onnx2tf dies after a
     minute on ``'Softmax@0' is not a valid scope name``). A BlazeFace-style float ``.tflite`` has no
     onnx2tf baseline (the workbench quantizes it as it is).
  2. **workbench**: ``workbench quantize MODEL --data <zoo data> --recipe a8w8_pc -o OUT`` in a fresh
     cache folder (nothing converted before), which converts (onnx2tf), checks the conversion
     against ONNX Runtime, calibrates, quantizes, reads the INT8 model back and writes its manifest.
  3. **fidelity**: ``compare_accuracy(model, {a8w8_pc: INT8}, data)``: the worst SQNR and cosine of
     each output over the built-in conditions.

Each timed step runs as its own process under ``/usr/bin/time -v`` (wall time; peak RSS of the
largest process of the step). Goal from issue 28: the workbench adds at most 20% to onnx2tf alone.
Prints a table and, last, one line per model::

    zoo <name>: onnx2tf_s=... workbench_s=... ratio=... peak_rss_mb=... worst_sqnr_db=...

    .venv/bin/python benchmarks/bench_zoo.py [NAME ...] [--recipe a8w8_pc]

Timings on the shared 2-core machine depend on its load: give ``uptime`` with them.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _timed(argv: list[str], *, env: dict | None = None, cwd: str | os.PathLike | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of ``argv`` under ``/usr/bin/time -v``; raises on a non-zero exit."""
    start = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True, env=env, cwd=cwd)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        tail = "\n".join(line for line in (proc.stderr + proc.stdout).splitlines() if not line.startswith("\t"))
        raise SystemExit(f"`{' '.join(map(str, argv))}` failed (exit {proc.returncode}):\n{tail[-3000:]}")
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    return seconds, (int(match.group(1)) / 1024.0 if match else float("nan"))


def _calibration_inputs(entry, contract):
    """The card's model inputs (NHWC float32) of the zoo data's calibration split."""
    import numpy as np

    from workbench.data.loaders import load_dataset
    data = load_dataset(entry.data).select(split="calibration")
    return np.asarray(contract.apply(np.asarray(data.x), layout="NHWC"), np.float32)


def onnx2tf_alone(entry, contract, work: Path) -> tuple[float, float]:
    import numpy as np
    import onnx

    from workbench import toolenv
    env = toolenv.ensure("onnx2tf")
    # the same exact rewrites the workbench gives onnx2tf (raw Paddle2ONNX names make onnx2tf die), in a copy:
    # onnx2tf runs onnxsim on its input file in place, so it never gets the zoo's own file (it did once, and
    # the zoo's ppocr-cls, onet and heatnet were simplified versions until fetch.py checked their sha256)
    from workbench.models.convert import exact_rewrites
    source = work / "model.onnx"
    done = exact_rewrites(entry.model, source)
    if done:
        print(f"  onnx2tf alone gets the rewritten ONNX: {'; '.join(done)}")
    graph = onnx.load(str(source)).graph
    inp = graph.input[0]
    dims = [d.dim_value if d.dim_value > 0 else None for d in inp.type.tensor_type.shape.dim]
    from workbench.models.convert import calibration_file
    calib = _calibration_inputs(entry, contract)
    np.save(work / "calib.npy", calib)
    calibration_file(calib, work)    # onnx2tf loads (else downloads) its sample file at start-up: ours instead
    channels = calib.shape[-1]
    zeros, ones = str([[[[0.0] * channels]]]), str([[[[1.0] * channels]]])
    argv = [str(env.bin_dir / "onnx2tf"), "-i", str(source), "-o", str(work / "out"), "-osd", "-oiqt",
            "-cind", inp.name, str(work / "calib.npy"), zeros, ones, "-v", "error"]
    if None in dims[1:]:
        h, w = contract.size
        argv += ["-ois", f"{inp.name}:1,{channels},{h},{w}"]
    return _timed(argv, env=env.environ(), cwd=work)


def workbench_quantize(entry, recipe: str, work: Path) -> tuple[float, float, Path]:
    from workbench.toolenv import tools_dir
    out = work / "int8"
    env = {**os.environ, "NPU_WORKBENCH_CACHE": str(work / "cache"), "NPU_WORKBENCH_TOOLS": str(tools_dir()),
           "PYTHONPATH": str(ROOT)}
    seconds, rss = _timed([sys.executable, "-m", "workbench", "quantize", str(entry.model), "--data", str(entry.data),
                           "--recipe", recipe, "-o", str(out)], env=env)
    tflite = next(out.rglob("*.tflite"))
    return seconds, rss, tflite


def conversion_seconds(work: Path) -> float | None:
    """The part of the workbench's run that was its own onnx2tf process (the conversion record in its fresh cache)."""
    import json
    records = list((work / "cache").rglob("conversion.json"))
    return float(json.loads(records[0].read_text()).get("seconds", 0.0)) if records else None


def fidelity(entry, recipe: str, int8: Path):
    import warnings

    from workbench.evaluate.accuracy import compare_accuracy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = compare_accuracy(str(entry.model), {recipe: str(int8)}, str(entry.data), cache=False)
    worst: dict[str, object] = {}
    for r in report.fidelity:
        if r.sqnr_db is None:
            continue
        if r.output not in worst or r.sqnr_db < worst[r.output].sqnr_db:  # type: ignore[attr-defined]
            worst[r.output] = r
    return report, list(worst.values())


def main() -> int:
    from tests.zoo.fetch import SOURCES, fetch
    from workbench.models.contract import resolve_contract
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"zoo models (default all: {', '.join(SOURCES)})")
    parser.add_argument("--recipe", default="a8w8_pc", help="TFLite recipe (default a8w8_pc)")
    args = parser.parse_args()
    names = args.names or list(SOURCES)
    lines = []
    print(f"load: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f} (1/5/15 min) on "
          f"{os.cpu_count()} cores")
    for name in names:
        entry = fetch(name)
        contract = resolve_contract(str(entry.model))
        with tempfile.TemporaryDirectory(prefix=f"wb-bench-zoo-{name}-") as tmp:
            work = Path(tmp)
            base_s = base_rss = None
            if entry.model.suffix == ".onnx":
                (work / "alone").mkdir()
                try:
                    base_s, base_rss = onnx2tf_alone(entry, contract, work / "alone")
                except SystemExit as exc:
                    print(f"{name}: onnx2tf alone failed: {str(exc)[-1500:]}")
            (work / "wb").mkdir()
            try:
                wb_s, wb_rss, int8 = workbench_quantize(entry, args.recipe, work / "wb")
                converting = conversion_seconds(work / "wb")
            except SystemExit as exc:
                print(f"{name}: workbench quantize failed:\n{exc}")
                lines.append(f"zoo {name}: workbench quantize failed")
                continue
            _, worst = fidelity(entry, args.recipe, int8)
        ratio = f"{wb_s / base_s:.2f}" if base_s else "-"
        base = f"{base_s:7.1f} s {base_rss:6.0f} MB" if base_s else f"{'-':>17}"
        print(f"{name}: onnx2tf alone {base}   workbench {wb_s:7.1f} s {wb_rss:6.0f} MB   ratio {ratio}")
        if converting is not None:   # what the workbench adds around its own onnx2tf (float conversion only)
            print(f"    workbench: its onnx2tf conversion {converting:.1f} s, everything else {wb_s - converting:.1f} s "
                  "(start-up, checks, TensorFlow import overlapped, calibration, quantization, read-back)")
        for r in worst:
            cos = "n/a" if r.cosine is None else f"{r.cosine:.4f}"
            print(f"    {r.output:32s} worst SQNR {r.sqnr_db:6.1f} dB ({r.condition}), cosine {cos}")
        low = min((r.sqnr_db for r in worst), default=float("nan"))
        lines.append(f"zoo {name}: onnx2tf_s={base_s if base_s is None else round(base_s, 1)} "
                     f"workbench_s={wb_s:.1f} ratio={ratio} peak_rss_mb={wb_rss:.0f} worst_sqnr_db={low:.1f}")
    print(f"load at the end: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
