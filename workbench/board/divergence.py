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

import base64
import io
import json
import math
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .._results import Result
from ..errors import BoardError, ModelError
from .inventory import KERNEL_CHOICES as KERNELS

DEFAULT_SAMPLES = 4
FLOAT_AGREE_DB = 60.0

RECORDING_FORMAT = "npu-workbench-bisect-recording"
RECORDING_VERSION = 1
RECORDING_MANIFEST = "bisect-recording.json"


def short_name(name: str, limit: int = 60) -> str:
    """A tensor name for a line of text: TensorFlow's fused names (``a;b;c``) cut to their first part."""
    first = name.split(";")[0]
    return first if len(first) <= limit else "..." + first[-(limit - 3):]


@dataclass(frozen=True)
class TensorAgreement(Result):
    """One tensor, host against board, over the samples."""

    tensor: int
    name: str
    op_index: int | None            # the op that computes it (None: a model input)
    op: str | None
    dtype: str
    shape: tuple[int, ...]
    values: int
    differing: int                  # values whose codes differ
    max_code_diff: float            # largest |board - host| in codes (float tensors: in value)
    sqnr_db: float | None           # board against host, dequantized; None when identical
    agrees: bool

    def summary(self) -> str:
        if self.differing == 0:
            return (f"tensor {self.tensor} {short_name(self.name)!r} ({self.op or 'input'}): bit-exact "
                    f"({self.values} values)")
        sqnr = "" if self.sqnr_db is None else f", SQNR {self.sqnr_db:.1f} dB"
        return (f"tensor {self.tensor} {short_name(self.name)!r} ({self.op or 'input'}): {self.differing} of "
                f"{self.values} "
                f"codes differ, max difference {self.max_code_diff:g}{sqnr}"
                f"{'' if not self.agrees else ' (within the tolerance)'}")


@dataclass(frozen=True)
class BisectResult(Result):
    """Where (and whether) the board's INT8 run departs from the host's."""

    model_name: str
    model_sha256: str
    where: str                      # the board label
    host_kernels: str
    board_kernels: str
    samples: int
    tolerance: int
    candidates: int                 # computed tensors in execution order
    board_runs: int
    max_runs: int                   # ceil(log2(candidates)) + 2
    outputs_agree: bool
    first_divergence: TensorAgreement | None = None
    op_inputs: tuple[TensorAgreement, ...] = ()
    compared: tuple[TensorAgreement, ...] = ()      # every tensor compared, in run order
    probes: tuple[tuple[int, ...], ...] = ()        # the tensors each board run exposed
    condition: str | None = None
    delegate: str | None = None
    target: str | None = None
    placement: str | None = None    # where the diverging op runs on the target ("NPU", "CPU: ...")
    notes: tuple[str, ...] = ()
    replayed_from: str | None = None

    @property
    def op_by_op_agree(self) -> bool:
        return self.outputs_agree and all(t.agrees for t in self.compared)

    def summary(self) -> str:
        runs = f"{self.board_runs} board run{'s' if self.board_runs != 1 else ''} (at most {self.max_runs})"
        if self.first_divergence is None:
            if self.outputs_agree:
                exact = all(t.differing == 0 for t in self.compared)
                what = "bit-exact" if exact else f"within {self.tolerance} code(s)"
                return (f"{self.where}: host ({self.host_kernels} kernels) and board agree {what} op by op "
                        f"on {len({t.tensor for t in self.compared})} tensors, {self.samples} samples; {runs}")
            return (f"{self.where}: the outputs depart but no exposed tensor does: the departure is inside "
                    f"a fused delegate partition; {runs}")
        d = self.first_divergence
        if not self.op_inputs and d.op_index is not None:
            inputs = "its input is the model input (the same codes on both sides)"
        else:
            inputs = ("its inputs agree" if all(t.agrees for t in self.op_inputs) else "its inputs already depart")
        where = f", runs on {self.placement}" if self.placement else ""
        masked = "; the outputs still agree (a later op masks it)" if self.outputs_agree else ""
        return (f"{self.where}: first departure at op #{d.op_index} {d.op} -> tensor {d.tensor} "
                f"{short_name(d.name)!r} "
                f"({d.differing} of {d.values} codes differ, max {d.max_code_diff:g}"
                f"{'' if d.sqnr_db is None else f', SQNR {d.sqnr_db:.1f} dB'}); {inputs}{where}{masked}; {runs}")

    def _repr_html_(self) -> str:
        from .. import display
        last = {t.tensor: t for t in self.compared}          # each tensor once, as last compared, in op order
        shown = sorted(last.values(), key=lambda t: (t.op_index if t.op_index is not None else 1 << 30, t.tensor))
        rows = [(t.tensor, t.op_index if t.op_index is not None else "-", t.op or "input", short_name(t.name),
                 t.differing,
                 t.values, f"{t.max_code_diff:g}", "-" if t.sqnr_db is None else f"{t.sqnr_db:.1f}",
                 "agrees" if t.agrees else "DEPARTS") for t in shown]
        return (display.heading("Host against board, tensor by tensor")
                + display.paragraph(self.summary())
                + display.table(("tensor", "op #", "op", "name", "codes differing", "values", "max diff",
                                 "SQNR dB", "check"), rows,
                                caption=f"host kernels {self.host_kernels}, board kernels {self.board_kernels}; "
                                        f"tolerance {self.tolerance} code(s)"))


# --- the model's tensors --------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    tensor: int
    op_index: int
    op: str


def candidates(graph: Any) -> tuple[Candidate, ...]:
    """Every computed tensor in execution order (each op's outputs; constants and inputs aside)."""
    inputs = set(graph.inputs)
    out = []
    seen: set[int] = set()
    for op in graph.ops:
        for t in op.outputs:
            if t < 0 or t in inputs or t in seen or graph.tensors[t].is_constant:
                continue
            seen.add(t)
            out.append(Candidate(t, op.index, op.type))
    return tuple(out)


def max_board_runs(n: int) -> int:
    return (math.ceil(math.log2(n)) if n > 1 else 0) + 2


def compare_tensor(host: Any, board: Any, info: Any, *, tolerance: int, op_index: int | None,
                   op: str | None) -> TensorAgreement:
    """Host against board for one tensor (arrays of the same shape, raw values)."""
    import numpy as np
    h, b = np.asarray(host), np.asarray(board)
    if h.shape != b.shape:
        raise BoardError(f"tensor {info.index} {info.name!r}: the board returned shape {b.shape}, the host "
                         f"{h.shape}. Next: check that the board ran the same file (sha256).")
    if h.dtype.kind in "iu":
        diff = np.abs(h.astype(np.int64) - b.astype(np.int64))
        differing = int(np.count_nonzero(diff))
        max_diff = float(diff.max()) if diff.size else 0.0
        scale = info.scales[0] if len(info.scales) == 1 else 1.0
        zp = info.zero_points[0] if len(info.zero_points) == 1 else 0
        hf = (h.astype(np.float64) - zp) * scale
        bf = (b.astype(np.float64) - zp) * scale
        agrees = max_diff <= tolerance
    else:
        hf, bf = h.astype(np.float64), b.astype(np.float64)
        diff = np.abs(hf - bf)
        differing = int(np.count_nonzero(diff))
        max_diff = float(diff.max()) if diff.size else 0.0
        agrees = True
    sqnr = None
    if differing:
        noise = float(np.sum((hf - bf) ** 2))
        signal = float(np.sum(hf ** 2))
        sqnr = round(10.0 * math.log10(signal / noise), 2) if signal > 0 else -math.inf
        if h.dtype.kind not in "iu":
            agrees = sqnr >= FLOAT_AGREE_DB
        if sqnr == -math.inf:
            sqnr = -999.0
    return TensorAgreement(tensor=info.index, name=info.name, op_index=op_index, op=op, dtype=info.dtype,
                           shape=tuple(int(v) for v in h.shape[1:]), values=int(h.size), differing=differing,
                           max_code_diff=max_diff, sqnr_db=sqnr, agrees=bool(agrees))


# --- where the runs happen ------------------------------------------------------------------------
class HostRunner:
    """The host's side: LiteRT on this machine with the chosen kernels."""

    def __init__(self, kernels: str = "default"):
        from .._validation import check_choice
        check_choice("host kernels", kernels, KERNELS, error=BoardError)
        self.kernels = kernels

    def run(self, content: bytes, feeds: dict[str, Any]) -> dict[int, Any]:
        import numpy as np
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
        kinds = {"default": OpResolverType.AUTO, "optimized": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                 "reference": OpResolverType.BUILTIN_REF}
        interp = Interpreter(model_content=content, experimental_op_resolver_type=kinds[self.kernels])
        interp.allocate_tensors()
        ins, outs = interp.get_input_details(), interp.get_output_details()
        n = min(len(v) for v in feeds.values())
        rows: dict[int, list] = {d["index"]: [] for d in outs}
        for i in range(n):
            for k, d in enumerate(ins):
                interp.set_tensor(d["index"], feeds[f"input_{k}"][i:i + 1])
            interp.invoke()
            for d in outs:
                rows[d["index"]].append(np.array(interp.get_tensor(d["index"])))
        return {t: np.concatenate(v) for t, v in rows.items()}


class BoardRunner:
    """The board's side: the Python runner over SSH (or on this machine), one run per probe."""

    def __init__(self, session: Any, *, kernels: str = "default", threads: int | None = None,
                 delegate_options: dict[str, str] | None = None, timeout: float | None = None):
        from .._validation import check_choice
        check_choice("board kernels", kernels, KERNELS, error=BoardError)
        self.session, self.kernels, self.threads = session, kernels, threads
        self.delegate_options = dict(delegate_options or {})
        self.timeout = timeout
        self.outputs: list[tuple[tuple[int, ...], str]] = []     # (probe, raw stdout) for a recording
        self._runner_path: str | None = None

    @property
    def where(self) -> str:
        return self.session.where + (f", {self.kernels} kernels" if self.kernels != "default" else "")

    def run(self, content: bytes, feeds_npz: bytes, probe: tuple[int, ...]) -> dict[int, Any]:
        from . import deploy as dep
        from .runners import python_argv
        s = self.session
        with tempfile.TemporaryDirectory(prefix="npu-workbench-bisect-") as tmp:
            if s.local:
                model_path = os.path.join(tmp, "probe.tflite")
                inputs_path = os.path.join(tmp, "tensors.npz")
                Path(model_path).write_bytes(content)
                Path(inputs_path).write_bytes(feeds_npz)
                runner_path = str(Path(dep.__file__).with_name("remote_runner.py"))
            else:
                model_path = dep.push_bytes(s.transport, content, s.workdir, "probe.tflite").remote_path
                inputs_path = dep.push_bytes(s.transport, feeds_npz, s.workdir, "tensors.npz",
                                             kind="inputs").remote_path
                if self._runner_path is None:
                    self._runner_path = dep.deploy_runner(s.transport, s.workdir).remote_path
                runner_path = self._runner_path
            argv = python_argv(python=s.python, runner_path=runner_path, model_path=model_path, runs=1,
                               warmup=0, delegate=s.delegate, threads=self.threads,
                               delegate_options=self.delegate_options)
            argv += ["--tensors", inputs_path, "--kernels", self.kernels]
            result = s.transport.run(argv, check=False, timeout=self.timeout)
        self.outputs.append((probe, result.stdout))
        return tensors_from_output(result.stdout, stderr=result.stderr, returncode=result.returncode,
                                   label=self.where, python=s.python)


def tensors_from_output(stdout: str, *, stderr: str = "", returncode: int = 0, label: str = "board",
                        python: str | None = None) -> dict[int, Any]:
    """The raw tensors a runner printed (``--tensors`` mode), by tensor index."""
    import numpy as np

    from .runners import _python_payload
    payload = _python_payload(stdout, stderr=stderr, returncode=returncode, label=label, python=python)
    tensors = payload.get("tensors")
    if not isinstance(tensors, dict) or not isinstance(tensors.get("npz"), str):
        raise BoardError(f"{label}: the runner printed no tensors. Next: re-run; the runner on the board may "
                         "be an old copy (the workbench pushes its own on each run).")
    try:
        data = np.load(io.BytesIO(base64.b64decode(tensors["npz"], validate=True)), allow_pickle=False)
        return {int(key[1:]): data[key] for key in data.files if key.startswith("t")}
    except (ValueError, OSError) as exc:
        raise BoardError(f"{label}: the runner's tensors cannot be read ({exc}). Next: re-run; the output "
                         "may be cut.") from None


def delegation_note(stdout: str) -> str | None:
    """What the board's runtime made of the model (its ops after delegation), in one sentence."""
    from .runners import _last_json
    payload = _last_json(stdout) or {}
    ops = (payload.get("tensors") or {}).get("ops_run")
    if not isinstance(ops, list) or not ops:
        return None
    partitions = sum(1 for op in ops if op == "DELEGATE")
    if not partitions:
        return f"the board's runtime ran all {len(ops)} ops itself (no delegate partition): every tensor is visible"
    return (f"the board's runtime ran the model as {partitions} delegate partition(s) and {len(ops) - partitions} "
            "op(s) of its own: inside a partition only its outputs exist, so each probe makes its tensor a "
            "partition output (which can split a fused partition there)")


class ReplayRunner:
    """A recorded bisection: each probe's runner output, as the board printed it."""

    def __init__(self, folder: str | os.PathLike, model_sha256: str):
        from .._io import sha256_bytes
        root = Path(folder)
        manifest = root / RECORDING_MANIFEST
        if not manifest.is_file():
            raise BoardError(f"--replay {str(root)!r} is not a bisection recording (no {RECORDING_MANIFEST} in "
                             "it). Next: pass a folder written by `workbench bisect ... --record DIR`.")
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            if data.get("format") != RECORDING_FORMAT or data.get("version") != RECORDING_VERSION:
                raise ValueError(f"format {data.get('format')!r} version {data.get('version')!r}")
            runs = data["runs"]
        except (ValueError, KeyError, TypeError) as exc:
            raise BoardError(f"{manifest}: not a readable bisection recording ({exc}). Next: record it "
                             "again.") from None
        if data.get("model_sha256") != model_sha256:
            raise BoardError(f"the bisection recorded in {root} was made with model {data.get('model_name')} "
                             f"(sha256 {str(data.get('model_sha256'))[:12]}...), not this one (sha256 "
                             f"{model_sha256[:12]}...). Next: replay a recording of this model.")
        self.where = f"replayed from {data.get('where')} ({data.get('recorded_at')})"
        self.settings = data.get("settings", {})
        self.kernels = str(self.settings.get("board_kernels", "default"))
        self.runs: dict[tuple[int, ...], str] = {}
        for run in runs:
            path = root / run["file"]
            if not path.is_file():
                raise BoardError(f"{root}: the recording lists {run['file']} but it is missing. Next: record "
                                 "again.")
            text = path.read_text(encoding="utf-8")
            if sha256_bytes(text.encode("utf-8")) != run.get("sha256"):
                raise BoardError(f"{path}: its sha256 is not the one recorded: the file was changed after "
                                 "the board wrote it, so it is no measurement. Next: record again.")
            self.runs[tuple(int(t) for t in run["probe"])] = text
        self.outputs: list[tuple[tuple[int, ...], str]] = []

    def run(self, content: bytes, feeds_npz: bytes, probe: tuple[int, ...]) -> dict[int, Any]:
        if probe not in self.runs:
            raise BoardError(f"the recording holds no board run exposing tensors {list(probe)}: it was made "
                             "with other settings (tolerance, samples, condition) or another model. Next: "
                             "replay with the settings it was recorded with, or record again.")
        self.outputs.append((probe, self.runs[probe]))
        return tensors_from_output(self.runs[probe], label=self.where)


def save_bisect_recording(folder: str | os.PathLike, result: BisectResult,
                          outputs: list[tuple[tuple[int, ...], str]], settings: dict[str, Any]) -> Path:
    """Keep each board run's raw output, with its sha256, so a bisection can be replayed."""
    import datetime as dt

    from .._io import sha256_bytes
    root = Path(folder)
    if root.exists() and not root.is_dir():
        raise BoardError(f"--record {str(root)!r} is an existing file, not a folder. Next: name a new folder.")
    if (root / RECORDING_MANIFEST).exists():
        raise BoardError(f"{root} already holds a bisection recording; it is not overwritten. Next: record "
                         "into a new folder.")
    root.mkdir(parents=True, exist_ok=True)
    runs = []
    for k, (probe, text) in enumerate(outputs):
        name = f"run_{k:02d}.txt"
        _write(root / name, text)
        runs.append({"probe": list(probe), "file": name, "sha256": sha256_bytes(text.encode("utf-8"))})
    manifest = {"format": RECORDING_FORMAT, "version": RECORDING_VERSION, "model_name": result.model_name,
                "model_sha256": result.model_sha256, "where": result.where,
                "recorded_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "settings": settings, "runs": runs}
    _write(root / RECORDING_MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return root


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


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
