"""`workbench bench` and `workbench bisect` reach a board the same way: one helper adds their flags."""

from __future__ import annotations

import argparse

import pytest

from workbench import cli
from workbench.board.commands import add_board_flags

#: what the two commands mean by these differs (what --local runs, what --record keeps): said per command
OWN_HELP = {"local", "replay", "record", "timeout"}


def _actions(command: str) -> dict[str, argparse.Action]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return {a.dest: a for a in sub._actions}


def _board_dests() -> set[str]:
    probe = argparse.ArgumentParser()
    add_board_flags(probe, local="l", replay="r", record="k", timeout="t")
    return {a.dest for a in probe._actions} - {"help"}


def test_bench_and_bisect_take_the_same_board_and_ssh_flags():
    bench, bisect = _actions("bench"), _actions("bisect")
    dests = _board_dests()
    assert {"board", "host", "local", "replay", "ssh_config", "known_hosts", "connect_timeout", "python",
            "delegate", "workdir", "boards_file", "record", "timeout"} <= dests
    for dest in sorted(dests):
        same = ("option_strings", "default", "type", "metavar", "required") + (() if dest in OWN_HELP else ("help",))
        for attr in same:
            assert getattr(bench[dest], attr) == getattr(bisect[dest], attr), (dest, attr)


@pytest.mark.parametrize("command", [["bench", "m.tflite"], ["bisect", "m.tflite", "--data", "digits-conditions"]])
def test_the_shared_flags_parse_the_same_way(command, capsys):
    parser = cli.build_parser()
    args = parser.parse_args([*command, "--host", "pi@board:2222", "--ssh-config", "cfg", "--known-hosts", "kh",
                              "--connect-timeout", "3", "--timeout", "60", "--workdir", "/tmp/w"])
    assert (args.host, args.ssh_config, args.known_hosts, args.connect_timeout, args.timeout, args.workdir) == (
        "pi@board:2222", "cfg", "kh", 3.0, 60.0, "/tmp/w")
    with pytest.raises(SystemExit):                      # exactly one place to run
        parser.parse_args([*command, "--host", "h", "--local"])
    assert "not allowed with argument" in capsys.readouterr().err
