"""`workbench data info` and `workbench data export`."""

from __future__ import annotations

import argparse


def _resize(text: str) -> tuple[int, int]:
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--resize takes HEIGHTxWIDTH, e.g. 32x32; got {text!r}") from None
    return h, w


def register(sub) -> None:
    from .._cli import add_json_flag
    data = sub.add_parser("data", help="inspect and export datasets")
    data_sub = data.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    info = data_sub.add_parser("info", help="classes, conditions and counts per split")
    info.add_argument("--dataset", "--data", dest="dataset", default="digits-conditions",
                      help="built-in name, folder, CSV manifest or .npz (default: digits-conditions)")
    info.add_argument("--resize", type=_resize, help="HxW for image datasets of mixed sizes")
    add_json_flag(info)
    info.set_defaults(func=_info)

    export = data_sub.add_parser("export", help="write one split (and condition) as .npz with x and y")
    export.add_argument("--dataset", "--data", dest="dataset", default="digits-conditions")
    export.add_argument("--split", required=True, choices=("train", "calibration", "test"))
    export.add_argument("--condition", help="only this deployment condition")
    export.add_argument("-o", "--output", required=True, help="output .npz file")
    export.add_argument("--resize", type=_resize, help="HxW for image datasets of mixed sizes")
    add_json_flag(export)
    export.set_defaults(func=_export)


def _info(args) -> int:
    from .._cli import emit
    from .loaders import load_dataset
    ds = load_dataset(args.dataset, resize=args.resize)
    info = ds.info()
    lines = [f"{ds.name}: {len(ds)} samples, input {tuple(ds.input_shape)}, {len(ds.classes)} classes",
             f"source: {ds.source}", ""]
    conds = list(ds.conditions)
    lines.append("split".ljust(12) + "".join(c.rjust(14) for c in conds))
    for split, row in info["counts"].items():
        lines.append(split.ljust(12) + "".join(str(row.get(c, 0)).rjust(14) for c in conds))
    emit(info, as_json=args.json, text="\n".join(lines))
    return 0


def _export(args) -> int:
    from .._io import check_output_path
    check_output_path(args.output)  # refuse a folder, device or link before loading anything
    from .._cli import emit
    from .loaders import export_npz, load_dataset
    ds = load_dataset(args.dataset, resize=args.resize)
    path = export_npz(ds, args.output, split=args.split, condition=args.condition)
    n = len(ds.select(split=args.split, condition=args.condition))
    emit({"path": str(path), "n": n, "input_shape": list(ds.input_shape)}, as_json=args.json,
         text=f"wrote {n} samples ({args.split}{'/' + args.condition if args.condition else ''}) to {path}")
    return 0
