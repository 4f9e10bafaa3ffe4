"""``workbench sweep``: targets x recipes x calibration x exclusion sets, a recommendation per target."""

from __future__ import annotations

import argparse
from typing import Any


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _sizes(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in _csv(value))
    except ValueError:
        raise argparse.ArgumentTypeError(f"calibration sizes must be integers, e.g. 64,256. Got {value!r}.") from None


def register(sub: argparse._SubParsersAction) -> None:
    from .._cli import add_json_flag
    from ..vocab import TARGETS
    from .plan import DEFAULT_EXCLUSIONS, DEFAULT_RECIPES, DEFAULT_SIZES, DEFAULT_STRATEGIES
    p = sub.add_parser(
        "sweep", help="sweep targets x recipes x calibration x exclusions on Dask; Pareto plots and a "
                      "recommendation per target",
        description="Every cell quantizes (cached), measures accuracy per condition, placement and latency "
                    "(labelled: Vela estimate, host CPU); prints the table and the recommended cell per "
                    "target under the gate. Cells run as Dask tasks on a LocalCluster, or on the cluster of "
                    "--scheduler / $DASK_SCHEDULER_ADDRESS. A failed cell is reported, never stops the sweep.")
    p.add_argument("--model", default="tradeoff", metavar="M",
                   help="a built-in model's name (default tradeoff; `workbench model --help` lists them) or a "
                        "Keras/SavedModel/ONNX path every worker can read")
    p.add_argument("--data", "--dataset", dest="data", default="digits-conditions", help="dataset name or path")
    from ..evaluate.commands import add_input_spec_flag
    add_input_spec_flag(p)
    p.add_argument("--targets", type=_csv, default=TARGETS, help=f"comma-separated (default {','.join(TARGETS)})")
    p.add_argument("--recipes", type=_csv, default=DEFAULT_RECIPES,
                   help=f"comma-separated recipe names, +cle/+bc allowed (default {','.join(DEFAULT_RECIPES)})")
    p.add_argument("--strategies", type=_csv, default=DEFAULT_STRATEGIES,
                   help=f"calibration strategies (default {','.join(DEFAULT_STRATEGIES)})")
    p.add_argument("--sizes", type=_sizes, default=DEFAULT_SIZES,
                   help=f"calibration set sizes (default {','.join(map(str, DEFAULT_SIZES))})")
    p.add_argument("--exclusions", type=_csv, default=DEFAULT_EXCLUSIONS,
                   help="exclusion sets: none, cpu-ops (ops the target runs on the CPU anyway), worst-K "
                        "(K worst layers by quantization error) (default none)")
    p.add_argument("--gate", metavar="FILE", help="gate YAML (default: accuracy only, the default max drop)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="Dask scheduler address (default $DASK_SCHEDULER_ADDRESS, else a LocalCluster)")
    p.add_argument("--workers", type=int, metavar="N", help="LocalCluster worker processes (default: cores)")
    p.add_argument("--serial", action="store_true", help="run the cells in a plain loop in this process")
    p.add_argument("--no-vela", action="store_true", help="predict imx93 placement from its table (no Vela)")
    p.add_argument("--no-cache", action="store_true", help="run every cell again (refreshes the cache)")
    p.add_argument("--plots", metavar="DIR", help="write pareto.png into DIR")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("-o", "--output", metavar="FILE", help="write the result as JSON to FILE")
    from ..pipeline.flags import add_spec_flags
    from .plan import SPEC_OPTIONS
    # the stages' options a cell takes (the axes above excepted): --seed, --metric, and any new option
    add_spec_flags(p, groups=SPEC_OPTIONS, skip=("calibration_size", "calibration_strategy"))
    add_json_flag(p)
    p.set_defaults(func=_sweep)


def sweep_spec(args: argparse.Namespace) -> Any:
    """The :class:`~workbench.sweep.plan.SweepSpec` of the parsed ``workbench sweep`` arguments: the axes, and
    the stages' options whole (every option parameter of the spec is a flag)."""
    from ..pipeline.flags import spec_from_args
    from .plan import SPEC_OPTIONS, SweepSpec
    run = spec_from_args(args, skip=("target", "dataset", "input_spec", "calibration_size", "calibration_strategy"))
    return SweepSpec(model=args.model, dataset=args.data, targets=args.targets, recipes=args.recipes,
                     strategies=args.strategies, sizes=args.sizes, exclusions=args.exclusions,
                     use_vela=not args.no_vela, input_spec=args.input_spec or "", seed=run.calibration.seed,
                     **{name: getattr(run, name) for name in SPEC_OPTIONS})


def _sweep(args: argparse.Namespace) -> int:
    from .._cli import emit
    from .._io import atomic_write_json
    from .run import sweep
    spec = sweep_spec(args)
    result = sweep(args.model, spec=spec, gate=args.gate, executor="serial" if args.serial else "dask",
                   scheduler=args.scheduler, workers=args.workers, cache=not args.no_cache,
                   progress=not args.no_progress, plots=args.plots)
    if args.output:
        atomic_write_json(args.output, result.to_dict())
    text = result.text() + "".join(f"\nplot: {p}" for p in result.plots)
    emit(result, as_json=args.json, text=text)
    return 0
