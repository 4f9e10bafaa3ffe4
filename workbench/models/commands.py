"""`workbench model reference`."""

from __future__ import annotations


def register(sub) -> None:
    from ..cli import add_json_flag
    model = sub.add_parser("model", help="the built-in reference model")
    model_sub = model.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    ref = model_sub.add_parser("reference", help="train (or load cached) the reference CNN; print its exports "
                                                 "and FP32 accuracy per condition")
    ref.add_argument("--data", default="digits-conditions", help="dataset to train on (default: digits-conditions)")
    ref.add_argument("--seed", type=int, default=0)
    ref.add_argument("--no-cache", action="store_true", help="train again even when a cached model exists")
    add_json_flag(ref)
    ref.set_defaults(func=_reference)


def _reference(args) -> int:
    from ..cli import emit
    from .reference import reference_model
    ref = reference_model(dataset=args.data, seed=args.seed, cache=not args.no_cache)
    lines = [ref.summary(), ""]
    for kind in ("keras", "saved_model", "tflite", "onnx"):
        lines.append(f"{kind:<12} {getattr(ref, kind)}")
    lines += ["", f"{'condition':<14}{'FP32 top-1':>12}"]
    lines += [f"{c:<14}{a:>12.2%}" for c, a in ref.accuracy.items()]
    emit(ref, as_json=args.json, text="\n".join(lines))
    return 0
