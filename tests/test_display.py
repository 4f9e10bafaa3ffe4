"""Report vocabulary: one line per warning in a notebook, A16W8 labels, the drop with its CI and noise."""

from __future__ import annotations

import subprocess
import sys
import warnings

import matplotlib

matplotlib.use("Agg")


def test_a_workbench_warning_formats_as_one_clean_line():
    from workbench.display import compact_warning_format
    from workbench.errors import WorkbenchWarning
    line = compact_warning_format("small calibration set:\n  60 samples", WorkbenchWarning,
                                  "/tmp/ipykernel_123/456.py", 1, "cal = wb.curate_calibration_set(...)")
    assert line == "WorkbenchWarning: small calibration set: 60 samples\n"
    other = compact_warning_format("old", DeprecationWarning, "x.py", 3, "y = 1")
    assert "x.py:3" in other                       # Python's own format for everything else


def test_import_in_an_ipython_kernel_installs_the_compact_format():
    """A real IPython shell: ``import workbench`` there makes a warning print as one line."""
    code = ("from IPython.testing.globalipapp import start_ipython\n"
            "ip = start_ipython()\n"
            "import warnings, workbench\n"
            "from workbench.errors import WorkbenchWarning\n"
            "warnings.warn('two\\nlines', WorkbenchWarning)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "WorkbenchWarning: two lines" in proc.stderr
    assert "warnings.warn(" not in proc.stderr and ".py:5" not in proc.stderr, proc.stderr


def test_outside_ipython_warnings_keep_pythons_format():
    import workbench  # noqa: F401
    from workbench.display import compact_warning_format
    assert warnings.formatwarning is not compact_warning_format


def test_quantized_label_and_drop_text():
    from workbench.display import DROP_CONVENTION, drop_text, quantized_label
    assert quantized_label("a16w8_pc") == "A16W8"
    assert quantized_label("a8w8_pt") == quantized_label(None) == "INT8"
    assert drop_text(1.2, -0.5, 2.9) == "+1.20 [-0.50, +2.90] (within noise)"
    assert drop_text(4.0, 1.5, 6.0) == "+4.00 [+1.50, +6.00]"
    assert drop_text(None) == "-"
    assert "FP32 - quantized" in DROP_CONVENTION and "positive = quantized worse" in DROP_CONVENTION


def test_run_summary_states_the_convention_cis_noise_and_a16w8():
    from workbench.runs import ConditionAccuracy, RunSummary, TargetSummary
    rows = (ConditionAccuracy("daylight", 100, 0.95, 0.94, 1.0, 0.9, 0.98, 0.99, -0.5, 2.5),
            ConditionAccuracy("low-light", 100, 0.90, 0.80, 10.0, 0.7, 0.88, 0.9, 5.0, 15.0))
    noisy = TargetSummary(target="imx95", status="ok", recipe="a16w8_pc", accuracy=rows[:1])
    real = TargetSummary(target="imx93", status="ok", recipe="a8w8_pc", accuracy=rows)
    assert "within noise" in noisy.summary() and "within noise" not in real.summary()
    html = RunSummary(run_id="t", targets=(noisy, real))._repr_html_()
    assert "drop = FP32 - quantized" in html and "positive = quantized worse" in html
    assert "+1.00 [-0.50, +2.50] (within noise)" in html and "+10.00 [+5.00, +15.00]" in html
    assert "94.00% (A16W8)" in html and "80.00% (INT8)" in html
