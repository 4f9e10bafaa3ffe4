"""``workbench calibrate``, ``workbench audit`` and ``workbench calibrate-experiment``."""

from __future__ import annotations

import argparse
from typing import Any

from .._validation import finite_float
from ..vocab import STRATEGIES


def _weights(text: str) -> dict[str, float]:
    out = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise argparse.ArgumentTypeError(
                f"--weights takes CONDITION=WEIGHT[,CONDITION=WEIGHT...], e.g. daylight=0.6,low-light=0.4; "
                f"got {text!r}")
    return out


def _strategies(text: str) -> tuple[str, ...]:
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in names if s not in STRATEGIES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"--strategies takes a comma list of {', '.join(STRATEGIES)}; got {text!r}")
    return names


def _add_data_model(parser: argparse.ArgumentParser, *, model_required: bool) -> None:
    parser.add_argument("--data", default="digits-conditions",
                        help="built-in name, folder, CSV manifest or .npz (default: digits-conditions)")
    parser.add_argument("--model", required=model_required,
                        help="FP32 model (.keras/.h5, SavedModel folder, .onnx or FP32 .tflite), or a built-in "
                             "model's name ('reference', ...)")
    from ..evaluate.commands import add_input_spec_flag
    add_input_spec_flag(parser)


def register(sub) -> None:
    from .._cli import add_json_flag
    cal = sub.add_parser("calibrate", help="curate a calibration set (random, stratified or coverage)")
    _add_data_model(cal, model_required=False)
    cal.add_argument("--strategy", required=True, choices=STRATEGIES)
    cal.add_argument("-n", type=int, required=True, help="number of samples (200-1000 is the usual advice)")
    cal.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    cal.add_argument("--weights", type=_weights,
                     help="deployment mix as CONDITION=WEIGHT,... (default: all conditions equally)")
    cal.add_argument("--pool", default="calibration", help="split to choose from (default: calibration)")
    cal.add_argument("-o", "--output", help="write the set as JSON to this file")
    add_json_flag(cal)
    cal.set_defaults(func=_calibrate)

    audit = sub.add_parser("audit", help="clip rate and range use per layer and condition for a calibration set")
    _add_data_model(audit, model_required=True)
    audit.add_argument("--calibration", required=True, help="calibration set JSON (from `workbench calibrate -o`)")
    audit.add_argument("--split", default="test", help="held-out split audited per condition (default: test)")
    audit.add_argument("--conditions", help="comma list of conditions (default: all in the split)")
    audit.add_argument("--clip-threshold", type=finite_float, default=0.001,
                       help="clip rate above which a layer/condition is at risk (default 0.001)")
    audit.add_argument("--activation-bits", type=int, default=8, choices=(8, 16))
    audit.add_argument("--plot", help="write the heatmap and range bars as a PNG to this file")
    add_json_flag(audit)
    audit.set_defaults(func=_audit)

    exp = sub.add_parser("calibrate-experiment",
                         help="quantize with each calibration strategy (same size) and compare INT8 accuracy "
                              "per condition")
    _add_data_model(exp, model_required=True)
    exp.add_argument("-n", type=int, required=True, help="calibration set size, the same for every strategy")
    exp.add_argument("--strategies", type=_strategies, default=STRATEGIES,
                     help="comma list (default: random,stratified,coverage)")
    exp.add_argument("--recipe", default="a8w8_pc", help="quantization recipe (default a8w8_pc)")
    exp.add_argument("--seed", type=int, default=0)
    exp.add_argument("--weights", type=_weights, help="deployment mix CONDITION=WEIGHT,... for stratified")
    exp.add_argument("--pool", default="calibration")
    exp.add_argument("--split", default="test", help="evaluation split (default: test)")
    exp.add_argument("--baseline", choices=STRATEGIES,
                     help="strategy the others are compared with (default: random if compared, else the first)")
    exp.add_argument("--repeats", type=int, default=1,
                     help="seeds per strategy (seed .. seed+repeats-1); drops are averaged (default 1)")
    exp.add_argument("--margin", type=finite_float, default=1.0,
                     help="difference in drop (pp) below which no verdict is drawn (default 1.0)")
    exp.add_argument("--plot", help="write the side-by-side plot as a PNG to this file")
    from ..pipeline.flags import add_spec_flags
    add_spec_flags(exp, groups=("evaluation", "placement"))   # --metric, and any option added to those stages
    add_json_flag(exp)
    exp.set_defaults(func=_experiment)


def _resolve_model(name: str | None, data):
    from ..models.builtin import builtin_path
    return builtin_path(name, dataset=data)


def _calibrate(args) -> int:
    from .._io import check_output_path
    if args.output:  # refuse a folder, device or link before any work
        check_output_path(args.output)
    import warnings

    from .._cli import emit
    from ..data.loaders import load_dataset
    from .curate import curate_calibration_set
    data = load_dataset(args.data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = curate_calibration_set(data, args.n, strategy=args.strategy, seed=args.seed,
                                     condition_weights=args.weights, pool=args.pool,
                                     model=_resolve_model(args.model, data), input_spec=args.input_spec)
    notes = _notes(caught)
    if args.output:
        cal.save(args.output)
    data_ = cal.to_dict()
    head = {k: data_[k] for k in ("n", "strategy", "hash", "conditions", "classes", "seed", "dataset", "pool")}
    obj = {**head, "id": cal.id, "path": args.output, "warnings": notes, **data_}
    lines = [cal.summary(), "", f"{'condition':<14}{'samples':>8}{'share':>8}{'target':>8}"]
    shares = cal.shares()
    lines += [f"{c:<14}{cal.conditions.get(c, 0):>8}{shares[c]:>8.1%}{cal.target_shares.get(c, 0.0):>8.1%}"
              for c in shares]
    lines += [f"warning: {n}" for n in notes]
    if args.output:
        lines.append(f"wrote {args.output}")
    emit(obj, as_json=args.json, text="\n".join(lines))
    return 0


def _audit(args) -> int:
    from .._io import check_output_path
    if args.plot:  # refuse a folder, device or link before any work
        check_output_path(args.plot)
    from .._cli import emit
    from ..data.loaders import load_dataset
    from .audit import audit_coverage
    from .curate import CalibrationSet
    data = load_dataset(args.data)
    cal = CalibrationSet.load(args.calibration)
    conditions = [c.strip() for c in args.conditions.split(",")] if args.conditions else None
    audit = audit_coverage(_resolve_model(args.model, data), cal, dataset=data, split=args.split,
                           conditions=conditions, clip_threshold=args.clip_threshold,
                           activation_bits=args.activation_bits, input_spec=args.input_spec)
    if args.plot:
        _save_figure(audit.figure(), args.plot)
    matrix = audit.matrix()
    width = max(len(layer) for layer in audit.layers) + 2
    lines = [audit.summary(), "", "clip rate".ljust(width) + "".join(c[:12].rjust(13) for c in audit.conditions)]
    for i, layer in enumerate(audit.layers):
        lines.append(layer.ljust(width) + "".join(f"{v:>13.3%}" for v in matrix[i]))
    lines += [""] + list(audit.findings)
    emit(audit, as_json=args.json, text="\n".join(lines))
    return 0


def experiment_spec(args) -> Any:
    """The :class:`~workbench.pipeline.RunSpec` template of ``workbench calibrate-experiment``: the options
    its flags give (the experiment sets the model, data, recipe, contract and each calibration draw)."""
    from ..pipeline.flags import spec_from_args
    return spec_from_args(args, skip=("model", "dataset", "recipe", "input_spec", "seed"))


def _experiment(args) -> int:
    from .._io import check_output_path
    if args.plot:  # refuse a folder, device or link before any work
        check_output_path(args.plot)
    import warnings

    from .._cli import emit
    from ..data.loaders import load_dataset
    from .experiment import compare_calibration_strategies
    data = load_dataset(args.data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exp = compare_calibration_strategies(_resolve_model(args.model, data), data, n=args.n,
                                             strategies=args.strategies, recipe=args.recipe, seed=args.seed,
                                             condition_weights=args.weights, pool=args.pool, split=args.split,
                                             baseline=args.baseline, margin_pp=args.margin,
                                             repeats=args.repeats, input_spec=args.input_spec,
                                             spec=experiment_spec(args))
    notes = list(dict.fromkeys(_notes(caught)))
    if args.plot:
        _save_figure(exp.figure(), args.plot)
    text = exp.text() + "".join(f"\nwarning: {n}" for n in notes)
    emit({**exp.to_dict(), "warnings": notes}, as_json=args.json, text=text)
    return 0


def _notes(caught) -> list[str]:
    """Workbench warnings as text for the output; any other warning goes to stderr as usual."""
    import warnings

    from ..errors import WorkbenchWarning
    notes = []
    for w in caught:
        if issubclass(w.category, WorkbenchWarning):
            notes.append(str(w.message))
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return notes


def _save_figure(fig, path: str) -> None:
    import matplotlib.pyplot as plt

    from .._io import atomic_path
    from ..display import figure_png
    with atomic_path(path) as tmp:
        tmp.write_bytes(figure_png(fig))
    plt.close(fig)
