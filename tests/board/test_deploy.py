"""Deploy over the loopback board: hash-keyed uploads, delegate check, board fingerprint."""

from __future__ import annotations

import platform

import pytest

from workbench._io import sha256_file
from workbench.board.deploy import board_fingerprint, check_remote_file, deploy_model, push_bytes
from workbench.board.ssh import SSHTransport
from workbench.errors import BoardError, ModelError


@pytest.fixture(scope="module")
def board(sshd, ssh_config):
    return SSHTransport("board", ssh_config=ssh_config, label="loopback board")


def test_upload_keyed_by_sha256_skips_same_hash(board, tiny_models, remote_workdir):
    first = deploy_model(board, tiny_models["hostile"], remote_workdir)
    assert first.uploaded
    assert first.remote_path.endswith("/my model;rm -rf ~.tflite")
    assert f"/models/{first.sha256[:16]}/" in first.remote_path
    remote_hash = board.run(["sha256sum", first.remote_path]).stdout.split()[0]
    assert remote_hash == sha256_file(tiny_models["hostile"]) == first.sha256
    again = deploy_model(board, tiny_models["hostile"], remote_workdir)
    assert not again.uploaded and again.remote_path == first.remote_path
    other = push_bytes(board, b"different bytes", remote_workdir, "my model;rm -rf ~.tflite")
    assert other.uploaded and other.remote_path != first.remote_path


def test_missing_local_model_is_a_model_error(board, tmp_path, remote_workdir):
    with pytest.raises(ModelError, match="does not exist"):
        deploy_model(board, tmp_path / "none.tflite", remote_workdir)


def test_missing_delegate_is_named(board):
    with pytest.raises(BoardError, match="delegate library '/nonexistent/libvx_delegate.so' is not "
                                         "an existing file"):
        check_remote_file(board, "/nonexistent/libvx_delegate.so", what="delegate library")


def test_fingerprint_reads_the_board(board, python_on_board):
    fp = board_fingerprint(board, python=python_on_board, delegate=None)
    # the loopback board is this machine: compare with what Python reads locally
    assert fp.kernel == f"{platform.system()} {platform.release()}"
    assert fp.machine == platform.machine()
    assert fp.tflite_runtime.startswith(("ai_edge_litert", "tflite_runtime", "tensorflow"))
    assert fp.os_release
    assert type(fp).from_dict(fp.to_dict()) == fp
