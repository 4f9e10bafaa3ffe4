"""Where the board departs from the host: tensor-by-tensor comparison and bisection.

An INT8 model that is right on the host and wrong on a board is wrong somewhere between
its input and its outputs.  The workbench finds the first tensor, in execution order,
where the board's values depart from the host's:

1. **Outputs.**  One board run of the model as it is, on a few real samples (the same INT8
   input codes on both sides).  If every output agrees within the tolerance, one more run
   exposes every computed tensor as an output and the comparison is op by op.
2. **Bisection.**  Otherwise the computed tensors are listed in execution order (each
   operator's outputs) and halved: each board run exposes one tensor (the model file is
   edited with :func:`workbench.models.tflite_edit.expose_tensors`, never re-converted) and
   is compared with the host's run of the same edited file.  ``ceil(log2(n))`` runs find a
   tensor that departs while the one before it agrees.
3. **The op.**  A last run exposes that tensor and the op's inputs: the op, whether its
   inputs agree (so the op itself departs) and the numbers.

At most ``ceil(log2(n)) + 2`` board runs.  Bisection assumes that a departure, once made,
is carried to the outputs; a departure that a later op masks (a ReLU, an argmax) can hide
an earlier one, so the answer is *a* tensor whose inputs agree while it does not: a real
departure, and the earliest one the halving saw.

What a delegate hides: a runtime only hands out a model's outputs, and a delegate keeps
the tensors inside its partition to itself.  Exposing a tensor makes it a partition
output, so the delegate computes and copies it out; that can split a fused partition at
that point (the NPU compiler then sees two graphs).  A departure that appears in the
model's outputs but at no exposed tensor therefore lives inside a fused partition: the
result says so.

Comparison is on the exact integer codes (count of differing codes, the largest code
difference) plus the SQNR of the board's values against the host's, dequantized with the
tensor's own parameters; float tensors (a model with float islands) agree when their
SQNR is at least ``FLOAT_AGREE_DB``.
"""

from __future__ import annotations

import io
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import BoardError, ModelError
from .agreement import BisectResult, Candidate, TensorAgreement, candidates, compare_tensor, max_board_runs
from .probes import BoardRunner, HostRunner, ReplayRunner, delegation_note, save_bisect_recording, tensors_from_output

DEFAULT_SAMPLES = 4


# --- inputs ---------------------------------------------------------------------------------------
def sample_inputs(model: str | os.PathLike, data: Any, *, condition: str | None, samples: int, seed: int = 0,
                  contract: Any = None) -> tuple[dict[str, Any], str]:
    """Real samples of ``data`` as the model's raw input codes: ``({"input_0": (N, ...)}, condition)``."""
    import numpy as np

    from ..data.loaders import load_dataset
    from ..models.contract import resolve_contract
    from ..models.predict import load_predictor, quantize_input
    from ..models.tflite_graph import read_tflite

    dataset = load_dataset(data)
    held_out = dataset.select(split="test")
    conditions = list(held_out.conditions)
    if condition is None:
        condition = conditions[0]
    if condition not in conditions:
        raise BoardError(f"condition {condition!r} is not in {dataset.name!r} (its conditions: "
                         f"{', '.join(conditions)}). Next: pick one of them with --condition.")
    subset = held_out.select(condition=condition)
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(len(subset), size=min(samples, len(subset)), replace=False))
    predictor = load_predictor(str(model), contract=resolve_contract(str(model), contract))
    x = predictor.prepare(np.asarray(subset.x[idx])).astype(np.float32)
    graph = read_tflite(model)
    if len(graph.inputs) != 1:
        raise ModelError(f"{Path(model).name}: {len(graph.inputs)} inputs; the bisection feeds one image input. "
                         "Next: bisect a single-input model.")
    info = graph.tensors[graph.inputs[0]]
    if info.is_quantized:
        codes = quantize_input(x, info.scales[0], info.zero_points[0], np.dtype(info.dtype.lower()))
    else:
        codes = x.astype(np.float32)
    return {"input_0": codes}, condition


def _npz(arrays: dict[str, Any]) -> bytes:
    import numpy as np
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


# --- the verb -------------------------------------------------------------------------------------
def bisect(model: str | os.PathLike, feeds: dict[str, Any], board: Any, *, host: HostRunner | None = None,
           tolerance: int = 0, condition: str | None = None, target: str | None = None,
           placement: Any = None) -> BisectResult:
    """Find the first tensor where ``board`` departs from ``host`` (see the module's docstring).

    ``feeds`` holds the raw input codes (``input_0``: ``(N, ...)``); ``board`` is a
    :class:`BoardRunner` or :class:`ReplayRunner`; ``placement`` (a ``PlacementReport`` of the
    same model, optional) says where the departing op runs on ``target``.
    """
    from .._io import sha256_bytes
    from ..models.tflite_edit import expose_tensors
    from ..models.tflite_graph import parse_tflite_bytes

    if isinstance(tolerance, bool) or not isinstance(tolerance, int) or tolerance < 0:
        raise BoardError(f"`tolerance` must be a whole number of codes >= 0. Got {tolerance!r} instead.")
    path = Path(model)
    content = path.read_bytes()
    graph = parse_tflite_bytes(content, source=str(path))
    cands = candidates(graph)
    if not cands:
        raise ModelError(f"{path.name}: no computed tensor to compare. Next: pass an INT8 model with ops.")
    host = host or HostRunner()
    op_of = {c.tensor: c for c in cands}
    feeds_npz = _npz(feeds)
    n_samples = int(min(len(v) for v in feeds.values()))
    compared: list[TensorAgreement] = []
    probes: list[tuple[int, ...]] = []

    def probe(tensors: tuple[int, ...]) -> dict[int, TensorAgreement]:
        edited = expose_tensors(content, tensors, source=path.name) if tensors else content
        key = tensors or tuple(graph.outputs)
        probes.append(key)
        board_values = board.run(edited, feeds_npz, key)
        host_values = host.run(edited, feeds)
        found = {}
        for t in (tensors or graph.outputs):
            if t not in board_values:
                raise BoardError(f"{board.where}: the board returned no tensor {t}. Next: re-run; the runner may "
                                 "be an old copy.")
            c = op_of.get(t)
            found[t] = compare_tensor(host_values[t], board_values[t], graph.tensors[t], tolerance=tolerance,
                                      op_index=c.op_index if c else None, op=c.op if c else None)
            compared.append(found[t])
        return found

    outputs = probe(())
    first_note = delegation_note(board.outputs[-1][1]) if board.outputs else None
    base = dict(model_name=path.name, model_sha256=sha256_bytes(content), where=board.where,
                host_kernels=host.kernels, board_kernels=board.kernels, samples=n_samples, tolerance=tolerance,
                candidates=len(cands), max_runs=max_board_runs(len(cands)), condition=condition,
                delegate=getattr(getattr(board, "session", None), "delegate", None), target=target,
                replayed_from=board.where if isinstance(board, ReplayRunner) else None)
    if all(a.agrees for a in outputs.values()):
        every = probe(tuple(c.tensor for c in cands))             # op by op, in one run
        first = next((every[c.tensor] for c in cands if not every[c.tensor].agrees), None)
        op_ins: tuple[TensorAgreement, ...] = ()
        if first is not None and first.op_index is not None:
            op_ins = tuple(every[t] for t in graph.ops[first.op_index].inputs if t in every)
        result = BisectResult(**base, board_runs=len(probes), outputs_agree=True, first_divergence=first,
                              op_inputs=op_ins, compared=tuple(compared), probes=tuple(probes),
                              notes=(first_note,) if first_note else ())
        return _placed(result, graph, placement)
    order = {c.tensor: i for i, c in enumerate(cands)}
    departing = [order[t] for t, a in outputs.items() if not a.agrees and t in order]
    lo, hi = -1, min(departing) if departing else len(cands) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if probe((cands[mid].tensor,))[cands[mid].tensor].agrees:
            lo = mid
        else:
            hi = mid
    target_tensor = cands[hi].tensor
    op = graph.ops[cands[hi].op_index]
    in_tensors = tuple(t for t in op.inputs if t >= 0 and t in op_of)
    found = probe((target_tensor, *in_tensors))
    departed: TensorAgreement | None = found[target_tensor]
    notes: tuple[str, ...] = (first_note,) if first_note else ()
    if departed is not None and departed.agrees:
        departed = None
        notes += ("the outputs depart, but the tensor the halving ended on agrees when exposed: the departure "
                  "is inside a fused delegate partition (exposing the tensor split it)",)
    result = BisectResult(**base, board_runs=len(probes), outputs_agree=False, first_divergence=departed,
                          op_inputs=tuple(found[t] for t in in_tensors), compared=tuple(compared),
                          probes=tuple(probes), notes=notes)
    return _placed(result, graph, placement)


def _placed(result: BisectResult, graph: Any, placement: Any) -> BisectResult:
    d = result.first_divergence
    if d is None or placement is None or d.op_index is None:
        return result
    for p in getattr(placement, "ops", ()):
        if p.index == d.op_index:
            reasons = "; ".join(f"{r.constraint}: {r.detail}" for r in p.reasons[:2])
            where = f"{p.placement} on {placement.target}" + (f" ({reasons})" if reasons else "")
            return replace(result, placement=where)
    return result


def divergence_graph(result: BisectResult, model: str | os.PathLike, placements: Any = None) -> Any:
    """The model's graph (:func:`workbench.placement.graph.model_graph`) with the bisection drawn on it: the
    first departing op marked, and each compared op's output labelled with its host-vs-board agreement.
    ``placements`` (``{target: PlacementReport}``) adds the placement chips."""
    from dataclasses import replace as _replace

    from ..placement.graph import ModelGraph, model_graph
    g: ModelGraph = model_graph(model, placements or {})
    last: dict[int, TensorAgreement] = {}
    for c in result.compared:                  # the last comparison of each op's output wins
        if c.op_index is not None:
            last[c.op_index] = c
    first = result.first_divergence.op_index if result.first_divergence else None
    ops = []
    for o in g.ops:
        t = last.get(o.index)
        if t is None:
            ops.append(o)
            continue
        text = "bit-exact" if t.differing == 0 else (f"{t.differing}/{t.values} codes differ, max "
                                                      f"{t.max_code_diff:g}")
        state = "first" if o.index == first else "agrees" if t.agrees else "departs"
        ops.append(_replace(o, board=text, board_state=state))
    return _replace(g, ops=tuple(ops))


def findings(result: BisectResult, *, target: str = "", **_: Any) -> list:
    """``board.tensor-divergence``: the first departing op (a warning when the outputs still agree)."""
    from ..findings import make
    target = target or result.target or ""
    d = result.first_divergence
    if d is None and result.outputs_agree:
        return []
    evidence: dict[str, Any] = {"where": result.where, "host_kernels": result.host_kernels,
                                "board_kernels": result.board_kernels, "samples": result.samples,
                                "tolerance": result.tolerance, "board_runs": result.board_runs,
                                "outputs_agree": result.outputs_agree}
    if d is None:
        return [make("board.tensor-divergence", f"{result.where}: the outputs depart but no exposed tensor does: "
                     "the departure is inside a fused delegate partition", target=target, evidence=evidence)]
    evidence.update({"op_index": d.op_index, "op": d.op, "tensor": d.tensor, "tensor_name": d.name,
                     "differing": d.differing, "values": d.values, "max_code_diff": d.max_code_diff,
                     "sqnr_db": d.sqnr_db, "inputs_agree": all(t.agrees for t in result.op_inputs),
                     "placement": result.placement})
    masked = " (the outputs still agree: a later op masks it)" if result.outputs_agree else ""
    return [make("board.tensor-divergence", f"{result.where}: op #{d.op_index} {d.op} departs first: "
                 f"{d.differing} of {d.values} codes differ (max {d.max_code_diff:g}) while its inputs "
                 f"{'agree' if evidence['inputs_agree'] else 'already depart'}{masked}", target=target,
                 severity="warning" if result.outputs_agree else None, evidence=evidence)]


def run_bisect(model: str | os.PathLike, *, data: Any, board: str | None = None, host: str | None = None,
               local: bool = False, replay: str | os.PathLike | None = None, condition: str | None = None,
               samples: int = DEFAULT_SAMPLES, seed: int = 0, tolerance: int = 0, kernels: str | None = None,
               host_kernels: str = "default", target: str | None = None,
               boards_file: str | os.PathLike | None = None, ssh_config: str | os.PathLike | None = None,
               known_hosts: str | os.PathLike | None = None, python: str | None = None,
               delegate: str | None = None, workdir: str | None = None, connect_timeout: float = 10.0,
               command_timeout: float = 900.0, record: str | os.PathLike | None = None,
               out: str | os.PathLike | None = None, placement: bool = True,
               graph: str | os.PathLike | None = None) -> BisectResult:
    """``workbench bisect``: resolve where, sample the inputs, bisect, record and write the result."""
    from .._io import atomic_write_text, sha256_bytes, sha256_file, to_json
    from .._validation import check_positive_int
    from .session import TimingOptions, _open_session

    chosen = [name for name, value in (("board", board), ("host", host), ("local", local), ("replay", replay))
              if value]
    if len(chosen) != 1:
        raise BoardError("give exactly one of `board`, `host`, `local=True` or `replay`. "
                         f"Got {chosen or 'none'} instead.")
    check_positive_int("samples", samples, error=BoardError)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int) or tolerance < 0:
        raise BoardError(f"`tolerance` must be a whole number of codes >= 0. Got {tolerance!r} instead.")
    if record is not None and (local or replay):
        raise BoardError("`record` keeps a board session: use it with `board` or `host`.")
    for flag, value in (("--out", out), ("--graph", graph)):
        if value is not None and Path(value).exists():
            raise BoardError(f"{flag} {str(value)!r} exists; it is not overwritten. Next: name a new file.")
    path = Path(model)
    if not path.is_file():
        raise ModelError(f"model file {str(path)!r} does not exist. Next: pass the INT8 .tflite deployed on "
                         "the board.")
    feeds, condition = sample_inputs(path, data, condition=condition, samples=samples, seed=seed)
    feeds_sha = sha256_bytes(_npz(feeds))
    host_runner = HostRunner(host_kernels)
    runner: BoardRunner | ReplayRunner
    if replay is not None:
        runner = ReplayRunner(replay, sha256_file(path))
        recorded = runner.settings
        checks: tuple[tuple[str, object], ...] = (("feeds_sha256", feeds_sha), ("tolerance", tolerance),
                                                  ("host_kernels", host_kernels))
        for key, expected in checks:
            if key in recorded and recorded[key] != expected:
                raise BoardError(f"the recording in {replay} was made with {key} {recorded[key]!r}, this replay "
                                 f"has {expected!r} (data, condition, samples and seed decide the inputs). Next: "
                                 "replay with the settings it was recorded with.")
        target = target or recorded.get("target")
    else:
        board_kernels = kernels
        if board and board_kernels is None:
            from .inventory import get_board
            board_kernels = get_board(board, boards_file).kernels
        options = TimingOptions(delegate=delegate, python=python, workdir=workdir,
                                connect_timeout=connect_timeout, command_timeout=command_timeout)
        session = _open_session(board=board, boards_file=boards_file, host=host, ssh_config=ssh_config,
                                known_hosts=known_hosts, local=local, options=options)
        runner = BoardRunner(session, kernels=board_kernels or "default", timeout=command_timeout)
        target = target or session.target
    report = None
    notes: list[str] = []
    if target and placement:
        from ..errors import WorkbenchError
        from ..placement.analyze import analyze_placement
        try:
            report = analyze_placement(path, target)
        except WorkbenchError as exc:
            notes.append(f"placement on {target} not available: {str(exc).splitlines()[0]}")
    result = bisect(path, feeds, runner, host=host_runner, tolerance=tolerance, condition=condition,
                    target=target, placement=report)
    if notes:
        result = replace(result, notes=result.notes + tuple(notes))
    if record is not None:
        settings = {"data": Path(str(data)).name, "condition": condition, "samples": samples, "seed": seed,
                    "tolerance": tolerance, "host_kernels": host_kernels, "board_kernels": runner.kernels,
                    "target": target, "feeds_sha256": feeds_sha}
        save_bisect_recording(record, result, runner.outputs, settings)
        result = replace(result, notes=result.notes + (f"recorded to {Path(record).name}/ ({len(runner.outputs)} "
                                                       "board runs, each with its sha256)",))
    if out is not None:
        atomic_write_text(out, to_json(result.to_dict(), indent=2) + "\n")
    if graph is not None:
        from .. import display
        drawn = divergence_graph(result, path, {target: report} if report is not None and target else None)
        page = (f"<!doctype html><meta charset='utf-8'><title>{display.esc(path.name)}: host vs board</title>"
                f"<body style='font-family:sans-serif;max-width:1200px'>{result._repr_html_()}"
                f"{drawn._repr_html_()}</body>")
        atomic_write_text(graph, page)
    return result


__all__ = ["BisectResult", "BoardRunner", "Candidate", "HostRunner", "ReplayRunner", "TensorAgreement",
           "bisect", "candidates", "divergence_graph", "compare_tensor", "max_board_runs", "sample_inputs",
           "run_bisect", "save_bisect_recording", "tensors_from_output"]
