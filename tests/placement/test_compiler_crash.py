"""One target's compiler crash stays on that target (issue 28, deliverable 8)."""

from __future__ import annotations

import pytest

from workbench.placement.vela import VelaCrash

TAIL = """Traceback (most recent call last):
  File "/env/bin/vela", line 8, in <module>
  File "/env/lib/python3.11/site-packages/ethosu/vela/vela.py", line 590, in main
  File "/env/lib/python3.11/site-packages/ethosu/vela/graph_optimiser_util.py", line 211, in rewrite_graph
  File "/env/lib/python3.11/site-packages/ethosu/vela/tflite_graph_optimiser.py", line 1802, in visit_op
AssertionError"""


def test_the_crash_reason_names_the_exception_and_the_compiler_passes():
    crash = VelaCrash("failed", version="3.10.0", returncode=1, tail=TAIL)
    assert crash.reason == "AssertionError (in main > rewrite_graph > visit_op)"


@pytest.mark.zoo
@pytest.mark.slow
def test_blazeface_vela_3_10_crash_is_the_imx93_result_and_other_targets_are_placed(tmp_path):
    """MediaPipe BlazeFace quantized by the workbench: Vela 3.10.0 (lf-6.6.3_1.0.0's) asserts inside its graph
    rewrite.  imx93's report is every op on the CPU with Vela 5.x's placement beside it and a
    placement.compiler-crash finding; imx8mp and imx95 are placed."""
    import warnings

    import numpy as np

    from tests.zoo.fetch import fetch
    from workbench.data.loaders import load_dataset
    from workbench.placement.analyze import analyze_placement
    from workbench.placement.findings import findings
    from workbench.quantize.engine import quantize
    zoo = fetch("blazeface")
    data = load_dataset(zoo.data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = quantize(zoo.model, "a8w8_pc", data.select(split="calibration"), dataset=data)
    reports = {t: analyze_placement(q.path, t) for t in ("imx8mp", "imx93", "imx95")}
    imx93 = reports["imx93"]
    if imx93.compiler_crash is None:
        pytest.skip("Vela 3.10.0 compiled this BlazeFace INT8 file (the crash is gone)")
    assert imx93.npu_ops == 0 and imx93.compiler_crash["version"] == "3.10.0"
    assert "AssertionError" in imx93.compiler_crash["reason"]
    assert imx93.compiler_crash.get("other_npu_ops", 0) > 0 and len(imx93.compiler_runs) == 2
    found = [f for f in findings(imx93) if f.code == "placement.compiler-crash"]
    assert len(found) == 1 and "--bsp" in found[0].next_step
    assert reports["imx8mp"].npu_ops > 0 and reports["imx95"].ops
    assert np.isfinite(reports["imx8mp"].npu_share)
