"""The CLI does what a notebook does: each notebook names its command line, and those commands run.

Every `` `workbench ...` `` command in a notebook's first markdown cell must parse with the real
parser (sub-command and flags exist, placeholders filled in); the calibrate -> quantize chain of
notebooks 10 and 20 runs for real: a curated set from `workbench calibrate -o FILE` is what
`workbench quantize --calibration FILE` quantizes with (and `--calibration N` keeps working).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import nbformat
import pytest

from workbench import cli

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
COMMAND = re.compile(r"`(workbench [^`]+)`")
#: placeholders the notebooks use in their commands, and a value that parses
PLACEHOLDERS = {"MODEL": "model.tflite", "NAME": "evk", "DIR": "dir", "REMOTE_PYTHON": "python3"}


def _commands(path: Path) -> list[str]:
    intro = nbformat.read(path, as_version=4).cells[0].source
    return COMMAND.findall(intro)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_names_a_command_that_parses(path):
    commands = _commands(path)
    assert commands, f"{path.name}: the first cell names no `workbench ...` command"
    parser = cli.build_parser()
    for command in commands:
        argv = [PLACEHOLDERS.get(a, a) for a in shlex.split(command.replace("[", "").replace("]", ""))][1:]
        with contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                args = parser.parse_args(argv)
            except SystemExit:
                pytest.fail(f"{path.name}: `{command}` does not parse: {err.getvalue().strip()}")
        assert getattr(args, "func", None), f"{path.name}: `{command}` names no command"


def _main(capsys, *argv: str) -> tuple[int, dict]:
    code = cli.main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_quantize_takes_a_calibration_set_made_by_calibrate(reference, tmp_path, capsys):
    """Notebook 10 then 20 from the command line: the curated set is the one quantized with."""
    cal_file = tmp_path / "calibration.json"
    code, cal = _main(capsys, "calibrate", "--data", "digits-conditions", "--strategy", "stratified", "-n", "60",
                      "-o", str(cal_file))
    assert code == 0 and cal_file.is_file()
    from workbench.calibration.curate import CalibrationSet
    curated = CalibrationSet.load(cal_file)
    code, q = _main(capsys, "quantize", str(reference.saved_model), "--calibration", str(cal_file),
                    "-o", str(tmp_path / "from_file"))
    assert code == 0, q
    assert q["calibration_hash"] == curated.hash and q["calibration_size"] == 60
    manifest = json.loads(Path(q["manifest"]).read_text())
    assert curated.hash in json.dumps(manifest)
    # N still means the first N samples of the pool: another calibration, another hash
    code, first_n = _main(capsys, "quantize", str(reference.saved_model), "--calibration", "60",
                          "-o", str(tmp_path / "first_n"))
    assert code == 0 and first_n["calibration_hash"] != curated.hash and first_n["calibration_size"] == 60


def test_quantize_calibration_errors(tmp_path, capsys):
    with pytest.raises(SystemExit):          # argparse: N must be positive
        cli.build_parser().parse_args(["quantize", "m.keras", "--calibration", "0", "-o", "x"])
    code = cli.main(["quantize", "m.keras", "--calibration", str(tmp_path / "nope.json"), "-o",
                     str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and "calibration set file" in err and "nope.json' does not exist" in err
