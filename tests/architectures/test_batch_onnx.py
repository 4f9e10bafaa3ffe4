"""`workbench batch --model <ONNX exported from PyTorch> --data <folder dataset>` on all three targets.

The issue's "done when": every stage runs and each target's report shows the placement of the INT8
TFLite converted from the ONNX model (onnx2tf, NCHW->NHWC).  The model is a small CNN trained here
with PyTorch (test-only dependency) on a folder dataset written here; nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.runs import RunFolder

TARGETS = ("imx8mp", "imx93", "imx95")


@pytest.fixture(scope="session")
def torch_onnx(tmp_path_factory):
    from tests.architectures.torch_fixture import train_and_export, write_folder_dataset
    root = tmp_path_factory.mktemp("torch")
    return train_and_export(root / "model.onnx"), write_folder_dataset(root / "data")


@pytest.mark.slow
def test_batch_on_an_onnx_model_from_pytorch(torch_onnx, tmp_path):
    model, data = torch_onnx
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "workbench", "batch", "--model", str(model), "--data", str(data),
           "--targets", ",".join(TARGETS), "--out", str(out), "--run-id", "onnx", "--calibration-size", "60",
           "--timing-runs", "5", "--timing-warmup", "2", "--jobs", "1", "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ), timeout=3000)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for target in TARGETS:
        run = RunFolder(out / "runs" / "onnx", target=target, model=str(model), dataset=str(data))
        q = run.load("quantize")
        assert q.format == "tflite" and q.source_sha256 and q.full_integer
        assert q.conversion["tool"] == "onnx2tf" and q.conversion["transposed_inputs"] == ["image"]
        assert q.input_quantization.shape == (1, 32, 32, 3)
        manifest = json.loads(Path(q.manifest_path).read_text()) if Path(q.manifest_path).is_absolute() \
            else json.loads((out / q.manifest_path).read_text())
        assert manifest["toolchain"]["onnx2tf"] == "1.29.24"
        placement = run.load("placement")
        assert placement.target == target and placement.npu_ops > 0
        assert Path(placement.model).name == "model.tflite"
        acc = run.load("accuracy")
        fp32 = [r for r in acc.rows if r.model == acc.reference]
        assert fp32 and min(r.accuracy for r in fp32) > 0.8, acc.summary()   # the ONNX FP32 baseline
        html = (out / target / "40_op_placement.html").read_text()
        assert "model.tflite" in html and target in html
