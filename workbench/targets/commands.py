"""``workbench targets``: list the target tables, or write docs/targets/<id>.md from them."""

from __future__ import annotations

import argparse

DEFAULT_DOCS_DIR = "docs/targets"


def register(subparsers: argparse._SubParsersAction) -> None:
    from .._cli import add_json_flag
    p = subparsers.add_parser(
        "targets", help="list the NPU targets and their rule tables",
        description="List the i.MX NPU targets (imx8mp, imx93, imx95) with their delegate, version, "
                    "op count and placement authority.")
    add_json_flag(p)
    p.add_argument("--docs", nargs="?", const=DEFAULT_DOCS_DIR, default=None, metavar="DIR",
                   help=f"write one Markdown page per target into DIR (default {DEFAULT_DOCS_DIR})")
    p.set_defaults(func=run)


def write_docs(directory: str) -> list[str]:
    """Write ``<directory>/<id>.md`` for every target (atomically); return the paths."""
    from pathlib import Path

    from .._io import atomic_write_text
    from . import list_targets
    paths = []
    for target in list_targets():
        path = Path(directory) / f"{target.id}.md"
        atomic_write_text(path, target.to_markdown())
        paths.append(str(path))
    return paths


def run(args: argparse.Namespace) -> int:
    from .._cli import emit
    from . import list_targets
    if args.docs is not None:
        paths = write_docs(args.docs)
        emit({"written": paths}, as_json=args.json, text="\n".join(f"wrote {p}" for p in paths))
        return 0
    targets = list_targets()
    lines = [f"{'id':8} {'npu':38} {'delegate':24} {'ops':>4} {'rules':>5}  {'authority':22} default BSP"]
    for t in targets:
        rel = t.release
        ships = f" ({rel.describe()})" if rel is not None else ""
        lines.append(f"{t.id:8} {t.npu:38} {t.delegate:24} {len(t.supported_ops):4d} "
                     f"{len(t.constraints):5d}  {t.authority:22} {t.default_bsp}{ships}")
    lines.append("other releases: " + "; ".join(
        f"{t.id} " + ", ".join(r.id + ("" if r.has_rules else " (version only)")
                               for r in reversed(t.bsp_releases) if r.id != t.default_bsp)
        for t in targets if len(t.bsp_releases) > 1))
    emit([t.to_dict() for t in targets], as_json=args.json, text="\n".join(lines))
    return 0
