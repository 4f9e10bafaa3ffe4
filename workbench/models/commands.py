"""`workbench model NAME` (one per built-in model of :mod:`workbench.models.builtin`), `workbench model convert`."""

from __future__ import annotations


def register(sub) -> None:
    from .._cli import add_json_flag
    from .builtin import BUILTIN_MODELS
    model = sub.add_parser("model", help="the built-in models and ONNX conversion")
    model_sub = model.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    for entry in BUILTIN_MODELS.values():
        label = entry.result.LABEL
        parser = model_sub.add_parser(entry.name, help=f"{entry.description} (shipped weights, or --retrain); "
                                                       f"print its exports and {label} per condition")
        _builtin_flags(parser, metric=label, data=None if entry.own_dataset_only else entry.dataset)
        parser.set_defaults(func=_builtin, builtin=entry.name)
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


def _builtin_flags(parser, *, metric: str, data: str | None) -> None:
    """The flags every built-in model command takes (``--data``, default ``data``, where it trains on a chosen
    dataset)."""
    from .._cli import add_json_flag
    if data:
        parser.add_argument("--data", default=data, help=f"dataset to train on (default: {data})")
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


def _builtin(args) -> int:
    """Exports, then the metric per condition (with the shipped value and the difference after a retrain)."""
    from .._cli import emit
    from ..vocab import ModelOrigin
    from .builtin import builtin_entry, builtin_model
    entry = builtin_entry(args.builtin)
    model = builtin_model(entry.name, getattr(args, "data", None), seed=args.seed, cache=not args.no_cache,
                          retrain=args.retrain, exports=entry.exports)       # the lazy .onnx too: it is printed
    values, label = model.values, model.LABEL
    shipped = model.shipped_values if model.origin == ModelOrigin.RETRAINED else None
    lines = [model.summary(), ""]
    for kind in entry.exports:
        lines.append(f"{kind:<12} {getattr(model, kind)}")
    if model.weights_sha256:
        lines.append(f"{'weights':<12} sha256 {model.weights_sha256}")
    lines += ["", f"{'condition':<14}{label:>12}"]
    if shipped:
        lines[-1] += f"{'shipped':>12}{'difference':>12}"
        lines += [f"{c:<14}{a:>12.2%}{shipped.get(c, float('nan')):>12.2%}"
                  f"{100 * (a - shipped.get(c, float('nan'))):>+10.1f} pp" for c, a in values.items()]
    else:
        lines += [f"{c:<14}{a:>12.2%}" for c, a in values.items()]
    emit(model, as_json=args.json, text="\n".join(lines))
    return 0
