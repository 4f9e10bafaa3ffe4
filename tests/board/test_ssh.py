"""The SSH transport against a real sshd on loopback."""

from __future__ import annotations

import socket
import subprocess

import pytest

from workbench.board.ssh import SSHTransport, quote_argv
from workbench.errors import BoardError, HostKeyError

from .conftest import HOSTILE_NAME, free_port


def _fingerprint(pub) -> str:
    out = subprocess.run(["ssh-keygen", "-l", "-f", str(pub)], capture_output=True, text=True,
                         check=True).stdout
    return out.split()[1]  # SHA256:...


def test_alias_from_ssh_config_runs_a_command(sshd, ssh_config):
    t = SSHTransport("board", ssh_config=ssh_config)
    assert t.run(["echo", "hello"]).stdout == "hello\n"


def test_user_at_host_port_destination(sshd, ssh_config):
    t = SSHTransport(sshd.destination, ssh_config=ssh_config, known_hosts=sshd.known_hosts)
    assert t.run(["id", "-un"]).stdout.strip() == sshd.user


def test_hostile_arguments_arrive_intact_and_are_not_executed(sshd, ssh_config, tmp_path):
    marker = tmp_path / "pwned"
    args = [HOSTILE_NAME, f"$(touch {marker})", f"`touch {marker}`", "a'b\"c", "x y\tz", "*"]
    t = SSHTransport("board", ssh_config=ssh_config)
    out = t.run(["printf", "%s\\n", *args]).stdout
    assert out.split("\n")[:-1] == args
    assert not marker.exists()
    assert quote_argv(["a b"]) == "'a b'"


def test_unknown_host_key_is_refused_with_fingerprint_and_trust_command(sshd, tmp_path):
    empty = tmp_path / "known_hosts_empty"
    empty.write_text("")
    cfg = sshd.config("ssh_config_unknown", known_hosts=empty)
    t = SSHTransport("board", ssh_config=cfg)
    with pytest.raises(HostKeyError) as info:
        t.run(["true"])
    message = str(info.value)
    assert "is not known" in message
    assert _fingerprint(sshd.host_pub) in message
    assert f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> {empty}" in message
    assert empty.read_text() == ""  # never added silently


def test_changed_host_key_is_refused(sshd, tmp_path):
    other = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kt, kd = (tmp_path / "other_host_key.pub").read_text().split()[:2]
    wrong = tmp_path / "known_hosts_changed"
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {kt} {kd}\n")
    t = SSHTransport("board", ssh_config=sshd.config("ssh_config_changed", known_hosts=wrong))
    with pytest.raises(HostKeyError) as info:
        t.run(["true"])
    message = str(info.value)
    assert "CHANGED" in message
    assert _fingerprint(sshd.host_pub) in message
    assert "ssh-keygen -R" in message


def test_wrong_client_key_is_refused(sshd, tmp_path):
    key = tmp_path / "not_authorized"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    t = SSHTransport("board", ssh_config=sshd.config("ssh_config_wrong_key", identity=key))
    with pytest.raises(BoardError, match="authentication refused"):
        t.run(["true"])


def test_closed_port_is_refused(sshd, ssh_config):
    port = free_port()  # nothing listens there any more
    t = SSHTransport(f"{sshd.user}@127.0.0.1:{port}", ssh_config=ssh_config, connect_timeout=3)
    with pytest.raises(BoardError, match="connection refused"):
        t.run(["true"])


def test_silent_host_times_out_with_a_clear_error(ssh_config, sshd):
    # a loopback socket that accepts TCP but never speaks SSH: the handshake times out
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        t = SSHTransport(f"{sshd.user}@127.0.0.1:{port}", ssh_config=ssh_config, connect_timeout=1)
        with pytest.raises(BoardError, match="timed out"):
            t.run(["true"])


def test_command_timeout_stops_a_hung_command(sshd, ssh_config):
    t = SSHTransport("board", ssh_config=ssh_config, connect_timeout=2)
    with pytest.raises(BoardError, match="did not finish within"):
        t.run(["sleep", "10"], timeout=1)


def test_failing_remote_command_shows_exit_code_and_stderr_tail(sshd, ssh_config):
    t = SSHTransport("board", ssh_config=ssh_config)
    with pytest.raises(BoardError) as info:
        t.run(["sh", "-c", "echo early >&2; echo the-real-reason >&2; exit 7"])
    assert "exit code 7" in str(info.value)
    assert "the-real-reason" in str(info.value)
    assert t.run(["sh", "-c", "exit 3"], check=False).returncode == 3


def test_missing_ssh_config_file_is_named(tmp_path):
    with pytest.raises(BoardError, match="SSH config file .* does not exist"):
        SSHTransport("board", ssh_config=tmp_path / "nope")


def test_bad_destination_is_rejected():
    with pytest.raises(BoardError, match="must be a number in 1..65535"):
        SSHTransport("root@host:99999")
    with pytest.raises(BoardError, match="is not an SSH destination"):
        SSHTransport("-oProxyCommand=evil")


def _running(pattern: str) -> bool:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0


def test_timed_out_remote_command_is_killed_on_the_board(sshd, ssh_config):
    # the loopback sshd's "board" is this machine, so the remote processes are visible here
    import time
    t = SSHTransport("board", ssh_config=ssh_config, connect_timeout=2)
    with pytest.raises(BoardError, match="killed on the board"):
        t.run(["sh", "-c", "sleep 41.25; sleep 42.25"], timeout=1)
    deadline = time.monotonic() + 5
    while _running("sleep 41.25") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running("sleep 41.25") and not _running("sleep 42.25")


@pytest.mark.parametrize("destination", [
    "-oProxyCommand=touch${IFS}/tmp/pwned", "$(touch /tmp/pwned)", "`id`", "host;id", "host|id",
    "host&id", "ho st", "-luser@host", "user@-host", "us$er@host", "'host'", "host>x", "%h"])
def test_hostile_destinations_are_refused_before_ssh_runs(destination):
    with pytest.raises(BoardError, match="is not an SSH destination"):
        SSHTransport(destination)


@pytest.mark.parametrize("value", [-5, 0, float("nan"), float("inf")])
def test_timeouts_must_be_finite_and_positive(value):
    with pytest.raises(BoardError, match="`command_timeout` must be"):
        SSHTransport("board", command_timeout=value)
    with pytest.raises(BoardError, match="`connect_timeout`"):
        SSHTransport("board", connect_timeout=value)
