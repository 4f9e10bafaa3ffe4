"""BSP releases as data: which releases each target knows, the toolchain each ships, per-release rules."""

from __future__ import annotations

import pytest

from workbench.errors import TargetError
from workbench.targets import TARGET_IDS, get_target, list_targets

from .hand_graphs import one_op, t


def test_every_target_knows_its_releases_and_defaults_to_the_newest_with_rules():
    expected = {"imx8mp": "lf-6.6.3_1.0.0", "imx93": "lf-6.6.3_1.0.0", "imx95": "lf-6.6.52_2.2.0"}
    for tgt in list_targets():
        assert tgt.bsp_releases, tgt.id
        assert tgt.default_bsp == expected[tgt.id] == tgt.bsp
        assert tgt.release.id == tgt.default_bsp
        assert get_target(tgt.id, bsp=tgt.default_bsp) is tgt
        assert all("npu-facts.md" in r.source for r in tgt.bsp_releases)


def test_imx93_vela_version_per_release_follows_npu_facts():
    """npu-facts.md §2.1: NXP BSP branch -> the Vela version stamped in it."""
    releases = {r.id: dict(r.toolchain)["vela"] for r in get_target("imx93").bsp_releases}
    assert releases == {
        "lf-5.15.52_2.1.0": "3.3.0", "lf-5.15.71_2.2.0": "3.6.0rc1.dev11", "lf-6.1.1_1.0.0": "3.6.0",
        "lf-6.1.22_2.0.0": "3.7.1.dev8", "lf-6.1.36_2.1.0": "3.8.0", "lf-6.1.55_2.2.0": "3.9.1.dev7",
        "lf-6.6.3_1.0.0": "3.10.0"}
    newest = get_target("imx93").release
    assert (newest.compiler, newest.compiler_version, newest.tool_env) == ("vela", "3.10.0", "vela-3.10.0")


def test_release_specific_op_table():
    """lf-6.1.55_2.2.0 ships Vela 3.9: SQUARED_DIFFERENCE and TRANSPOSE came with 3.10.0."""
    new = get_target("imx93", bsp="lf-6.6.3_1.0.0")
    old = get_target("imx93", bsp="lf-6.1.55_2.2.0")
    assert {"SQUARED_DIFFERENCE", "TRANSPOSE"} <= new.supported_ops - old.supported_ops
    graph = one_op("TRANSPOSE", [t(), t("INT32", (4,), const=True)])
    assert new.evaluate_op(graph, graph.ops[0]) == ()
    reasons = old.evaluate_op(graph, graph.ops[0])
    assert [r.constraint for r in reasons] == ["ethosu.op_type"] and "Vela 3.9" in reasons[0].detail
    assert old.bsp == "lf-6.1.55_2.2.0" and old.release.compiler_version == "3.9.0"


def test_unknown_release_names_the_known_ones():
    with pytest.raises(TargetError, match=r"`bsp` must be one of .*'lf-6.6.3_1.0.0'.*Got 'lf-9.9' instead"):
        get_target("imx93", bsp="lf-9.9")


def test_release_without_rules_is_refused_with_its_version():
    with pytest.raises(TargetError, match=r"lf-6.1.1_1.0.0 ships vela 3.6.0.*no operator rules.*Use one of"):
        get_target("imx93", bsp="lf-6.1.1_1.0.0")


@pytest.mark.parametrize("target_id", TARGET_IDS)
def test_docs_and_dict_list_the_releases(target_id):
    tgt = get_target(target_id)
    page = tgt.to_markdown()
    assert "## BSP releases" in page and f"`{tgt.default_bsp}`" in page
    data = tgt.to_dict()
    assert data["bsp"] == tgt.default_bsp
    assert [r["id"] for r in data["bsp_releases"]] == [r.id for r in tgt.bsp_releases]
