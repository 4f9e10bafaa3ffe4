"""Every zoo model (tests/zoo/fetch.py) through every stage: `workbench batch` on imx8mp, imx93 and imx95.

Each test then checks the tool's per-output fidelity (SQNR of the INT8 model against the FP32 one,
per condition) against a plain loop written here: its own image reading and preprocessing from
the card's numbers, ONNX Runtime or the LiteRT interpreter, its own INT8 input quantization, its
own mapping of the converted model's NHWC outputs back to the source model's layout. They must
agree within 0.5 dB on every output and condition.

The two fast models (``heatnet``, ``ppocr-cls``) run in ``make test``; the others are also marked
``heavy`` (``make test-zoo`` runs all). The batch uses a cache folder kept beside the zoo
(``<zoo>/workbench-cache``: content-keyed conversions and quantizations), so a second run does
not convert again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

TARGETS = ("imx8mp", "imx93", "imx95")
TOLERANCE_DB = 0.5

MODELS = [pytest.param("heatnet", marks=[pytest.mark.zoo, pytest.mark.slow]),
          pytest.param("ppocr-cls", marks=[pytest.mark.zoo, pytest.mark.slow]),
          pytest.param("ppocr-det", marks=[pytest.mark.zoo, pytest.mark.heavy]),
          pytest.param("blazeface", marks=[pytest.mark.zoo, pytest.mark.heavy]),
          pytest.param("onet", marks=[pytest.mark.zoo, pytest.mark.heavy])]


# -- the plain loop -----------------------------------------------------------------------------
def _images(folder: Path) -> tuple[np.ndarray, list[str]]:
    from PIL import Image
    files = sorted(p for p in folder.rglob("*.png"))
    return np.stack([np.asarray(Image.open(p).convert("RGB")) for p in files]), [p.name for p in files]


def _preprocess(pixels: np.ndarray, card: dict) -> np.ndarray:
    """uint8 RGB NHWC -> the model's float input, NHWC (the caller transposes for NCHW)."""
    x = pixels.astype(np.float32) / np.float32(255.0)
    if card["color"] == "bgr":
        x = x[..., ::-1]
    if "range" in card:
        low, high = card["range"]
        return (x * np.float32(high - low) + np.float32(low)).astype(np.float32)
    scale = float(card.get("pixel_max", 1))
    mean, std = np.asarray(card["mean"], np.float32), np.asarray(card["std"], np.float32)
    return ((x * np.float32(scale) - mean) / std).astype(np.float32)


def _fp32_outputs(path: Path, x_nhwc: np.ndarray, card: dict) -> tuple[list[str], list[np.ndarray]]:
    if path.suffix == ".onnx":
        import onnxruntime as ort
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        x = x_nhwc.transpose(0, 3, 1, 2) if card["layout"] == "NCHW" else x_nhwc
        runs = [session.run(None, {name: np.ascontiguousarray(x[i:i + 1])}) for i in range(len(x))]
        return [o.name for o in session.get_outputs()], [np.concatenate(r) for r in zip(*runs)]
    return _tflite_outputs(path, x_nhwc)


def _tflite_outputs(path: Path, x_nhwc: np.ndarray) -> tuple[list[str], list[np.ndarray]]:
    from ai_edge_litert.interpreter import Interpreter
    interp = Interpreter(model_path=str(path))        # LiteRT's default runtime, as a user runs it
    interp.allocate_tensors()
    inp, outs = interp.get_input_details()[0], interp.get_output_details()
    results: list[list[np.ndarray]] = [[] for _ in outs]
    for i in range(len(x_nhwc)):
        x = x_nhwc[i:i + 1]
        scale, zero = inp["quantization"]
        if np.dtype(inp["dtype"]) != np.float32:
            info = np.iinfo(inp["dtype"])
            v = x / np.float32(scale)                       # TFLite's QUANTIZE: round half away from zero
            x = np.clip(np.trunc(v + np.copysign(np.float32(0.5), v)) + zero, info.min, info.max).astype(inp["dtype"])
        interp.set_tensor(inp["index"], x)
        interp.invoke()
        for k, o in enumerate(outs):
            y = interp.get_tensor(o["index"])
            s, z = o["quantization"]
            results[k].append((y.astype(np.float32) - z) * np.float32(s) if np.dtype(o["dtype"]) != np.float32
                              else y.astype(np.float32))
    return [o["name"] for o in outs], [np.concatenate(r) for r in results]


def _to_source_layout(fp32: list[np.ndarray], int8: list[np.ndarray]) -> list[np.ndarray]:
    """The INT8 model's outputs, in the FP32 model's order and layout: matched by number of values
    (unique in the zoo), a channels-first output [C, H, W] being the converted [H, W, C]."""
    out = []
    for ref in fp32:
        size = int(np.prod(ref.shape[1:]))
        match = [y for y in int8 if int(np.prod(y.shape[1:])) == size]
        assert len(match) == 1, f"no unique INT8 output with {size} values: {[y.shape for y in int8]}"
        y = match[0]
        if y.shape != ref.shape and y.ndim == 4:          # NHWC -> NCHW
            y = y.transpose(0, 3, 1, 2)
        assert y.shape == ref.shape, (y.shape, ref.shape)
        out.append(y)
    return out


def _sqnr(ref: np.ndarray, got: np.ndarray) -> float:
    ref, got = ref.astype(np.float64), got.astype(np.float64)
    noise = float(((ref - got) ** 2).sum())
    return 200.0 if noise == 0 else min(200.0, 10 * np.log10(float((ref ** 2).sum()) / noise))


# -- the test -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_zoo_model_through_the_batch_on_every_target(name, tmp_path):
    import yaml

    from tests.zoo.fetch import fetch, zoo_dir
    from workbench.runs import RunFolder

    entry = fetch(name)
    card = yaml.safe_load(entry.card.read_text())
    out = tmp_path / "out"
    env = {**os.environ, "NPU_WORKBENCH_CACHE": str(zoo_dir() / "workbench-cache")}
    cmd = [sys.executable, "-m", "workbench", "batch", "--model", str(entry.model), "--data", str(entry.data),
           "--targets", ",".join(TARGETS), "--out", str(out), "--run-id", "zoo", "--calibration-size", "24",
           "--timing-runs", "3", "--timing-warmup", "1", "--jobs", "2", "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    log = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert (out / "index.html").is_file(), log
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run_id"] == "zoo"
    checked = 0
    for target in TARGETS:
        status = summary["targets"][target]
        if name == "onet" and status.get("failed_stage") == "20_quantize":
            # the other way out: quantize refuses an INT8 model that ignores its input, naming why
            assert "input" in (status.get("error") or ""), status
            continue
        assert status["status"] == "ok", (target, status.get("failed_stage"), status.get("error"), log)
        run = RunFolder(out / "runs" / "zoo", target=target, model=str(entry.model), dataset=str(entry.data))
        acc = run.load("accuracy")
        assert acc is not None and acc.fidelity, f"{target}: no fidelity rows"
        candidate = acc.candidates[0]
        int8_path = Path(acc.model_paths[candidate])
        int8_path = int8_path if int8_path.is_absolute() else out / int8_path
        fp32_names = None
        for condition in acc.conditions:
            pixels, _ = _images(entry.data / "test" / condition)
            x = _preprocess(pixels, card)
            fp32_names, fp32 = _fp32_outputs(entry.model, x, card)
            _, int8 = _tflite_outputs(int8_path, x)
            int8 = _to_source_layout(fp32, int8)
            if name == "onet":     # the INT8 ONet must follow its input (the issue: one vector for every image)
                assert max(float(np.ptp(y, axis=0).max()) for y in int8) > 0, f"{target}: INT8 ONet ignores its input"
            rows = {r.output_index: r for r in acc.fidelity if r.condition == condition and r.model == candidate}
            assert sorted(rows) == list(range(len(fp32))), (target, condition, sorted(rows))
            for k, (ref, got) in enumerate(zip(fp32, int8)):
                mine, tool = _sqnr(ref, got), rows[k].sqnr_db
                assert tool is not None and abs(tool - mine) <= TOLERANCE_DB, (
                    f"{name} {target} {condition} output {rows[k].output!r}: the tool says SQNR {tool} dB, "
                    f"the plain loop {mine:.2f} dB")
                checked += 1
        # outputs carry the card's names, else the source model's own (never output_<k>)
        want = [o["name"] for o in card.get("outputs", [])] or fp32_names
        assert [r.output for r in acc.fidelity if r.condition == acc.conditions[0]] == want
        placement = run.load("placement")
        assert placement is not None and placement.target == target
    assert checked > 0
    index = (out / "index.html").read_text()
    assert "zoo" in index
    if card["task"] != "classification":   # no task metric: the index and summary show worst SQNR per target
        assert "worst SQNR" in index
