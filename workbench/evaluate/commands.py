"""``workbench evaluate FP32 INT8 [INT8 ...] --data DATASET [--conditions a,b] [--gate FILE] [--json]``."""

from __future__ import annotations

import argparse

from .._validation import finite_float


def register(sub: argparse._SubParsersAction) -> None:
    from .._cli import add_json_flag
    p = sub.add_parser(
        "evaluate", help="held-out accuracy per deployment condition: FP32 against INT8 candidates, with a gate",
        description="Score FP32 and each INT8 model on every deployment condition of a held-out split: "
                    "top-1 accuracy with a bootstrap CI, the drop against FP32 with a paired bootstrap CI, "
                    "and FP32/INT8 agreement.  With a gate (--gate FILE, --max-drop, --min-agreement) the "
                    "command exits 1 when the gate fails.")
    p.add_argument("fp32", metavar="FP32",
                   help="the FP32 model (.keras/.h5, SavedModel folder, .tflite, .onnx), or a built-in model's name "
                        "('reference', 'keypoints', ...: its FP32 .tflite)")
    p.add_argument("candidates", metavar="INT8", nargs="+", help="one or more candidate models")
    p.add_argument("--data", "--dataset", dest="data", default="digits-conditions",
                   help="dataset name or path (default: digits-conditions)")
    p.add_argument("--split", default="test", help="held-out split to score (default: test)")
    p.add_argument("--severity", type=int, choices=range(1, 6), default=None, metavar="1..5",
                   help="built-in datasets only: render the test split's conditions at this severity "
                        "(1 mild .. 5 harsh; default 3, as the dataset is built)")
    p.add_argument("--conditions", default=None, metavar="A,B",
                   help="comma-separated conditions (default: every condition in the split)")
    p.add_argument("--names", default=None, metavar="N1,N2",
                   help="comma-separated candidate names (default: file stems)")
    p.add_argument("--gate", metavar="FILE", help="quality gate YAML (see gate.yaml); its accuracy section is checked")
    p.add_argument("--max-drop", type=finite_float, metavar="PP",
                   help="gate: largest accepted drop in percentage points (overrides the file's default)")
    p.add_argument("--min-agreement", type=finite_float, metavar="FRACTION",
                   help="gate: smallest accepted FP32/INT8 agreement, e.g. 0.97 (overrides the file's default)")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="bootstrap resamples (default: 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    p.add_argument("--no-cache", action="store_true", help="run every model again even if scores are cached")
    add_input_spec_flag(p)
    p.add_argument("--metric", default=None, metavar="NAME|MODULE:FUNCTION",
                   help="task metric called as metric(outputs, labels) per condition: 'top1', 'pck' or "
                        "'module:function' (default: top1 for class labels, pck for a keypoint card)")
    p.add_argument("--no-fidelity", action="store_true",
                   help="skip the per-output FP32/INT8 fidelity (SQNR, cosine, max error, top-k agreement)")
    add_json_flag(p)
    p.set_defaults(func=_evaluate)


def add_input_spec_flag(parser: argparse.ArgumentParser) -> None:
    """``--input-spec FILE``: the model's input contract (shared by calibrate, quantize, evaluate, batch)."""
    parser.add_argument("--input-spec", default=None, metavar="FILE",
                        help="the model's input contract as a YAML card (layout, color, size, resize, range or "
                             "mean/std, task, classes, outputs); default: <model>.card.yaml beside the model, "
                             "else inferred from the model's input (see docs/byom.md)")


def _evaluate(args: argparse.Namespace) -> int:
    import dataclasses

    from .._cli import EXIT_GATE_FAILED, EXIT_OK, emit
    from ..errors import EvaluationError
    from .accuracy import compare_accuracy
    from .gate import DEFAULT_MAX_DROP_PP, Gate, check_gate

    gate = None
    if args.gate or args.max_drop is not None or args.min_agreement is not None:
        gate = Gate.from_yaml(args.gate) if args.gate else Gate(max_drop_pp=DEFAULT_MAX_DROP_PP)
        changes = {}
        if args.max_drop is not None:
            changes["max_drop_pp"] = args.max_drop
        if args.min_agreement is not None:
            changes["min_agreement"] = args.min_agreement
        gate = dataclasses.replace(gate, **changes)
    from ..models.builtin import builtin_path
    fp32 = builtin_path(args.fp32, export="tflite")
    names = [n.strip() for n in args.names.split(",")] if args.names else None
    if names is not None and len(names) != len(args.candidates):
        raise EvaluationError(f"--names gives {len(names)} name(s) for {len(args.candidates)} candidate model(s).")
    data = args.data
    if args.severity is not None:
        from ..data.loaders import load_dataset
        data = load_dataset(args.data, severity=args.severity)
    report = compare_accuracy(fp32, list(args.candidates), data, conditions=args.conditions,
                              split=args.split, names=names, n_bootstrap=args.bootstrap, seed=args.seed,
                              cache=not args.no_cache, input_spec=args.input_spec, metric=args.metric,
                              fidelity=not args.no_fidelity)
    result = check_gate(report, gate) if gate is not None else None
    obj = report.to_dict()
    if result is not None:
        obj["gate"] = result.to_dict()
    text = report.text() + ("\n\n" + result.text() if result is not None else "")
    emit(obj, as_json=args.json, text=text)
    return EXIT_GATE_FAILED if result is not None and not result.passed else EXIT_OK
