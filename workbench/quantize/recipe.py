"""Quantization recipes as data.

A :class:`QuantRecipe` is a frozen description of one post-training
quantization: which backend, per-channel or per-tensor weights, activation bits,
the model's input/output dtype, the calibrator, excluded ops or nodes and
whether float fallback is allowed.  Invalid combinations are rejected when the
recipe is built, so a recipe that exists can be applied.

Named recipes follow one scheme, ``a<activation bits>w<weight bits>_<pc|pt>``:
``a8w8_pc``, ``a8w8_pt`` and ``a16w8_pc``.  The ONNX Runtime variant of a named
recipe is the same name with ``backend="onnx"`` (``get_recipe("a8w8_pc",
backend="onnx")``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .._results import Result
from .._validation import check_choice, check_range
from ..errors import QuantizationError

BACKENDS = ("tflite", "onnx")
GRANULARITIES = ("per_channel", "per_tensor")
CALIBRATORS = ("minmax", "minmax-global", "percentile", "entropy")
TFLITE_CALIBRATORS = ("minmax", "minmax-global", "percentile")
IO_DTYPES = ("int8", "uint8", "int16", "float32")


@dataclass(frozen=True)
class QuantRecipe(Result):
    """One post-training quantization, validated when built.

    Parameters
    ----------
    name : recipe name (``a8w8_pc`` ...); free text for custom recipes.
    backend : ``"tflite"`` (TFLite converter) or ``"onnx"`` (ONNX Runtime, QDQ format).
    weights : ``"per_channel"`` (one scale per output channel) or ``"per_tensor"``.
    activation_bits : 8, or 16 (TFLite only, with 8-bit weights: the 16x8 mode).
    weight_bits : 8 (the only width the targets run).
    input_dtype, output_dtype : the model's input/output type.  TFLite: ``int8``/``uint8``/
        ``float32`` for 8-bit activations, ``int16``/``float32`` for 16-bit.  ONNX Runtime
        QDQ models keep ``float32`` inputs and outputs.
    calibrator : ``"minmax"``, ``"minmax-global"`` or ``"percentile"`` (TFLite: the calibrated min/max
        narrowed to the ``percentile``/``100 - percentile`` values of each tensor on the calibration data
        before the quantizer reads them, workbench/quantize/ranges.py); ONNX Runtime also ``"entropy"``.
        ``"minmax-global"`` is each tensor's min/max over all the calibration samples: what ``"minmax"``
        already is for the TFLite converter and ONNX Runtime; for a float ``.tflite`` source (AI Edge
        Quantizer, whose min/max is a moving average of each sample's min/max) it keeps the values that
        only a few samples reach, e.g. the one face among the crops of a face detector.
    percentile : the percentile of the ``percentile`` calibrator, in (90, 100].
    exclude : op types (``MEAN``, ``Softmax``) or node names that stay in float.
    allow_float_fallback : allow float ops in the result.  Off by default (full integer);
        required when ``exclude`` is not empty (excluded ops run in float).
    """

    name: str = "custom"
    backend: str = "tflite"
    weights: str = "per_channel"
    activation_bits: int = 8
    weight_bits: int = 8
    input_dtype: str = "int8"
    output_dtype: str = "int8"
    calibrator: str = "minmax"
    percentile: float = 99.999
    exclude: tuple[str, ...] = ()
    allow_float_fallback: bool = False
    transforms: tuple[str, ...] = ()    # float-weight transforms before conversion: "cle", "bc" (equalize.py)

    def __post_init__(self) -> None:
        err = QuantizationError
        check_choice("backend", self.backend, BACKENDS, error=err)
        check_choice("weights", self.weights, GRANULARITIES, error=err)
        check_choice("activation_bits", self.activation_bits, (8, 16), error=err)
        check_choice("weight_bits", self.weight_bits, (8,), error=err)
        check_choice("input_dtype", self.input_dtype, IO_DTYPES, error=err)
        check_choice("output_dtype", self.output_dtype, IO_DTYPES, error=err)
        check_choice("calibrator", self.calibrator, CALIBRATORS, error=err)
        check_range("percentile", self.percentile, 90.0, 100.0, error=err)
        if isinstance(self.exclude, str) or not all(isinstance(e, str) and e for e in self.exclude):
            raise err(f"`exclude` must be a tuple of op types or node names. Got {self.exclude!r} instead.")
        object.__setattr__(self, "exclude", tuple(self.exclude))
        if isinstance(self.transforms, str) or any(t not in TRANSFORMS for t in self.transforms):
            raise err(f"`transforms` must be a tuple of {', '.join(map(repr, TRANSFORMS))}. "
                      f"Got {self.transforms!r} instead.")
        object.__setattr__(self, "transforms", tuple(t for t in TRANSFORMS if t in self.transforms))
        where = f"recipe {self.name!r}"
        if self.backend == "tflite" and self.calibrator not in TFLITE_CALIBRATORS:
            raise err(f"{where}: the TFLite backend has no {self.calibrator!r} calibrator (it calibrates "
                      "with min/max, narrowed to percentiles by 'percentile'). Use calibrator='minmax' or "
                      "'percentile', or backend='onnx' for 'entropy'.")
        if self.backend == "onnx":
            if self.activation_bits != 8:
                raise err(f"{where}: 16-bit activations are a TFLite mode (16x8); the ONNX Runtime "
                          "backend here quantizes activations to 8 bits. Use backend='tflite'.")
            for field in ("input_dtype", "output_dtype"):
                if getattr(self, field) != "float32":
                    raise err(f"{where}: ONNX Runtime QDQ models keep float32 inputs and outputs; "
                              f"`{field}` must be 'float32' with backend='onnx'. "
                              f"Got {getattr(self, field)!r} instead.")
        if self.backend == "tflite":
            allowed = ("int16", "float32") if self.activation_bits == 16 else ("int8", "uint8", "float32")
            for field in ("input_dtype", "output_dtype"):
                if getattr(self, field) not in allowed:
                    raise err(f"{where}: with {self.activation_bits}-bit activations `{field}` must be one "
                              f"of {', '.join(map(repr, allowed))}. Got {getattr(self, field)!r} instead.")
            if self.exclude and self.activation_bits == 16:
                raise err(f"{where}: excluding ops is not available in the TFLite 16x8 mode "
                          "(the selective quantizer writes 8-bit activations). Use an a8w8 recipe.")
            if self.exclude and "uint8" in (self.input_dtype, self.output_dtype):
                raise err(f"{where}: with excluded ops the TFLite selective quantizer writes int8 or "
                          "float32 inputs/outputs, not uint8. Use input_dtype/output_dtype 'int8'.")
        if self.exclude and not self.allow_float_fallback:
            raise err(f"{where}: excluded ops {', '.join(self.exclude)} run in float, so the model cannot "
                      "be full integer. Set allow_float_fallback=True (the CLI does so with --exclude).")

    @property
    def full_integer(self) -> bool:
        """True when the result must contain no float ops."""
        return not self.allow_float_fallback

    @property
    def per_channel(self) -> bool:
        return self.weights == "per_channel"

    def replace(self, **changes: Any) -> QuantRecipe:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    def key(self) -> dict[str, Any]:
        """The fields that change the produced model (everything; used in the cache key)."""
        return self.to_dict()

    def summary(self) -> str:
        parts = [f"{self.name}: {self.backend}", f"A{self.activation_bits}W{self.weight_bits}",
                 self.weights.replace("_", "-"), f"io {self.input_dtype}/{self.output_dtype}",
                 self.calibrator + (f" p{self.percentile:g}" if self.calibrator == "percentile" else "")]
        if self.transforms:
            parts.append("transforms " + "+".join(self.transforms))
        if self.exclude:
            parts.append("exclude " + ",".join(self.exclude))
        parts.append("float fallback allowed" if self.allow_float_fallback else "full integer")
        return ", ".join(parts)


RECIPES: dict[str, dict[str, Any]] = {
    "a8w8_pc": dict(weights="per_channel", activation_bits=8, input_dtype="int8", output_dtype="int8"),
    "a8w8_pt": dict(weights="per_tensor", activation_bits=8, input_dtype="int8", output_dtype="int8"),
    "a16w8_pc": dict(weights="per_channel", activation_bits=16, input_dtype="int16", output_dtype="int16"),
}


def list_recipes() -> tuple[str, ...]:
    return tuple(RECIPES)


def get_recipe(name: str | QuantRecipe, *, backend: str | None = None, **changes: Any) -> QuantRecipe:
    """The named recipe (``a8w8_pc``, ``a8w8_pt``, ``a16w8_pc``), optionally changed.

    ``backend="onnx"`` gives the ONNX Runtime variant (float32 inputs/outputs, as QDQ
    models have).  A non-empty ``exclude`` turns ``allow_float_fallback`` on unless it is
    given.  A :class:`QuantRecipe` passes through (with ``changes`` applied).
    """
    if isinstance(name, QuantRecipe):
        base = name
        if backend is not None and backend != base.backend:
            changes = {**_backend_defaults(backend), **changes}
    else:
        full_name = str(name)
        name, transforms = _split_transforms(name)
        if transforms and "transforms" not in changes:
            changes["transforms"] = transforms
        check_choice("recipe", name, RECIPES, error=QuantizationError)
        fields = dict(RECIPES[name])
        if backend is not None:
            check_choice("backend", backend, BACKENDS, error=QuantizationError)
            fields.update(_backend_defaults(backend))
        if fields.get("backend") == "onnx" and fields["activation_bits"] != 8:
            raise QuantizationError(f"recipe {name!r} has 16-bit activations, a TFLite mode (16x8); the "
                                    "ONNX Runtime backend quantizes activations to 8 bits. Use "
                                    "backend='tflite' or recipe 'a8w8_pc'.")
        base = QuantRecipe(name=full_name, **fields)
    if changes.get("exclude") and "allow_float_fallback" not in changes:
        changes["allow_float_fallback"] = True
    if "exclude" in changes:
        changes["exclude"] = _as_tuple(changes["exclude"])
    return dataclasses.replace(base, **changes) if changes else base


TRANSFORMS = ("cle", "bc")


def _split_transforms(name: str) -> tuple[str, tuple[str, ...]]:
    """``"a8w8_pt+cle+bc"`` -> ``("a8w8_pt", ("cle", "bc"))``; unknown transforms are an error."""
    base, *extra = str(name).split("+")
    for t in extra:
        check_choice("recipe transform", t, TRANSFORMS, error=QuantizationError)
    return base, tuple(extra)


def _backend_defaults(backend: str) -> dict[str, Any]:
    if backend == "onnx":
        return {"backend": "onnx", "input_dtype": "float32", "output_dtype": "float32"}
    return {"backend": backend}


def _as_tuple(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(value)
