"""One sweep cell through the stage chain, cached under a content key.

``run_cell`` reads as its steps: curate the calibration set, quantize with the
cell's recipe and exclusions, measure accuracy per condition (FP32 against INT8,
paired bootstrap CIs), place every op on the target, then the latency: Vela's
estimate on imx93, and on every target the host CPU (labelled: not an NPU).
The stages are the pipeline's (:class:`~workbench.pipeline.Pipeline` on the cell's
:class:`~workbench.pipeline.RunSpec`, its stage results kept in a :class:`~workbench.pipeline.CellStore`
shared by the cells of a quantization group), and the cell's result is cached as JSON so a rerun
of the sweep is all cache hits.

A cell never raises: an error becomes a :class:`CellResult` with ``error`` set
(its type and message), so one failing cell never stops a sweep.

Threads: a cell's accuracy runs use ``$NPU_WORKBENCH_SWEEP_THREADS`` LiteRT threads when set
(the sweep's LocalCluster sets it, with TensorFlow's and OpenMP's thread counts, to the cores
divided by the workers, so two workers on two cores do not fight over four threads); the
host-CPU latency always uses one.  The model's input contract (read by loading the model) and
the dataset are loaded once per process, not per cell.
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .._io import cache_dir, read_sealed_json, sha256_file, stable_hash, write_sealed_json
from .._results import Result
from ..errors import WorkbenchError
from ..vocab import LatencySource, latency_label
from .plan import SweepCell, SweepSpec

HOST_RUNS = 50
HOST_WARMUP = 5
THREADS_ENV = "NPU_WORKBENCH_SWEEP_THREADS"


@dataclass(frozen=True)
class ConditionScore:
    """INT8 accuracy of one cell under one condition, against FP32."""

    condition: str
    fp32: float
    int8: float
    drop_pp: float
    drop_ci_low: float
    drop_ci_high: float
    n: int


@dataclass(frozen=True)
class CellResult(Result):
    """What one cell measured (or the error that stopped it)."""

    cell: SweepCell
    ok: bool
    error: str = ""
    scores: tuple[ConditionScore, ...] = ()
    worst_condition: str = ""
    worst_drop_pp: float | None = None
    npu_ops: int = 0
    total_ops: int = 0
    npu_share: float | None = None
    cpu_ops: tuple[str, ...] = ()          # "#6 RESIZE_BILINEAR"
    cpu_islands: int = 0
    float_npu_ops: tuple[str, ...] = ()    # float (non-integer) ops the target still places on its NPU
    placement_label: str = ""
    latency_ms: float | None = None
    latency_kind: str = ""
    latency_label: str = ""
    host_cpu_ms: float | None = None
    latency_ci_low: float | None = None     # host CPU: the median's 95% CI (order statistics of the timed runs)
    latency_ci_high: float | None = None
    model_sha256: str = ""
    model_path: str = ""
    calibration_hash: str = ""
    recipe_summary: str = ""
    seconds: float = 0.0
    worker: str = ""
    cache_hit: bool = False
    key: str = ""

    def score(self, condition: str) -> ConditionScore | None:
        return next((s for s in self.scores if s.condition == condition), None)

    def summary(self) -> str:
        if not self.ok:
            return f"{self.cell.label}: FAILED {self.error.splitlines()[0] if self.error else ''}"
        lat = "-" if self.latency_ms is None else f"{self.latency_ms:.3f} ms ({self.latency_kind})"
        return (f"{self.cell.label}: worst drop {self.worst_drop_pp:+.2f} pp ({self.worst_condition}), "
                f"NPU {self.npu_ops}/{self.total_ops}, {self.cpu_islands} CPU island(s), latency {lat}")


# ------------------------------------------------------------------------------- the chain

def cell_key(cell: SweepCell, spec: SweepSpec, model_sha: str, dataset_hash: str) -> str:
    """The content key of a cell: model and data bytes, the cell, the settings and the code."""
    from ..quantize.engine import _toolchain
    from ..quantize.recipe import get_recipe
    package = Path(__file__).parents[1]   # the sweep's code and the placement rules/compiler choice it relies on
    code = stable_hash([sha256_file(package / f) for f in ("sweep/cell.py", "sweep/plan.py", "placement/analyze.py",
                                                           "placement/ops.py", "placement/compilers.py",
                                                           "placement/vela.py", "pipeline/core.py")])
    backend = get_recipe(cell.recipe).backend
    vela = None
    from ..targets import get_target
    if get_target(cell.target).compiler == "vela" and spec.use_vela:
        from importlib import metadata
        try:
            vela = metadata.version("ethos-u-vela")
        except metadata.PackageNotFoundError:
            vela = "absent"
    return stable_hash({"cell": cell.to_dict(), "model": model_sha, "dataset": dataset_hash, "code": code,
                        "seed": spec.seed, "n_bootstrap": spec.n_bootstrap, "use_vela": spec.use_vela,
                        "host_cpu": spec.time_host_cpu, "toolchain": _toolchain(backend), "vela": vela,
                        **({"input_spec": _input_spec_key(spec.input_spec)} if spec.input_spec else {}),
                        **({"options": spec.options_key()} if spec.options_key() else {})})[:24]


def _input_spec_key(input_spec: Any) -> Any:
    """What the cell key holds of the sweep's input contract: a card file's bytes, else the value."""
    if isinstance(input_spec, (str, os.PathLike)) and Path(input_spec).is_file():
        return sha256_file(input_spec)
    return input_spec


@lru_cache(maxsize=4)
def _dataset(name: str) -> Any:
    from ..data.loaders import load_dataset
    return load_dataset(name)


def _threads() -> int | None:
    value = os.environ.get(THREADS_ENV, "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def cached_result(cell: SweepCell, spec: SweepSpec, model_sha: str, dataset_hash: str) -> CellResult | None:
    """The cached result of ``cell``, verified, or None.

    Verified: the record's content matches its sealed sha256 (a damaged record warns and is
    removed), it was written by this version of the cell, and for a cell that ran, the
    quantized model it names is on disk with its recorded sha256.  Anything else is a miss.
    """
    key = cell_key(cell, spec, model_sha, dataset_hash)
    found_data = read_sealed_json(cache_dir("sweep") / f"{key}.json")
    if found_data is None:
        return None
    try:
        found = CellResult.from_dict(found_data)
    except (ValueError, KeyError, TypeError):
        return None             # written by another version of the cell: redone
    if found.cell != cell or found.key != key:
        return None
    if found.ok and not (found.model_path and Path(found.model_path).is_file()
                         and sha256_file(found.model_path) == found.model_sha256):
        return None             # the quantized model it names is gone or changed: redone
    return found


def run_cell(cell: SweepCell, spec: SweepSpec, model_path: str, model_sha: str, *, cache: bool = True,
             data: Any = None) -> CellResult:
    """Run one cell; never raises (errors are returned in the result).

    ``data``: the loaded dataset (the sweep sends it to every Dask worker once); default: load
    ``spec.dataset`` in this process (once per process).
    """
    start = time.perf_counter()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    key = ""
    try:
        if not Path(model_path).exists():
            raise WorkbenchError(f"{worker}: cannot read the model {model_path}; every Dask worker must see it. "
                                 "Put the model (and NPU_WORKBENCH_CACHE) on a path shared by all workers.")
        if data is None:
            data = _dataset(spec.dataset)
        key = cell_key(cell, spec, model_sha, data.hash)
        record = cache_dir("sweep") / f"{key}.json"
        found = cached_result(cell, spec, model_sha, data.hash) if cache else None
        if found is not None:
            return _replace(found, cache_hit=True, worker=worker, seconds=round(time.perf_counter() - start, 3))
        result = _chain(cell, spec, model_path, data, model_sha)
        result = _replace(result, key=key, worker=worker, seconds=round(time.perf_counter() - start, 3))
        write_sealed_json(record, result.to_dict())
        return result
    except WorkbenchError as exc:
        # a stated failure of the chain (a recipe the converter refuses...) is a result: cached too
        result = CellResult(cell=cell, ok=False, error=f"{type(exc).__name__}: {exc}", key=key, worker=worker,
                            seconds=round(time.perf_counter() - start, 3))
        if key:
            write_sealed_json(cache_dir("sweep") / f"{key}.json", result.to_dict())
        return result
    except Exception as exc:  # noqa: BLE001 - any other failure is reported with its traceback, not cached
        tail = "".join(traceback.format_exception(exc)[-3:])
        return CellResult(cell=cell, ok=False, error=f"{type(exc).__name__}: {exc}\n{tail}", key=key,
                          worker=worker, seconds=round(time.perf_counter() - start, 3))


def _replace(result: CellResult, **changes: Any) -> CellResult:
    import dataclasses
    return dataclasses.replace(result, **changes)


_BASE_SPECS: dict[tuple[str, str, str, str], Any] = {}


def cell_spec(cell: SweepCell, spec: SweepSpec, model_path: str, data: Any, model_sha: str) -> Any:
    """The :class:`~workbench.pipeline.RunSpec` of one cell: the sweep's model, dataset and input contract
    (resolved once per process and model), the cell's target, recipe (with its exclusions), calibration
    strategy and size, the sweep's seed, bootstrap draws and compiler choice, and the rest of the stages'
    options as the sweep was given them (:meth:`SweepSpec.options`)."""
    import dataclasses

    from ..pipeline import RunSpec
    from ..quantize.recipe import get_recipe
    key = (model_path, model_sha, data.hash, str(spec.input_spec))
    base = _BASE_SPECS.get(key)
    if base is None:
        base = _BASE_SPECS[key] = RunSpec(model_path, data, target=cell.target, recipe=cell.recipe,
                                          input_spec=spec.input_spec)
        base.contract               # noqa: B018 - read once here (it loads the model), kept by every replace()
    recipe = get_recipe(cell.recipe, exclude=cell.exclude) if cell.exclude else cell.recipe
    options = spec.options()
    return base.replace(target=cell.target, recipe=recipe,
                        calibration=dataclasses.replace(options["calibration"], n=cell.size, strategy=cell.strategy),
                        evaluation=dataclasses.replace(options["evaluation"], num_threads=_threads()),
                        placement=options["placement"])


def _chain(cell: SweepCell, spec: SweepSpec, model_path: str, data: Any, model_sha: str) -> CellResult:
    import warnings

    from ..errors import WorkbenchWarning
    from ..pipeline import CellStore, Pipeline
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkbenchWarning)
        pipe = Pipeline(cell_spec(cell, spec, model_path, data, model_sha), CellStore())
        qm = pipe.quantize()
        report = pipe.evaluate(qm)
        placement = pipe.place(qm)
    candidate = qm.recipe.name
    scores = []
    for cond in report.conditions:
        row = report.row(cond, candidate)
        scores.append(ConditionScore(condition=cond, fp32=report.accuracy(cond, report.reference), int8=row.accuracy,
                                     drop_pp=row.drop_pp, drop_ci_low=row.drop_ci_low, drop_ci_high=row.drop_ci_high,
                                     n=row.n))
    worst = max(scores, key=lambda s: s.drop_pp)
    host_ms, host_low, host_high = host_cpu_latency_ci(qm.path) if spec.time_host_cpu else (None, None, None)
    if placement.estimated_latency_ms is not None:
        latency, kind = placement.estimated_latency_ms, LatencySource.VELA.value
        version = placement.authority.split()[-1] if placement.authority.startswith("vela ") else None
        label = latency_label(kind, version=version)     # the Vela that compiled it (the BSP's)
    elif host_ms is not None:
        latency, kind, label = host_ms, LatencySource.HOST_CPU.value, latency_label(LatencySource.HOST_CPU)
    else:
        latency, kind, label = None, "", ""
    ci = (host_low, host_high) if kind == LatencySource.HOST_CPU.value else (None, None)
    return CellResult(
        cell=cell, ok=True, scores=tuple(scores), worst_condition=worst.condition, worst_drop_pp=worst.drop_pp,
        npu_ops=placement.npu_ops, total_ops=len(placement.ops), npu_share=placement.npu_share,
        cpu_ops=tuple(f"#{o.index} {o.type}" for o in placement.ops if o.placement == "CPU"),
        cpu_islands=placement.n_cpu_islands, placement_label=placement.label, latency_ms=latency,
        float_npu_ops=tuple(f"#{o.index} {o.type}" for o in placement.ops
                            if o.index in set(placement.non_integer_ops) and o.placement != "CPU"),
        latency_kind=kind, latency_label=label, host_cpu_ms=host_ms, latency_ci_low=ci[0], latency_ci_high=ci[1],
        model_sha256=qm.sha256, model_path=qm.path,
        calibration_hash=qm.calibration_hash, recipe_summary=qm.recipe.summary())


def host_cpu_latency(model: str, *, runs: int = HOST_RUNS, warmup: int = HOST_WARMUP) -> float:
    """Median single-thread latency (ms) of ``model`` on this machine's CPU (LiteRT, XNNPACK off)."""
    return host_cpu_latency_ci(model, runs=runs, warmup=warmup)[0]


def median_ci(times: Any, confidence: float = 0.95) -> tuple[float, float, float]:
    """The median of ``times`` and its distribution-free CI: the order statistics whose ranks a binomial
    (n, 1/2) puts around the middle (no assumption on the shape of the timing distribution)."""
    import math
    values = np.sort(np.asarray(times, dtype=float))
    n = len(values)
    # the largest k with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2: ranks k and n - k + 1 (1-based)
    k, cumulative = 0, 0.0
    while k < n and cumulative + math.comb(n, k) / 2 ** n <= (1 - confidence) / 2:
        cumulative += math.comb(n, k) / 2 ** n
        k += 1
    low, high = max(k - 1, 0), min(n - k, n - 1)
    return float(np.median(values)), float(values[low]), float(values[high])


def host_cpu_latency_ci(model: str, *, runs: int = HOST_RUNS, warmup: int = HOST_WARMUP) -> tuple[float, float, float]:
    """Median single-thread latency (ms) of ``model`` on this machine's CPU and its 95% CI (ms)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    interp = Interpreter(model_path=str(model), num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interp.allocate_tensors()
    detail = interp.get_input_details()[0]
    rng = np.random.default_rng(0)
    if np.issubdtype(detail["dtype"], np.integer):
        info = np.iinfo(detail["dtype"])
        x = rng.integers(info.min, info.max, size=detail["shape"], endpoint=True).astype(detail["dtype"])
    else:
        x = rng.random(detail["shape"], dtype=np.float32)
    interp.set_tensor(detail["index"], x)
    for _ in range(warmup):
        interp.invoke()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        interp.invoke()
        times.append((time.perf_counter() - t0) * 1000.0)
    return median_ci(times)
