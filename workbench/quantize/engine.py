"""``quantize``: FP32 model + recipe + calibration set -> an inspected, versioned INT8 model.

The pipeline reads as its steps: resolve the recipe, resolve the calibration
samples, look the content key up in the cache; on a miss convert with the
recipe's backend, inspect the produced file (never trust the conversion), check
it against the recipe, write model and manifest atomically into the cache; then
copy to ``output`` if asked.

Layout: this module holds the result (:class:`QuantizedModel`), the verb and the source checks;
:mod:`~workbench.quantize.calibration_samples` the calibration samples and their contract,
:mod:`~workbench.quantize.produce` a cache miss, :mod:`~workbench.quantize.publish` the copy to ``output``.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from .._io import entry_lock, read_json, sha256_file
from .._results import Result
from ..errors import ModelError, QuantizationError, WorkbenchWarning
from ..models.tflite_graph import check_no_custom_ops
from .calibration_samples import (
    MIN_CALIBRATION_SAMPLES,
    apply_contract,
    calibration_hashes,
    contract_record,
    resolve_calibration,
)
from .inspect import ModelInspection, QuantParams, inspect_model
from .produce import quantize_fresh, structure_diff
from .publish import publish, publish_target
from .recipe import QuantRecipe, get_recipe

__all__ = ["MIN_CALIBRATION_SAMPLES", "MODEL_EXT", "QuantizedModel", "calibration_hashes", "check_no_custom_ops",
           "contract_record", "quantize"]

MODEL_EXT = {"tflite": ".tflite", "onnx": ".onnx"}


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
        publish_target(Path(output), MODEL_EXT[rec.backend])
    # 2. source model
    from ..models.formats import model_format
    source = Path(model)
    if output is not None:
        target = publish_target(Path(output), MODEL_EXT[rec.backend])[0]
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
    calib = resolve_calibration(calibration, dataset, calibration_size)
    calib = apply_contract(calib, source, input_spec)
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
            model_path, manifest_path, inspection = quantize_fresh(
                source, fmt, rec, calib, toolchain, key, source_sha, ext, contract)
    # 5. output
    if output is not None:
        model_path, manifest_path = publish(model_path, manifest_path, Path(output), ext, contract)
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
        structure=_stored_structure(manifest) or structure_diff(source, fmt, model_path, rec.backend), runtime=runtime,
        input_contract=contract)


# -- steps -------------------------------------------------------------------------------------
def _stored_structure(manifest: dict[str, Any]) -> dict[str, Any] | None:
    from ..models.structure import STRUCTURE_VERSION
    stored = manifest.get("structure")
    return stored if isinstance(stored, dict) and stored.get("version") == STRUCTURE_VERSION else None


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
