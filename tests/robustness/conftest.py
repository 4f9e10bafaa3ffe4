"""Shared helpers of the robustness catalogue.

Every case runs the real ``workbench`` command (in-process through
``workbench.cli.main`` when that is enough, in a subprocess when the case needs
a signal, a closed pipe or a resource limit) and asserts three things: the
message, the exit code, and that nothing that existed before was lost or
trusted.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


def run_cli(*args: str, cwd: str | os.PathLike | None = None) -> Outcome:
    """Run ``workbench ARGS`` in this process; argparse's own exits are caught too."""
    from workbench.cli import main
    out, err = io.StringIO(), io.StringIO()
    previous = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        os.chdir(previous)
    return Outcome(code, out.getvalue(), err.getvalue())


def run_subprocess(*args: str, cwd: str | os.PathLike | None = None, timeout: float = 300,
                   **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, **kwargs)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Relative name -> bytes of every regular file under ``folder`` (to prove nothing was lost)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture()
def precious(tmp_path) -> Path:
    """A folder of the user's own files that no command may delete or change."""
    folder = tmp_path / "precious"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("mine\n")
    (folder / "sub" / "data.bin").write_bytes(os.urandom(64))
    return folder


@pytest.fixture(scope="session")
def digits_npz(tmp_path_factory) -> Path:
    """The test split of the built-in dataset as an .npz (x float32, y int)."""
    out = tmp_path_factory.mktemp("npz") / "digits_test.npz"
    code = run_cli("data", "export", "--split", "test", "-o", out).code
    assert code == 0
    return out
