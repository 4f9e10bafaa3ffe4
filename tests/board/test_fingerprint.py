"""The board fingerprint's shell script, run for real against a board-like /etc and /sys."""

from __future__ import annotations

import subprocess

from workbench.board.deploy import _delegate_version, _tool_version, board_fingerprint, bsp_release
from workbench.board.ssh import RemoteResult


class _RootedShell:
    """Runs the fingerprint script on this machine with /etc/ and /sys/ under ``root``.

    A stand-in for a board's file system (this machine is not an i.MX board); the script and
    the parsing of what it prints are the real ones.
    """

    label = "rooted shell"

    def __init__(self, root):
        self.root = root

    def run_shell(self, command, *, check=True, **_):
        command = command.replace("/etc/", f"{self.root}/etc/").replace("/sys/", f"{self.root}/sys/")
        proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)
        return RemoteResult((command,), proc.returncode, proc.stdout, proc.stderr)


def test_fingerprint_reads_bsp_delegate_and_board_state(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    # synthetic files in the shape of a Yocto image (os-release keys, image-buildinfo lines)
    (etc / "os-release").write_text('ID=fsl-imx-xwayland\nNAME="NXP i.MX Release Distro"\n'
                                    'VERSION_ID=6.6-nanbield\n'
                                    'PRETTY_NAME="NXP i.MX Release Distro 6.6-nanbield"\n')
    (etc / "buildinfo").write_text("DISTRO = fsl-imx-xwayland\nDISTRO_VERSION = 6.6-nanbield\n"
                                   "MACHINE = imx93evk\nmeta-imx-bsp = HEAD:lf-6.6.3-1.0.0\n")
    gov = tmp_path / "sys/devices/system/cpu/cpu0/cpufreq"
    gov.mkdir(parents=True)
    (gov / "scaling_governor").write_text("performance\n")
    thermal = tmp_path / "sys/class/thermal/thermal_zone0"
    thermal.mkdir(parents=True)
    (thermal / "temp").write_text("48500\n")
    lib = tmp_path / "libethosu_delegate.so.1.0.2"
    lib.write_bytes(b"\x7fELF fake library")
    link = tmp_path / "libethosu_delegate.so"
    link.symlink_to(lib.name)
    fp = board_fingerprint(_RootedShell(tmp_path), delegate=str(link),
                           benchmark_model="/usr/bin/tensorflow-lite-2.11.1/examples/benchmark_model")
    assert fp.bsp_release == "lf-6.6.3_1.0.0"
    assert fp.os_release == "NXP i.MX Release Distro 6.6-nanbield" and fp.os_version_id == "6.6-nanbield"
    assert "MACHINE = imx93evk" in fp.buildinfo
    assert (fp.cpu_governor, fp.temperature_c) == ("performance", 48.5)
    import hashlib
    assert fp.delegate_sha256 == hashlib.sha256(lib.read_bytes()).hexdigest()
    assert fp.delegate_file == str(lib) and fp.delegate_version == "1.0.2"
    assert fp.benchmark_model_version is None    # the path does not exist here: readlink says nothing
    assert "lf-6.6.3_1.0.0" in fp.summary() and "delegate 1.0.2" in fp.summary()


def test_version_helpers():
    assert bsp_release("lf-6.6.3_1.0.0") == bsp_release("rel_imx_6.6.3_1.0.0") == "lf-6.6.3_1.0.0"
    assert bsp_release("lf-6.1.55-2.2.0") == "lf-6.1.55_2.2.0" and bsp_release("6.6-nanbield") is None
    assert _tool_version("/usr/bin/tensorflow-lite-2.11.1/examples/benchmark_model") == \
        "tensorflow-lite 2.11.1"
    assert _tool_version("/opt/bm") is None
    assert _delegate_version({"delegate_file": "/usr/lib/libvx_delegate.so.2.9.0"}) == "2.9.0"
    assert _delegate_version({"delegate_file": "/usr/lib/libvx_delegate.so",
                              "delegate_strings_version": "Version: 2.1.0"}) == "2.1.0"
    assert _delegate_version({"delegate_package": "tflite-vx-delegate 2.11"}) == "tflite-vx-delegate 2.11"
    assert _delegate_version({}) is None
