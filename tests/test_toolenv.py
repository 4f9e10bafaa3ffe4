"""Pinned tool environments: created from an exact lock, never half-used, found again without work."""

from __future__ import annotations

import subprocess

import pytest

from workbench import toolenv
from workbench.errors import ToolError

TINY = toolenv.ToolSpec(name="tiny", summary="a test tool: `six` pinned", requirements=("six==1.17.0",),
                        report=("six",), check=("python", "-c", "import six"))


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    monkeypatch.setenv("NPU_WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("NPU_WORKBENCH_TOOLS", raising=False)
    monkeypatch.setitem(toolenv.TOOLS, "tiny", TINY)
    return TINY


def test_requirements_must_be_pinned():
    with pytest.raises(ValueError, match="must be pinned with =="):
        toolenv.ToolSpec("loose", "x", ("six>=1",), ("six",), ("python", "-V"))


def test_unknown_tool_names_the_known_ones():
    with pytest.raises(ToolError, match=r"`tool` must be one of 'onnx2tf', 'vela-3.10.0'.*Got 'vela-9'"):
        toolenv.spec("vela-9")


def test_lock_sha_changes_with_the_lock():
    other = toolenv.ToolSpec("tiny", "x", ("six==1.16.0",), ("six",), ("python", "-V"))
    assert other.lock_sha256 != TINY.lock_sha256
    assert TINY.lock_text == "six==1.17.0\n"


def test_ensure_installs_once_and_redoes_an_interrupted_install(tiny):
    assert toolenv.find("tiny") is None
    env = toolenv.ensure("tiny")
    assert env.versions == {"six": "1.17.0"}
    assert env.root.name == f"tiny-{tiny.lock_sha256[:12]}"
    assert (env.root / "lock.txt").read_text() == "six==1.17.0\n"
    marker = env.root / ".complete"
    stamp = marker.stat().st_mtime_ns
    again = toolenv.ensure("tiny")                     # a folder look-up, no reinstall
    assert again == env and marker.stat().st_mtime_ns == stamp
    # the tool's python is the environment's own, with the pinned package and not ours
    out = env.run(["python", "-c", "import six, sys; print(six.__version__, sys.prefix)"], check=True)
    assert out.stdout.split() == ["1.17.0", str(env.root)]
    assert env.run(["python", "-c", "import workbench"], cwd=env.root).returncode != 0
    # an install that never completed is not trusted: it is removed and redone
    marker.unlink()
    (env.root / "half-written").write_text("x")
    assert toolenv.find("tiny") is None
    redone = toolenv.ensure("tiny")
    assert redone.versions == {"six": "1.17.0"} and not (redone.root / "half-written").exists()


def test_run_time_out_and_failure_are_tool_errors(tiny):
    env = toolenv.ensure("tiny")
    with pytest.raises(ToolError, match=r"tiny: `python -c .*` did not finish within 0.5 s"):
        env.run(["python", "-c", "import time; time.sleep(5)"], timeout=0.5)
    with pytest.raises(ToolError, match="exited with 3"):
        env.run(["python", "-c", "import sys; sys.exit(3)"], check=True)


def test_cli_install_rejects_unknown_names_before_installing(tmp_path):
    proc = subprocess.run(["workbench", "tools", "install", "vela-3.10.0", "nope"], capture_output=True,
                          text=True, env={"NPU_WORKBENCH_CACHE": str(tmp_path), "PATH": _path()})  # no NPU_WORKBENCH_TOOLS
    assert proc.returncode == 2
    assert "Got 'nope' instead" in proc.stderr
    assert not any(tmp_path.glob("tools/vela-*"))


def test_the_bsp_vela_runs_from_its_environment():
    """`make test` installs the tools first; this is the real Vela 3.10.0 from the package index."""
    env = toolenv.ensure("vela-3.10.0")
    assert env.versions["ethos-u-vela"] == "3.10.0"
    assert env.run(["vela", "--version"], check=True).stdout.strip() == "3.10.0"


def _path() -> str:
    import os
    import sys
    return os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
