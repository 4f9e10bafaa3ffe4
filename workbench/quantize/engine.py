"""``quantize``: FP32 model + recipe + calibration set -> an inspected, versioned INT8 model.

The pipeline reads as its steps: resolve the recipe, resolve the calibration
samples, look the content key up in the cache; on a miss convert with the
recipe's backend, inspect the produced file (never trust the conversion), check
it against the recipe, write model and manifest atomically into the cache; then
copy to ``output`` if asked.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from .._io import (
    atomic_path,
    check_output_path,
    entry_lock,
    portable_paths,
    read_json,
    sha256_bytes,
    sha256_file,
    to_json,
)
from .._results import Result
from ..errors import CalibrationError, ModelError, QuantizationError, WorkbenchWarning
from .inspect import ModelInspection, QuantParams, inspect_model
from .manifest import MANIFEST_NAME, build_manifest
from .recipe import QuantRecipe, get_recipe

MODEL_EXT = {"tflite": ".tflite", "onnx": ".onnx"}
MIN_CALIBRATION_SAMPLES = 50


@dataclass(frozen=True)
class QuantizedModel(Result):
    """A quantized model file, what it really contains, and where it came from."""

    path: str
    sha256: str
    size_bytes: int
    recipe: QuantRecipe
    backend: str
    format: str
    model_version: str
    source_path: str
    source_sha256: str
    calibration_id: str
    calibration_hash: str
    calibration_size: int
    input_quantization: QuantParams
    output_quantization: QuantParams
    op_summary: dict[str, int]
    float_ops: tuple[str, ...]
    weight_granularity: str
    full_integer: bool
    min_runtime: str
    toolchain: dict[str, str]
    manifest_path: str
    cache_key: str
    cache_hit: bool = False
    conversion: dict[str, Any] | None = None   # how a non-Keras source reached the backend (onnx2tf...)
    structure: dict[str, Any] | None = None    # source ops vs INT8 ops (workbench/models/structure.py)
    runtime: dict[str, Any] | None = None      # what loaded the .tflite and ran it (runtime_check.check_tflite)
    input_contract: dict[str, Any] | None = None   # the contract calibration went through (source, summary, params)

    def inspect(self) -> ModelInspection:
        """Read the file again (every tensor and op with its quantization)."""
        return inspect_model(self.path)

    def manifest(self) -> dict[str, Any]:
        return read_json(self.manifest_path)

    def summary(self) -> str:
        state = "full integer" if self.full_integer else f"{len(self.float_ops)} float op(s)"
        return (f"{Path(self.path).name}: {self.recipe.name} ({self.backend}), {self.size_bytes / 1024:.1f} KiB, "
                f"{state}, weights {self.weight_granularity.replace('_', '-')}, "
                f"{self.calibration_size} calibration samples, sha256 {self.sha256[:12]}"
                + (" (cache hit)" if self.cache_hit else ""))

    def loaded(self) -> str:
        """What loaded and ran the file before it was stored ("" for ONNX)."""
        rt = self.runtime
        if not rt:
            return ""
        if rt.get("xnnpack"):
            return f"loaded and run in {rt.get('loaded_by')} ({rt.get('probes')} calibration samples)"
        return ("XNNPACK refuses it (LiteRT's default runtime: " + str(rt.get("xnnpack_error")) + "); loaded and "
                f"run with LiteRT's builtin kernels ({rt.get('probes')} calibration samples)")

    def _repr_html_(self) -> str:
        from .. import display
        q_in, q_out = self.input_quantization, self.output_quantization
        rows = [("file", self.path), ("sha256", self.sha256), ("model version", self.model_version),
                ("recipe", self.recipe.summary()), ("calibration", f"{self.calibration_id} "
                 f"({self.calibration_size} samples, hash {self.calibration_hash[:12]})"),
                ("input", f"{q_in.dtype} scale={q_in.scale} zero_point={q_in.zero_point}"),
                ("output", f"{q_out.dtype} scale={q_out.scale} zero_point={q_out.zero_point}"),
                ("float ops", ", ".join(self.float_ops) or "none"), ("min runtime", self.min_runtime),
                ("manifest", self.manifest_path), ("cache", "hit" if self.cache_hit else "miss"),
                ("runtime", self.loaded() or "n/a")]
        if self.conversion:
            conv = self.conversion
            rows.insert(4, ("converted with", f"{conv.get('tool')} "
                            + ", ".join(f"{k} {v}" for k, v in sorted((conv.get('versions') or {}).items()))
                            + "; NCHW->NHWC inputs: " + (", ".join(conv.get("transposed_inputs") or ()) or "none")))
        styles = [display.BAD_STYLE if r[0] == "float ops" and self.float_ops else "" for r in rows]
        return (display.heading("Quantized model") + display.paragraph(self.summary())
                + display.table(("", ""), rows, row_styles=styles)
                + display.table(("op type", "count"), sorted(self.op_summary.items()), caption="Ops")
                + _structure_html(self.structure))


def _structure_html(structure: dict[str, Any] | None) -> str:
    from .. import display
    from ..models.structure import summary_lines
    if not structure:
        return ""
    html = display.paragraph("; ".join(line.strip() for line in summary_lines(structure)))
    if structure.get("compared"):
        src, dst = structure.get("source_ops", {}), structure.get("int8_ops", {})
        rows = [(k, src.get(k, 0), dst.get(k, 0), dst.get(k, 0) - src.get(k, 0)) for k in sorted(set(src) | set(dst))]
        styles = [display.BAD_STYLE if r[3] > 0 else "" for r in rows]
        html += display.table(("op type", "source", "INT8", "added"), rows, row_styles=styles,
                              caption="Structure: source ops vs INT8 ops (edge QUANTIZE/DEQUANTIZE aside)")
    return html


@dataclass(frozen=True)
class _Calibration:
    x: np.ndarray
    id: str
    hash: str
    sample_ids: tuple[str, ...]
    strategy: str


def quantize(model: str | os.PathLike, recipe: str | QuantRecipe = "a8w8_pc", calibration: Any = None, *,
             dataset: Any = None, output: str | os.PathLike | None = None, backend: str | None = None,
             calibration_size: int | None = None, exclude: Any = (), cache: bool = True,
             input_spec: Any = None) -> QuantizedModel:
    """Quantize ``model`` with ``recipe`` and ``calibration`` samples.

    Parameters
    ----------
    model : the FP32 source: a Keras ``.keras``/``.h5`` file, a SavedModel folder, an ``.onnx``
        file or an FP32 ``.tflite`` file.  The TFLite backend takes an ``.onnx`` file through
        onnx2tf (:func:`workbench.models.convert.convert_onnx`: NCHW->NHWC, checked against
        ONNX Runtime) and quantizes an FP32 ``.tflite`` as it is (AI Edge Quantizer); the ONNX Runtime
        backend takes Keras/SavedModel/FP32 ``.tflite`` through tf2onnx.
    recipe : a recipe name (``a8w8_pc``, ``a8w8_pt``, ``a16w8_pc``) or a :class:`QuantRecipe`.
    calibration : an (N, H, W, C) float32 array; a ``Dataset`` (all its samples); or a
        calibration set (has ``sample_ids`` and ``hash``) together with ``dataset=``.
        None takes ``dataset``'s ``calibration`` split (or all of it).
    dataset : the ``Dataset`` the calibration set's sample ids refer to.
    output : a folder (gets ``model.tflite``/``model.onnx``) or a model file path; the
        manifest ``model_manifest.json`` is written beside the model.  One folder per model.
    backend : ``"tflite"`` or ``"onnx"``; overrides the recipe's backend.
    calibration_size : use only the first N calibration samples.
    exclude : op types or node names kept in float (turns float fallback on).
    input_spec : the model's input contract (an ``InputContract``, a card mapping or a YAML path);
        default the card beside ``model`` (``<model>.card.yaml``).  The calibration pixels go through
        its ``apply`` (normalisation, colour, size) before they reach the converter; without a card the
        samples are fed as they are.
    cache : reuse an identical earlier quantization from the cache; False quantizes again
        (and refreshes the cache entry).
    """
    # 1. recipe
    changes: dict[str, Any] = {}
    if exclude:
        changes["exclude"] = exclude
    rec = get_recipe(recipe, backend=backend, **changes)
    if output is not None:  # refuse a device, link or unwritable output before any work
        _publish_target(Path(output), MODEL_EXT[rec.backend])
    # 2. source model
    from ..models.formats import model_format
    source = Path(model)
    if output is not None:
        target = _publish_target(Path(output), MODEL_EXT[rec.backend])[0]
        if target.exists() and source.exists() and os.path.samefile(source, target):
            raise QuantizationError(f"{target} is the source model; writing the INT8 model there would destroy it. "
                                    "Give another -o.")
    fmt = model_format(source)
    _check_backend(source, fmt, rec)
    if fmt == "onnx":   # sizes, external data, checker before any allocation; the data files enter the hash
        from ..models.onnx_preflight import preflight
        source_sha = sha256_file(preflight(source))
    else:
        source_sha = sha256_file(source)
    # 3. calibration samples
    calib = _resolve_calibration(calibration, dataset, calibration_size)
    calib = _apply_contract(calib, source, input_spec)
    contract = contract_record(source, input_spec)
    toolchain = _toolchain(rec.backend, fmt)
    from .cache import cache_key, entry_dir, lookup
    key = cache_key(source_sha256=source_sha, recipe=rec.key(),
                    calibration={"hash": calib.hash, "sample_ids": list(calib.sample_ids)},
                    toolchain=toolchain)
    ext = MODEL_EXT[rec.backend]
    # 4. cache (two processes that need one entry at once, e.g. two targets of a batch: one quantizes)
    with entry_lock(entry_dir(key)) if cache else contextlib.nullcontext():
        hit = lookup(key, ext) if cache else None
        if hit is not None:
            model_path, manifest_path = hit
            inspection = inspect_model(model_path)
        else:
            model_path, manifest_path, inspection = _quantize_fresh(
                source, fmt, rec, calib, toolchain, key, source_sha, ext, contract)
    # 5. output
    if output is not None:
        model_path, manifest_path = _publish(model_path, manifest_path, Path(output), ext, contract)
    manifest = read_json(manifest_path)
    runtime = manifest.get("runtime")
    if runtime is None and ext == ".tflite":   # a cache entry from before the check: load it now (not stored)
        from .runtime_check import check_tflite
        try:
            runtime = check_tflite(Path(model_path).read_bytes(), calib.x)
        except (RuntimeError, ValueError) as exc:
            raise QuantizationError(f"{model_path}: LiteRT cannot load the cached INT8 model ({exc}). "
                                    "Quantize again with cache=False (--no-cache).") from exc
    if runtime and not runtime.get("xnnpack"):
        warnings.warn(f"{model_path}: LiteRT's default runtime refuses the INT8 model (XNNPACK: "
                      f"{runtime.get('xnnpack_error')}); it loads and runs with the builtin kernels "
                      "(evaluate falls back to them).", WorkbenchWarning, stacklevel=2)
    return QuantizedModel(
        path=str(model_path), sha256=manifest["sha256"], size_bytes=int(manifest["size_bytes"]),
        recipe=rec, backend=rec.backend, format=inspection.format, model_version=manifest["model_version"],
        source_path=str(source), source_sha256=source_sha, calibration_id=calib.id,
        calibration_hash=calib.hash, calibration_size=len(calib.x),
        input_quantization=inspection.inputs[0], output_quantization=inspection.outputs[0],
        op_summary=dict(inspection.op_summary), float_ops=inspection.float_ops + inspection.qdq_inside,
        weight_granularity=inspection.weight_granularity, full_integer=inspection.full_integer,
        min_runtime=inspection.min_runtime, toolchain=toolchain, manifest_path=str(manifest_path),
        cache_key=key, cache_hit=hit is not None, conversion=manifest.get("conversion"),
        structure=_stored_structure(manifest) or _structure(source, fmt, model_path, rec.backend), runtime=runtime,
        input_contract=contract)


# -- steps -------------------------------------------------------------------------------------
def _stored_structure(manifest: dict[str, Any]) -> dict[str, Any] | None:
    from ..models.structure import STRUCTURE_VERSION
    stored = manifest.get("structure")
    return stored if isinstance(stored, dict) and stored.get("version") == STRUCTURE_VERSION else None


def _structure(source: Path, fmt: str, model_path: Path | str, backend: str) -> dict[str, Any] | None:
    """The structural diff of a TFLite-recipe result (None for ONNX QDQ models)."""
    if backend != "tflite":
        return None
    from ..models.structure import structural_diff
    return structural_diff(source, fmt, model_path)


def _check_backend(source: Path, fmt: str, rec: QuantRecipe) -> None:
    if fmt == "tflite":
        from .inspect import inspect_model as _inspect
        found = _inspect(source)
        quantized = [t for t in found.tensors if t.scales and t.dtype in ("INT8", "UINT8", "INT16", "INT32")]
        if quantized:
            raise ModelError(f"{source}: already a quantized .tflite file ({len(quantized)} quantized tensor(s), "
                             f"e.g. {quantized[0].name!r} {quantized[0].dtype}); quantization starts from the float "
                             "model: give the FP32 .tflite, the Keras .keras/.h5, SavedModel folder or .onnx it "
                             "came from.")
        check_no_custom_ops(source)


def check_no_custom_ops(source: Path) -> None:
    """Refuse a float .tflite holding custom ops, naming each, from the file's operator codes (no conversion
    runs first): calibration runs the float model, and no runtime here has a custom op's kernel."""
    from ..models.tflite_graph import read_tflite
    graph = read_tflite(source)
    custom = [op for op in graph.ops if op.is_custom]
    if not custom:
        return
    kinds = sorted({op.type for op in custom})
    shown = ", ".join(f"#{op.index} {op.type!r} (output {op.name!r})" for op in custom[:6])
    more = f" and {len(custom) - 6} more" if len(custom) > 6 else ""
    raise ModelError(
        f"{source}: {len(custom)} custom op(s) ({', '.join(map(repr, kinds))}): {shown}{more}. Quantization runs "
        "the float model on the calibration samples and neither LiteRT here nor the NPU compilers have a kernel "
        "for a custom op. Next: export the model without it (replace it by builtin ops, e.g. a MediaPipe "
        "Convolution2DTransposeBias by TRANSPOSE_CONV + ADD), or quantize the source model it came from.")


def _toolchain(backend: str, fmt: str = "keras") -> dict[str, str]:
    """Tool versions of the quantization, plus the converters a non-native source goes through."""
    if backend == "tflite":
        from .tflite_backend import toolchain
    else:
        from .onnx_backend import toolchain
    tools = {"npu-workbench": __version__, **toolchain()}
    if backend == "tflite":
        from ..models.tflite_passes import PASSES_VERSION
        tools["tflite-passes"] = str(PASSES_VERSION)
    from ..models.convert import conversion_toolchain
    tools.update(conversion_toolchain(fmt, backend))
    return tools


def _array_hash(x: np.ndarray) -> str:
    digest = hashlib.sha256(np.ascontiguousarray(x).tobytes())
    digest.update(str(tuple(x.shape)).encode())
    digest.update(str(x.dtype).encode())
    return digest.hexdigest()


def _resolve_calibration(calibration: Any, dataset: Any, size: int | None) -> _Calibration:
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
        raise CalibrationError(f"`calibration_size` must be a positive integer. Got {size!r} instead.")
    if calibration is None:
        if dataset is None:
            raise CalibrationError("no calibration data: pass `calibration` (an array, a Dataset or a "
                                   "calibration set with `dataset=`) or `dataset=` to use its calibration split.")
        splits = getattr(dataset, "splits", ())
        calibration = dataset.select(split="calibration") if "calibration" in splits else dataset
    from ..data.images import ImageFiles
    if isinstance(calibration, ImageFiles):      # a dataset's lazily decoded pixels (dataset.x)
        calibration = np.asarray(calibration)
    if isinstance(calibration, np.ndarray):
        x = calibration
        ids: tuple[str, ...] = ()
        cid, chash, strategy = "array", None, "array"
    elif hasattr(calibration, "sample_ids") and hasattr(calibration, "hash"):
        if dataset is None:
            raise CalibrationError(
                f"calibration set {getattr(calibration, 'id', calibration.hash[:12])!r} holds sample ids only; "
                "pass the dataset it was drawn from as `dataset=`.")
        ids = tuple(str(s) for s in calibration.sample_ids)
        if ids and hasattr(calibration, "images"):
            # a curated set is checked as the audit checks it: test-split ids, repeated ids, another dataset
            x = calibration.images(dataset).x
        else:
            x = dataset.take(ids).x if ids else np.zeros((0, *dataset.input_shape), np.float32)
        strategy = str(getattr(calibration, "strategy", "unknown"))
        cid = str(getattr(calibration, "id", "") or f"{strategy}:{calibration.hash[:12]}")
        chash = str(calibration.hash)
    elif hasattr(calibration, "x") and hasattr(calibration, "ids"):
        x = calibration.x
        ids = tuple(str(s) for s in calibration.ids.tolist())
        cid, chash, strategy = f"dataset:{calibration.name}", str(calibration.hash), "dataset"
    else:
        raise CalibrationError(f"`calibration` must be an (N, H, W, C) float32 array, a Dataset or a calibration "
                               f"set (with sample_ids and hash). Got {type(calibration).__name__} instead.")
    x = np.asarray(x)
    if size is not None:
        if size > len(x):
            warnings.warn(f"calibration_size={size} but only {len(x)} calibration samples exist; using all.",
                          WorkbenchWarning, stacklevel=3)
        else:
            x, ids = x[:size], ids[:size]
            chash = None if chash is None else hashlib.sha256(f"{chash}:{size}".encode()).hexdigest()
    if len(x) == 0:
        raise CalibrationError(f"calibration {cid!r} has zero samples; the selection (split, condition or "
                               "sample ids) matched nothing. Choose a calibration set with samples.")
    if not np.issubdtype(x.dtype, np.floating):
        raise CalibrationError(f"calibration samples have dtype {x.dtype}; float32 images in [0, 1] are expected "
                               "(divide uint8 images by 255).")
    if x.ndim != 4:
        raise CalibrationError(f"calibration samples have shape {tuple(x.shape)}; (N, H, W, C) is expected.")
    if not np.all(np.isfinite(x)):
        raise CalibrationError(f"calibration {cid!r} contains NaN or infinite values.")
    x = np.ascontiguousarray(x, dtype=np.float32)
    if len(x) < MIN_CALIBRATION_SAMPLES:
        warnings.warn(f"only {len(x)} calibration samples (fewer than {MIN_CALIBRATION_SAMPLES}); activation "
                      "ranges may be poorly estimated.", WorkbenchWarning, stacklevel=3)
    return _Calibration(x=x, id=cid, hash=chash or _array_hash(x), sample_ids=ids, strategy=strategy)


def _apply_contract(calib: _Calibration, source: Path, input_spec: Any) -> _Calibration:
    """Calibration pixels -> model inputs through the model's input contract (its card or
    ``input_spec``); unchanged when there is neither, or when the contract changes nothing."""
    from ..models.contract import card_path, resolve_contract
    if input_spec is None and not card_path(source).is_file():
        return calib
    contract = resolve_contract(source, input_spec)
    x = contract.apply(calib.x, ids=calib.sample_ids or None, where=f"calibration {calib.id}")
    if x.shape == calib.x.shape and np.array_equal(x, calib.x):
        return calib
    import dataclasses
    return dataclasses.replace(calib, x=np.ascontiguousarray(x, np.float32), hash=_contract_hash(calib.hash, contract))


def contract_record(source: Path, input_spec: Any) -> dict[str, Any]:
    """What the manifest and the ``quantize`` output say about the input contract calibration went through."""
    from ..models.contract import card_path, resolve_contract
    if input_spec is None and not card_path(source).is_file():
        return {"source": "none", "summary": "input contract: none (no card beside the model, no input_spec): "
                                             "calibration pixels go in as the dataset holds them"}
    contract = resolve_contract(source, input_spec)
    origin = f"card {card_path(source).name}" if input_spec is None else "input_spec"
    summary = contract.summary()
    for given in (card_path(source), input_spec):     # the card by its name: the manifest is shared
        if isinstance(given, str | os.PathLike) and str(given) and str(given) in summary:
            summary = summary.replace(str(given), Path(given).name)
    return {"source": origin, "summary": summary, "params": contract.to_params()}


def _contract_hash(calibration_hash: str, contract: Any) -> str:
    from .._io import stable_hash
    return hashlib.sha256(f"{calibration_hash}:{stable_hash(contract.to_params())}".encode()).hexdigest()


def calibration_hashes(calibration_hash: str, model: str | os.PathLike, input_spec: Any = None) -> frozenset[str]:
    """The ``calibration_hash`` a :func:`quantize` of ``model`` with calibration ``calibration_hash`` and
    ``input_spec`` (or the card beside ``model``) records: both candidates when the contract's
    normalisation is the identity (it may then leave the pixels unchanged), for reusing a saved result."""
    from ..models.contract import card_path, resolve_contract
    if input_spec is None and not card_path(model).is_file():
        return frozenset({calibration_hash})
    contract = resolve_contract(model, input_spec)
    with_contract = _contract_hash(calibration_hash, contract)
    return frozenset({with_contract, calibration_hash}) if contract.is_identity else frozenset({with_contract})


def _model_input_shape(source: Path, fmt: str, rec: QuantRecipe) -> tuple[tuple[int, ...], str, Any]:
    if rec.backend == "onnx":
        from .onnx_backend import input_info
        name, shape = input_info(source)
        return shape, name, None
    if fmt == "tflite":
        from ..models.tflite_graph import read_tflite
        graph = read_tflite(source)
        if len(graph.inputs) != 1:
            raise ModelError(f"{source}: the model has {len(graph.inputs)} inputs; one image input is expected.")
        tensor = graph.tensors[graph.inputs[0]]
        from .tflite_backend import _static_shape
        return _static_shape(source, tensor.name, tensor.shape_signature or tensor.shape), tensor.name, None
    from .tflite_backend import load_function
    fn, shape, name = load_function(source, fmt)
    return shape, name, fn


def _backend_source(source: Path, fmt: str, rec: QuantRecipe, calib: _Calibration
                    ) -> tuple[Path, str, dict[str, Any] | None]:
    """The file the backend reads, its format, and how it was converted from ``source`` (or None).

    TFLite backend: ``.onnx`` -> onnx2tf SavedModel (checked against ONNX Runtime); an FP32
    ``.tflite`` is read as it is (AI Edge Quantizer).  ONNX backend: Keras/SavedModel/FP32
    ``.tflite`` -> tf2onnx ONNX."""
    from ..models import convert
    if rec.backend == "tflite" and fmt == "tflite":   # quantized as it is (aeq_backend.py), no round trip
        return source, fmt, None
    if rec.backend == "tflite" and fmt == "onnx":
        from .tflite_backend import preload_tensorflow
        preload_tensorflow()     # the TFLite converter's import runs while onnx2tf converts (its own process)
        converted = convert.convert_onnx(source, samples=calib.x)
        return Path(converted.saved_model), "saved_model", converted.manifest_entry()
    if rec.backend == "onnx" and fmt != "onnx":
        onnx_path, first = convert.tf_to_onnx(source, fmt)
        return onnx_path, "onnx", first
    return source, fmt, None


def _quantize_fresh(source: Path, fmt: str, rec: QuantRecipe, calib: _Calibration, toolchain: dict[str, str],
                    key: str, source_sha: str, ext: str, contract: dict[str, Any] | None = None
                    ) -> tuple[Path, Path, ModelInspection]:
    if rec.transforms:   # +cle/+bc: rewrite the float weights first (workbench/quantize/equalize.py)
        from .equalize import apply_transforms
        eq_source, eq_fmt, _ = apply_transforms(source, fmt, rec.transforms, weights=rec.weights,
                                                calibration=calib.x)
        work, work_fmt, conversion = _backend_source(eq_source, eq_fmt, rec, calib)
    else:
        work, work_fmt, conversion = _backend_source(source, fmt, rec, calib)
    shape, input_name, _ = _model_input_shape(work, work_fmt, rec)
    x = calib.x
    if rec.backend == "onnx" and len(shape) == 4 and tuple(x.shape[1:]) == (shape[2], shape[3], shape[1]) \
            and tuple(x.shape[1:]) != tuple(shape[1:]):
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))   # NHWC images into an NCHW ONNX input
        conversion = {**(conversion or {}), "calibration_layout": "NHWC images fed as NCHW"}
    if tuple(x.shape[1:]) != tuple(shape[1:]):
        layout = (" (the converted model takes NHWC: calibration images are (H, W, C))"
                  if conversion and conversion.get("transposed_inputs") else "")
        raise CalibrationError(
            f"calibration samples have shape {tuple(calib.x.shape[1:])} per sample but model input "
            f"{input_name!r} of {source} takes {tuple(shape)}{layout}; resize the images or pick the matching "
            "dataset.")
    if rec.backend == "onnx":
        from .onnx_backend import quantize_onnx
        data = quantize_onnx(work, rec, x)
        ranges = None
    elif work_fmt == "tflite":
        from .aeq_backend import quantize_float_tflite
        data, conversion = quantize_float_tflite(work, rec, calib.x)
        ranges = conversion.pop("ranges", None)
    else:
        from .tflite_backend import quantize_tflite
        report: dict[str, Any] = {}
        data = quantize_tflite(work, work_fmt, rec, calib.x, report)
        ranges = report.get("ranges")
    if rec.backend == "tflite":   # exact rewrites of what a converter added (workbench/models/tflite_passes.py)
        from ..models.tflite_fold import fold_lines
        from ..models.tflite_passes import apply_passes
        data, passes = apply_passes(data)
        data, folds = fold_lines(data)
        passes += folds
        if passes:
            conversion = {**(conversion or {}), "passes": passes}
    with tempfile.TemporaryDirectory(prefix="wb-quant-") as tmp:
        probe = Path(tmp) / f"model{ext}"
        probe.write_bytes(data)
        inspection = inspect_model(probe)
        structure = _structure(source, fmt, probe, rec.backend)
        problems = inspection.check(rec)
        if problems:
            raise QuantizationError(f"{source}: the {rec.backend} result breaks recipe {rec.name!r}: "
                                    + "; ".join(problems)
                                    + ". Exclude those ops with float fallback (--exclude), or change the model.")
        runtime, absurd = _runtime_check(source, work, work_fmt, probe, data, calib.x) if ext == ".tflite" \
            else (None, [])
    manifest = build_manifest(
        file=f"model{ext}", sha256=sha256_bytes(data), size_bytes=len(data), fmt=inspection.format,
        recipe=rec.to_dict(), min_runtime=inspection.min_runtime,
        calibration={"id": calib.id, "hash": calib.hash, "strategy": calib.strategy, "n_samples": len(calib.x),
                     "sample_ids_sha256": hashlib.sha256("\0".join(calib.sample_ids).encode()).hexdigest()
                     if calib.sample_ids else None, "input_contract": contract},
        source={"path": portable_paths(str(source)), "sha256": source_sha, "format": fmt}, toolchain=toolchain,
        inspection=inspection, cache_key=key, conversion=conversion,
        created_utc=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    manifest["structure"] = structure
    if runtime is not None:
        manifest["runtime"] = runtime
        manifest["absurd_scales"] = absurd
    if ranges:
        manifest["ranges"] = ranges      # what the data says of the calibrated ranges (ranges.py)
    from .cache import store
    model_path, manifest_path = store(key, ext, data, manifest)
    return model_path, manifest_path, inspect_model(model_path)


def _runtime_check(source: Path, work: Path, work_fmt: str, path: Path, data: bytes, x: np.ndarray
                   ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Load the INT8 file as LiteRT's default runtime does (XNNPACK; the builtin kernels where XNNPACK refuses
    it) and run calibration samples through it; refuse a model whose INT8 outputs ignore the input."""
    from .runtime_check import absurd_scales, cause, check_tflite, describe_absurd
    try:
        record = check_tflite(data, x, reference=lambda p: _float_outputs(work, work_fmt, p))
    except (RuntimeError, ValueError) as exc:
        raise QuantizationError(f"{source}: LiteRT cannot load the quantized model, neither with its default runtime "
                                f"(XNNPACK) nor with its builtin kernels: {' '.join(str(exc).split())[:300]}. "
                                "Next: exclude the op it names (--exclude) or try another recipe.") from exc
    absurd = absurd_scales(str(path))
    if record["ignores_input"]:
        why = describe_absurd(absurd)
        raise QuantizationError(
            f"{source}: the INT8 model ignores its input: {record['distinct_inputs']} different calibration samples "
            f"give the same INT8 output(s) ({', '.join(record['constant_outputs'])}) while the float model's "
            f"differ (by up to {record.get('float_spread', float('nan')):.3g})"
            + (f"; {why}" if why else "") + ". Next: "
            + ("make the padding finite (export the max-pool without ceil_mode, with explicit padding) or exclude "
               f"{cause(absurd)['op']} (--exclude {cause(absurd)['op']})" if absurd else
               "check the calibration data and the layer ranges (`workbench quantize` with --calibrator "
               "percentile, or exclude the op that saturates)") + ".")
    return record, absurd


def _float_outputs(work: Path, work_fmt: str, x: np.ndarray) -> list[np.ndarray]:
    """The float model the backend read, run on ``x`` (a list of outputs, each (N, ...))."""
    from .runtime_check import _run, load_tflite
    if work_fmt == "tflite":
        return _run(load_tflite(work.read_bytes())[0], x)
    import contextlib
    import io

    from .tflite_backend import _tf, load_function
    fn, _, _ = load_function(work, work_fmt)
    with contextlib.redirect_stdout(io.StringIO()):
        data = _tf().lite.TFLiteConverter.from_concrete_functions([fn]).convert()
    return _run(load_tflite(bytes(data))[0], x)


def _publish_target(output: Path, ext: str) -> tuple[Path, Path]:
    """The model and manifest paths ``output`` names; a device, link or non-folder parent is refused."""
    target = output if output.suffix.lower() in (".tflite", ".onnx") else output / f"model{ext}"
    if target.suffix.lower() != ext:
        raise QuantizationError(f"{output}: the {ext} model cannot be written to a {target.suffix} path; "
                                f"name it *{ext} or give a folder.")
    if output != target and (output.is_symlink() or (output.exists() and not output.is_dir())):
        raise QuantizationError(f"{output} is not a folder: give a folder (it gets model{ext} and "
                                f"{MANIFEST_NAME}) or a *{ext} file path.")
    target_manifest = target.parent / MANIFEST_NAME
    return check_output_path(target), check_output_path(target_manifest)


def _publish(model_path: Path, manifest_path: Path, output: Path, ext: str,
             contract: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """Copy model and manifest to ``output`` (a folder, or a model file path) atomically."""
    target, target_manifest = _publish_target(output, ext)
    if target_manifest.is_file():
        try:
            existing = read_json(target_manifest)
            existing = existing.get("file") if isinstance(existing, dict) else None
        except (OSError, ValueError):
            existing = None
        if existing not in (None, target.name):
            raise QuantizationError(
                f"{target.parent} already holds the manifest of {existing!r}; a folder holds one model and its "
                f"{MANIFEST_NAME}. Write {target.name} to another folder.")
    manifest = read_json(manifest_path)
    manifest["file"] = target.name
    if contract is not None and isinstance(manifest.get("calibration"), dict):
        manifest["calibration"]["input_contract"] = contract   # also for a cache entry made before it was recorded
    manifest = portable_paths(manifest)      # a shipped manifest names no folder of this machine
    # Manifest-last commit: the old manifest goes first, the manifest of the new model last, so an
    # interruption leaves at worst a model without a manifest (never trusted), never a mismatched pair.
    if target_manifest.is_file():
        target_manifest.unlink()
    with atomic_path(target) as tmp:
        shutil.copyfile(model_path, tmp)
    with atomic_path(target_manifest) as tmp:
        tmp.write_text(to_json(manifest, indent=2) + "\n", encoding="utf-8")
    return target, target_manifest
