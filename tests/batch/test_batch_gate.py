"""``workbench batch --gate FILE`` end to end: the run keeps its gate (``<run>/gate.json``) and the gate's
verdict reaches summary.json and ``workbench findings`` of the ``--out`` folder.

Reuses the session batch (``batch``): a copy of its folder, one more CLI batch on imx8mp's placement stage (the
accuracy of the session run stays). The session batch's imx8mp INT8 model loses 0.9 pp on low-light (95% CI
[0.19, ...] pp): under the default 1 pp that is no finding; under a gate of 0.1 pp on low-light (0.5 pp
elsewhere) it is a warning, and the gate fails on low-light only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from workbench.evaluate.gate import Gate
from workbench.run_findings import RUN_GATE_FILE

from .conftest import SMALL


def _findings(out, cwd):
    proc = subprocess.run([sys.executable, "-m", "workbench", "findings", str(out), "--json"],
                          capture_output=True, text=True, timeout=300, cwd=cwd)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)


def _found(data):
    return {(f["code"], f["target"], f["severity"], f["message"]) for f in data["findings"]}


def test_a_batch_gate_is_kept_in_the_run_and_judges_every_view(batch, batch_out, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(batch_out, out)
    run = out / "runs" / "session"
    (run / RUN_GATE_FILE).unlink(missing_ok=True)              # another test's gate (latency, no drop limit)
    low = json.loads((run / "imx8mp" / "accuracy.json").read_text())
    row = next(r for r in low["result"]["rows"] if r["condition"] == "low-light" and r["model"] != "fp32")
    assert 0.1 < row["drop_ci_low"] and row["drop_pp"] < 1.0, row    # the premise: a drop only a tight gate sees

    # without a gate: 1 pp, no accuracy finding (asked from another folder than the batch's)
    before = _found(_findings(out, tmp_path))
    assert not [f for f in before if f[0] == "accuracy.drop"], before

    gate = tmp_path / "tight.yaml"
    gate.write_text("accuracy:\n  max_drop_pp: 0.5\n  per_condition:\n    low-light: 0.1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "batch", "--targets", "imx8mp", "--stages", "placement",
         "--out", str(out), "--run-id", "session", "--calibration-size", str(SMALL["calibration_size"]),
         "--timing-runs", str(SMALL["timing_runs"]), "--timing-warmup", str(SMALL["timing_warmup"]),
         "--gate", str(gate), "--no-progress"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "gate: imx8mp: accuracy drop under low-light" in proc.stdout, proc.stdout

    # 1. the run keeps the gate it was judged by
    saved = json.loads((run / RUN_GATE_FILE).read_text())
    assert Gate.from_dict(saved["gate"]).limits("low-light")[0] == 0.1
    assert Gate.from_dict(saved["gate"]).limits("motion-blur")[0] == 0.5

    # 2. summary.json: the gate failed on the drop, and the run's findings name the drop by the gate's limit
    summary = json.loads((out / "summary.json").read_text())
    assert summary["gate"]["passed"] is False and summary["exit_code"] == 1
    assert [(v["check"], v["condition"]) for v in summary["gate"]["violations"]] == [
        ("accuracy.max_drop_pp", "low-light")]
    (drop,) = [f for f in summary["targets"]["imx8mp"]["findings"] if f["code"] == "accuracy.drop"]
    assert drop["severity"] == "warning" and "low-light" in drop["message"] and "threshold 0.1 pp" in drop["message"]
    assert summary["findings"]["counts"].get("warning", 0) >= 1

    # 3. `workbench findings` of the --out folder, from another folder: what it said before, and the drop
    after = _found(_findings(out, tmp_path))
    assert after - before == {("accuracy.drop", "imx8mp", "warning", drop["message"])} and before <= after
