"""Stage commands are quiet: what libraries write to standard error goes to a log, each workbench warning once."""

from __future__ import annotations

import os
import sys
import warnings

from workbench._cli import quiet_libraries
from workbench.errors import WorkbenchWarning


def test_library_output_goes_to_the_log_and_each_workbench_warning_shows_once(capfd, monkeypatch, tmp_path):
    monkeypatch.setenv("NPU_WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.delenv("WORKBENCH_VERBOSE", raising=False)
    monkeypatch.setattr(sys, "stderr", sys.__stderr__)        # as in a terminal (capfd captures descriptor 2)
    with quiet_libraries("quantize") as log:
        os.write(2, b"fully_quantize: 0, inference_type: 6, input_inference_type: INT8\n")   # C++ code's way
        print("I0000 absl line", file=sys.stderr)
        for _ in range(2):
            warnings.warn("calibration set is small", WorkbenchWarning, stacklevel=1)
        warnings.warn("some library deprecation", DeprecationWarning, stacklevel=1)
        print("the result", flush=True)
    out, err = capfd.readouterr()
    assert out == "the result\n"
    assert err == "warning: calibration set is small\n"
    text = log.read_text()
    assert "fully_quantize" in text and "I0000 absl line" in text and "some library deprecation" in text


def test_batch_and_verbose_keep_the_terminal(monkeypatch, tmp_path):
    monkeypatch.setenv("NPU_WORKBENCH_CACHE", str(tmp_path))
    with quiet_libraries("batch") as log:
        assert log is None
    monkeypatch.setenv("WORKBENCH_VERBOSE", "1")
    with quiet_libraries("quantize") as log:
        assert log is None
