"""Fixtures of the board stage: a real OpenSSH server on loopback, tiny real models.

The "board" is this machine reached over ``ssh`` on 127.0.0.1 (the only network
target the tests use).  ``sshd`` is installed with apt-get when missing (CI runs
as root on a fresh machine), started on a free port with a temporary host key
and a temporary authorized client key, and stopped at the end of the session.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import sys
import time
import types
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
HOSTILE_NAME = "my model;rm -rf ~.tflite"


def _ensure_sshd() -> None:
    if os.path.exists(SSHD) and shutil.which("ssh") and shutil.which("ssh-keygen"):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("openssh-server is not installed and cannot be installed without root/apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update"],
                 ["apt-get", "install", "-y", "--no-install-recommends", "openssh-server",
                  "openssh-client"]):
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            pytest.fail(f"{' '.join(argv)} failed:\n{proc.stderr[-2000:]}")


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


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    _ensure_sshd()
    root = tmp_path_factory.mktemp("sshd")
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
    log = open(root / "sshd.log", "wb")
    proc = subprocess.Popen([SSHD, "-D", "-f", str(config), "-e"], stdout=log,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("sshd did not start:\n" + (root / "sshd.log").read_text()[-2000:])
            time.sleep(0.1)
    known_hosts = root / "known_hosts"
    host_pub = Path(f"{host_key}.pub")
    key_type, key_data = host_pub.read_text().split()[:2]
    known_hosts.write_text(f"[127.0.0.1]:{port} {key_type} {key_data}\n")
    server = Sshd(port=port, root=root, user=user, host_pub=host_pub, client_key=client_key,
                  known_hosts=known_hosts)
    server.config()
    yield server
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="session")
def ssh_config(sshd) -> Path:
    return sshd.root / "ssh_config"


@pytest.fixture(scope="session")
def remote_workdir(tmp_path_factory) -> str:
    """A work folder on the loopback board, with a space and a quote in its name."""
    return str(tmp_path_factory.mktemp("board") / "work dir 'x'")


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    """A tiny Keras CNN converted to FP32 and to full-INT8 TFLite (representative dataset)."""
    import keras
    import numpy as np
    import tensorflow as tf

    root = tmp_path_factory.mktemp("models")
    keras.utils.set_random_seed(0)
    inp = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(8, 3, activation="relu")(inp)
    x = keras.layers.DepthwiseConv2D(3, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    out = keras.layers.Dense(4)(x)
    model = keras.Model(inp, out)
    paths = {}
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    paths["fp32"] = root / "tiny_fp32.tflite"
    paths["fp32"].write_bytes(conv.convert())
    rng = np.random.default_rng(0)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([rng.random((1, 16, 16, 3), dtype=np.float32)]
                                           for _ in range(16))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    paths["int8"] = root / "tiny_int8.tflite"
    with warnings.catch_warnings():  # "Statistics for quantized inputs were expected": irrelevant
        warnings.simplefilter("ignore", UserWarning)
        paths["int8"].write_bytes(conv.convert())
    hostile = root / "hostile"
    hostile.mkdir()
    paths["hostile"] = hostile / HOSTILE_NAME
    shutil.copyfile(paths["int8"], paths["hostile"])
    return paths


@pytest.fixture(scope="session")
def python_on_board() -> str:
    """The loopback board's Python: the one running the tests (it has ai_edge_litert)."""
    return sys.executable


@pytest.fixture(scope="session")
def remote(sshd, ssh_config, python_on_board, remote_workdir):
    """Keyword arguments of time_on_board for the loopback board (alias ``board``)."""
    return dict(host="board", ssh_config=ssh_config, python=python_on_board, workdir=remote_workdir)


def upload_fake_benchmark_model(transport, folder: str, log_text: bytes) -> types.SimpleNamespace:
    """The benchmark_model TEST DOUBLE replaying ``log_text``, and a file posing as a delegate."""
    transport.upload((HERE / "fake_benchmark_model.sh").read_bytes(), f"{folder}/benchmark_model",
                     mode="755")
    transport.upload(log_text, f"{folder}/replay.log")
    transport.upload(b"not a shared library", f"{folder}/libfake_delegate.so")
    return types.SimpleNamespace(transport=transport, folder=folder,
                                 binary=f"{folder}/benchmark_model",
                                 delegate=f"{folder}/libfake_delegate.so")


@pytest.fixture(scope="session")
def fake_board(sshd, ssh_config, remote_workdir):
    """The benchmark_model test double replaying sample A2 on the loopback board."""
    from workbench.board.ssh import SSHTransport
    t = SSHTransport("board", ssh_config=ssh_config)
    return upload_fake_benchmark_model(t, f"{remote_workdir}/fake bm", (FIXTURES / "A2.log").read_bytes())
