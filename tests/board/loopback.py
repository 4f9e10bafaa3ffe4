"""The loopback "board": a real OpenSSH server on 127.0.0.1, and the benchmark_model TEST DOUBLE.

Used by the board tests (``conftest.sshd``, session-scoped) and by the trap zoo's board traps
(``loopback_sshd``, one server per trap, stopped when the trap ends; ``benchmarks/bench_traps.py``
runs them outside pytest).  The server gets a free port, a temporary host key and a temporary
authorized client key; nothing outside ``root`` is written (but ``/run/sshd`` when run as root).
"""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"
HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"


class LoopbackUnavailable(RuntimeError):
    """sshd is not installed, or did not start."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "npu-workbench-test",
                    "-f", str(path)], check=True)
    return path


@dataclass
class Sshd:
    port: int
    root: Path
    user: str
    host_pub: Path
    client_key: Path
    known_hosts: Path
    proc: subprocess.Popen | None = field(default=None, repr=False)

    def config(self, name: str = "ssh_config", *, identity: Path | None = None,
               known_hosts: Path | None = None) -> Path:
        """An OpenSSH client config: alias ``board`` -> the loopback sshd; ``Host *`` keys."""
        path = self.root / name
        path.write_text(
            "Host board\n"
            "    HostName 127.0.0.1\n"
            f"    Port {self.port}\n"
            f"    User {self.user}\n"
            "Host *\n"
            f"    IdentityFile {identity or self.client_key}\n"
            "    IdentitiesOnly yes\n"
            "    IdentityAgent none\n"
            f"    UserKnownHostsFile {known_hosts or self.known_hosts}\n"
            "    GlobalKnownHostsFile /dev/null\n")
        return path

    @property
    def destination(self) -> str:
        return f"{self.user}@127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


def start_sshd(root: Path) -> Sshd:
    """Start sshd on a free loopback port with keys and logs in ``root`` (an existing, empty folder)."""
    if not os.path.exists(SSHD):
        raise LoopbackUnavailable(f"{SSHD} is not installed (apt-get install openssh-server)")
    host_key = _keygen(root / "host_ed25519")
    client_key = _keygen(root / "client_ed25519")
    (root / "authorized_keys").write_text(Path(f"{client_key}.pub").read_text())
    port = free_port()
    user = getpass.getuser()
    config = root / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
        f"PidFile {root / 'sshd.pid'}\nAuthorizedKeysFile {root / 'authorized_keys'}\n"
        "UsePAM no\nStrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\n"
        f"AllowUsers {user}\nLogLevel VERBOSE\nMaxStartups 50\nMaxSessions 50\n")
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    with open(root / "sshd.log", "wb") as log:       # the child keeps its own descriptor
        proc = subprocess.Popen([SSHD, "-D", "-f", str(config), "-e"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait(timeout=10)
                raise LoopbackUnavailable("sshd did not start:\n" + (root / "sshd.log").read_text()[-2000:]) from None
            time.sleep(0.1)
    known_hosts = root / "known_hosts"
    host_pub = Path(f"{host_key}.pub")
    key_type, key_data = host_pub.read_text().split()[:2]
    known_hosts.write_text(f"[127.0.0.1]:{port} {key_type} {key_data}\n")
    server = Sshd(port=port, root=root, user=user, host_pub=host_pub, client_key=client_key,
                  known_hosts=known_hosts, proc=proc)
    server.config()
    return server


@contextmanager
def loopback_sshd(root: Path) -> Iterator[Sshd]:
    """A loopback sshd for the duration of the block (``root`` is created)."""
    root.mkdir(parents=True, exist_ok=True)
    server = start_sshd(root)
    try:
        yield server
    finally:
        server.stop()


def upload_fake_benchmark_model(transport, folder: str, log_text: bytes) -> types.SimpleNamespace:
    """The benchmark_model TEST DOUBLE replaying ``log_text``, and a file posing as a delegate."""
    transport.upload((HERE / "fake_benchmark_model.sh").read_bytes(), f"{folder}/benchmark_model",
                     mode="755")
    transport.upload(log_text, f"{folder}/replay.log")
    transport.upload(b"not a shared library", f"{folder}/libfake_delegate.so")
    return types.SimpleNamespace(transport=transport, folder=folder,
                                 binary=f"{folder}/benchmark_model",
                                 delegate=f"{folder}/libfake_delegate.so")
