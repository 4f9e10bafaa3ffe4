"""The batch's console: library noise (also from C code writing to fd 2) goes to the log file."""

from __future__ import annotations

import logging
import os
import sys

from workbench.batch.console import Console, quiet
from workbench.batch.execute import StageRun


def test_quiet_sends_fd_level_and_python_output_to_the_log(tmp_path, capfd):
    log = tmp_path / "runs" / "x" / "batch.log"
    logger = logging.getLogger("test-console-nbconvert")          # a handler made before the batch starts
    logger.addHandler(logging.StreamHandler(sys.__stderr__))
    with quiet(log) as terminal:
        os.write(2, b"I0000 cpu_feature_guard.cc: This TensorFlow binary is optimized\n")   # as C++ does
        os.write(1, b"Kernel is running over TCP without encryption\n")
        print("a print from a library")
        logger.warning("Alternative text is missing on 1 image(s)")
        sys.stderr.write("absl says hello\n")
        Console(terminal).line("[imx8mp] 10_calibration_set  ok  1.0 s")
    out, err = capfd.readouterr()
    text = log.read_text()
    for noise in ("TensorFlow binary", "TCP without encryption", "a print from a library", "Alternative text",
                  "absl says hello"):
        assert noise in text and noise not in out + err
    assert err == "[imx8mp] 10_calibration_set  ok  1.0 s\n" and out == ""
    print("after")                                     # restored
    assert capfd.readouterr().out == "after\n"


def test_quiet_restores_the_descriptors_after_an_error(tmp_path, capfd):
    try:
        with quiet(tmp_path / "b.log"):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    os.write(2, b"visible\n")
    assert capfd.readouterr().err == "visible\n"


def test_console_lines_per_stage(capsys):
    console = Console(sys.stdout, width=6)
    run = dict(target="imx93", notebook="n", html="h", shared_html="s")
    console.stage(StageRun(stage="20_quantize", status="ok", seconds=3.25, **run))
    console.stage(StageRun(stage="30_accuracy_by_condition", status="ok", seconds=0.0, reused=True, **run))
    console.stage(StageRun(stage="40_op_placement", status="failed", seconds=1.0,
                           error="PlacementError: CONV_2D #3 has stride 4x4\nmore lines", **run))
    Console(sys.stdout, enabled=False).line("never shown")
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["[imx93 ] 20_quantize                ok        3.2 s",
                     "[imx93 ] 30_accuracy_by_condition   reused    (inputs unchanged)",
                     "[imx93 ] 40_op_placement            FAILED    PlacementError: CONV_2D #3 has stride 4x4"]
