"""The INT8 model as a graph: each op placed per target and annotated with the error it adds.

:func:`model_graph` reads the ``.tflite`` (the one reader, :mod:`workbench.models.tflite_graph`), takes
one :class:`~workbench.placement.analyze.PlacementReport` per target and, optionally, one
:class:`~workbench.quantize.layer_errors.LayerErrors` per target (per-layer SQNR against FP32), and
returns a :class:`ModelGraph`.  Its picture is a self-contained SVG (no script, no external file): a
box per op in execution order, arrows for the tensors between ops, one chip per target coloured by
placement (blue NPU, orange CPU: Okabe-Ito, readable with any colour vision) and, under the op, the
SQNR in dB and the reason an op falls back to the CPU.  Hovering a box shows its full tensor name and
every reason (SVG ``<title>``), so it works the same in JupyterLab and in an HTML report.

Why not Google's Model Explorer (``ai-edge-model-explorer``)?  It installs into the shared venv
without touching TensorFlow, LiteRT or NumPy (``pip install --dry-run``: Flask, Werkzeug, the adapter,
five small packages), and its node-data overlays can carry the same numbers; but it renders in a
local Flask server's web app, so an HTML report mailed as one file cannot embed it, and in JupyterLab
it needs that server running beside the kernel.  This view is one SVG string: the same picture in the
explorer, the placement report and index.html, offline.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._results import Result

#: Okabe-Ito, as :data:`workbench.placement.analyze.PLACEMENT_COLORS`
COLORS = {"NPU": "#0072B2", "CPU": "#E69F00"}
#: host-vs-board agreement marks (`workbench bisect`): Okabe-Ito vermillion and bluish green
BOARD_COLORS = {"first": "#D55E00", "departs": "#D55E00", "agrees": "#009E73"}
BOX_W, BOX_H, ROW_H, COL_W, MARGIN = 230, 40, 74, 250, 12


@dataclass(frozen=True)
class GraphOp:
    """One op: its type and name, the ops it reads from, where each target runs it, and its error."""

    index: int
    type: str
    name: str
    inputs_from: tuple[int, ...] = ()
    placement: dict[str, str] = field(default_factory=dict)       # target -> "NPU" | "CPU"
    reasons: dict[str, tuple[str, ...]] = field(default_factory=dict)
    sqnr_db: dict[str, float] = field(default_factory=dict)       # target -> SQNR of the op's output vs FP32
    board: str = ""                 # host-vs-board agreement of its output (`workbench bisect`), one line
    board_state: str = ""           # "" (not compared), "agrees", "departs" or "first" (the first departure)


@dataclass(frozen=True)
class ModelGraph(Result):
    """The ops of one INT8 model in execution order, with placement and error per target."""

    model: str
    targets: tuple[str, ...]
    ops: tuple[GraphOp, ...]

    def summary(self) -> str:
        parts = []
        for t in self.targets:
            cpu = sum(o.placement.get(t) == "CPU" for o in self.ops)
            sq = [o.sqnr_db[t] for o in self.ops if t in o.sqnr_db and math.isfinite(o.sqnr_db[t])]
            parts.append(f"{t}: {len(self.ops) - cpu}/{len(self.ops)} on the NPU"
                         + (f", worst SQNR {min(sq):.1f} dB" if sq else ""))
        return f"{Path(self.model).name}: {len(self.ops)} ops; " + "; ".join(parts)

    def layers(self) -> dict[int, int]:
        """op index -> row: one more than the deepest op it reads from (a chain is one column)."""
        row: dict[int, int] = {}
        for o in self.ops:
            row[o.index] = 1 + max((row[i] for i in o.inputs_from if i in row), default=-1)
        return row

    def to_svg(self, *, max_width: int = 1080) -> str:
        """The graph as one ``<svg>`` element (inline styles, ``<title>`` tooltips, no script)."""
        from .. import display
        rows = self.layers()
        by_row: dict[int, list[int]] = {}
        for o in self.ops:
            by_row.setdefault(rows[o.index], []).append(o.index)
        columns = max((len(v) for v in by_row.values()), default=1)
        n_rows = max(rows.values(), default=0) + 1
        # a chain (one op per row) longer than a screen snakes into side-by-side columns of ~12 ops
        snake = columns == 1 and n_rows > 12
        if snake:
            columns = min(max(1, int((max_width - 2 * MARGIN) // COL_W)), math.ceil(n_rows / 12))
            per_col = math.ceil(n_rows / columns)
            rows = {i: r % per_col for i, r in rows.items()}
            by_row = {}
            for o in self.ops:
                by_row.setdefault(self.layers()[o.index] // per_col, []).append(o.index)
        width = max(560, min(max_width, MARGIN * 2 + columns * COL_W))
        col_w = (width - 2 * MARGIN) / max(columns, 1)
        pos = {}
        for key, members in by_row.items():
            for k, i in enumerate(members):
                col, r = (key, rows[i]) if snake else (k, key)
                pos[i] = (MARGIN + col_w * col + 5, MARGIN + 26 + r * ROW_H)
        box_w = min(BOX_W, col_w - 10)
        height = MARGIN * 2 + 26 + (max(rows.values(), default=0) + 1) * ROW_H
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
               f'viewBox="0 0 {width:.0f} {height:.0f}" style="font-family:sans-serif;max-width:100%;height:auto" '
               f'role="img" aria-label="{display.esc(self.summary())}">',
               '<defs><marker id="wb-arrow" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
               '<path d="M0,0 L8,4 L0,8 z" fill="#777"/></marker></defs>']
        legend = "   ".join(f"{t}" for t in self.targets)
        out.append(f'<text x="{MARGIN}" y="{MARGIN + 12}" font-size="12">chips per op, left to right: '
                   f'{display.esc(legend)}'
                   f' · <tspan fill="{COLORS["NPU"]}" font-weight="bold">■ NPU</tspan> '
                   f'<tspan fill="{COLORS["CPU"]}" font-weight="bold">■ CPU</tspan> · SQNR vs FP32 in dB</text>')
        for o in self.ops:
            x, y = pos[o.index]
            for i in o.inputs_from:
                if i in pos:
                    x0, y0 = pos[i]
                    a, b = x0 + box_w / 2, x + box_w / 2
                    out.append(f'<path d="M{a:.0f},{y0 + BOX_H:.0f} C{a:.0f},{y0 + BOX_H + 20:.0f} '
                               f'{b:.0f},{y - 20:.0f} {b:.0f},{y - 2:.0f}" fill="none" '
                               f'stroke="#999" stroke-width="1.2" marker-end="url(#wb-arrow)"/>')
        for o in self.ops:
            out.append(self._node_svg(o, *pos[o.index], box_w))
        out.append("</svg>")
        return "".join(out)

    def _node_svg(self, o: GraphOp, x: float, y: float, w: float) -> str:
        from .. import display
        cpu_any = any(o.placement.get(t) == "CPU" for t in self.targets)
        tip = [f"#{o.index} {o.type}: {o.name}"]
        for t in self.targets:
            tip.append(f"{t}: {o.placement.get(t, '?')}" + (f", SQNR {o.sqnr_db[t]:.1f} dB" if t in o.sqnr_db else "")
                       + "".join(f"; {r}" for r in o.reasons.get(t, ())))
        if o.board:
            tip.append(f"board: {o.board}")
        first = o.board_state == "first"
        stroke = BOARD_COLORS["first"] if first else COLORS["CPU"] if cpu_any else "#555"
        dash = ' stroke-dasharray="6,3"' if first else ""
        parts = [f'<g><title>{display.esc(chr(10).join(tip))}</title>',
                 f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{BOX_H}" rx="5" fill="#fff" '
                 f'stroke="{stroke}" stroke-width="{3 if first else 2 if cpu_any else 1}"{dash}/>',
                 f'<text x="{x + 6:.0f}" y="{y + 16:.0f}" font-size="12" font-weight="bold">'
                 f'#{o.index} {display.esc(o.type)}</text>']
        chip = 14
        for k, t in enumerate(self.targets):
            cx = x + w - 6 - (len(self.targets) - k) * (chip + 3)
            parts.append(f'<rect x="{cx:.0f}" y="{y + 5:.0f}" width="{chip}" height="{chip}" '
                         f'fill="{COLORS.get(o.placement.get(t, ""), "#ddd")}"><title>{display.esc(t)}: '
                         f'{display.esc(o.placement.get(t, "not placed"))}</title></rect>')
        # one value per target in the chips' order ("33 / 38 / 38 dB"), one when they agree
        shown = [("exact" if o.sqnr_db[t] > 100 else f"{o.sqnr_db[t]:.0f}") if t in o.sqnr_db else "-"
                 for t in self.targets]
        known = [v for v in shown if v != "-"]
        sq = ("" if not known else (known[0] if len(set(shown)) == 1 else " / ".join(shown))
              + ("" if known and set(known) == {"exact"} else " dB")) if known else ""
        reasons = sorted({r.split(":")[0] for t in self.targets for r in o.reasons.get(t, ())})
        line = (f"SQNR {sq}" if sq else "") + ("  " if sq and reasons else "") + (
            "CPU: " + ", ".join(reasons) if reasons else "")
        if line:
            parts.append(f'<text x="{x + 6:.0f}" y="{y + 33:.0f}" font-size="11" fill="#333">'
                         f'{display.esc(line[:44] + ("..." if len(line) > 44 else ""))}</text>')
        if o.board_state:
            mark = {"first": "▲ board departs first: ", "departs": "board departs: ",
                    "agrees": "board: "}[o.board_state]
            text = mark + o.board
            bold = ' font-weight="bold"' if first else ""
            parts.append(f'<text x="{x + 6:.0f}" y="{y + BOX_H + 12:.0f}" font-size="11" '
                         f'fill="{BOARD_COLORS[o.board_state]}"{bold}>'
                         f'{display.esc(text[:46] + ("..." if len(text) > 46 else ""))}</text>')
        parts.append("</g>")
        return "".join(parts)

    def _repr_html_(self) -> str:
        from .. import display
        return (display.heading("Model graph: placement and error per op") + display.paragraph(self.summary())
                + f'<div style="max-width:100%;overflow:hidden">{self.to_svg()}</div>')


def model_graph(model: str | os.PathLike, placements: Mapping[str, Any], *,
                sqnr: Mapping[str, Mapping[int, float]] | None = None) -> ModelGraph:
    """The graph of the INT8 ``model`` with each target's placement (``{target: PlacementReport}``) and,
    when given, each target's SQNR per op (``{target: {op index: dB}}``, from :func:`activation_sqnr`)."""
    from ..models.tflite_graph import read_tflite
    graph = read_tflite(model)
    producer = {t: op.index for op in graph.ops for t in op.outputs}
    placed = {t: {o.index: o for o in p.ops} for t, p in placements.items()}
    ops = []
    for op in graph.ops:
        ops.append(GraphOp(
            index=op.index, type=op.type, name=op.name,
            inputs_from=tuple(dict.fromkeys(producer[i] for i in op.inputs if i in producer)),
            placement={t: placed[t][op.index].placement for t in placements if op.index in placed[t]},
            reasons={t: tuple(f"{r.constraint}: {r.detail}" for r in placed[t][op.index].reasons)
                     for t in placements if op.index in placed[t] and placed[t][op.index].reasons},
            sqnr_db={t: float(by[op.index]) for t, by in (sqnr or {}).items() if op.index in by}))
    return ModelGraph(model=str(model), targets=tuple(placements), ops=tuple(ops))


_IO_OPS = ("QUANTIZE", "DEQUANTIZE")


def activation_sqnr(fp32: str | os.PathLike, int8: str | os.PathLike, x: Any, *, limit: int = 64,
                    contract: Any = None) -> dict[int, float]:
    """SQNR (dB) of each op's output of the INT8 ``.tflite`` against the same op of the FP32 ``.tflite``
    (error accumulated from the input up to that op), over the first ``limit`` samples of ``x``.

    ``x`` holds pixels as datasets give them (float32 in [0, 1] or uint8, NHWC); they become model inputs
    through the input contract, as in every other stage: ``contract`` (an ``InputContract``, a card path or
    mapping; default the card beside ``fp32``, else inferred from the model).

    The two graphs are matched op by op once QUANTIZE/DEQUANTIZE are left out; when their op types do not
    line up (another converter, a fused pattern), the result is empty rather than a guess.
    ``10 log10(sum f^2 / sum (f - dequantized q)^2)``; an op whose outputs agree exactly gets +inf."""
    import numpy as np

    from ..models.tflite_graph import read_tflite
    if Path(fp32).suffix.lower() != ".tflite" or Path(int8).suffix.lower() != ".tflite":
        return {}                            # no FP32 .tflite to compare with (a Keras model given, an ONNX backend)
    gf, gq = read_tflite(fp32), read_tflite(int8)
    of = [o for o in gf.ops if o.type not in _IO_OPS]
    oq = [o for o in gq.ops if o.type not in _IO_OPS]
    from ..models.tflite_custom_ops import REWRITES  # a custom op quantize rewrote is its builtin twin
    if [REWRITES.get(o.type, o.type) for o in of] != [o.type for o in oq]:
        return {}
    from ..models.contract import resolve_contract
    xs = resolve_contract(fp32, contract).apply(np.asarray(x)[:limit], where=str(fp32))
    out_f = _all_outputs(fp32, [o.outputs[0] for o in of], xs)
    out_q = _all_outputs(int8, [o.outputs[0] for o in oq], xs)
    result = {}
    for a, b in zip(of, oq, strict=True):
        f, q = out_f[a.outputs[0]], out_q[b.outputs[0]]
        if f.shape != q.shape:
            continue
        noise = float(np.sum((f - q) ** 2))
        result[b.index] = math.inf if noise == 0 else 10 * math.log10(max(float(np.sum(f ** 2)), 1e-30) / noise)
    return result


def _all_outputs(path: str | os.PathLike, tensors: list[int], xs: Any) -> dict[int, Any]:
    """The float (dequantized) value of ``tensors`` for every sample of ``xs``, stacked."""
    import warnings

    import numpy as np
    from ai_edge_litert.interpreter import Interpreter
    with warnings.catch_warnings():     # "intended for debugging purposes only": that is what this is
        warnings.filterwarnings("ignore", message=".*experimental_preserve_all_tensors")
        it = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    inp = it.get_input_details()[0]
    details = {d["index"]: d for d in it.get_tensor_details()}
    collected: dict[int, list[Any]] = {t: [] for t in tensors}
    for sample in xs:
        value = sample.reshape(inp["shape"])
        if np.issubdtype(inp["dtype"], np.integer):
            scale, zero = inp["quantization"]
            info = np.iinfo(inp["dtype"])
            value = np.clip(np.round(value / scale + zero), info.min, info.max)
        it.set_tensor(inp["index"], value.astype(inp["dtype"]))
        it.invoke()
        for t in tensors:
            raw = it.get_tensor(t)
            scale, zero = details[t]["quantization"]
            collected[t].append(raw.astype(np.float64) if not scale else (raw.astype(np.float64) - zero) * scale)
    return {t: np.stack(v) for t, v in collected.items()}
