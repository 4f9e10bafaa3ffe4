"""The tables as data: ids, sources, docs in sync, Vela's own operator list, the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from workbench import cli
from workbench.errors import TargetError
from workbench.targets import TARGET_IDS, get_target, list_targets

REPO = Path(__file__).resolve().parents[2]


def test_list_and_get():
    assert tuple(t.id for t in list_targets()) == TARGET_IDS
    for t in list_targets():
        assert get_target(t.id) is t
        assert t.sources and t.runtime and t.delegate.endswith(".so")
        ids = [c.id for c in t.constraints]
        assert len(ids) == len(set(ids))
    assert get_target("imx93").authority == "vela"
    assert get_target("imx8mp").authority == get_target("imx95").authority == "rule table (predicted)"


def test_unknown_target_lists_known_ones():
    with pytest.raises(TargetError, match="must be one of 'imx8mp', 'imx93', 'imx95'. Got 'imx8m'"):
        get_target("imx8m")


@pytest.mark.parametrize("target_id", TARGET_IDS)
def test_docs_in_sync_with_tables(target_id):
    page = REPO / "docs" / "targets" / f"{target_id}.md"
    assert page.read_text(encoding="utf-8") == get_target(target_id).to_markdown(), (
        f"{page} is stale: run `workbench targets --docs`")


def _vela_ops(text: str, heading: str) -> set[str]:
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| ([A-Z0-9_]+) \|", section, flags=re.M))


def test_imx93_op_set_matches_the_bsp_vela(tmp_path):
    """The default imx93 table = Vela 3.10.0's own operator list (the BSP's) + NXP's fork additions."""
    from workbench import toolenv
    from workbench.targets.imx93 import NXP_FORK_OPS, VELA_3_10_OPS
    env = toolenv.ensure("vela-3.10.0")
    env.run(["vela", "--supported-ops-report"], cwd=tmp_path, check=True)
    vela_ops = _vela_ops((tmp_path / "SUPPORTED_OPS.md").read_text(), "## TFLite Summary Table")
    assert vela_ops == set(VELA_3_10_OPS) and len(vela_ops) == 43
    tgt = get_target("imx93", bsp="lf-6.6.3_1.0.0")
    assert set(tgt.supported_ops) == vela_ops | set(NXP_FORK_OPS)
    assert not set(NXP_FORK_OPS) & vela_ops        # the fork's ops are what upstream 3.10 lacks


def test_installed_vela_is_newer_and_differs():
    """The installed Vela (5.2) is not the BSP's: its operator list is larger than 3.10.0's."""
    exe = Path(sys.executable).with_name("vela")
    from workbench.targets.imx93 import VELA_3_10_OPS
    with __import__("tempfile").TemporaryDirectory() as tmp:
        subprocess.run([str(exe), "--supported-ops-report"], cwd=tmp, check=True, capture_output=True)
        newest = _vela_ops((Path(tmp) / "SUPPORTED_OPS.md").read_text(),
                           "## Ethos-U55 and Ethos-U65 TFLite Summary Table")
    assert len(newest) > len(VELA_3_10_OPS) and {"TILE", "BATCH_MATMUL"} <= newest - VELA_3_10_OPS


def test_vela_config_names_exist_in_vela_ini():
    import ethosu

    from workbench.targets.imx93 import VELA_CONFIG
    ini = (Path(list(ethosu.__path__)[0]) / "config_files" / VELA_CONFIG["config"]).read_text()
    assert f"[System_Config.{VELA_CONFIG['system_config']}]" in ini
    assert f"[Memory_Mode.{VELA_CONFIG['memory_mode']}]" in ini


def test_cli_targets_json(capsys):
    assert cli.main(["targets", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["id"] for d in data] == list(TARGET_IDS)
    assert all(d["constraints"] and d["supported_ops"] for d in data)


def test_cli_targets_text(capsys):
    assert cli.main(["targets"]) == 0
    out = capsys.readouterr().out
    assert "libvx_delegate.so" in out and "vela" in out


def test_cli_targets_docs_writes_pages(tmp_path, capsys):
    assert cli.main(["targets", "--docs", str(tmp_path)]) == 0
    for tid in TARGET_IDS:
        assert (tmp_path / f"{tid}.md").read_text() == get_target(tid).to_markdown()
