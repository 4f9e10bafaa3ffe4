"""`workbench model reference`."""

from __future__ import annotations


def register(sub) -> None:
    from .._cli import add_json_flag
    model = sub.add_parser("model", help="the built-in reference model")
    model_sub = model.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    ref = model_sub.add_parser("reference", help="the reference CNN (shipped weights, or --retrain); print its "
                                                 "exports and FP32 accuracy per condition")
    ref.add_argument("--data", default="digits-conditions", help="dataset to train on (default: digits-conditions)")
    ref.add_argument("--seed", type=int, default=0)
    ref.add_argument("--no-cache", action="store_true", help="rebuild the exports even when they are cached")
    ref.add_argument("--retrain", action="store_true",
                     help="train from the recipe instead of using the shipped weights, and print how far the "
                          "retrained accuracy is from the shipped one per condition")
    add_json_flag(ref)
    ref.set_defaults(func=_reference)


def _reference(args) -> int:
    from .._cli import emit
    from .reference import reference_model
    ref = reference_model(dataset=args.data, seed=args.seed, cache=not args.no_cache, retrain=args.retrain)
    lines = [ref.summary(), ""]
    for kind in ("keras", "saved_model", "tflite", "onnx"):
        lines.append(f"{kind:<12} {getattr(ref, kind)}")
    lines += ["", f"{'condition':<14}{'FP32 top-1':>12}"]
    shipped = ref.shipped_accuracy if ref.origin == "retrained" else None
    if shipped:
        lines[-1] += f"{'shipped':>12}{'difference':>12}"
        lines += [f"{c:<14}{a:>12.2%}{shipped.get(c, float('nan')):>12.2%}"
                  f"{100 * (a - shipped.get(c, float('nan'))):>+10.1f} pp" for c, a in ref.accuracy.items()]
    else:
        lines += [f"{c:<14}{a:>12.2%}" for c, a in ref.accuracy.items()]
    emit(ref, as_json=args.json, text="\n".join(lines))
    return 0
