"""``workbench batch``: the stage notebooks per target, shareable HTML reports, the CI gate."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._cli import add_json_flag
from ..vocab import STRATEGIES, TARGETS

if TYPE_CHECKING:
    from ..run_summary import RunSummary


def register(sub: Any) -> None:
    p = sub.add_parser(
        "batch", help="run the stage notebooks per target (papermill) and write HTML reports",
        description="Execute notebooks/10..50 per target with papermill on the npu-workbench kernel, export "
                    "each to self-contained HTML (with code, and code-hidden), then 90_summary, summary.json, "
                    "summary.csv and index.html. Exit 0 when every target ran and the gate passed, 1 when a "
                    "target failed or the gate failed, 2 on bad input.")
    p.add_argument("--targets", default=",".join(TARGETS), metavar="T[,T...]",
                   help="targets to run (default: imx8mp,imx93,imx95)")
    p.add_argument("--model", default="reference", metavar="M",
                   help="a built-in model's name (default reference; `workbench model --help` lists them) or an "
                        "FP32 .keras/.h5 file, SavedModel "
                        "folder, .onnx (converted with onnx2tf) or FP32 .tflite")
    p.add_argument("--data", default="digits-conditions", metavar="D",
                   help="dataset name or path (default: digits-conditions)")
    p.add_argument("--out", default="reports", metavar="DIR", help="output folder (default: reports)")
    p.add_argument("--gate", default=None, metavar="FILE", help="quality gate YAML (see gate.yaml)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="targets executed at the same time (default 1)")
    p.add_argument("--run-id", default=None, help="run folder name under DIR/runs/ (default: the local time)")
    p.add_argument("--recipe", default="auto",
                   help="a8w8_pc, a8w8_pt, a16w8_pc or auto (imx8mp a8w8_pt, imx93/imx95 a8w8_pc; default)")
    p.add_argument("--calibration-strategy", default="stratified", choices=STRATEGIES)
    p.add_argument("--calibration-size", type=int, default=200, metavar="N", help="calibration samples (default 200)")
    p.add_argument("--seed", type=int, default=0, help="seed of the calibration draw (default 0)")
    p.add_argument("--board", action="append", default=None, metavar="[TARGET=]NAME",
                   help="board from boards.yaml to time on (repeat per target as TARGET=NAME); "
                        "without it latency is timed on the host CPU and labelled so")
    p.add_argument("--replay", metavar="DIR", default=None,
                   help="time every target from a board recording (bench --record) instead of a board or "
                        "the host CPU; DIR may hold one recording per target (labelled 'replayed')")
    p.add_argument("--record", metavar="DIR", default=None,
                   help="with --board: keep each target's board session in DIR/<target> (replay it with --replay)")
    p.add_argument("--timing-runs", type=int, default=100, metavar="N", help="timed invocations (default 100)")
    p.add_argument("--timing-warmup", type=int, default=10, metavar="N", help="warm-up invocations (default 10)")
    p.add_argument("--stages", default=None, metavar="S[,S...]",
                   help="only these stages: calibration, quantize, accuracy, placement, timing (or 10..50)")
    p.add_argument("--bsp", default=None, metavar="RELEASE",
                   help="NXP BSP release whose rules and compiler place the ops (notebook parameter `bsp`) "
                        "for the targets that know it; the others, and the default, use the newest release "
                        "their tables know")
    p.add_argument("--input-spec", default=None, metavar="FILE",
                   help="the model's input contract as a YAML card (notebook parameter `input_spec`) for every "
                        "stage: calibration (coverage embeddings), quantization, accuracy, board timing; default "
                        "the card beside the model (<model>.card.yaml), else inferred (docs/byom.md)")
    p.add_argument("--metric", default=None, metavar="NAME|MODULE:FUNCTION",
                   help="task metric of the accuracy stage (notebook parameter `metric`): top1, pck or "
                        "module:function called as metric(outputs, labels)")
    p.add_argument("-p", "--param", action="append", default=[], metavar="[TARGET:]NAME=VALUE",
                   help="extra notebook parameter (a Python literal or a string), for one target with TARGET:")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="per-cell timeout in seconds")
    p.add_argument("--kernel", default="npu-workbench", help="Jupyter kernel (default npu-workbench)")
    p.add_argument("--no-progress", action="store_true", help="no progress lines (one per target and stage)")
    p.add_argument("--verbose", action="store_true",
                   help="let TensorFlow, Jupyter and nbconvert print to the terminal; by default what they print "
                        "goes to runs/<run id>/batch.log")
    p.add_argument("--sweep", action="store_true",
                   help="also run notebooks/60_sweep once across the targets (the batch's model, data, seed and "
                        "gate; axes with -p recipes=... -p strategies=... -p sizes=64,256 -p exclusions=...): report, "
                        "pareto.png and sweep.json in DIR/sweep/, linked from index.html, reused when unchanged")
    p.add_argument("--rerun", action="store_true",
                   help="execute every notebook again; by default a notebook whose inputs did not change since "
                        "the last batch into the same --out and --run-id is reused with its reports")
    from ..pipeline.flags import add_spec_flags
    add_spec_flags(p, skip=NOT_SPEC)            # every other notebook parameter of the spec, e.g. --accuracy-samples
    add_json_flag(p)
    p.set_defaults(func=_batch)


def _value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_params(items: list[str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    from ..errors import BatchError
    common: dict[str, Any] = {}
    per_target: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BatchError(f"--param {item!r}: expected NAME=VALUE or TARGET:NAME=VALUE.")
        target, colon, name = key.partition(":")
        if colon:
            per_target.setdefault(target, {})[name] = _value(value)
        else:
            common[key] = _value(value)
    return common, per_target


def sweep_axes(params: dict[str, Any]) -> dict[str, Any]:
    """The sweep's axes as the comma-separated text its notebook takes (``-p sizes=64,256`` parses as a tuple)."""
    out = dict(params)
    for axis in ("recipes", "strategies", "sizes", "exclusions"):
        value = out.get(axis)
        if isinstance(value, (tuple, list)):
            out[axis] = ",".join(map(str, value))
        elif isinstance(value, int) and not isinstance(value, bool):
            out[axis] = str(value)
    return out


def parse_boards(items: list[str] | None) -> Any:
    if not items:
        return None
    plain = [i for i in items if "=" not in i]
    mapping = dict(i.split("=", 1) for i in items if "=" in i)
    if plain and mapping:
        from ..errors import BatchError
        raise BatchError("--board: give either one NAME for every target or TARGET=NAME pairs, not both.")
    return plain[-1] if plain else mapping


def _accuracy_table(summary_json: Path) -> list[str]:
    """Top-1 per condition: FP32 once, then each target's INT8 (from summary.json, read as a RunSummary)."""
    from ..errors import BatchError
    from ..run_summary import RunSummary
    if not summary_json.is_file():
        return []
    try:
        summary = RunSummary.read(summary_json)
    except BatchError as exc:
        return ["", f"  (no accuracy table: {exc})", ""]
    return accuracy_lines(summary)


def accuracy_lines(summary: RunSummary) -> list[str]:
    """The console's accuracy table of ``summary``: a row per condition of the first target with accuracy."""
    targets = [t for t in summary.targets if t.accuracy]
    if not targets:
        return []
    if all(a.int8 is None for t in targets for a in t.accuracy):     # no task metric: fidelity is the headline
        if all(a.sqnr_db is None for t in targets for a in t.accuracy):
            return []
        header = f"  {'condition':<14}" + "".join(f"{t.target + ' INT8':>14}" for t in targets)
        lines = ["", "  no task metric: worst output SQNR against FP32 (dB) on the test split", header]
        for row in targets[0].accuracy:
            cells = []
            for t in targets:
                match = next((a for a in t.accuracy if a.condition == row.condition), None)
                cells.append(f"{match.sqnr_db:>14.1f}" if match is not None and match.sqnr_db is not None
                             else f"{'-':>14}")
            lines.append(f"  {row.condition:<14}" + "".join(cells))
        worst = [f"{t.target} {w.sqnr_output!r} ({w.condition})" for t in targets if (w := t.worst_sqnr)]
        return lines + ([f"  worst output: {'; '.join(worst)}"] if worst else []) + [""]
    header = f"  {'condition':<14}{'FP32':>9}" + "".join(f"{t.target + ' INT8':>14}" for t in targets)
    lines = ["", "  top-1 accuracy on the test split", header]
    for row in targets[0].accuracy:
        cells = []
        for t in targets:
            match = next((a for a in t.accuracy if a.condition == row.condition), None)
            cells.append(f"{match.int8:>14.2%}" if match is not None and match.int8 is not None else f"{'-':>14}")
        fp32 = f"{row.fp32:>9.2%}" if row.fp32 is not None else f"{'-':>9}"
        lines.append(f"  {row.condition:<14}{fp32}" + "".join(cells))
    return lines + [""]


#: notebook parameters the batch command passes on otherwise: per target (--targets, --bsp), as the batch's
#: options (--board, --record), or under another flag name (--data)
NOT_SPEC = ("target", "bsp", "board", "record", "dataset")


def batch_spec(args: argparse.Namespace) -> Any:
    """The :class:`~workbench.pipeline.RunSpec` template of the parsed ``workbench batch`` arguments: every
    notebook parameter of the spec is a flag (:func:`~workbench.pipeline.flags.add_spec_flags`)."""
    from ..pipeline.flags import spec_from_args
    return spec_from_args(args, skip=NOT_SPEC, dataset=args.data)


def _batch(args: argparse.Namespace) -> int:
    import sys
    if not args.no_progress and not args.json:     # at once: the checks and imports below take seconds
        print(f"batch: checking the inputs for {args.targets} (notebooks, gate, model) ...", file=sys.stderr,
              flush=True)
    from .._cli import emit
    from .pipeline import run_batch
    params, per_target = parse_params(args.param)
    params = sweep_axes(params)
    if args.input_spec:
        import os
        params["input_spec"] = os.path.abspath(args.input_spec)   # notebooks run in their run folder
    if args.metric:
        params["metric"] = args.metric
    if args.bsp:
        from ..placement.commands import bsp_parameters
        for t, value in bsp_parameters(args.targets, args.bsp).items():
            per_target.setdefault(t, {})["bsp"] = value
    result = run_batch(
        args.targets, spec=batch_spec(args), out=args.out, gate=args.gate, jobs=args.jobs, run_id=args.run_id,
        board=parse_boards(args.board), stages=args.stages, record=args.record,
        parameters=params, target_parameters=per_target, kernel=args.kernel, timeout=args.timeout,
        progress=not args.no_progress, reuse=not args.rerun, quiet=not args.verbose, sweep=args.sweep)
    if args.json:
        emit(result, as_json=True)
    else:
        lines = [result.summary()]
        for target_run in result.targets:
            lines.append(f"  {target_run.summary()}")
        lines += _accuracy_table(Path(result.out_dir) / result.summary_json)
        if result.sweep is not None:
            lines.append(f"  sweep: {result.sweep.summary()}")
        if result.gate is not None:
            lines += [f"  gate: {v.reason}" for v in result.gate.violations]
            lines += [f"  gate note: {n}" for n in result.gate.notes]
        if not args.verbose:
            lines.append(f"  log: {Path(result.out_dir) / result.run_dir / 'batch.log'}")
        lines.append(str(result.index_path))
        emit(result, as_json=False, text="\n".join(lines))
    return result.exit_code
