"""What a conversion gives: :class:`ConvertedModel` (the SavedModel, the FP32 ``.tflite``, each input's and
output's layout in ONNX and in TFLite, the agreement with ONNX Runtime) and what a manifest records of it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._results import Result
from .onnx2tf_run import TOOL


@dataclass(frozen=True)
class TensorLayout:
    """One graph input or output: its shape in ONNX and in the converted model."""

    name: str
    onnx_shape: tuple[int, ...]
    tflite_shape: tuple[int, ...]
    transposed: bool            # NCHW (ONNX) became NHWC (TFLite)
    tflite_name: str = ""       # its name in the converted model's signature (when onnx2tf changed it)


@dataclass(frozen=True)
class OutputAgreement:
    """ONNX Runtime vs converted FP32 TFLite on the check samples, for one output."""

    name: str
    max_abs_error: float
    max_abs_reference: float
    cosine: float
    ok: bool

    @property
    def relative_error(self) -> float:
        return self.max_abs_error / self.max_abs_reference if self.max_abs_reference > 0 else self.max_abs_error


@dataclass(frozen=True)
class ConvertedModel(Result):
    """An ONNX model converted to a SavedModel and an FP32 ``.tflite``, with how it was checked."""

    source_path: str
    source_sha256: str
    saved_model: str
    tflite: str
    inputs: tuple[TensorLayout, ...]
    outputs: tuple[TensorLayout, ...]
    agreement: tuple[OutputAgreement, ...]
    check_samples: int
    tools: dict[str, str]
    lock_sha256: str
    seconds: float
    cache_key: str
    cache_hit: bool = False
    rewrites: tuple[str, ...] = ()   # exact graph rewrites made before onnx2tf ("Sum -> Add: 16 nodes")

    @property
    def transposed_inputs(self) -> tuple[str, ...]:
        """Names of the ONNX inputs that were NCHW and are NHWC in the converted model."""
        return tuple(t.name for t in self.inputs if t.transposed)

    def manifest_entry(self) -> dict[str, Any]:
        """What a quantized model's manifest records about the conversion."""
        return {"tool": TOOL, "versions": dict(self.tools), "lock_sha256": self.lock_sha256,
                "transposed_inputs": list(self.transposed_inputs),
                "transposed_outputs": [t.name for t in self.outputs if t.transposed],
                "inputs": [{"name": t.name, "onnx_shape": list(t.onnx_shape), "tflite_shape": list(t.tflite_shape)}
                           for t in self.inputs],
                "agreement": [{"output": a.name, "max_abs_error": a.max_abs_error, "cosine": a.cosine}
                              for a in self.agreement],
                "check_samples": self.check_samples, "cache_key": self.cache_key, "rewrites": list(self.rewrites)}

    def summary(self) -> str:
        worst = max(self.agreement, key=lambda a: a.relative_error, default=None)
        check = (f"worst output {worst.name!r}: max abs error {worst.max_abs_error:.3g}, cosine {worst.cosine:.6f}"
                 if worst else "not checked")
        layout = (f"NCHW->NHWC for {', '.join(self.transposed_inputs)}" if self.transposed_inputs
                  else "layout unchanged") + "".join(f"; {r}" for r in self.rewrites)
        return (f"{Path(self.source_path).name} -> FP32 TFLite with onnx2tf {self.tools.get('onnx2tf', '?')}: "
                f"{layout}; {check} on {self.check_samples} samples"
                + (" (cache hit)" if self.cache_hit else f" ({self.seconds:.1f} s)"))

    def _repr_html_(self) -> str:
        from ... import display
        io_rows = [(kind, t.name, str(t.onnx_shape), str(t.tflite_shape), "NCHW->NHWC" if t.transposed else "-")
                   for kind, group in (("input", self.inputs), ("output", self.outputs)) for t in group]
        check_rows = [(a.name, a.max_abs_error, a.max_abs_reference, a.cosine, "ok" if a.ok else "DIVERGES")
                      for a in self.agreement]
        styles = ["" if a.ok else display.BAD_STYLE for a in self.agreement]
        return (display.heading("Converted model (ONNX -> TFLite)") + display.paragraph(self.summary())
                + display.table(("", "name", "ONNX shape", "TFLite shape", "layout"), io_rows)
                + display.table(("output", "max abs error", "max |ONNX|", "cosine", ""), check_rows,
                                row_styles=styles, caption="ONNX Runtime vs converted FP32 TFLite")
                + display.table(("tool", "version"), sorted(self.tools.items())))
