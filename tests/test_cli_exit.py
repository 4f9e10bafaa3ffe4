"""A command run as its own process (``workbench ...``, ``python -m workbench ...``) ends without the interpreter's
teardown of what it loaded (TensorFlow's: seconds), and loses nothing by it: its output, its exit code, the
exit handlers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _as_process(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    marker = tmp_path / "handler.txt"
    script = textwrap.dedent(f"""
        import atexit, sys
        atexit.register(lambda: open({str(marker)!r}, "w").write("ran"))
        sys.argv = ["workbench", *{list(args)!r}]
        from workbench.cli import main
        code = main()
        print("main returned", code)                # only when the process did not end in main
        sys.exit(code)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NPU_WORKBENCH_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    return proc, marker.read_text() if marker.exists() else ""


def test_the_command_process_ends_in_main_with_its_output_code_and_exit_handlers(tmp_path):
    proc, handler = _as_process(tmp_path, "tools", "list")
    assert proc.returncode == 0, proc.stderr
    assert "onnx2tf" in proc.stdout and "vela-3.10.0" in proc.stdout      # written, flushed through the pipe
    assert "main returned" not in proc.stdout                            # the process ended in main
    assert handler == "ran"
    proc, handler = _as_process(tmp_path, "quantize", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "out"))
    assert proc.returncode == 2 and "missing.onnx" in proc.stderr and "does not exist" in proc.stderr
    assert "main returned" not in proc.stdout and handler == "ran"


def test_called_with_arguments_main_returns(tmp_path, monkeypatch, capsys):
    from workbench.cli import main
    monkeypatch.setenv("NPU_WORKBENCH_CACHE", str(tmp_path))
    assert main(["tools", "list"]) == 0          # in-process callers (docs, tests, notebooks) get the code back
    assert "onnx2tf" in capsys.readouterr().out
