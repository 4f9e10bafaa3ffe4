"""boards.yaml: loading and validation with errors naming the file and the board."""

from __future__ import annotations

import pytest

from workbench.board.inventory import Board, get_board, load_boards, parse_destination
from workbench.errors import BoardError

GOOD = """\
boards:
  evk8mp:
    destination: root@192.168.1.20
    target: imx8mp
    delegate: /usr/lib/libvx_delegate.so
    benchmark_model: /usr/bin/tensorflow-lite-2.11.1/examples/benchmark_model
  evk93:
    destination: evk93-alias
    target: imx93
    workdir: /home/root/wb
    python: /usr/bin/python3.11
"""


def _write(tmp_path, text):
    path = tmp_path / "boards.yaml"
    path.write_text(text)
    return path


def test_loads_and_fills_defaults(tmp_path):
    boards = load_boards(_write(tmp_path, GOOD))
    assert set(boards) == {"evk8mp", "evk93"}
    b = boards["evk8mp"]
    assert (b.target, b.delegate, b.workdir, b.python) == \
        ("imx8mp", "/usr/lib/libvx_delegate.so", "/tmp/npu-workbench", "python3")
    assert boards["evk93"].delegate is None and boards["evk93"].workdir == "/home/root/wb"
    assert Board.from_dict(b.to_dict()) == b


def test_example_file_at_repo_root_is_valid():
    from pathlib import Path
    example = Path(__file__).resolve().parents[2] / "boards.example.yaml"
    boards = load_boards(example)
    assert {b.target for b in boards.values()} == {"imx8mp", "imx93", "imx95"}


@pytest.mark.parametrize("entry, phrase", [
    ("destination: root@h\n    target: imx8m", "`target` must be one of 'imx8mp', 'imx93', 'imx95'"),
    ("target: imx93", "is missing destination"),
    ("destination: root@h\n    target: imx93\n    colour: red", "unknown setting(s) 'colour'"),
    ("destination: root@h\n    target: imx93\n    password: hunter2", "secrets never go into"),
    ("destination: root@h:70000\n    target: imx93", "must be a number in 1..65535"),
    ("destination: root@h\n    target: imx93\n    delegate: 5", "`delegate` must be a string"),
    ("destination: root@h\n    target: imx93\n    workdir: -rf", "must be a path, not an option"),
])
def test_errors_name_file_and_board(tmp_path, entry, phrase):
    path = _write(tmp_path, f"boards:\n  myboard:\n    {entry}\n")
    with pytest.raises(BoardError) as info:
        load_boards(path)
    message = str(info.value)
    assert phrase in message
    assert str(path) in message and "'myboard'" in message


def test_file_level_errors(tmp_path):
    with pytest.raises(BoardError, match="does not exist.*boards.example.yaml"):
        load_boards(tmp_path / "missing.yaml")
    with pytest.raises(BoardError, match="expected a top-level `boards:`"):
        load_boards(_write(tmp_path, "- a\n- b\n"))
    with pytest.raises(BoardError, match="not valid YAML"):
        load_boards(_write(tmp_path, "boards: [unclosed\n"))
    with pytest.raises(BoardError, match="unknown top-level key"):
        load_boards(_write(tmp_path, GOOD + "extra: 1\n"))


def test_get_board_unknown_name_lists_the_known_ones(tmp_path):
    path = _write(tmp_path, GOOD)
    assert get_board("evk93", path).destination == "evk93-alias"
    with pytest.raises(BoardError, match="`board` must be one of 'evk8mp', 'evk93'"):
        get_board("evk95", path)


def test_parse_destination_forms():
    assert parse_destination("alias") .host == "alias"
    d = parse_destination("root@10.0.0.2:2222")
    assert (d.user, d.host, d.port) == ("root", "10.0.0.2", 2222)
    assert parse_destination("root@[::1]:22").host == "::1"
    assert str(d) == "root@10.0.0.2:2222"


@pytest.mark.parametrize("key,value,phrase", [
    ("destination", "$(reboot)", "is not an SSH destination"),
    ("destination", "root@host;id", "is not an SSH destination"),
    ("destination", "-oProxyCommand=id", "is not an SSH destination"),
    ("python", "-c import os", "must be a path, not an option"),
    ("ssh_config", "-F/etc/passwd", "must be a path, not an option"),
    ("workdir", "/tmp/x\nrm -rf /", "must be a path, not an option or a line break"),
])
def test_hostile_inventory_values_are_refused(tmp_path, key, value, phrase):
    import yaml
    entry = {"destination": "root@10.0.0.2", "target": "imx8mp", key: value}
    path = tmp_path / "boards.yaml"
    path.write_text(yaml.safe_dump({"boards": {"evk": entry}}))
    with pytest.raises(BoardError, match=phrase):
        load_boards(path)
