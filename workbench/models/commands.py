"""`workbench model reference|tradeoff|keypoints` (the built-in models), `workbench model convert`."""

from __future__ import annotations


def register(sub) -> None:
    from .._cli import add_json_flag
    model = sub.add_parser("model", help="the built-in models (reference, trade-off, keypoints) and ONNX conversion")
    model_sub = model.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    ref = model_sub.add_parser("reference", help="the reference CNN (shipped weights, or --retrain); print its "
                                                 "exports and FP32 accuracy per condition")
    _builtin_flags(ref, metric="accuracy", data=True)
    ref.set_defaults(func=_reference)
    trade = model_sub.add_parser("tradeoff", help="the trade-off demo model of `workbench sweep` (shipped weights, or "
                                                  "--retrain); print its exports and FP32 accuracy per condition")
    _builtin_flags(trade, metric="accuracy", data=True)
    trade.set_defaults(func=_tradeoff)
    kp = model_sub.add_parser("keypoints", help="the keypoint regression model on digits-keypoints (shipped weights, "
                                                "or --retrain); print its exports and FP32 PCK per condition")
    _builtin_flags(kp, metric="PCK", data=False)
    kp.set_defaults(func=_keypoints)
    conv = model_sub.add_parser("convert", help="convert an FP32 .onnx to a SavedModel and FP32 .tflite with onnx2tf "
                                                "(its pinned tool env), NCHW->NHWC recorded, checked against ONNX "
                                                "Runtime; quantize does this itself, this shows it")
    conv.add_argument("onnx", metavar="MODEL.onnx", help="the FP32 ONNX model")
    conv.add_argument("--data", default=None, help="dataset whose images calibrate/check the conversion "
                                                   "(default: seeded noise in [0, 1])")
    conv.add_argument("--split", default="calibration", help="split of --data to take the images from "
                                                             "(default: calibration)")
    conv.add_argument("--input-layout", choices=("auto", "nchw", "nhwc"), default="auto",
                      help="auto: a 4-D input with 1-4 channels in dimension 1 is NCHW and becomes NHWC, one with "
                           "them last stays NHWC (default: auto)")
    conv.add_argument("--no-cache", action="store_true", help="convert again even when the conversion is cached")
    add_json_flag(conv)
    conv.set_defaults(func=_convert)


def _builtin_flags(parser, *, metric: str, data: bool) -> None:
    """The flags every built-in model command takes (``--data`` where it trains on a chosen dataset)."""
    from .._cli import add_json_flag
    if data:
        parser.add_argument("--data", default="digits-conditions",
                            help="dataset to train on (default: digits-conditions)")
        parser.add_argument("--seed", type=int, default=0)
    else:
        parser.add_argument("--seed", type=int, default=0, help="seed of the dataset and the training (default: 0)")
    parser.add_argument("--no-cache", action="store_true", help="rebuild the exports even when they are cached")
    parser.add_argument("--retrain", action="store_true",
                        help="train from the recipe instead of using the shipped weights, and print how far the "
                             f"retrained {metric} is from the shipped one per condition")
    add_json_flag(parser)


def _convert(args) -> int:
    from .._cli import emit
    from .convert import convert_onnx
    samples = None
    if args.data:
        from ..data.loaders import load_dataset
        data = load_dataset(args.data)
        samples = (data.select(split=args.split) if args.split in data.splits else data).x
    conv = convert_onnx(args.onnx, samples=samples, cache=not args.no_cache, input_layout=args.input_layout)
    lines = [conv.summary(), ""]
    lines += [f"{kind:<7} {t.name:<24} ONNX {str(t.onnx_shape):<18} TFLite {str(t.tflite_shape):<18}"
              f"{'NCHW->NHWC' if t.transposed else ''}"
              for kind, group in (("input", conv.inputs), ("output", conv.outputs)) for t in group]
    lines += [""] + [f"{a.name:<24} max abs error {a.max_abs_error:.3g} (max |ONNX| {a.max_abs_reference:.3g}), "
                     f"cosine {a.cosine:.6f}" for a in conv.agreement]
    lines += ["", f"saved_model  {conv.saved_model}", f"tflite       {conv.tflite}",
              "tools        " + ", ".join(f"{k} {v}" for k, v in conv.tools.items())]
    emit(conv, as_json=args.json, text="\n".join(lines))
    return 0


def _reference(args) -> int:
    from .reference import reference_model
    ref = reference_model(dataset=args.data, seed=args.seed, cache=not args.no_cache, retrain=args.retrain)
    return _emit_builtin(ref, args)


def _tradeoff(args) -> int:
    from .tradeoff import tradeoff_model
    model = tradeoff_model(dataset=args.data, seed=args.seed, cache=not args.no_cache, retrain=args.retrain)
    return _emit_builtin(model, args)


def _keypoints(args) -> int:
    from .keypoints import keypoint_model
    model = keypoint_model(seed=args.seed, cache=not args.no_cache, retrain=args.retrain)
    return _emit_builtin(model, args, values=model.pck, shipped=model.shipped_pck, label="FP32 PCK",
                         kinds=("keras", "saved_model", "tflite"))


EXPORTS = ("keras", "saved_model", "tflite", "onnx")


def _emit_builtin(ref, args, *, values: dict[str, float] | None = None, shipped: dict[str, float] | None = None,
                  label: str = "FP32 top-1", kinds: tuple[str, ...] = EXPORTS) -> int:
    """Exports, then the metric per condition (with the shipped value and the difference after a retrain)."""
    from .._cli import emit
    from ..vocab import ModelOrigin
    values = ref.accuracy if values is None else values
    shipped = (ref.shipped_accuracy if shipped is None else shipped) if ref.origin == ModelOrigin.RETRAINED else None
    lines = [ref.summary(), ""]
    for kind in kinds:
        lines.append(f"{kind:<12} {getattr(ref, kind)}")
    if ref.weights_sha256:
        lines.append(f"{'weights':<12} sha256 {ref.weights_sha256}")
    lines += ["", f"{'condition':<14}{label:>12}"]
    if shipped:
        lines[-1] += f"{'shipped':>12}{'difference':>12}"
        lines += [f"{c:<14}{a:>12.2%}{shipped.get(c, float('nan')):>12.2%}"
                  f"{100 * (a - shipped.get(c, float('nan'))):>+10.1f} pp" for c, a in values.items()]
    else:
        lines += [f"{c:<14}{a:>12.2%}" for c, a in values.items()]
    emit(ref, as_json=args.json, text="\n".join(lines))
    return 0
