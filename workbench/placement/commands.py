"""``workbench placement MODEL --target T``: per-op NPU/CPU placement with reasons."""

from __future__ import annotations

import argparse

TARGET_CHOICES_HELP = "imx8mp, imx93, imx95, or 'all' (comma-separated lists work too)"


def register(subparsers: argparse._SubParsersAction) -> None:
    from .._cli import add_json_flag
    p = subparsers.add_parser(
        "placement", help="which ops of an INT8 .tflite run on the NPU, and why",
        description="Place every op of an INT8 .tflite on a target: imx93 through Vela (the "
                    "authority), imx8mp and imx95 from their rule tables (predicted; imx95 runs "
                    "neutron-converter when it is on PATH).")
    p.add_argument("model", metavar="MODEL", help="an INT8 .tflite file")
    p.add_argument("--target", "-t", required=True, help=TARGET_CHOICES_HELP)
    p.add_argument("--no-vela", action="store_true",
                   help="imx93: predict from the rule table instead of compiling with Vela")
    p.add_argument("--vela-output", metavar="PATH", default=None,
                   help="imx93: also copy the compiled <model>_vela.tflite to PATH (folder or file)")
    p.add_argument("--ops", action="store_true", help="text output: list every op, not only CPU ops")
    add_json_flag(p)
    p.set_defaults(func=run)


def _targets(value: str) -> list[str]:
    from ..targets import TARGET_IDS
    if value.strip().lower() == "all":
        return list(TARGET_IDS)
    return [v.strip() for v in value.split(",") if v.strip()]


def format_report(report, *, all_ops: bool = False) -> str:
    lines = [report.summary()]
    if report.estimated_latency_ms is not None:
        lines.append(f"  estimated latency {report.estimated_latency_ms:.4f} ms - {report.latency_label}")
    if report.vela_model:
        lines.append(f"  Vela-compiled model: {report.vela_model}")
    for f in report.findings:
        lines.append(f"  [{f.severity}] {f.check}: {f.detail}")
    for island in report.cpu_islands:
        lines.append(f"  CPU island: ops {', '.join(map(str, island.ops))}")
    for o in report.ops:
        if all_ops or o.placement == "CPU":
            lines.append(f"  #{o.index:<4d} {o.type:24s} {o.placement}  {o.name}")
            for r in o.reasons:
                lines.append(f"        {r.constraint}: {r.detail}")
    for note in report.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .._cli import emit
    from ..errors import ModelError, missing_file
    from ..targets import get_target
    from .analyze import analyze_placement
    ids = [get_target(t).id for t in _targets(args.target)]   # unknown target -> TargetError
    if not Path(args.model).is_file():
        raise missing_file("model file", args.model, "give the path of an INT8 .tflite", ModelError)
    reports = [analyze_placement(args.model, t, use_vela=not args.no_vela,
                                 vela_output=args.vela_output) for t in ids]
    text = "\n\n".join(format_report(r, all_ops=args.ops) for r in reports)
    if len(reports) == 1:
        emit(reports[0], as_json=args.json, text=text)
    else:
        emit({"reports": [r.to_dict() for r in reports]}, as_json=args.json, text=text)
    return 0
