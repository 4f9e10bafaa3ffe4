"""Where and how a timing runs: :class:`TimingOptions` (runner, counts, delegate, timeouts) and the
session resolved from ``boards.yaml``, an SSH destination or this machine (step 1 of ``time_on_board``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from .._validation import check_choice, check_positive_int
from ..errors import BoardError
from ..vocab import HOST_CPU_LABEL, LatencySource, latency_label

HOST_CPU = HOST_CPU_LABEL


@dataclass(frozen=True)
class TimingOptions:
    """How to time (not where): runner, counts, delegate, board-side paths, timeouts.

    Validated at construction (the one place): counts are positive integers, timeouts
    finite and > 0 (``--timeout -5`` is refused, never turned into 5 s).
    """

    runner: str = "python"
    runs: int = 100
    warmup: int = 10
    threads: int | None = None
    delegate: str | None = None
    delegate_options: tuple[tuple[str, str], ...] = ()
    python: str | None = None
    benchmark_model: str | None = None
    workdir: str | None = None
    connect_timeout: float = 10.0
    command_timeout: float = 900.0
    seed: int = 0
    fingerprint: bool = True
    kernels: str | None = None          # python runner's CPU kernels (None: the board's `kernels:`, else default)

    def __post_init__(self) -> None:
        from .inventory import KERNEL_CHOICES
        from .runners import RUNNERS
        check_choice("runner", self.runner, RUNNERS, error=BoardError)
        if self.kernels is not None:
            check_choice("kernels", self.kernels, KERNEL_CHOICES, error=BoardError)
        check_positive_int("runs", self.runs, error=BoardError)
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise BoardError(f"`warmup` must be an integer >= 0. Got {self.warmup!r} instead.")
        if self.threads is not None:
            check_positive_int("threads", self.threads, error=BoardError)
        for name in ("connect_timeout", "command_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise BoardError(f"`{name}` must be a finite number of seconds > 0. Got {value!r} "
                                 "instead.")
        if isinstance(self.delegate_options, dict):
            object.__setattr__(self, "delegate_options",
                               tuple((str(k), str(v)) for k, v in self.delegate_options.items()))


@dataclass
class _Session:
    """Where a timing runs, resolved from the inventory or the arguments."""

    transport: Any
    where: str
    local: bool
    python: str
    workdir: str
    delegate: str | None
    benchmark_model: str | None
    board: str | None = None
    target: str | None = None
    destination: str | None = None
    kernels: str = "default"            # the python runner's CPU kernels on this board


def _open_session(*, board: str | None, boards_file: Any, host: str | None, ssh_config: Any,
                  known_hosts: Any, local: bool, options: TimingOptions) -> _Session:
    """Step 1: resolve where to time (inventory, destination or this machine) and check the
    delegate exists there."""
    from . import deploy as dep
    from .inventory import DEFAULT_PYTHON, DEFAULT_WORKDIR, TYPICAL_DELEGATE, get_board
    from .ssh import LocalTransport, SSHTransport

    delegate, python, kernels = options.delegate, options.python, options.kernels
    if local:
        import sys
        session = _Session(LocalTransport(command_timeout=options.command_timeout), HOST_CPU,
                           local=True, python=python or sys.executable, workdir="",
                           delegate=delegate, benchmark_model=None, kernels=kernels or "default")
    else:
        board_name = target = None
        workdir, binary = options.workdir, options.benchmark_model
        if board:
            b = get_board(board, boards_file)
            board_name, target, destination = b.name, b.target, b.destination
            delegate = delegate if delegate is not None else b.delegate
            python = python or b.python
            workdir = workdir or b.workdir
            binary = binary or b.benchmark_model
            ssh_config = ssh_config or b.ssh_config
            known_hosts = known_hosts or b.known_hosts
            kernels = kernels or b.kernels
        else:
            destination = str(host)
        transport = SSHTransport(destination, ssh_config=ssh_config, known_hosts=known_hosts,
                                 connect_timeout=options.connect_timeout,
                                 command_timeout=options.command_timeout,
                                 label=f"board {board_name} ({destination})" if board_name
                                 else destination)
        where = (f"board {board_name} ({target})" if board_name else f"{destination} over SSH")
        where += (f", delegate {os.path.basename(delegate)}" if delegate
                  else ", CPU only (no delegate)")
        session = _Session(transport, where, local=False, python=python or DEFAULT_PYTHON,
                           workdir=workdir or DEFAULT_WORKDIR, delegate=delegate,
                           benchmark_model=binary, board=board_name, target=target,
                           destination=destination, kernels=kernels or "default")
    if session.delegate:
        hint = "check `delegate:` in boards.yaml or --delegate"
        if session.target in TYPICAL_DELEGATE:
            hint += f" (usually {TYPICAL_DELEGATE[session.target]} on {session.target})"
        if session.local:
            if not os.path.isfile(session.delegate):
                raise BoardError(f"delegate library {session.delegate!r} does not exist on this "
                                 f"machine. Next: {hint}.")
        else:
            dep.check_remote_file(session.transport, session.delegate, what="delegate library",
                                  hint=hint)
    return session


def _session_label(session: _Session, raw: Any) -> str:
    if session.local:
        return HOST_CPU
    name = session.board or session.destination or "?"
    ignored = raw.log is not None and raw.log.ignored_delegate
    kernels = f", {session.kernels} kernels" if session.kernels != "default" else ""
    if session.delegate and not ignored:
        return latency_label(LatencySource.BOARD, board=name,
                             delegate=os.path.basename(session.delegate)) + kernels
    return latency_label(LatencySource.BOARD_CPU, board=name) + kernels


class _LocalShell:
    """Runs the fingerprint shell script on this machine (for local runs)."""

    label = HOST_CPU

    def run_shell(self, command: str, *, check: bool = True, **_: Any):
        import subprocess

        from .ssh import RemoteResult
        proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)
        return RemoteResult((command,), proc.returncode, proc.stdout, proc.stderr)
