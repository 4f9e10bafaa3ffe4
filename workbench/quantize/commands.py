"""``workbench quantize MODEL --data DATASET --recipe a8w8_pc ... -o OUT [--json]``."""

from __future__ import annotations

import argparse
from typing import Any

from .._validation import finite_float
from ..vocab import RECIPES as RECIPE_NAMES


def register(sub: argparse._SubParsersAction) -> None:
    from .._cli import add_json_flag
    p = sub.add_parser(
        "quantize", help="post-training quantization to an inspected INT8 model with its manifest",
        description="Quantize MODEL (FP32 Keras .keras/.h5, SavedModel folder, .onnx or .tflite, or a built-in "
                    "model's name such as 'reference') with a named recipe and calibration samples from DATASET; an "
                    ".onnx goes through onnx2tf for the TFLite recipes (NCHW->NHWC, checked against ONNX "
                    "Runtime; `workbench model convert` shows it), Keras/SavedModel/.tflite through tf2onnx "
                    "for --backend onnx; the result "
                    "is read back and checked against the recipe, cached, and written with "
                    "model_manifest.json beside it.")
    p.add_argument("model", metavar="MODEL", help="model file/folder, or a built-in model's name ('reference', ...)")
    p.add_argument("--data", "--dataset", dest="data", default="digits-conditions",
                   help="dataset name or path for calibration samples (default: digits-conditions)")
    p.add_argument("--split", default="calibration",
                   help="split of DATASET the calibration samples come from (default: calibration)")
    p.add_argument("--recipe", default="a8w8_pc", metavar="RECIPE",
                   help="named recipe: " + ", ".join(RECIPE_NAMES) + ", optionally with float-weight transforms "
                        "+cle (cross-layer equalisation) and +bc (bias correction), e.g. a8w8_pt+cle "
                        "(default: a8w8_pc)")
    p.add_argument("--backend", choices=("tflite", "onnx"), help="override the recipe's backend (default tflite)")
    p.add_argument("--calibration", type=_calibration, metavar="N|FILE",
                   help="a calibration set written by `workbench calibrate -o FILE` (its samples from DATASET), "
                        "or N: the first N samples of --split (default: the whole split)")
    p.add_argument("--calibrator", choices=("minmax", "minmax-global", "percentile", "entropy"),
                   help="calibration method: minmax; minmax-global (each tensor's min/max over all samples; for a "
                        "float .tflite, whose minmax is a moving average of each sample's min/max); percentile (the "
                        "data's percentiles, every backend); entropy (ONNX only)")
    p.add_argument("--percentile", type=finite_float, help="percentile for --calibrator percentile (default 99.999)")
    p.add_argument("--exclude", metavar="OPS", default="",
                   help="comma-separated op types or node names kept in float (turns float fallback on)")
    p.add_argument("--allow-float", action="store_true", help="allow float fallback without excluding ops")
    p.add_argument("--no-cache", action="store_true", help="quantize again even if the cache holds the result")
    p.add_argument("--input-spec", default=None, metavar="FILE",
                   help="the model's input contract as a YAML card: calibration images are prepared with it "
                        "(default: <model>.card.yaml beside the model; none: fed as they are; docs/byom.md)")
    p.add_argument("-o", "--output", required=True,
                   help="output folder (gets model.tflite/.onnx + model_manifest.json) or model file path")
    add_json_flag(p)
    p.set_defaults(func=_quantize)


def _calibration(text: str) -> int | str:
    """``N`` (a positive whole number) or the path of a calibration set file."""
    if text.strip().isdigit():
        n = int(text)
        if n <= 0:
            raise argparse.ArgumentTypeError(f"N must be a positive whole number; got {text!r}")
        return n
    return text


def _quantize(args: argparse.Namespace) -> int:
    import warnings

    from .._cli import emit
    from ..data.loaders import load_dataset
    from .engine import quantize
    from .recipe import get_recipe

    changes = {}
    if args.calibrator:
        changes["calibrator"] = args.calibrator
    if args.percentile is not None:
        changes["percentile"] = args.percentile
    if args.exclude:
        changes["exclude"] = args.exclude
    if args.allow_float:
        changes["allow_float_fallback"] = True
    recipe = get_recipe(args.recipe, backend=args.backend, **changes)
    from ..models.builtin import builtin_path
    # a built-in model: the .keras file the batch (RunFolder.source_model) and the explorer quantize (same bytes)
    model = builtin_path(args.model, export="onnx" if recipe.backend == "onnx" else "keras")
    dataset = load_dataset(args.data)
    if isinstance(args.calibration, str):          # a curated set: its sample ids refer to DATASET
        from ..calibration.curate import CalibrationSet
        from ..errors import CalibrationError
        curated = CalibrationSet.load(args.calibration)
        calibration: Any = curated
        size = None
        if curated.dataset_hash and curated.dataset_hash != dataset.hash:
            raise CalibrationError(
                f"calibration set {args.calibration!r} was drawn from dataset {curated.dataset!r} "
                f"(hash {curated.dataset_hash[:12]}), not from {args.data!r} (hash {dataset.hash[:12]}). "
                "Next: pass the dataset it was made from with --data, or make a set from this one with "
                "`workbench calibrate`.")
    else:
        calibration, size = dataset.select(split=args.split), args.calibration
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = quantize(model, recipe, calibration, dataset=dataset, output=args.output,
                          calibration_size=size, cache=not args.no_cache, input_spec=args.input_spec)
    notes = [str(w.message) for w in caught]
    found = _calibration_findings(args, calibration, dataset, result, model)
    obj = result.to_dict()
    obj["findings"] = found.to_list()
    obj["manifest"] = result.manifest_path
    obj["recipe"] = result.recipe.name
    obj["recipe_settings"] = result.recipe.to_dict()
    obj["float_ops"] = list(result.float_ops)
    obj["warnings"] = notes
    text = result.summary() + f"\n  model:    {result.path}\n  manifest: {result.manifest_path}"
    if result.loaded():
        text += f"\n  runtime:  {result.loaded()}"
    if result.input_contract:
        text += f"\n  calibrated through the {result.input_contract['summary']}"
    if result.float_ops:
        text += "\n  float ops: " + ", ".join(result.float_ops)
    from ..models.structure import summary_lines
    text += "".join(f"\n  {line}" for line in summary_lines(result.structure))
    for note in notes:
        text += f"\n  warning: {note}"
    for f in found:
        text += f"\n  {f.summary()}"
    emit(obj, as_json=args.json, text=text)
    return 0


def _calibration_findings(args: Any, calibration: Any, dataset: Any, result: Any, model: Any) -> Any:
    """The findings of a calibration set file given with --calibration (test images under other ids, checked
    at the model's input size too; a stale hash, a small or skewed set) and of the quantized model itself."""
    from ..errors import WorkbenchError
    from ..findings import collect, findings_for
    groups = [findings_for(result)]
    if isinstance(args.calibration, str):
        size = None
        try:
            from ..models.contract import resolve_contract
            size = resolve_contract(model, args.input_spec).size
        except (WorkbenchError, OSError, ValueError):
            size = None            # no contract: the dataset's own size
        groups.append(findings_for(calibration, dataset=dataset, calibration_file=args.calibration, input_size=size))
    return collect(*groups)
