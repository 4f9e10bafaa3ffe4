"""The vocabulary is defined once, and a target registered there has everything CONTRIBUTING.md lists."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from workbench import vocab

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("target", vocab.TARGETS)
def test_a_registered_target_has_its_table_docs_and_tests(target):
    """Adding a target to vocab.TargetId without these files fails here, naming what is missing."""
    table = ROOT / "workbench" / "targets" / f"{target}.py"
    assert table.is_file(), f"{target}: write its table {table.relative_to(ROOT)} (see CONTRIBUTING.md)"
    module = importlib.import_module(f"workbench.targets.{target}")
    assert module.TARGET.id == target
    assert module.TARGET.npu_custom_ops == vocab.NPU_CUSTOM_OPS[target], \
        f"{target}: its table's npu_custom_ops must be vocab.NPU_CUSTOM_OPS[{target!r}]"
    page = ROOT / "docs" / "targets" / f"{target}.md"
    assert page.is_file(), f"{target}: write {page.relative_to(ROOT)} (`workbench targets --docs docs/targets`)"
    constraint_tests = (ROOT / "tests" / "targets" / "test_constraints.py").read_text(encoding="utf-8")
    assert f'_c("{target}"' in constraint_tests, \
        f"{target}: add a passing and a failing case per constraint to tests/targets/test_constraints.py"
    from workbench.board.inventory import TYPICAL_DELEGATE
    assert target in TYPICAL_DELEGATE, f"{target}: name its usual delegate library in board/inventory.py"


def test_every_table_file_is_a_registered_target():
    tables = {p.stem for p in (ROOT / "workbench" / "targets").glob("*.py") if not p.stem.startswith("_")}
    assert tables - {"commands"} == set(vocab.TARGETS)


def _constants(path: Path) -> list[object]:
    """Every constant a module's code holds: strings and tuples/lists/sets of strings (docstrings too)."""
    out: list[object] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant):
            out.append(node.value)
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and all(isinstance(e, ast.Constant) for e in node.elts):
            out.append(tuple(e.value for e in node.elts))
    return out


def _modules() -> list[Path]:
    return [p for p in (ROOT / "workbench").rglob("*.py") if p.name != "vocab.py"]


def test_target_ids_are_not_written_again_as_a_tuple():
    """A name written twice is a bug waiting: no module spells the target ids as a literal sequence again."""
    offenders = [str(p.relative_to(ROOT)) for p in _modules() if vocab.TARGETS in _constants(p)]
    assert offenders == []


def test_the_host_cpu_label_is_written_once():
    offenders = [str(p.relative_to(ROOT)) for p in _modules() if vocab.HOST_CPU_LABEL in _constants(p)]
    assert offenders == []


def test_enums_are_their_strings():
    assert vocab.Recipe.A8W8_PC == "a8w8_pc" and f"{vocab.TargetId.IMX93}" == "imx93"
    assert vocab.STAGES == tuple(vocab.STAGE_NOTEBOOKS)
    assert vocab.ALL_NPU_CUSTOM_OPS == {"vsi-npu", "ethos-u", "NeutronGraph", "NeutronOp"}


@pytest.mark.parametrize("kind, kwargs, text", [
    ("board", dict(board="evk93", delegate="libethosu_delegate.so"), "board evk93 via libethosu_delegate.so"),
    ("board-cpu", dict(board="evk93"), "board evk93 CPU only (no delegate)"),
    ("host-cpu", {}, "host CPU (not an NPU)"),
    ("vela", dict(version="5.2.0"), "Vela 5.2.0 estimate"),
    ("replayed", dict(board="evk93", date="2026-11-30"), "replayed from evk93 2026-11-30"),
])
def test_latency_labels(kind, kwargs, text):
    assert vocab.latency_label(kind, **kwargs) == text
    assert vocab.is_board_source(kind) is (kind in ("board", "board-cpu"))


def test_an_unknown_latency_kind_is_refused():
    with pytest.raises(ValueError, match="'phone'"):
        vocab.latency_label("phone")
