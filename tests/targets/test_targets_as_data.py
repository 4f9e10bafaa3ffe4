"""Targets are data, exceptions included: no module outside workbench/targets/ branches on a target id, and
a fourth target written as a table only (registered here, no other module touched) runs through the pipeline."""

from __future__ import annotations

import dataclasses
import re
import warnings
from pathlib import Path

import pytest

from workbench.errors import TargetError, WorkbenchWarning

PACKAGE = Path(__file__).resolve().parents[2] / "workbench"
ID = r"""["']imx(?:8mp|93|95)["']"""
#: a comparison with, membership in, or a dict keyed by a literal target id: a branch on the id
BRANCH = re.compile(rf"""(?:==|!=)\s*{ID}|{ID}\s*(?:==|!=)|\bin\s*[(\[{{]\s*{ID}|\{{\s*{ID}\s*:|^\s*{ID}\s*:|"""
                    r"""TargetId\.\w+\s*(?:==|!=)|(?:==|!=)\s*TargetId\.""", re.M)


def branches(source: str) -> list[str]:
    return [m.group(0) for m in BRANCH.finditer(source)]


def test_the_branch_pattern_finds_branches():
    assert branches('if target == "imx8mp":') and branches("if t.target != 'imx93':")
    assert branches('if target in ("imx93", "imx95"):') and branches('X = {"imx8mp": "/usr/lib/a.so",')
    assert branches("if t == TargetId.IMX93:")
    assert not branches('help="imx93: predict from the rule table"') and not branches("target: str = 'imx8mp'")


def test_no_branch_on_a_target_id_outside_targets():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("targets/") or rel == "vocab.py":        # the tables, and the ids' one vocabulary
            continue
        if hits := branches(path.read_text()):
            found[rel] = hits
    assert not found, f"branches on a target id (make it a field of the target's table): {found}"


@pytest.fixture
def fourth(reference):
    """An i.MX 99 described by a table only: the imx95 rules, its own delegate, no compiler."""
    from workbench import targets
    table = dataclasses.replace(targets.get_target("imx95"), id="imx99", name="i.MX 99 (test table)",
                                soc="NXP i.MX 99", delegate="libimx99_delegate.so", compiler="", bsp_releases=(),
                                bsp="", per_channel_fast=False, recipe="a8w8_pc")
    targets.register_target(table)
    yield table
    targets.unregister_target("imx99")
    assert "imx99" not in targets.target_ids()


def test_a_fourth_target_runs_through_the_pipeline(fourth, digits, tmp_path):
    from workbench import targets
    from workbench.board.inventory import TYPICAL_DELEGATE
    from workbench.pipeline import CalibrationOptions, Pipeline, RunFolderStore, RunSpec, TimingSettings
    from workbench.quantize.findings import _what_target_allows
    from workbench.runs import RunFolder, summarize_run
    assert targets.target_ids()[-1] == "imx99" and targets.get_target("imx99") is fourth
    spec = RunSpec("reference", digits, target="imx99", calibration=CalibrationOptions(n=60, seed=4),
                   timing=TimingSettings(runs=3, warmup=1))
    assert spec.recipe_name == "a8w8_pc"                    # the table's recipe for "auto"
    folder = RunFolder.of(tmp_path / "run", spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkbenchWarning)
        pipe = Pipeline(spec, RunFolderStore(folder))
        placement = pipe.place()
        timing = pipe.time()
    assert placement.target == "imx99" and placement.npu_ops > 0
    assert placement.compiler == "rule table"               # no compiler in the table: the rule table decides
    assert timing.model_sha256 == pipe.quantize().sha256    # the host CPU runs the INT8 model
    assert TYPICAL_DELEGATE["imx99"] == "/usr/lib/libimx99_delegate.so"
    assert "runs them slower" in _what_target_allows("imx99")
    assert summarize_run(tmp_path / "run").targets[0].target == "imx99"
    with pytest.raises(TargetError, match="built-in"):
        targets.register_target(dataclasses.replace(fourth, id="imx93"))


def test_exemptions_are_data(reference):
    from workbench.targets import get_target
    c = get_target("imx8mp").constraint("vx.generic.int64_input")
    assert c.exempt == frozenset({"BROADCAST_TO"}) and c.describe_scope() == "all ops except BROADCAST_TO"
