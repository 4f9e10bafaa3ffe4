"""One model across the three targets, and a shape sweep to find placement cliffs.

``compare_placement(model, targets)`` analyses one INT8 ``.tflite`` on every
target; ``differences()`` lists the ops the targets place differently, each with
every target's placement and reason; ``plot()`` draws the op sequence as a strip
per target, coloured by placement.  With ``input_sizes=[...]`` the model must be a Keras file: it is
re-exported at each input size (batch 1), quantized to INT8 with the TFLite
converter using a small random representative dataset (enough for placement,
which depends on op types, shapes and dtypes, not on the quantization ranges;
not for accuracy) and re-analysed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._io import atomic_write_bytes, cache_dir, sha256_file, stable_hash
from .._results import Result
from ..errors import ModelError, PlacementError
from ..targets import TARGET_IDS, get_target
from .analyze import PlacementReport, analyze_placement, draw_strip

SWEEP_NOTE = ("Shape sweep: re-exported at each input size with batch 1 and quantized to INT8 with the "
              "TFLite converter from {n} random representative samples - valid for op placement, not "
              "for accuracy.")
KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")


@dataclass(frozen=True)
class SweepPoint:
    """Placement of one target at one input size."""

    input_size: tuple[int, int]
    target: str
    model: str
    npu_ops: int
    cpu_ops: int
    npu_share: float
    npu_segments: int
    cpu_islands: int
    label: str
    estimated_latency_ms: float | None = None


@dataclass(frozen=True)
class TargetPlacement:
    """One target's placement of one op, with its reason when on the CPU."""

    target: str
    placement: str
    reason: str = ""


@dataclass(frozen=True)
class PlacementDifference:
    """An op that not every target places the same way."""

    index: int
    type: str
    name: str
    placements: tuple[TargetPlacement, ...]


@dataclass(frozen=True)
class PlacementComparison(Result):
    """Placement reports for one model on several targets (plus an optional shape sweep)."""

    model: str
    targets: tuple[str, ...]
    reports: tuple[PlacementReport, ...]
    sweep: tuple[SweepPoint, ...] = ()
    sweep_note: str = ""

    def report(self, target: str) -> PlacementReport:
        for r in self.reports:
            if r.target == target:
                return r
        raise KeyError(target)

    def differences(self) -> tuple[PlacementDifference, ...]:
        """The ops whose placement differs between the targets (same model, same op order)."""
        if len(self.reports) < 2:
            return ()
        out = []
        for ops in zip(*(r.ops for r in self.reports)):
            if len({o.placement for o in ops}) < 2:
                continue
            cells = tuple(TargetPlacement(r.target, o.placement, "; ".join(
                [f"{x.constraint}: {x.detail}" for x in o.reasons] + list(o.notes)))
                for r, o in zip(self.reports, ops))
            out.append(PlacementDifference(ops[0].index, ops[0].type, ops[0].name, cells))
        return tuple(out)

    def format_differences(self) -> str:
        """The cross-target diff as text: one block per op placed differently."""
        diffs = self.differences()
        head = ", ".join(f"{r.target} ({r.label}: {r.produced_by})" for r in self.reports)
        if not diffs:
            return f"All {len(self.reports)} targets place every op the same way [{head}]."
        lines = [f"{len(diffs)} op(s) placed differently across {head}:",
                 f"  {'#':>4} {'type':22s}" + "".join(f"{r.target:>8}" for r in self.reports)]
        for d in diffs:
            lines.append(f"  {d.index:>4} {d.type:22s}" + "".join(f"{c.placement:>8}" for c in d.placements))
            for c in d.placements:
                if c.reason:
                    lines.append(f"         {c.target}: {c.reason}")
        return "\n".join(lines)

    def format_sweep(self) -> str:
        """The input-size sweep as text, one line per size and target."""
        lines = [self.summary()]
        for p in self.sweep:
            lat = "" if p.estimated_latency_ms is None else f", {p.estimated_latency_ms:.4g} ms (Vela estimate)"
            lines.append(f"  {p.input_size[0]}x{p.input_size[1]:<5} {p.target:7s} {p.npu_ops}/"
                         f"{p.npu_ops + p.cpu_ops} NPU ({p.npu_share:.0%}), {p.npu_segments} segment(s), "
                         f"{p.cpu_islands} island(s) [{p.label}]{lat}")
        if self.sweep_note:
            lines.append("  note: " + self.sweep_note)
        return "\n".join(lines)

    def summary(self) -> str:
        parts = [f"{r.target} {r.npu_ops}/{len(r.ops)} NPU, {r.npu_segments} seg, "
                 f"{len(r.cpu_islands)} island(s) [{r.label}]" for r in self.reports]
        text = f"{Path(self.model).name}: " + "; ".join(parts)
        if self.sweep:
            sizes = sorted({p.input_size for p in self.sweep})
            text += f"; sweep over {len(sizes)} input size(s)"
        return text

    def _repr_html_(self) -> str:
        from .. import display
        rows = [(r.target, r.label, len(r.ops), r.npu_ops, r.cpu_ops, f"{r.npu_share:.0%}",
                 r.npu_segments, len(r.cpu_islands),
                 "" if r.estimated_latency_ms is None else f"{r.estimated_latency_ms:.4f} (Vela est.)")
                for r in self.reports]
        parts = [display.heading(f"Placement of {Path(self.model).name}"),
                 display.paragraph(self.summary()),
                 display.table(("target", "label", "ops", "NPU", "CPU", "NPU share", "NPU segments",
                                "CPU islands", "latency ms"), rows)]
        diffs = self.differences()
        if diffs:
            parts.append(display.table(
                ["#", "type", "name"] + [f"{r.target}" for r in self.reports],
                [[d.index, d.type, display.short_name(d.name)]
                 + [f"{c.placement}" + (f": {c.reason}" if c.reason else "") for c in d.placements]
                 for d in diffs], caption="Ops the targets place differently (with each target's reason)"))
        elif len(self.reports) > 1:
            parts.append(display.paragraph("Every target places every op the same way."))
        if self.reports:
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(max(4.0, 0.12 * max(len(r.ops) for r in self.reports) + 2),
                                            0.5 * len(self.reports) + 1))
            self.plot(ax=ax)
            parts.append(display.figure_html(fig, alt="placement strips"))
            plt.close(fig)
        if self.sweep:
            parts.append(display.table(
                ("input size", "target", "NPU", "CPU", "NPU share", "segments", "islands", "label"),
                [(f"{p.input_size[0]}x{p.input_size[1]}", p.target, p.npu_ops, p.cpu_ops,
                  f"{p.npu_share:.0%}", p.npu_segments, p.cpu_islands, p.label) for p in self.sweep],
                caption="Shape sweep"))
            parts.append(display.paragraph(self.sweep_note))
        return "".join(parts)

    def plot(self, ax=None):
        """One strip per target: the op sequence coloured by placement (blue NPU, orange CPU)."""
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch

        from .analyze import PLACEMENT_COLORS
        if ax is None:
            n = max((len(r.ops) for r in self.reports), default=1)
            _, ax = plt.subplots(figsize=(max(4.0, 0.12 * n + 2), 0.5 * len(self.reports) + 1))
        for row, report in enumerate(self.reports):
            draw_strip(ax, report, -row)
        ax.set_yticks([-i for i in range(len(self.reports))])
        ax.set_yticklabels([f"{r.target} ({r.label})" for r in self.reports])
        n = max((len(r.ops) for r in self.reports), default=1)
        ax.set_xlim(-0.5, n - 0.5)
        ax.set_ylim(-len(self.reports) + 0.4, 0.6)
        ax.set_xlabel("op index (execution order)")
        ax.legend(handles=[Patch(color=c, label=p) for p, c in PLACEMENT_COLORS.items()],
                  loc="upper right", fontsize=10, ncol=2, bbox_to_anchor=(1.0, 1.35))
        return ax

    def plot_sweep(self, ax=None):
        """NPU share against input size, one line per target."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(5, 3))
        for t in self.targets:
            pts = sorted((p for p in self.sweep if p.target == t), key=lambda p: p.input_size)
            ax.plot([p.input_size[0] for p in pts], [p.npu_share for p in pts], marker="o", label=t)
        ax.set_xlabel("input height")
        ax.set_ylabel("NPU share of ops")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=10)
        return ax


def compare_placement(model: str | os.PathLike, targets: Sequence[str] = TARGET_IDS, *,
                      input_sizes: Sequence[int | tuple[int, int]] | None = None,
                      use_vela: bool = True, representative_samples: int = 8,
                      workdir: str | os.PathLike | None = None,
                      bsp: str | None = None) -> PlacementComparison:
    """Analyse ``model`` on each of ``targets``; with ``input_sizes``, sweep input shapes.

    ``model`` is an INT8 ``.tflite``, or (for a sweep) a Keras model file; then the
    reports at the model's own input size come first and the sweep points follow.
    ``workdir`` keeps the re-exported models (default: the workbench cache).  ``bsp`` applies
    to the targets that know that BSP release; the others use their newest.
    """
    ids = tuple(get_target(t).id for t in targets)
    if not ids:
        raise PlacementError("`targets` is empty; give at least one of " + ", ".join(TARGET_IDS) + ".")
    if bsp:
        bsp_for_targets(ids, bsp)
    path = Path(model)
    if not input_sizes:
        if path.suffix.lower() in KERAS_SUFFIXES:
            raise ModelError(f"{path}: a Keras model; placement reads an INT8 .tflite. Quantize it "
                             "first, or pass input_sizes=[...] to sweep shapes from the Keras model.")
        reports = tuple(analyze_placement(path, t, use_vela=use_vela, bsp=_bsp(t, bsp)) for t in ids)
        return PlacementComparison(model=str(path), targets=ids, reports=reports)

    if path.suffix.lower() not in KERAS_SUFFIXES:
        raise ModelError(f"{path}: a shape sweep re-exports the model, so it needs the Keras model "
                         f"({', '.join(KERAS_SUFFIXES)}), not {path.suffix or 'this file'}.")
    sizes = [_size(s) for s in input_sizes]
    folder = Path(workdir) if workdir else cache_dir("placement-sweep", sha256_file(path)[:16])
    points = []
    first_reports: tuple[PlacementReport, ...] = ()
    for size in sizes:
        tflite = export_int8_at_size(path, size, folder, samples=representative_samples)
        reports = tuple(analyze_placement(tflite, t, use_vela=use_vela, bsp=_bsp(t, bsp)) for t in ids)
        if not first_reports:
            first_reports = reports
        for r in reports:
            points.append(SweepPoint(input_size=size, target=r.target, model=str(tflite),
                                     npu_ops=r.npu_ops, cpu_ops=r.cpu_ops, npu_share=r.npu_share,
                                     npu_segments=r.npu_segments, cpu_islands=len(r.cpu_islands),
                                     label=r.label, estimated_latency_ms=r.estimated_latency_ms))
    return PlacementComparison(model=str(path), targets=ids, reports=first_reports, sweep=tuple(points),
                               sweep_note=SWEEP_NOTE.format(n=representative_samples))


def bsp_for_targets(targets: Sequence[str], bsp: str) -> dict[str, str]:
    """``{target: bsp}`` for the targets with rules for release ``bsp`` (the others use their newest).

    Raises :class:`~workbench.errors.TargetError` (naming the known releases) when no target
    has rules for it.
    """
    from ..errors import TargetError
    ids = [get_target(t).id for t in targets]
    knowing = [t for t in ids if bsp in {r.id for r in get_target(t).bsp_releases}]
    out = {t: bsp for t in knowing
           if next(r for r in get_target(t).bsp_releases if r.id == bsp).has_rules}
    if not knowing:
        known = sorted({r.id for t in ids for r in get_target(t).bsp_releases})
        raise TargetError(f"`bsp` must be one of {', '.join(repr(k) for k in known)} (releases of "
                          f"{', '.join(ids)}). Got {bsp!r} instead.")
    if not out:
        get_target(knowing[0], bsp=bsp)   # raises: known without rules, naming the usable releases
    return out


def _bsp(target: str, bsp: str | None) -> str | None:
    if not bsp:
        return None
    return bsp if any(r.id == bsp and r.has_rules for r in get_target(target).bsp_releases) else None


def _size(value: int | tuple[int, int]) -> tuple[int, int]:
    from .._validation import check_positive_int
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return (check_positive_int("input_sizes[h]", int(value[0])),
                check_positive_int("input_sizes[w]", int(value[1])))
    v = check_positive_int("input_sizes", value)
    return (v, v)


def export_int8_at_size(keras_path: Path, size: tuple[int, int], folder: Path, *,
                        samples: int = 8, seed: int = 0) -> Path:
    """Rebuild the Keras model with input ``(1, H, W, C)``, reuse its weights, write an INT8 .tflite.

    A private stand-in for the quantization engine: full-integer INT8 with int8
    input/output, from ``samples`` uniform random inputs in [0, 1).
    """
    out = folder / f"{keras_path.stem}_{size[0]}x{size[1]}_int8.tflite"
    key_file = out.with_suffix(".key")
    key = stable_hash({"model": sha256_file(keras_path), "size": size, "samples": samples, "seed": seed})
    if out.is_file() and key_file.is_file() and key_file.read_text() == key:
        return out
    import keras
    import numpy as np
    import tensorflow as tf

    try:
        original = keras.models.load_model(keras_path, compile=False)
    except Exception as exc:
        raise ModelError(f"{keras_path}: Keras could not load the model ({exc}).") from exc
    shape = tuple(original.inputs[0].shape)
    if len(shape) != 4:
        raise ModelError(f"{keras_path}: the shape sweep expects one NHWC image input; got {shape}.")
    channels = shape[3]
    config = original.get_config()
    try:
        layers = config["layers"]
        inp = next(layer for layer in layers if layer["class_name"] == "InputLayer")
        inp["config"]["batch_shape"] = [1, size[0], size[1], channels]
        inp["config"].pop("batch_input_shape", None)
        resized = original.__class__.from_config(config)
        resized.set_weights(original.get_weights())
    except Exception as exc:
        raise ModelError(f"{keras_path}: could not rebuild the model at input {size[0]}x{size[1]} "
                         f"({type(exc).__name__}: {exc}). Shape sweeps need a functional model whose "
                         "weights do not depend on the input size.") from exc

    rng = np.random.default_rng(seed)

    def representative():
        for _ in range(samples):
            yield [rng.random((1, size[0], size[1], channels), dtype=np.float32)]

    import contextlib
    import sys
    converter = tf.lite.TFLiteConverter.from_keras_model(resized)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    # the converter prints "Saved artifact at ..." on stdout, which would break `--json`
    with contextlib.redirect_stdout(sys.stderr):
        try:
            data = converter.convert()
        except Exception:  # an op without an INT8 kernel: keep it in float, as the quantizer would report
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8,
                                                   tf.lite.OpsSet.TFLITE_BUILTINS]
            data = converter.convert()
    atomic_write_bytes(out, data)
    atomic_write_bytes(key_file, key.encode())
    return out
