"""``workbench placement MODEL --target T``: per-op NPU/CPU placement with reasons.

Also the cross-target diff (``--target all``: the ops the targets place differently, with each
target's reason), the compiler comparison on imx93 (``--vela-versions 3.10.0,5.2.0``) and the
input-size sweep (``--sizes 96,160,224`` on a Keras model).
"""

from __future__ import annotations

import argparse

TARGET_CHOICES_HELP = "imx8mp, imx93, imx95, or 'all' (comma-separated lists work too)"


def register(subparsers: argparse._SubParsersAction) -> None:
    from .._cli import add_json_flag
    p = subparsers.add_parser(
        "placement", help="which ops of an INT8 .tflite run on the NPU, and why",
        description="Place every op of an INT8 .tflite on a target: imx93 through the Vela its BSP "
                    "ships (the authority), imx8mp and imx95 from their rule tables (predicted; imx95 "
                    "runs neutron-converter when it is on PATH). Several targets: also the table of ops "
                    "they place differently. --sizes: re-export a Keras model at each input size.")
    p.add_argument("model", metavar="MODEL",
                   help="an INT8 .tflite file (with --sizes: a Keras .keras/.h5 file)")
    p.add_argument("--target", "-t", required=True, help=TARGET_CHOICES_HELP)
    p.add_argument("--bsp", metavar="RELEASE", default=None,
                   help="NXP BSP release whose rules and compiler decide (e.g. lf-6.6.3_1.0.0; "
                        "default: the newest each target's tables know; `workbench targets` lists them)")
    p.add_argument("--vela-versions", metavar="V1,V2", default=None,
                   help="imx93: also compile with these Vela versions and list the ops they place "
                        "differently from the BSP's Vela (default: the installed Vela; '' for none)")
    p.add_argument("--no-vela", action="store_true",
                   help="imx93: predict from the rule table instead of compiling with Vela")
    p.add_argument("--vela-output", metavar="PATH", default=None,
                   help="imx93: also copy the compiled <model>_vela.tflite to PATH (folder or file)")
    p.add_argument("--sizes", metavar="S1,S2", default=None,
                   help="input-size sweep: re-export the Keras MODEL at each size (N or HxW), quantize "
                        "with random representative data (placement only) and place it on each target")
    p.add_argument("--ops", action="store_true", help="text output: list every op, not only CPU ops")
    add_json_flag(p)
    p.set_defaults(func=run)


def _targets(value: str) -> list[str]:
    from ..targets import TARGET_IDS
    if value.strip().lower() == "all":
        return list(TARGET_IDS)
    return [v.strip() for v in value.split(",") if v.strip()]


def _versions(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _sizes(value: str) -> list[tuple[int, int]]:
    from ..errors import WorkbenchError
    out = []
    for item in (v.strip() for v in value.split(",") if v.strip()):
        parts = item.lower().split("x")
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            nums = []
        if len(nums) not in (1, 2) or any(n <= 0 for n in nums):
            raise WorkbenchError(f"`--sizes` must be a comma-separated list of N or HxW (positive "
                                 f"integers), e.g. 96,160,224. Got {item!r} instead.")
        out.append((nums[0], nums[-1]))
    if not out:
        raise WorkbenchError("`--sizes` is empty; give e.g. --sizes 96,160,224.")
    return out


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
        if all_ops or o.placement == "CPU" or o.notes:
            lines.append(f"  #{o.index:<4d} {o.type:24s} {o.placement}  {o.name}")
            for r in o.reasons:
                lines.append(f"        {r.constraint}: {r.detail}")
            for n in o.notes:
                lines.append(f"        note: {n}")
    if report.compiler_runs:
        lines.append(format_compiler_table(report))
    for note in report.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def format_compiler_table(report) -> str:
    """Per op, the placement each compiler version chose (``*`` marks a disagreement)."""
    runs = report.compiler_runs
    heads = [f"vela {r.version}" + (" (BSP)" if r.bsp_compiler else "") for r in runs]
    width = max(len(h) for h in heads) + 2
    differ = {d.index for d in report.compiler_disagreements}
    lines = ["  compilers: " + "; ".join(
        f"{h}: {r.npu_ops}/{len(report.ops)} NPU"
        + ("" if r.estimated_latency_ms is None else f", {r.estimated_latency_ms:.4g} ms estimate")
        for h, r in zip(heads, runs)),
        "  " + f"{'#':>4} {'type':22s}" + "".join(f"{h:>{width}}" for h in heads)]
    for o in report.ops:
        cells = "".join(f"{('CPU' if o.index in r.cpu_ops else 'NPU'):>{width}}" for r in runs)
        lines.append(f"  {o.index:>4} {o.type:22s}{cells}{'  *' if o.index in differ else ''}")
    for d in report.compiler_disagreements:
        lines.append(f"  * #{d.index} {d.type}: {d.bsp_compiler} {d.bsp_placement}, {d.other_compiler} "
                     f"{d.other_placement} - {d.reason}")
    if not report.compiler_disagreements:
        lines.append("  the compiler versions agree on every op")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .._cli import emit
    from ..errors import ModelError, missing_file
    from ..targets import get_target
    ids = [get_target(t).id for t in _targets(args.target)]   # unknown target -> TargetError
    if args.bsp is not None:                                   # unknown release -> TargetError
        if len(ids) == 1:
            get_target(ids[0], bsp=args.bsp)
        else:
            bsp_parameters(",".join(ids), args.bsp)
    if args.sizes is not None:
        return _run_sweep(args, ids)
    if not Path(args.model).is_file():
        raise missing_file("model file", args.model, "give the path of an INT8 .tflite", ModelError)
    from .analyze import analyze_placement
    versions = _versions(args.vela_versions)
    reports = [analyze_placement(args.model, t, use_vela=not args.no_vela, vela_output=args.vela_output,
                                 bsp=_bsp_for(t, args.bsp, len(ids)),
                                 vela_versions=versions if get_target(t).compiler == "vela" else None)
               for t in ids]
    text = "\n\n".join(format_report(r, all_ops=args.ops) for r in reports)
    if len(reports) == 1:
        emit(reports[0], as_json=args.json, text=text)
        return 0
    from .compare import PlacementComparison
    comparison = PlacementComparison(model=str(args.model), targets=tuple(ids), reports=tuple(reports))
    text += "\n\n" + comparison.format_differences()
    emit(comparison, as_json=args.json, text=text)
    return 0


def bsp_parameters(targets: str, bsp: str) -> dict[str, str]:
    """``{target: bsp}`` for the targets of ``targets`` ("imx93,imx95" or "all") that know release ``bsp``."""
    from .compare import bsp_for_targets
    return bsp_for_targets(_targets(targets), bsp)


def _bsp_for(target: str, bsp: str | None, n_targets: int) -> str | None:
    """``--bsp`` with several targets applies to those with rules for the release (others: their newest)."""
    if bsp is None or n_targets == 1:
        return bsp
    from .compare import _bsp
    return _bsp(target, bsp)


def _run_sweep(args: argparse.Namespace, ids: list[str]) -> int:
    from .._cli import emit
    from ..models.builtin import builtin_path
    from .compare import compare_placement
    model = builtin_path(args.model)
    comparison = compare_placement(model, ids, input_sizes=_sizes(args.sizes), use_vela=not args.no_vela,
                                   bsp=args.bsp)
    emit(comparison, as_json=args.json, text=comparison.format_sweep())
    return 0
