"""``workbench tools``: the pinned tool environments (onnx2tf, the Vela a BSP ships)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    from ._cli import add_json_flag
    tools = sub.add_parser(
        "tools", help="pinned tool environments (onnx2tf, older Vela): list or install ahead of need",
        description="Tools whose dependencies cannot live beside the workbench's own get a virtual "
                    "environment of their own under the cache folder, created on first need from an exact "
                    "lock. `install` creates them ahead (needs the package index once).")
    tools_sub = tools.add_subparsers(dest="tools_command", metavar="ACTION", required=True)
    lst = tools_sub.add_parser("list", help="every known tool, its lock sha256 and whether it is installed")
    add_json_flag(lst)
    lst.set_defaults(func=_list)
    inst = tools_sub.add_parser("install", help="create the environments of these tools now")
    inst.add_argument("names", nargs="+", metavar="NAME", help="tool names (see `workbench tools list`)")
    inst.add_argument("--force", action="store_true", help="remove and recreate an installed environment")
    add_json_flag(inst)
    inst.set_defaults(func=_install)
    ver = tools_sub.add_parser("verify", help="hash every file of these environments again and compare with "
                                              "the content hash recorded at install")
    ver.add_argument("names", nargs="+", metavar="NAME", help="tool names (see `workbench tools list`)")
    add_json_flag(ver)
    ver.set_defaults(func=_verify)


def _verify(args: argparse.Namespace) -> int:
    from . import toolenv
    from ._cli import emit
    for name in args.names:
        toolenv.spec(name)
    digests = {name: toolenv.verify(name) for name in args.names}
    emit({"tools": digests}, as_json=args.json,
         text="\n".join(f"{n:<14} unchanged since install, content sha256 {d[:16]}" for n, d in digests.items()))
    return 0


def _list(args: argparse.Namespace) -> int:
    from . import toolenv
    from ._cli import emit
    rows: list[dict[str, Any]] = []
    from .errors import ToolError
    for name, tool in toolenv.TOOLS.items():
        try:
            env, damage = toolenv.find(name), None
        except ToolError as exc:
            env, damage = None, str(exc)
        rows.append({"name": name, "summary": tool.summary, "lock_sha256": tool.lock_sha256,
                     "installed": env is not None, "versions": dict(env.versions) if env else {}, "damaged": damage})
    state = {r["name"]: "DAMAGED" if r["damaged"] else "installed" if r["installed"] else "not installed" for r in rows}
    text = "\n".join(f"{r['name']:<14} {state[r['name']]:<14} "
                     f"lock {r['lock_sha256'][:12]}  {r['summary']}" for r in rows)
    emit({"tools": rows}, as_json=args.json, text=text)
    return 0


def _install(args: argparse.Namespace) -> int:
    from . import toolenv
    from ._cli import emit
    for name in args.names:  # unknown names fail before anything is installed
        toolenv.spec(name)
    envs = [toolenv.ensure(name, force=args.force) for name in args.names]
    emit({"tools": [e.to_dict() for e in envs]}, as_json=args.json,
         text="\n".join(e.summary() for e in envs))
    return 0
