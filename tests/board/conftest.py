"""Fixtures of the board stage: a real OpenSSH server on loopback, tiny real models.

The "board" is this machine reached over ``ssh`` on 127.0.0.1 (the only network
target the tests use).  ``sshd`` is installed with apt-get when missing (CI runs
as root on a fresh machine), started on a free port with a temporary host key
and a temporary authorized client key, and stopped at the end of the session.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from .loopback import (  # noqa: F401 - FIXTURES, free_port, Sshd, upload_fake_benchmark_model: imported by tests
    FIXTURES,
    SSHD,
    LoopbackUnavailable,
    Sshd,
    free_port,
    start_sshd,
    upload_fake_benchmark_model,
)

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


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    _ensure_sshd()
    try:
        server = start_sshd(tmp_path_factory.mktemp("sshd"))
    except LoopbackUnavailable as exc:
        pytest.fail(str(exc))
    yield server
    server.stop()


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


@pytest.fixture(scope="session")
def fake_board(sshd, ssh_config, remote_workdir):
    """The benchmark_model test double replaying sample A2 on the loopback board."""
    from workbench.board.ssh import SSHTransport
    t = SSHTransport("board", ssh_config=ssh_config)
    return upload_fake_benchmark_model(t, f"{remote_workdir}/fake bm", (FIXTURES / "A2.log").read_bytes())
