"""``sweep``: plan the cells, run them as Dask tasks (or a serial loop), recommend per target.

Executors:

- ``"dask"`` (default): without ``scheduler`` a ``LocalCluster`` of worker processes (one
  thread each; as many as the machine has cores, at most one per task) is started and
  closed again; with ``scheduler="tcp://HOST:PORT"`` (or ``$DASK_SCHEDULER_ADDRESS``) the
  cells go to that cluster.  Workers need the workbench installed, the model path and a
  shared ``NPU_WORKBENCH_CACHE`` (see docs/sweep.md); a cell's result (small JSON-able
  data) comes back to the client, its artifacts stay in the shared cache.
- ``"serial"``: a plain loop in this process (the same ``run_cell``).

A failed cell is a result with its error; the sweep always finishes.  A progress bar
(tqdm, on stderr) counts finished cells.

Before any executor starts, the client looks every cell up in the cache (the sealed record
verified, and the quantized model it names checked by sha256: :func:`.cell.cached_result`);
only the misses are sent to the executor, so a rerun whose cells are all cached starts no
cluster.  The client sends its loaded dataset to the workers once (``scatter``) instead of
each worker building it again.

Cells that quantize the same way (same recipe, calibration strategy and size, same ops kept
in float: the same cell on other targets) are one Dask task (:func:`quantization_groups`,
:func:`run_cells`): the task quantizes and evaluates once and places the model on each of its
targets, so two workers never compute the same quantization at the same time, and tasks
running in parallel are distinct work.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from .._io import sha256_file
from .cell import THREADS_ENV, CellResult, cached_result, run_cell
from .plan import SweepCell, SweepError, SweepSpec, plan_cells, resolve_exclusions
from .result import SweepResult, recommend

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
EXECUTORS = ("dask", "serial")


SCHEDULER_SCHEMES = ("tcp", "tls")


def scheduler_address(scheduler: str | None) -> tuple[str | None, str]:
    """``(address or None, where it came from)``: ``scheduler``, else ``$DASK_SCHEDULER_ADDRESS``.

    The address must be ``tcp://HOST:PORT`` or ``tls://HOST:PORT`` (HOST a name, an IPv4 address or
    ``[IPv6]``; PORT 1-65535).  The scheduler receives and sends pickled tasks: it runs code on this
    machine's behalf and its answers are unpickled here, so it is trusted like code (docs/security.md).
    """
    import re
    source = "--scheduler"
    if scheduler is None or scheduler == "":
        scheduler, source = os.environ.get(SCHEDULER_ENV) or None, f"${SCHEDULER_ENV}"
        if scheduler is None:
            return None, ""
    fix = ("Give tcp://HOST:PORT (e.g. tcp://10.0.0.5:8786), the address `dask scheduler` prints"
           + (f", or unset {SCHEDULER_ENV} to run on a LocalCluster" if source.startswith("$") else ""))
    if not isinstance(scheduler, str):
        raise SweepError(f"{source} must be a Dask scheduler address. Got {scheduler!r} instead. {fix}.")
    m = re.fullmatch(r"(?P<scheme>[a-z]+)://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.\-_]{0,252}))"
                     r":(?P<port>\d{1,5})", scheduler)
    if m is None or m["scheme"] not in SCHEDULER_SCHEMES or not 0 < int(m["port"]) < 65536:
        raise SweepError(f"{source} {scheduler!r} is not a Dask scheduler address (scheme "
                         f"{'/'.join(SCHEDULER_SCHEMES)}, a host and a port 1-65535). {fix}.")
    return scheduler, source


def resolve_model(model: str, dataset: str) -> str:
    """A built-in model's ``.keras`` (trained or cached) or a given path."""
    from ..models.builtin import builtin_names, builtin_path, is_builtin
    if is_builtin(model):
        return builtin_path(model, dataset=dataset)
    from pathlib import Path
    if not Path(model).exists():
        raise SweepError(f"model {model!r} does not exist; give a Keras/SavedModel/ONNX path, or a built-in model "
                         f"({', '.join(map(repr, builtin_names()))}).")
    return str(Path(model).resolve())


def sweep(model: str = "tradeoff", *, spec: SweepSpec | None = None, gate: Any = None, executor: str = "dask",
          scheduler: str | None = None, workers: int | None = None, cache: bool = True, progress: bool = True,
          plots: str | os.PathLike | None = None, output: str | os.PathLike | None = None,
          **axes: Any) -> SweepResult:
    """Run a sweep of ``model`` and recommend a cell per target.

    Parameters
    ----------
    model : ``"tradeoff"`` (default), ``"reference"`` or a model path (every worker must read it).
    spec : a :class:`SweepSpec`; or give its fields as keyword arguments (``targets=``,
        ``recipes=``, ``strategies=``, ``sizes=``, ``exclusions=``, ``dataset=`` ...).
    gate : a gate YAML path, a :class:`~workbench.evaluate.gate.Gate` or None (accuracy only:
        the default maximum drop per condition).
    executor : ``"dask"`` or ``"serial"``.
    scheduler : a Dask scheduler address (``tcp://HOST:PORT``); default ``$DASK_SCHEDULER_ADDRESS``,
        else a ``LocalCluster``.
    workers : LocalCluster worker processes (default: the machine's cores, at most the number of
        quantization groups: cells that differ only in target are one task).
    cache : reuse cached cell results (False runs every cell again and refreshes the cache).
    plots : a folder to write ``pareto.png`` into.
    output : a file to write the whole result into as JSON (written atomically, last).
    """
    from ..evaluate.gate import DEFAULT_MAX_DROP_PP, Gate, load_gate
    if executor not in EXECUTORS:
        raise SweepError(f"`executor` must be one of {', '.join(map(repr, EXECUTORS))}. Got {executor!r} instead.")
    if spec is None:
        spec = SweepSpec(model=model, **axes)
    elif axes:
        raise SweepError("give either `spec` or the sweep axes as keyword arguments, not both.")
    gate_obj = Gate(max_drop_pp=DEFAULT_MAX_DROP_PP) if gate is None else load_gate(gate)
    scheduler, scheduler_source = scheduler_address(scheduler) if executor == "dask" else (None, "")
    start = time.perf_counter()
    model_path = resolve_model(spec.model, spec.dataset)
    model_sha = sha256_file(model_path)
    from ..data.loaders import load_dataset
    data = load_dataset(spec.dataset)
    exclusions = resolve_exclusions(spec, model_path, data)
    cells = plan_cells(spec, exclusions)
    found: dict[int, CellResult] = {}
    if cache:                       # verified cache hits never go to an executor
        import socket
        client_name = f"{socket.gethostname()}:{os.getpid()} (client)"
        for i, cell in enumerate(cells):
            t = time.perf_counter()
            hit = cached_result(cell, spec, model_sha, data.hash)
            if hit is not None:
                found[i] = dataclasses.replace(hit, cache_hit=True, worker=client_name,
                                               seconds=round(time.perf_counter() - t, 3))
    todo = tuple(c for i, c in enumerate(cells) if i not in found)
    if not todo:
        ran, where, n_workers = [], "the cache (every cell a verified hit: no executor started)", 0
    elif executor == "serial":
        ran, where, n_workers = _run_serial(todo, spec, model_path, model_sha, cache, progress, data), "serial loop", 1
    else:
        ran, where, n_workers = _run_dask(todo, spec, model_path, model_sha, cache, progress, scheduler, workers,
                                          data)
        if scheduler_source.startswith("$"):
            where += f" (from ${SCHEDULER_ENV})"
    computed = iter(ran)
    results = [found[i] if i in found else next(computed) for i in range(len(cells))]
    gate_dict = gate_obj.to_dict()
    recs = tuple(recommend(t, [r for r in results if r.cell.target == t], gate_dict) for t in spec.targets)
    result = SweepResult(spec=spec, model=model_path, model_sha256=model_sha, cells=tuple(results),
                         recommendations=recs, gate=gate_dict, scheduler=where, workers=n_workers,
                         seconds=round(time.perf_counter() - start, 2))
    if plots is not None:
        result = _write_plots(result, plots)
    if output is not None:
        from pathlib import Path

        from .._io import atomic_write_json
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(output, result.to_dict())
    return result


def _write_plots(result: SweepResult, folder: str | os.PathLike) -> SweepResult:
    import dataclasses
    from pathlib import Path

    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from .._io import atomic_path
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    fig = result.plot()
    path = out / "pareto.png"
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
    finally:
        plt.close(fig)
    return dataclasses.replace(result, plots=(str(path),))


def _bar(total: int, progress: bool) -> Any:
    from tqdm.auto import tqdm
    return tqdm(total=total, desc="sweep cells", unit="cell", disable=not progress, leave=True)


def _run_serial(cells: tuple, spec: SweepSpec, model_path: str, model_sha: str, cache: bool,
                progress: bool, data: Any = None) -> list[CellResult]:
    out = []
    with _bar(len(cells), progress) as bar:
        for cell in cells:
            out.append(run_cell(cell, spec, model_path, model_sha, cache=cache, data=data))
            bar.update(1)
    return out


def quantization_groups(cells: tuple[SweepCell, ...]) -> list[list[int]]:
    """The indices of ``cells`` grouped by what they quantize: recipe, calibration strategy and size, and
    the ops kept in float (cells of one group differ only in target, or in an exclusion set's name that
    resolved to the same ops).  Groups are in the order of their first cell; cells keep their order."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, cell in enumerate(cells):
        groups.setdefault((cell.recipe, cell.strategy, cell.size, tuple(cell.exclude)), []).append(i)
    return list(groups.values())


def run_cells(cells: tuple[SweepCell, ...], spec: SweepSpec, model_path: str, model_sha: str, *,
              cache: bool = True, data: Any = None) -> list[CellResult]:
    """Run ``cells`` one after the other in this process (one Dask task: a quantization group; the first
    cell quantizes and evaluates, the others find both in the stages' caches and place on their target)."""
    return [run_cell(cell, spec, model_path, model_sha, cache=cache, data=data) for cell in cells]


def worker_env(n_workers: int, cores: int | None = None) -> dict[str, str]:
    """The environment of a LocalCluster worker: TensorFlow, OpenMP/BLAS and the cell's LiteRT runs get
    the cores divided by the workers (at least one thread), instead of every worker using every core."""
    threads = str(max(1, (cores or os.cpu_count() or 1) // max(n_workers, 1)))
    return {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_NUM_INTRAOP_THREADS": threads, "TF_NUM_INTEROP_THREADS": "1",
            "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads,
            THREADS_ENV: threads}


def _run_dask(cells: tuple, spec: SweepSpec, model_path: str, model_sha: str, cache: bool, progress: bool,
              scheduler: str | None, workers: int | None, data: Any = None) -> tuple[list[CellResult], str, int]:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError as exc:  # pragma: no cover - a dependency of the workbench
        raise SweepError("the Dask executor needs `dask` and `distributed` (pip install dask distributed), "
                         "or use executor='serial'.") from exc
    cluster = None
    groups = quantization_groups(cells)
    try:
        if scheduler:
            try:
                client = Client(scheduler, timeout="10s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise SweepError(f"cannot reach the Dask scheduler at {scheduler} ({type(exc).__name__}: {exc}). "
                                 "Start one with `dask scheduler` and workers with `dask worker ADDRESS`, or "
                                 f"unset {SCHEDULER_ENV} to run on a LocalCluster.") from None
            where = f"Dask scheduler {scheduler}"
        else:
            n = workers or min(os.cpu_count() or 1, max(len(groups), 1))
            if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                raise SweepError(f"`workers` must be a positive integer. Got {workers!r} instead.")
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                                   env=worker_env(n))
            client = Client(cluster)
            where = f"Dask LocalCluster ({n} process(es))"
        try:
            n_workers = len(client.scheduler_info().get("workers", {})) or 1
            # the client's dataset, sent once to every worker (a worker would spend seconds building it)
            shared = client.scatter(data, broadcast=True) if data is not None else None
            # one task per quantization group, submitted in plan order (Dask runs them first in, first out)
            futures = {client.submit(run_cells, tuple(cells[i] for i in group), spec, model_path, model_sha,
                                     cache=cache, data=shared, pure=False): group
                       for group in groups}
            results: list[CellResult | None] = [None] * len(cells)
            with _bar(len(cells), progress) as bar:
                for future in as_completed(futures):
                    group = futures[future]
                    try:
                        for i, result in zip(group, future.result(), strict=True):
                            results[i] = result
                    except Exception as exc:  # noqa: BLE001 - a lost worker: its cells failed, the sweep goes on
                        for i in group:
                            results[i] = CellResult(cell=cells[i], ok=False,
                                                    error=f"{type(exc).__name__} on the Dask worker: {exc}")
                    bar.update(len(group))
        finally:
            _close(client)
        return [r for r in results if r is not None], where, n_workers
    finally:
        if cluster is not None:
            _close(cluster)


def _close(cluster: Any) -> None:
    """Close a Client or LocalCluster; a slow shutdown (a loaded machine) warns instead of losing the results."""
    import warnings

    from ..errors import WorkbenchWarning
    try:
        cluster.close(timeout=60)
    except (TimeoutError, OSError, RuntimeError) as exc:
        warnings.warn(f"the Dask {type(cluster).__name__} did not shut down cleanly ({type(exc).__name__}: "
                      f"{exc}); its worker processes end with this process. The results are complete.",
                      WorkbenchWarning, stacklevel=3)


#: the notebook-facing name (``wb.run_sweep``: ``wb.sweep`` is the package)
run_sweep = sweep
