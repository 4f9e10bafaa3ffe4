"""Structure, NPU share and fidelity per zoo model: the conversion route before this work vs now.

    python benchmarks/bench_convert.py                      # every model (cached conversions)
    python benchmarks/bench_convert.py --models blazeface   # some
    python benchmarks/bench_convert.py --fresh              # convert and quantize again (timings)

Models: the zoo's ``blazeface`` (float .tflite, fp16 weights), ``ppocr-det`` and ``ppocr-cls``
(Paddle2ONNX), and two PyTorch nets exported here in the ``torch-2.13`` tool environment
(``benchmarks/export_convert_nets.py``): ``mbnet`` (MobileNetV2-style, depthwise) and ``gnet``
(grouped non-depthwise convolutions with a channel shuffle).  Calibration: the zoo's calibration
photos through the model's card (the two own nets take heatnet's 64x64 photos as [0, 1] pixels).

Per model and route, a8w8_pc:

* before: a float .tflite went tf2onnx -> onnx2tf -> TFLite converter; an .onnx went onnx2tf ->
  TFLite converter with no structural passes (run here with today's ONNX rewrites, without which
  the PaddleOCR models did not convert at all);
* now: ``workbench.quantize`` (AI Edge Quantizer for a float .tflite, passes for every result).

Printed per model and route: seconds, source ops / INT8 ops, TRANSPOSE added, depthwise kept,
NPU ops / ops and CPU islands per target (imx8mp and imx95 rule tables, imx93 Vela 3.10.0), and
SQNR per output of the INT8 model against the FP32 source on 16 test photos.  Last line:
``added_transposes=N depthwise_kept=K/M npu_share_imx95=S`` (now; N and K/M summed over the
models, S the lowest share of any model).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODELS = ("blazeface", "ppocr-det", "ppocr-cls", "mbnet", "gnet")
OWN = ("mbnet", "gnet")
TARGETS = ("imx8mp", "imx93", "imx95")


def model_source(name: str) -> tuple[Path, Path]:
    """(model file, data folder)."""
    from tests.zoo.fetch import fetch
    if name not in OWN:
        entry = fetch(name)
        return Path(entry.model), Path(entry.data)
    from workbench import toolenv
    from workbench._io import cache_dir
    out = cache_dir("bench_convert") / f"{name}.onnx"
    if not out.is_file():
        env = toolenv.ensure("torch-2.13")
        with tempfile.TemporaryDirectory() as tmp:
            tmp_out = Path(tmp) / out.name
            proc = env.run(["python", str(Path(__file__).with_name("export_convert_nets.py")), name, str(tmp_out)],
                           cwd=tmp, timeout=900)
            if proc.returncode != 0:
                raise SystemExit(f"export of {name} failed:\n{proc.stderr[-2000:]}")
            os.replace(tmp_out, out)
    return out, Path(fetch("heatnet").data)


def pixels(data: Path, split: str, n: int | None = None) -> np.ndarray:
    from workbench.data.loaders import load_dataset
    ds = load_dataset(data).select(split=split)
    x = np.asarray(ds.x, np.float32)
    return x[:n] if n else x


def model_inputs(src: Path, x: np.ndarray) -> np.ndarray:
    """Pixels -> what the converted model takes (the card's contract; none for the own nets)."""
    from workbench.quantize.engine import _apply_contract, _resolve_calibration
    return _apply_contract(_resolve_calibration(x, None, None), src, None).x


def before_route(src: Path, fmt: str, x: np.ndarray, out: Path) -> float:
    """The INT8 file of the route before this work (no AI Edge Quantizer, no passes); seconds."""
    from workbench.models import convert
    from workbench.quantize.recipe import get_recipe
    from workbench.quantize.tflite_backend import quantize_tflite
    start = time.perf_counter()
    onnx_path = convert.tf_to_onnx(src, "tflite")[0] if fmt == "tflite" else src
    converted = convert.convert_onnx(onnx_path, samples=x)
    out.write_bytes(quantize_tflite(converted.saved_model, "saved_model", get_recipe("a8w8_pc"), x))
    return time.perf_counter() - start


def sqnr(ref: list[np.ndarray], got: list[np.ndarray]) -> list[float]:
    out = []
    for a, b in zip(ref, got):
        a, b = np.asarray(a, np.float64).reshape(len(a), -1), np.asarray(b, np.float64).reshape(len(b), -1)
        if a.shape != b.shape:
            out.append(float("nan"))
            continue
        noise = float(np.sum((a - b) ** 2))
        out.append(float("inf") if noise == 0 else 10 * np.log10(float(np.sum(a ** 2)) / noise))
    return out


def measure(name: str, src: Path, fmt: str, int8: Path, x_test: np.ndarray, ref: list[np.ndarray],
            seconds: float) -> dict:
    from workbench.models.predict import load_predictor
    from workbench.models.structure import structural_diff
    from workbench.placement.analyze import analyze_placement
    st = structural_diff(src, fmt, int8)
    row = {"seconds": seconds, "source_ops": st.get("source_total"), "int8_ops": st["int8_total"],
           "transposes_added": st.get("transposes_added"), "depthwise": st.get("depthwise"),
           "added": st.get("added"), "targets": {}}
    for target in TARGETS:
        try:
            rep = analyze_placement(int8, target)
            row["targets"][target] = (rep.npu_ops, rep.npu_ops + rep.cpu_ops, rep.n_cpu_islands)
        except Exception as exc:  # noqa: BLE001 - a compiler crash is this target's result
            row["targets"][target] = (type(exc).__name__, str(exc).splitlines()[0][:60] if str(exc) else "", None)
    row["sqnr"] = sqnr(ref, load_predictor(str(int8)).predict_outputs(x_test))
    return row


def fmt_row(route: str, r: dict) -> str:
    tg = "  ".join(f"{t} {v[0]}/{v[1]} isl {v[2]}" if isinstance(v[0], int) else f"{t} {v[0]}"
                   for t, v in r["targets"].items())
    dw = r["depthwise"] or {}
    return (f"  {route:<6} {r['seconds']:6.1f} s  ops {r['source_ops']}->{r['int8_ops']}  "
            f"+TRANSPOSE {r['transposes_added']}  depthwise {dw.get('int8', '?')}/{dw.get('source', '?')}  {tg}  "
            f"SQNR {', '.join(f'{v:.1f}' for v in r['sqnr'])} dB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--fresh", action="store_true", help="quantize again (no cache) for timings")
    parser.add_argument("--no-before", action="store_true", help="skip the old route")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from workbench.models.formats import model_format
    from workbench.models.predict import load_predictor
    from workbench.quantize.engine import quantize
    total_t, dw_k, dw_m, shares = 0, 0, 0, []
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} cores (timings under that load)")
    for name in args.models.split(","):
        src, data = model_source(name)
        fmt = model_format(src)
        calib_px, test_px = pixels(data, "calibration"), pixels(data, "test", 16)
        calib, x_test = model_inputs(src, calib_px), model_inputs(src, test_px)
        fp32 = load_predictor(str(src))
        if fmt == "onnx":
            fp32.adapt_layout(x_test.shape[1:])
        ref = fp32.predict_outputs(x_test)
        print(f"{name} ({fmt}, {len(calib)} calibration samples, {len(x_test)} test)")
        with tempfile.TemporaryDirectory() as tmp:
            if not args.no_before:
                before = Path(tmp) / "before.tflite"
                try:
                    seconds = before_route(src, fmt, calib, before)
                    print(fmt_row("before", measure(name, src, fmt, before, x_test, ref, seconds)), flush=True)
                except Exception as exc:  # noqa: BLE001 - the old route failing is a result
                    print(f"  before failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            start = time.perf_counter()
            q = quantize(src, "a8w8_pc", calib_px, cache=not args.fresh)
            now = measure(name, src, fmt, Path(q.path), x_test, ref, time.perf_counter() - start)
            print(fmt_row("now", now), flush=True)
        total_t += now["transposes_added"] or 0
        dw = now["depthwise"] or {}
        dw_k += min(dw.get("int8", 0), dw.get("source", 0))
        dw_m += dw.get("source", 0)
        imx95 = now["targets"]["imx95"]
        if isinstance(imx95[0], int):
            shares.append(imx95[0] / imx95[1])
    print(f"added_transposes={total_t} depthwise_kept={dw_k}/{dw_m} "
          f"npu_share_imx95={min(shares) if shares else float('nan'):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
