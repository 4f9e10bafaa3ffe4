"""The notebooks stay thin, on the npu-workbench kernel, and document their parameters."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
STAGE_NOTEBOOKS = ["10_calibration_set", "20_quantize", "30_accuracy_by_condition", "40_op_placement",
                   "50_board_timing", "90_summary"]
PARAM_LINE = re.compile(r"^(?P<name>[a-z_][a-z0-9_]*): (?P<type>str|int|float|bool) = (?P<default>.+?)  # (?P<help>\S.*)$")
MAX_CODE_CELLS = 12
MAX_CELL_LINES = 8
ABSOLUTE = re.compile(r"""["'](?:/|~/|[A-Za-z]:\\)""")


def ids(paths):
    return [p.stem for p in paths]


def test_all_stage_notebooks_exist():
    assert set(STAGE_NOTEBOOKS) <= {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_notebook_is_thin(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "npu-workbench"
    cells = nb.cells
    assert cells[0].cell_type == "markdown"
    intro = cells[0].source
    for word in ("Purpose", "Inputs", "Outputs", "command line"):
        assert word in intro, f"{path.name}: the first cell should state {word}"
    tagged = [i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", [])]
    assert tagged == [1], f"{path.name}: exactly one `parameters` cell, the second"
    assert cells[2].source.strip() == "import workbench as wb"
    code = [c for c in cells if c.cell_type == "code"]
    assert len(code) <= MAX_CODE_CELLS
    for cell in code:
        assert not cell.get("outputs") and cell.get("execution_count") is None, f"{path.name}: clear outputs"
        src = cell.source
        if "parameters" not in cell.metadata.get("tags", []):
            assert len(src.splitlines()) <= MAX_CELL_LINES, f"{path.name}: cell too long:\n{src}"
        tree = ast.parse(src)
        for node in ast.walk(tree):
            assert not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)), \
                f"{path.name}: no def/class/lambda in notebooks:\n{src}"
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                assert all(n == "workbench" or n.startswith("workbench.") for n in names), \
                    f"{path.name}: import only workbench"
        assert not re.search(r"^\s*[!%]", src, re.M), f"{path.name}: no shell escapes or magics (!pip)"
        assert not ABSOLUTE.search(src), f"{path.name}: no absolute paths:\n{src}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_parameters_cell_has_typed_defaults_with_help(path):
    nb = nbformat.read(path, as_version=4)
    lines = [ln for ln in nb.cells[1].source.splitlines() if ln.strip()]
    assert lines
    for line in lines:
        m = PARAM_LINE.match(line)
        assert m, f"{path.name}: `name: type = default  # help` expected, got {line!r}"
        assert isinstance(ast.literal_eval(m["default"]), {"str": str, "int": int, "float": (int, float),
                                                            "bool": bool}[m["type"]])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_papermill_help_lists_every_parameter_with_its_help(path, caplog):
    nb = nbformat.read(path, as_version=4)
    params = [PARAM_LINE.match(ln) for ln in nb.cells[1].source.splitlines() if ln.strip()]
    # papermill's own command (`papermill --help-notebook PATH`) run in this process: a new interpreter per
    # notebook cost 2.5 CPU s of imports each
    from click.testing import CliRunner
    from papermill.cli import papermill
    proc = CliRunner().invoke(papermill, ["--help-notebook", str(path)])
    assert proc.exit_code == 0, proc.output
    assert "Unable to parse" not in proc.output + caplog.text, proc.output + caplog.text   # papermill logs it
    flat = " ".join(proc.output.split())
    for m in params:
        assert f"{m['name']}: {m['type']} (default {m['default']})" in flat
        assert " ".join(m["help"].split()) in flat


@pytest.mark.parametrize("name", [n for n in STAGE_NOTEBOOKS if n != "90_summary"])
def test_stage_notebooks_share_the_run_parameters(name):
    path = next(p for p in NOTEBOOKS if p.stem == name)
    source = nbformat.read(path, as_version=4).cells[1].source
    for param in ("target", "model", "dataset", "run_dir", "calibration_size", "calibration_strategy"):
        assert re.search(rf"^{param}: ", source, re.M), f"{name}: missing parameter {param}"
