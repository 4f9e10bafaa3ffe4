"""TensorFlow's import overlaps onnx2tf's conversion (benchmarks/bench_zoo.py: the workbench's overhead).

``preload_tensorflow`` starts the import in a thread; ``_tf`` waits for that thread, so two threads are never
inside TensorFlow's import at once, and a second preload does nothing.  Run in a fresh interpreter (this
one may have imported TensorFlow already)."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import sys, threading
from workbench.quantize import tflite_backend as tb
assert "tensorflow" not in sys.modules
tb.preload_tensorflow()
started = [t for t in threading.enumerate() if t.name == "workbench-preload-tensorflow"]
assert len(started) == 1 and tb._PRELOAD == started, (started, tb._PRELOAD)
tb.preload_tensorflow()                       # already under way: no second thread
assert len([t for t in threading.enumerate() if t.name == "workbench-preload-tensorflow"]) <= 1
tf = tb._tf()
assert not started[0].is_alive() and tb._PRELOAD == []
assert tf is sys.modules["tensorflow"] and hasattr(tf, "lite")
tb.preload_tensorflow()                       # imported: nothing to start
assert tb._PRELOAD == []
print("ok")
"""


@pytest.mark.slow
def test_preload_imports_tensorflow_in_a_thread_that_tf_waits_for():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
