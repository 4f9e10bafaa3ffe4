"""SSH transport: the only module of the workbench that touches the network.

It drives the system OpenSSH client (``ssh``, ``ssh-keyscan``, ``ssh-keygen``)
through :mod:`subprocess`, so the user's own OpenSSH configuration applies as
is (``Host`` aliases, ``Match``, ``ProxyJump``, ``IdentityFile``, agents, hashed
known_hosts).  Every call adds:

* ``-o BatchMode=yes``: never a password or passphrase prompt (key/agent only);
* ``-o StrictHostKeyChecking=yes``: an unknown or changed host key is refused, never
  added silently; :class:`~workbench.errors.HostKeyError` shows the fingerprint the
  host offers and the command that trusts it;
* ``-o ConnectTimeout=N`` (TCP connect *and* SSH handshake) and a command timeout.

Every remote argument is quoted with :func:`shlex.quote` for the remote POSIX shell,
so a model called ``my model;rm -rf ~.tflite`` is only a file name.  Nothing here
reads, stores or returns keys or passwords.
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from .._validation import check_range
from ..errors import BoardError, HostKeyError
from ..vocab import HOST_CPU_LABEL
from .inventory import parse_destination

SSH = "ssh"
TAIL_CHARS = 1500


@dataclass(frozen=True)
class RemoteResult:
    """What a remote command returned."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def quote_argv(argv: Sequence[str]) -> str:
    """One remote command line with every argument quoted for a POSIX shell."""
    return " ".join(shlex.quote(os.fspath(a)) for a in argv)


def check_timeout(name: str, value: float) -> float:
    """A timeout in seconds: finite and > 0 (``--timeout -5`` or ``nan`` is refused, not reinterpreted)."""
    return float(check_range(name, value, 0.0, None, error=BoardError, low_open=True))


def remote_bounded(command: str, seconds: float) -> str:
    """``command`` for the board's POSIX shell, killed there after ``seconds``.

    GNU ``timeout`` signals its whole process group; busybox ``timeout`` the
    program (``sh -c`` execs a simple command, so that is the program itself).
    Boards without ``timeout`` run the command unbounded (the local limit still applies).
    """
    n = max(1, math.ceil(seconds))
    quoted = shlex.quote(command)
    return (f"if command -v timeout >/dev/null 2>&1; then timeout -s KILL {n} sh -c {quoted}; "
            f"else exec sh -c {quoted}; fi")


def tail(text: str, limit: int = TAIL_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def _require(binary: str) -> str:
    path = shutil.which(binary)
    if not path:
        raise BoardError(f"the OpenSSH client program {binary!r} is not installed on this machine. "
                         "Next: install it (Debian/Ubuntu: apt-get install openssh-client).")
    return path


class SSHTransport:
    """Run commands on one board over OpenSSH.

    ``destination`` is an alias from the OpenSSH config or ``user@host[:port]``;
    ``ssh_config`` replaces ``~/.ssh/config`` (``ssh -F``); ``known_hosts`` replaces
    the known-hosts files (``UserKnownHostsFile``).

    ``ssh_config`` is trusted like code: ``ProxyCommand``, ``LocalCommand`` and
    ``Match exec`` in it run on this machine.  Pass only a file you wrote or reviewed.
    """

    def __init__(self, destination: str, *, ssh_config: str | os.PathLike | None = None,
                 known_hosts: str | os.PathLike | None = None, connect_timeout: float = 10.0,
                 command_timeout: float = 600.0, label: str | None = None):
        self.dest = parse_destination(destination)
        self.destination = destination
        self.ssh_config = os.fspath(ssh_config) if ssh_config else None
        if self.ssh_config and not os.path.isfile(self.ssh_config):
            raise BoardError(f"SSH config file {self.ssh_config!r} does not exist. Next: pass an "
                             "existing file with --ssh-config, or leave it out to use ~/.ssh/config.")
        self.known_hosts = os.fspath(known_hosts) if known_hosts else None
        self.connect_timeout = check_timeout("connect_timeout", connect_timeout)
        self.command_timeout = check_timeout("command_timeout", command_timeout)
        self.label = label or str(self.dest)

    # --- command lines -------------------------------------------------------------------
    def _options(self) -> list[str]:
        opts = []
        if self.ssh_config:
            opts += ["-F", self.ssh_config]
        opts += ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                 "-o", "UpdateHostKeys=no",
                 "-o", f"ConnectTimeout={max(1, int(round(self.connect_timeout)))}",
                 "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3"]
        if self.known_hosts:
            opts += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        if self.dest.port:
            opts += ["-p", str(self.dest.port)]
        return opts

    def _target(self) -> str:
        return f"{self.dest.user}@{self.dest.host}" if self.dest.user else self.dest.host

    def ssh_argv(self, remote_command: str) -> list[str]:
        """The local ``ssh`` command line that runs ``remote_command`` (already quoted)."""
        return [_require(SSH), *self._options(), "-T", "--", self._target(), remote_command]

    # --- running -------------------------------------------------------------------------
    def run(self, argv: Sequence[str], *, timeout: float | None = None, check: bool = True,
            stdin: bytes | None = None) -> RemoteResult:
        """Run one program with arguments on the board (each argument quoted)."""
        return self.run_shell(quote_argv(argv), timeout=timeout, check=check, stdin=stdin,
                              argv=tuple(map(str, argv)))

    def run_shell(self, command: str, *, timeout: float | None = None, check: bool = True,
                  stdin: bytes | None = None, argv: tuple[str, ...] | None = None) -> RemoteResult:
        """Run a remote shell command line.  Callers quote every value with :func:`shlex.quote`."""
        seconds = check_timeout("timeout", self.command_timeout if timeout is None else timeout)
        # The board enforces the limit itself (`timeout -s KILL`, GNU or busybox): a local ssh that
        # is stopped does not stop the remote program, which would keep the NPU busy.
        limit = seconds + self.connect_timeout + 5
        started = time.monotonic()
        try:
            proc = subprocess.run(self.ssh_argv(remote_bounded(command, seconds)), input=stdin,
                                  stdin=None if stdin is not None else subprocess.DEVNULL,
                                  capture_output=True, timeout=limit)
        except subprocess.TimeoutExpired:
            raise BoardError(f"{self.label}: the remote command did not finish within {seconds:g} s "
                             f"and was stopped: {tail(command, 200)}. Next: raise the command "
                             "timeout, or check the board is not hung.") from None
        out = proc.stdout.decode("utf-8", errors="replace")
        err = proc.stderr.decode("utf-8", errors="replace")
        if proc.returncode in (124, 137) and time.monotonic() - started >= seconds:
            raise BoardError(f"{self.label}: the remote command did not finish within {seconds:g} s "
                             f"and was killed on the board: {tail(command, 200)}. Next: raise the "
                             "command timeout, or check the board is not hung.")
        result = RemoteResult(argv or (command,), proc.returncode, out, err)
        if proc.returncode == 255:
            self._raise_ssh_error(err)
        if check and proc.returncode != 0:
            raise BoardError(f"{self.label}: remote command failed with exit code {proc.returncode}: "
                             f"{tail(command, 200)}\nstderr (tail):\n{tail(err) or '(empty)'}")
        return result

    def upload(self, data: bytes, remote_path: str, *, mode: str | None = None) -> None:
        """Write ``data`` to ``remote_path`` (folders created; a temp file renamed into place)."""
        folder = os.path.dirname(remote_path) or "."
        tmp = f"{remote_path}.part"
        cmd = f"mkdir -p {shlex.quote(folder)} && cat > {shlex.quote(tmp)}"
        if mode:
            cmd += f" && chmod {shlex.quote(mode)} {shlex.quote(tmp)}"
        cmd += f" && mv -f {shlex.quote(tmp)} {shlex.quote(remote_path)}"
        self.run_shell(cmd, stdin=data)

    # --- errors ---------------------------------------------------------------------------
    def _raise_ssh_error(self, err: str) -> None:
        where = self.label
        if "REMOTE HOST IDENTIFICATION HAS CHANGED" in err:
            raise HostKeyError(self._host_key_message(changed=True))
        if "Host key verification failed" in err or "host key is known" in err:
            raise HostKeyError(self._host_key_message(changed=False))
        low = err.lower()
        if "permission denied" in low:
            raise BoardError(f"{where}: authentication refused ({tail(err, 300)}). The workbench "
                             "uses keys or ssh-agent only (BatchMode, no password prompts). Next: "
                             "check IdentityFile in your OpenSSH config, that the key is in the "
                             "board's authorized_keys, and `ssh-add -l`.")
        if "timed out" in low:
            raise BoardError(f"{where}: connection timed out after {self.connect_timeout:g} s "
                             f"({tail(err, 300)}). Next: check the board is powered, on the "
                             "network, and that the address and port are right.")
        if "connection refused" in low:
            raise BoardError(f"{where}: connection refused ({tail(err, 300)}): nothing listens "
                             "on that port. Next: check sshd runs on the board and the port.")
        if "could not resolve hostname" in low:
            raise BoardError(f"{where}: unknown host name ({tail(err, 300)}). Next: check the "
                             "destination or the Host alias in your OpenSSH config.")
        if "unreachable" in low or "no route to host" in low:
            raise BoardError(f"{where}: host unreachable ({tail(err, 300)}). Next: check the "
                             "network path to the board.")
        raise BoardError(f"{where}: ssh failed with exit code 255.\nstderr (tail):\n"
                         f"{tail(err) or '(empty)'}")

    def resolved(self) -> dict[str, str]:
        """``ssh -G``: the effective settings (hostname, port, known-hosts files) for this host."""
        argv = [_require(SSH), *self._options(), "-G", "--", self._target()]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        out: dict[str, str] = {}
        for line in proc.stdout.splitlines():
            key, _, value = line.partition(" ")
            out.setdefault(key.lower(), value.strip())
        return out

    def _host_key_message(self, *, changed: bool) -> str:
        conf = self.resolved()
        host = conf.get("hostname", self.dest.host)
        port = conf.get("port", str(self.dest.port or 22))
        files = self.known_hosts or conf.get("userknownhostsfile", "~/.ssh/known_hosts").split()[0]
        fingerprints = host_fingerprints(host, int(port), timeout=self.connect_timeout)
        shown = "\n".join(f"  {fp}" for fp in fingerprints) or \
            "  (could not read the host's keys with ssh-keyscan)"
        entry = host if port == "22" else f"[{host}]:{port}"
        scan = f"ssh-keyscan -p {port} {shlex.quote(host)} >> {shlex.quote(files)}"
        if changed:
            head = (f"{self.label}: the host key of {entry} has CHANGED since it was recorded in "
                    f"{files}. Refusing to connect: this is what a man-in-the-middle attack looks "
                    f"like, or the board was re-flashed. The host now offers:\n{shown}\n")
            todo = (f"Only if you know the board was re-installed, compare the fingerprint with the "
                    f"board's console (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), then run:\n"
                    f"  ssh-keygen -R {shlex.quote(entry)} -f {shlex.quote(files)}\n  {scan}")
        else:
            head = (f"{self.label}: the host key of {entry} is not known (not in {files}); the "
                    f"workbench never adds keys silently. The host offers:\n{shown}\n")
            todo = (f"Compare the fingerprint with the board's console (ssh-keygen -lf "
                    f"/etc/ssh/ssh_host_ed25519_key.pub); if it matches, trust it with:\n  {scan}")
        return head + todo


def host_fingerprints(host: str, port: int, *, timeout: float = 5.0) -> list[str]:
    """The SHA256 fingerprints of the keys a host offers (``ssh-keyscan`` + ``ssh-keygen -lf``)."""
    try:
        scan = subprocess.run([_require("ssh-keyscan"), "-T", str(max(1, int(timeout))),
                               "-p", str(port), "--", host],
                              capture_output=True, text=True, timeout=timeout + 10)
        keys = "\n".join(line for line in scan.stdout.splitlines()
                         if line.strip() and not line.startswith("#"))
        if not keys:
            return []
        listed = subprocess.run([_require("ssh-keygen"), "-l", "-f", "-"], input=keys + "\n",
                                capture_output=True, text=True, timeout=30)
    except (subprocess.TimeoutExpired, OSError):
        return []
    return [line.strip() for line in listed.stdout.splitlines() if line.strip()]


class LocalTransport:
    """The same ``run`` interface on this machine (no shell, no network), for ``--local``."""

    label = HOST_CPU_LABEL

    def __init__(self, *, command_timeout: float = 600.0):
        self.command_timeout = check_timeout("command_timeout", command_timeout)

    def run(self, argv: Sequence[str], *, timeout: float | None = None, check: bool = True,
            stdin: bytes | None = None) -> RemoteResult:
        limit = check_timeout("timeout", self.command_timeout if timeout is None else timeout)
        try:
            proc = subprocess.run(list(map(os.fspath, argv)), input=stdin, capture_output=True,
                                  timeout=limit)
        except subprocess.TimeoutExpired:
            raise BoardError(f"local run did not finish within {limit:.0f} s and was stopped. "
                             "Next: use fewer runs or a smaller model.") from None
        except OSError as exc:
            raise BoardError(f"cannot start {argv[0]!r} on this machine: {exc}. Next: pass "
                             "`python` pointing at a Python with ai_edge_litert.") from None
        out = proc.stdout.decode("utf-8", errors="replace")
        err = proc.stderr.decode("utf-8", errors="replace")
        if check and proc.returncode != 0:
            raise BoardError(f"local command failed with exit code {proc.returncode}: "
                             f"{quote_argv(argv)[:200]}\nstderr (tail):\n{tail(err) or '(empty)'}")
        return RemoteResult(tuple(map(str, argv)), proc.returncode, out, err)
