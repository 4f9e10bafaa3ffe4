"""Structure, NPU share and fidelity per zoo model: the conversion route before this work vs now.

    python benchmarks/bench_convert.py                      # every model (cached conversions)
    python benchmarks/bench_convert.py --models blazeface   # some
    python benchmarks/bench_convert.py --fresh              # convert and quantize again (timings)

Models: the zoo's ``blazeface`` (float .tflite, fp16 weights), ``ppocr-det`` and ``ppocr-cls``
(Paddle2ONNX), and two PyTorch nets exported here in the ``torch-2.13`` tool environment
(``tests/zoo/export_torch.py``, beside the zoo's own): ``mbnet`` (MobileNetV2-style, depthwise) and ``gnet``
(grouped non-depthwise convolutions with a channel shuffle).  Calibration: the zoo's calibration
photos through the model's card (the two own nets take heatnet's 64x64 photos as [0, 1] pixels).

Per model and route, a8w8_pc:

* before: a float .tflite went tf2onnx -> onnx2tf -> TFLite converter; an .onnx went onnx2tf ->
  TFLite converter with no structural passes (run here with today's ONNX rewrites, without which
  the PaddleOCR models did not convert at all);
* now: ``workbench.quantize`` (AI Edge Quantizer for a float .tflite, passes for every result).

Printed per model and route: seconds, source ops / INT8 ops, TRANSPOSE added, depthwise kept,
NPU ops / ops and CPU islands per target (imx8mp and imx95 rule tables, imx93 Vela 3.10.0), and
SQNR per output of the INT8 model against the FP32 source on 16 test photos.  Then, per model and
target, the NPU share of the INT8 graph as placed against the share the source graph's own ops get
(the same placement with the ops the structural diff lists as added left out, a type's CPU-placed
ops taken first, the worst case for the claim; the INT8 file's QUANTIZE/DEQUANTIZE at the model's
inputs and outputs left out too, the diff does not count them either) and whether share >= that;
and the same with only the data-moving types of ``added`` left out (``LAYOUT_OPS``: a compute type
the INT8 file has more of, e.g. HARD_SWISH, is the source's own ops fused, not the converter's);
under it a ``why:`` line per added type with ops on that target's CPU: which ops, the rules that put them
there and each rule's source in the target table (Vela's own reason where Vela placed them).  imx93
rows end with Vela's estimated latency (a compiler model, not a board measurement).
Last line:
``added_transposes=N depthwise_kept=K/M npu_share_imx95=S`` (now; N and K/M summed over the
models, S the lowest share of any model).
"""

from __future__ import annotations

import argparse
import os
import re
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
            script = Path(__file__).resolve().parents[1] / "tests" / "zoo" / "export_torch.py"
            proc = env.run(["python", str(script), name, "-", str(tmp_out)], cwd=tmp, timeout=900)
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
    from workbench.quantize.calibration_samples import apply_contract, resolve_calibration
    return apply_contract(resolve_calibration(x, None, None), src, None).x


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
           "added": st.get("added"), "targets": {}, "shares": {}}
    edges = edge_ops(int8)
    for target in TARGETS:
        try:
            rep = analyze_placement(int8, target)
            row["targets"][target] = (rep.npu_ops, rep.npu_ops + rep.cpu_ops, rep.n_cpu_islands)
            if rep.estimated_latency_ms is not None:
                row.setdefault("estimates", {})[target] = rep.estimated_latency_ms
            if st.get("compared"):
                row["shares"][target] = share_row(rep, st.get("added") or {}, edges)
        except Exception as exc:  # noqa: BLE001 - a compiler crash is this target's result
            row["targets"][target] = (type(exc).__name__, str(exc).splitlines()[0][:60] if str(exc) else "", None)
            row["shares"][target] = {"crash": f"{type(exc).__name__}"}
    row["sqnr"] = sqnr(ref, load_predictor(str(int8)).predict_outputs(x_test))
    return row


def edge_ops(int8: Path) -> set[int]:
    """Indices of the INT8 file's QUANTIZE/DEQUANTIZE at the model's inputs and outputs (the ops
    ``structural_diff`` leaves aside: neither the source's nor the converter's)."""
    from workbench.models.tflite_graph import read_tflite
    graph = read_tflite(int8)
    inputs, outputs = set(graph.inputs), set(graph.outputs)
    return {op.index for op in graph.ops if op.type in ("QUANTIZE", "DEQUANTIZE")
            and (any(i in inputs for i in op.inputs) or any(o in outputs for o in op.outputs))}


def source_only(placed: list[tuple[int, str, bool]], added: dict[str, int], edges: set[int]) -> tuple[int, int]:
    """(NPU ops, ops) of the source graph's own ops: the placement ``placed`` ((index, type, on NPU)
    per op) without the edge ops and without ``added[type]`` ops of each type, its CPU-placed ops first
    (the worst case for "the INT8 share is at least the source-only share")."""
    kept = [(t, npu) for i, t, npu in placed if i not in edges]
    for typ, n in added.items():
        if typ == "grouped CONV_2D":        # a kind of CONV_2D, not an op type of its own
            continue
        of_type = sorted((k for k, (t, _) in enumerate(kept) if t == typ), key=lambda k: kept[k][1])
        drop = set(of_type[:n])             # False (CPU) sorts first
        kept = [op for k, op in enumerate(kept) if k not in drop]
    return sum(1 for _, npu in kept if npu), len(kept)


def share_row(rep, added: dict[str, int], edges: set[int]) -> dict:
    """NPU share as placed vs the source graph's own ops' share, for one placement report."""
    placed = [(o.index, o.type, o.placement == "NPU") for o in rep.ops]
    row: dict = {}
    if rep.compiler_crash:                  # the BSP's Vela crashed: the other Vela's placement beside it
        row["crash"] = f"Vela {rep.compiler_crash['version']} crashes"
        other = [r for r in rep.compiler_runs if not r.bsp_compiler]
        if other:
            cpu = set(other[0].cpu_ops)
            row["other"] = f"Vela {other[0].version}"
            placed = [(i, t, i not in cpu) for i, t, _ in placed]
        else:
            return row
    from workbench.models.structure import LAYOUT_OPS
    npu = sum(1 for _, _, on in placed if on)
    share = npu / len(placed)
    row.update(npu=npu, ops=len(placed), share=share)
    for key, left_out in (("src", added), ("lay", {k: v for k, v in added.items() if k in LAYOUT_OPS})):
        src_npu, src_total = source_only(placed, left_out, edges)
        src_share = src_npu / src_total if src_total else float("nan")
        row.update({f"{key}_npu": src_npu, f"{key}_ops": src_total, f"{key}_share": src_share,
                    f"{key}_ok": share >= src_share - 1e-12})
    row["ok"] = row["src_ok"] and row["lay_ok"]
    row["why"] = why_cpu(rep, added, {i for i, _, on in placed if not on})
    return row


def why_cpu(rep, added: dict[str, int], cpu: set[int]) -> list[str]:
    """Per op type the structural diff lists as added: how many of its ops are on the CPU, the rules that put
    them there and each rule's source in the target table (a compiler's own reason: its detail instead)."""
    from workbench.targets import get_target
    table = get_target(rep.target)
    by_type: dict[str, tuple[list[int], dict[str, None]]] = {}
    for o in rep.ops:
        if o.index not in cpu or o.type not in added:
            continue
        indices, rules = by_type.setdefault(o.type, ([], {}))
        indices.append(o.index)
        for r in o.reasons:
            try:
                rules[f"{r.constraint} [{table.constraint(r.constraint).source}]"] = None
            except KeyError:                # a compiler's own reason: its first words, without tensor names
                detail = re.sub(rf"^{o.type} #\d+: ", "", r.detail).split(" Tensor '")[0].split(" Op has")[0]
                rules[f"{r.constraint}: {detail[:90]}"] = None
        if not o.reasons:
            rules[f"placed on the CPU by {rep.authority}"] = None
    return [f"{t} x{len(ix)} on the CPU (#{', #'.join(map(str, ix))}; {added[t]} more in INT8 than in the source): "
            + "; ".join(rules) for t, (ix, rules) in by_type.items()]


def fmt_share(name: str, route: str, target: str, s: dict) -> str:
    if "npu" not in s:
        return f"  share {name} {route} {target}: {s.get('crash', '?')} (no placement to compare)"
    head = f"{s['crash']}; {s['other']}: " if "crash" in s else ""
    return (f"  share {name} {route} {target}: {head}{s['npu']}/{s['ops']} = {s['share']:.3f}  "
            f"source-only {s['src_npu']}/{s['src_ops']} = {s['src_share']:.3f} "
            f"{'>=' if s['src_ok'] else '<'}  layout-added-only {s['lay_npu']}/{s['lay_ops']} = "
            f"{s['lay_share']:.3f} {'>=' if s['lay_ok'] else '<'}  {'ok' if s['ok'] else 'FAILS'}"
            + "".join(f"\n    why: {w}" for w in s.get("why", ())))


def fmt_row(route: str, r: dict) -> str:
    tg = "  ".join(f"{t} {v[0]}/{v[1]} isl {v[2]}" if isinstance(v[0], int) else f"{t} {v[0]}"
                   for t, v in r["targets"].items())
    dw = r["depthwise"] or {}
    return (f"  {route:<6} {r['seconds']:6.1f} s  ops {r['source_ops']}->{r['int8_ops']}  "
            f"+TRANSPOSE {r['transposes_added']}  depthwise {dw.get('int8', '?')}/{dw.get('source', '?')}  {tg}  "
            f"SQNR {', '.join(f'{v:.2f}' for v in r['sqnr'])} dB"
            + "".join(f"  {t} Vela estimate {ms:.4f} ms" for t, ms in r.get("estimates", {}).items()))


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
    checks: list[bool] = []
    crashes: list[str] = []
    failing: list[str] = []
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
                    old = measure(name, src, fmt, before, x_test, ref, seconds)
                    print(fmt_row("before", old), flush=True)
                    for target, share in old["shares"].items():
                        print(fmt_share(name, "before", target, share), flush=True)
                except Exception as exc:  # noqa: BLE001 - the old route failing is a result
                    print(f"  before failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            start = time.perf_counter()
            q = quantize(src, "a8w8_pc", calib_px, cache=not args.fresh)
            now = measure(name, src, fmt, Path(q.path), x_test, ref, time.perf_counter() - start)
            print(fmt_row("now", now), flush=True)
            print(f"  added ops (structural diff): {now['added']}  edge QUANTIZE/DEQUANTIZE: "
                  f"{len(edge_ops(Path(q.path)))}", flush=True)
            for target, share in now["shares"].items():
                print(fmt_share(name, "now", target, share), flush=True)
                if "ok" in share:
                    checks.append(share["ok"])
                    if not share["ok"]:
                        failing.append(f"{name} {target}")
                if "crash" in share:
                    crashes.append(f"{name} {target}: {share['crash']}"
                                   + (f", compared on {share['other']}" if "other" in share else ", not compared"))
        total_t += now["transposes_added"] or 0
        dw = now["depthwise"] or {}
        dw_k += min(dw.get("int8", 0), dw.get("source", 0))
        dw_m += dw.get("source", 0)
        imx95 = now["targets"]["imx95"]
        if isinstance(imx95[0], int):
            shares.append(imx95[0] / imx95[1])
    print(f"share_at_least_source_only={sum(checks)}/{len(checks)} (model x target, now"
          + "".join(f"; {c}" for c in crashes) + (f"; below: {', '.join(failing)}" if failing else "") + ")")
    print(f"added_transposes={total_t} depthwise_kept={dw_k}/{dw_m} "
          f"npu_share_imx95={min(shares) if shares else float('nan'):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
