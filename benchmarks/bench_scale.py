"""Evaluating a held-out set of real size from disk: peak memory and speed against a plain loop.

The model is a real one from the test zoo (``tests/zoo/fetch.py``): PaddleOCR's text direction
classifier (``ppocr-cls``, ONNX, dynamic H/W, BGR, mean/std 0.5, input 48x192, classes 0/180).
Generates ``--n`` JPEG frames into a folder dataset ``ROOT/test/daylight/<class>/<i>.jpg``
(temporary unless ``--folder``): seeded crops of scikit-image's text photos at 48x192, half of
them turned 180 degrees (class ``180``), so the model's answers differ from image to image.
Then, each in its own process (so each has its own peak RSS):

  1. plain loop: list the files, and per batch of ``--batch``: Pillow decode, the card's
     preprocessing written out here (/255, RGB->BGR, (x-0.5)/0.5, NCHW), one batched ONNX Runtime
     ``run``; top-1 against the folder's labels;
  2. workbench: ``load_dataset(folder)`` (lazy image files) and ``compare_accuracy(model, [], data)``
     with the zoo card: the same decode/preprocess/run, batch by batch, plus the contract's pixel
     checks, the bootstrap CIs and the contract guards; its per-image outputs are read back from
     its output cache (a fresh cache folder per run).

The two passes are compared **image by image** (largest absolute difference of the two output
vectors over all images, and how many top-1 answers differ), not by top-1 accuracy alone. The
order alternates: the pair runs plain-first, then workbench-first (the first pass warms the page
cache for the second: measured 1.44 vs 1.10 on the old benchmark), and both ratios are printed;
the last line::

    peak_rss_mb=... ratio_plain_first=... ratio_workbench_first=... max_abs_diff=...

    .venv/bin/python benchmarks/bench_scale.py [--n 20000] [--batch 32] [--folder DIR]
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

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ZOO_MODEL = "ppocr-cls"
SIZE = (48, 192)
CLASSES = ("0", "180")


def generate(folder: Path, n: int) -> Path:
    """``n`` JPEG text crops (half turned 180 degrees) and the zoo model with its card, in ``folder``."""
    import shutil

    import numpy as np
    from PIL import Image

    from tests.zoo.fetch import TEXT_PHOTOS, _crops, _photos, fetch
    entry = fetch(ZOO_MODEL)
    model = folder / "model.onnx"
    done = folder / "generated.json"
    recipe = {"n": n, "model_sha256": entry.info["model_sha256"]}
    if done.is_file() and json.loads(done.read_text()) == recipe:
        return model
    shutil.copyfile(entry.model, model)
    shutil.copyfile(entry.card, folder / "model.card.yaml")
    for c in CLASSES:
        (folder / "data" / "test" / "daylight" / c).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    photos = _photos(TEXT_PHOTOS)
    for i in range(0, n, 256):
        for k, (_, crop) in enumerate(_crops(photos, min(256, n - i), SIZE, rng)):
            c = CLASSES[(i + k) % 2]
            image = crop[::-1, ::-1] if c == "180" else crop
            Image.fromarray((image * 255).round().astype(np.uint8)).save(
                folder / "data" / "test" / "daylight" / c / f"{i + k:06d}.jpg", quality=90)
    done.write_text(json.dumps(recipe))
    return model


def plain_loop(folder: Path, model: Path, batch: int) -> dict:
    """The same work without the workbench: decode, the card's preprocessing, batched ORT run, top-1."""
    import numpy as np
    import onnxruntime as ort
    from PIL import Image
    start = time.perf_counter()
    files = sorted((folder / "data" / "test" / "daylight").glob("*/*.jpg"))
    labels = np.array([CLASSES.index(f.parent.name) for f in files])
    options = ort.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    outputs = []
    for b in range(0, len(files), batch):
        chunk = files[b:b + batch]
        x = np.stack([np.asarray(Image.open(f).convert("RGB")) for f in chunk]).astype(np.float32) / np.float32(255)
        x = (x[..., ::-1] - np.float32(0.5)) / np.float32(0.5)           # the card: BGR, mean/std 0.5
        outputs.append(session.run(None, {name: np.ascontiguousarray(x.transpose(0, 3, 1, 2))})[0])
    y = np.concatenate(outputs)
    seconds = time.perf_counter() - start
    np.save(folder / "plain_outputs.npy", y)
    return {"seconds": seconds, "accuracy": float(np.mean(y.argmax(axis=1) == labels)), "n": len(files),
            "ids": [f.relative_to(folder / "data").as_posix() for f in files]}


def workbench(folder: Path, model: Path, batch: int) -> dict:
    import warnings

    import numpy as np

    from workbench.data.loaders import load_dataset
    from workbench.evaluate import cache as eval_cache
    from workbench.evaluate.accuracy import compare_accuracy
    start = time.perf_counter()
    data = load_dataset(folder / "data")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = compare_accuracy(model, [], data, cache=True, batch_size=batch)
    seconds = time.perf_counter() - start
    row = report.rows[0]
    test = data.select(split="test", condition="daylight")
    key = eval_cache.cache_key(report.model_sha256[report.reference], data.hash, "test", "daylight",
                               contract=report.contract.to_params())
    outputs = eval_cache.load_outputs(key, test.ids)
    if outputs is None:
        raise SystemExit("the workbench's outputs are not in its cache: cannot compare them image by image")
    np.save(folder / "workbench_outputs.npy", outputs[0])
    return {"seconds": seconds, "accuracy": row.accuracy, "n": row.n, "ids": [str(i) for i in test.ids],
            "issues": [i.code for i in report.issues], "contract": report.contract.summary()}


def _peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM: counted from its own exec, unlike ru_maxrss)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _child(phase: str, folder: Path, batch: int, extra: list[str] | None = None) -> dict:
    cmd = [sys.executable, __file__, "--phase", phase, "--folder", str(folder), "--batch", str(batch),
           *(extra or [])]
    with tempfile.TemporaryDirectory(prefix="wb-bench-scale-cache-") as cache:   # no warm output cache
        env = {**os.environ, "NPU_WORKBENCH_CACHE": cache}
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{phase} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _compare(folder: Path, plain: dict, wb: dict) -> tuple[float, int]:
    """Largest |difference| of the per-image outputs, and the number of images whose top-1 differs."""
    import numpy as np
    a, b = np.load(folder / "plain_outputs.npy"), np.load(folder / "workbench_outputs.npy")
    order = {i: k for k, i in enumerate(wb["ids"])}
    b = b[[order[i] for i in plain["ids"]]]                  # the workbench's outputs in the plain loop's order
    return float(np.abs(a - b).max()), int(np.sum(a.argmax(axis=1) != b.argmax(axis=1)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="images (default 20000)")
    parser.add_argument("--batch", type=int, default=32, help="images per run (default 32)")
    parser.add_argument("--folder", help="keep the generated set here (reused when it matches --n)")
    parser.add_argument("--phase", choices=("generate", "plain", "workbench"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.phase == "generate":
        generate(Path(args.folder), args.n)
        print(json.dumps({}))
        return 0
    if args.phase:
        folder = Path(args.folder)
        result = (plain_loop if args.phase == "plain" else workbench)(folder, folder / "model.onnx", args.batch)
        result["peak_rss_mb"] = _peak_rss_mb()
        print(json.dumps(result))
        return 0

    with tempfile.TemporaryDirectory(prefix="wb-bench-scale-") as tmp:
        folder = Path(args.folder) if args.folder else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        _child("generate", folder, args.batch, ["--n", str(args.n)])
        print(f"{args.n} JPEG text crops {SIZE[0]}x{SIZE[1]}x3 and the zoo's {ZOO_MODEL} (ONNX) in {folder} "
              f"({time.perf_counter() - start:.0f} s)")
        ratios, worst_diff, worst_flips, peak = {}, 0.0, 0, 0.0
        for order in ("plain-first", "workbench-first"):
            if order == "plain-first":
                plain = _child("plain", folder, args.batch)
                wb = _child("workbench", folder, args.batch)
            else:
                wb = _child("workbench", folder, args.batch)
                plain = _child("plain", folder, args.batch)
            diff, flips = _compare(folder, plain, wb)
            worst_diff, worst_flips = max(worst_diff, diff), max(worst_flips, flips)
            ratios[order] = wb["seconds"] / plain["seconds"]
            peak = max(peak, wb["peak_rss_mb"])
            print(f"{order}:")
            print(f"  plain loop   {plain['seconds']:8.1f} s  {plain['n'] / plain['seconds']:7.1f} img/s  "
                  f"peak RSS {plain['peak_rss_mb']:7.0f} MB  top-1 {plain['accuracy']:.4f}")
            print(f"  workbench    {wb['seconds']:8.1f} s  {wb['n'] / wb['seconds']:7.1f} img/s  "
                  f"peak RSS {wb['peak_rss_mb']:7.0f} MB  top-1 {wb['accuracy']:.4f}  ({wb['contract']}; "
                  f"issues: {', '.join(wb['issues']) or 'none'})")
            print(f"  per image: largest |output difference| {diff:.3g}, top-1 differs on {flips} of {plain['n']}")
    same = worst_diff <= 1e-4 and worst_flips == 0
    print(f"  same outputs as the plain loop on every image (|diff| <= 1e-4): {same}")
    print(f"peak_rss_mb={peak:.0f} ratio_plain_first={ratios['plain-first']:.3f} "
          f"ratio_workbench_first={ratios['workbench-first']:.3f} max_abs_diff={worst_diff:.3g}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
