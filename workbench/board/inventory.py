"""The board inventory: ``boards.yaml``.

Example (see ``boards.example.yaml`` at the project root)::

    boards:
      evk8mp:
        destination: evk8mp          # an alias from ~/.ssh/config, or user@host[:port]
        target: imx8mp               # imx8mp | imx93 | imx95
        delegate: /usr/lib/libvx_delegate.so
        benchmark_model: /usr/bin/tensorflow-lite-2.11.1/examples/benchmark_model  # optional
        workdir: /tmp/npu-workbench  # optional, this default
        python: python3              # optional, this default

Secrets never live here: authentication is by key or agent through the OpenSSH
configuration.  Keys such as ``password`` are refused.

Trust: ``boards.yaml`` and the ``ssh_config`` it names are trusted like code.  An
OpenSSH config can run local commands (``ProxyCommand``, ``LocalCommand``,
``Match exec``), and ``python``/``benchmark_model`` name programs run on the
board.  Use only inventories and SSH configs you wrote or reviewed (see
docs/security.md).  The workbench still refuses destinations and paths that
could be read as options or shell code.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._results import Result
from ..errors import BoardError

DEFAULT_FILE = "boards.yaml"
DEFAULT_WORKDIR = "/tmp/npu-workbench"
DEFAULT_PYTHON = "python3"


class _TypicalDelegates(Mapping[str, str]):
    """The usual delegate library of each target, read from its table (``Target.delegate_path``)."""

    def __getitem__(self, target: str) -> str:
        from ..errors import TargetError
        from ..targets import get_target
        try:
            return get_target(target).delegate_path
        except TargetError:
            raise KeyError(target) from None

    def __iter__(self) -> Iterator[str]:
        from ..targets import target_ids
        return iter(target_ids())

    def __len__(self) -> int:
        from ..targets import target_ids
        return len(target_ids())


#: the usual delegate library of each target (used in messages only)
TYPICAL_DELEGATE: Mapping[Any, str] = _TypicalDelegates()

_REQUIRED = ("destination", "target")
_OPTIONAL = ("delegate", "benchmark_model", "workdir", "python", "ssh_config", "known_hosts",
             "description", "kernels")
#: CPU kernels a board's runtime can be told to use (``workbench bisect``; see remote_runner.KERNELS)
KERNEL_CHOICES = ("default", "optimized", "reference")
_SECRET_WORDS = ("password", "passphrase", "secret", "token", "private_key")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_DEST = re.compile(r"^(?:(?P<user>[^@\s:]+)@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[^@\s:\[\]]+)"
                   r"(?::(?P<port>[^:]*))?$")
#: an allow-list, not a deny-list: user names and host names/aliases/IPv4 are letters, digits,
#: '.', '_' and '-' (never first); IPv6 is hex, ':' and '.'.  No shell or ssh metacharacter
#: ($, backtick, ;, |, &, quotes, whitespace, %, -option) can reach ssh or a shell.
_SAFE_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_SAFE_HOST = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}|[0-9A-Fa-f:.]+(?:%[A-Za-z0-9_.-]+)?)$")


@dataclass(frozen=True)
class Destination:
    """An SSH destination split into its parts (host may be an OpenSSH alias)."""

    host: str
    user: str | None = None
    port: int | None = None

    def __str__(self) -> str:
        text = f"{self.user}@{self.host}" if self.user else self.host
        return f"{text}:{self.port}" if self.port else text


_CONTROL = tuple(chr(c) for c in range(32)) + ("\x7f",)


def parse_destination(text: str, *, where: str = "destination") -> Destination:
    """``alias``, ``host``, ``user@host`` or ``user@host:port`` (``[v6addr]:port``)."""
    if not isinstance(text, str) or not text.strip():
        raise BoardError(f"{where}: the SSH destination must be a non-empty string such as "
                         f"'root@192.168.1.20' or an alias from ~/.ssh/config. Got {text!r} instead.")
    m = _DEST.match(text.strip())
    if (not m or not _SAFE_HOST.match(m.group("host").strip("[]"))
            or (m.group("user") is not None and not _SAFE_USER.match(m.group("user")))):
        raise BoardError(f"{where}: {text!r} is not an SSH destination. Expected an alias from "
                         "your OpenSSH config or user@host[:port]: letters, digits, '.', '_' and '-' "
                         "(not first), never spaces, quotes, '$', backticks, ';' or other shell characters.")
    port = None
    if m.group("port") is not None:
        if not m.group("port").isdigit() or not 0 < int(m.group("port")) < 65536:
            raise BoardError(f"{where}: the port in {text!r} must be a number in 1..65535.")
        port = int(m.group("port"))
    host = m.group("host").strip("[]")
    return Destination(host=host, user=m.group("user"), port=port)


@dataclass(frozen=True)
class Board(Result):
    """One board of the inventory."""

    name: str
    destination: str
    target: str
    delegate: str | None = None
    benchmark_model: str | None = None
    workdir: str = DEFAULT_WORKDIR
    python: str = DEFAULT_PYTHON
    ssh_config: str | None = None
    known_hosts: str | None = None
    description: str = ""
    source: str = ""
    kernels: str = "default"           # CPU kernels of the board's runtime (python runner, accuracy, bisect)

    def summary(self) -> str:
        return (f"board {self.name} ({self.target}) at {self.destination}, delegate "
                f"{self.delegate or 'none'}")


def _check_board(name: Any, entry: Any, source: str) -> Board:
    where = f"{source}: board {name!r}"
    if not isinstance(name, str) or not _NAME.match(name):
        raise BoardError(f"{source}: board name {name!r} must be letters, digits, '.', '_' or '-'.")
    if not isinstance(entry, dict):
        raise BoardError(f"{where} must be a mapping of settings (destination, target, ...). "
                         f"Got {type(entry).__name__} instead.")
    for key in entry:
        if any(word in str(key).lower() for word in _SECRET_WORDS):
            raise BoardError(f"{where}: {key!r} is not accepted: secrets never go into boards.yaml. "
                             "Next: authenticate with a key or ssh-agent configured in your "
                             "OpenSSH config (IdentityFile).")
    unknown = sorted(set(map(str, entry)) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        allowed = ", ".join(_REQUIRED + _OPTIONAL)
        raise BoardError(f"{where}: unknown setting(s) {', '.join(map(repr, unknown))}. "
                         f"Allowed: {allowed}.")
    missing = [k for k in _REQUIRED if entry.get(k) in (None, "")]
    if missing:
        raise BoardError(f"{where} is missing {', '.join(missing)}. Next: add e.g. "
                         "`destination: root@192.168.1.20` and `target: imx8mp`.")
    for key in _REQUIRED + _OPTIONAL:
        if key in entry and entry[key] is not None and not isinstance(entry[key], str):
            raise BoardError(f"{where}: `{key}` must be a string. Got {entry[key]!r} instead.")
    parse_destination(entry["destination"], where=where)
    target = entry["target"]
    from ..targets import target_ids
    if target not in target_ids():
        listed = ", ".join(repr(t) for t in target_ids())
        raise BoardError(f"{where}: `target` must be one of {listed}. Got {target!r} instead.")
    for key in ("delegate", "benchmark_model", "workdir", "python", "ssh_config", "known_hosts"):
        value = entry.get(key)
        if value and (value.startswith("-") or any(c in value for c in _CONTROL)):
            raise BoardError(f"{where}: `{key}` must be a path, not an option or a line break. Got {value!r}.")
    kernels = entry.get("kernels") or "default"
    if kernels not in KERNEL_CHOICES:
        raise BoardError(f"{where}: `kernels` must be one of {', '.join(KERNEL_CHOICES)}. Got {kernels!r} instead.")
    workdir = entry.get("workdir") or DEFAULT_WORKDIR
    return Board(kernels=kernels, name=name, destination=entry["destination"].strip(), target=target,
                 delegate=entry.get("delegate") or None,
                 benchmark_model=entry.get("benchmark_model") or None, workdir=workdir,
                 python=entry.get("python") or DEFAULT_PYTHON,
                 ssh_config=entry.get("ssh_config") or None,
                 known_hosts=entry.get("known_hosts") or None,
                 description=entry.get("description") or "", source=source)


def load_boards(path: str | os.PathLike | None = None) -> dict[str, Board]:
    """Read and validate a board inventory; returns ``{name: Board}``.

    ``path`` defaults to ``boards.yaml`` in the current (project) folder.  Errors
    name the file and the board.
    """
    import yaml

    file = Path(path) if path is not None else Path(DEFAULT_FILE)
    if not file.is_file():
        raise BoardError(f"board inventory {str(file)!r} does not exist. Next: copy "
                         "boards.example.yaml to boards.yaml and describe your boards, or use "
                         "--host DEST / --local.")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise BoardError(f"{file}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("boards"), dict) or not data["boards"]:
        raise BoardError(f"{file}: expected a top-level `boards:` mapping of board names to "
                         "settings (see boards.example.yaml).")
    extra = sorted(set(data) - {"boards"})
    if extra:
        raise BoardError(f"{file}: unknown top-level key(s) {', '.join(map(repr, extra))}; "
                         "only `boards:` is read.")
    return {name: _check_board(name, entry, str(file)) for name, entry in data["boards"].items()}


def get_board(name: str, path: str | os.PathLike | None = None) -> Board:
    """One board by name from the inventory."""
    boards = load_boards(path)
    if name not in boards:
        listed = ", ".join(repr(b) for b in boards)
        raise BoardError(f"`board` must be one of {listed} (from {path or DEFAULT_FILE}). "
                         f"Got {name!r} instead.")
    return boards[name]
