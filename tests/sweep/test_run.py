"""Sweeps on a tiny model: serial, a LocalCluster, and a real scheduler with two worker processes."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.sweep.plan import SweepSpec
from workbench.sweep.result import SweepResult
from workbench.sweep.run import sweep

# two targets x one recipe x one strategy x (one good size, one impossible size): 2 cells run, 2 fail
SPEC = dict(dataset="digits-conditions", targets=("imx8mp", "imx95"), recipes=("a8w8_pc",),
            strategies=("random",), sizes=(64, 5000), exclusions=("none",), n_bootstrap=100)


def _essence(result: SweepResult) -> list[tuple]:
    return sorted((c.cell.label, c.ok, c.model_sha256, c.worst_condition, None if c.worst_drop_pp is None else round(c.worst_drop_pp, 6), c.npu_ops,
                   c.cpu_islands, c.error.splitlines()[0] if c.error else "") for c in result.cells)


@pytest.fixture(scope="module")
def serial_result(tiny_model):
    return sweep(tiny_model, spec=SweepSpec(model=tiny_model, **SPEC), executor="serial", progress=False)


def test_serial_sweep_reports_failed_cells_and_recommends(serial_result):
    r = serial_result
    assert len(r.cells) == 4
    failed = r.failed
    assert len(failed) == 2 and all(c.cell.size == 5000 for c in failed)
    assert all("CalibrationError" in c.error for c in failed)
    ok = [c for c in r.cells if c.ok]
    for c in ok:
        assert {s.condition for s in c.scores} == {"daylight", "low-light", "overexposed", "motion-blur",
                                                    "sensor-noise"}
        assert c.latency_kind == "host-cpu" and c.latency_ms > 0 and c.total_ops > 0
    assert [rec.target for rec in r.recommendations] == ["imx8mp", "imx95"]
    assert all(rec.cell is not None and rec.cell.ok for rec in r.recommendations)
    text = r.text()
    assert "FAILED" in text and "Recommendation per target" in text


def test_rerun_is_all_cache_hits(serial_result, tiny_model):
    again = sweep(tiny_model, spec=SweepSpec(model=tiny_model, **SPEC), executor="serial", progress=False)
    assert again.cache_hits == len(again.cells) == 4
    assert _essence(again) == _essence(serial_result)


def test_result_round_trip_html_and_plot(serial_result, tmp_path):
    back = SweepResult.from_dict(serial_result.to_dict())
    assert _essence(back) == _essence(serial_result)
    assert back.recommendations[0].cell.cell == serial_result.recommendations[0].cell.cell
    html = serial_result._repr_html_()
    assert "<table" in html and "data:image/png" in html
    from workbench.sweep.run import _write_plots
    written = _write_plots(serial_result, tmp_path)
    assert Path(written.plots[0]).stat().st_size > 1000


def test_local_cluster_gives_the_serial_results(serial_result, tiny_model):
    r = sweep(tiny_model, spec=SweepSpec(model=tiny_model, **SPEC), executor="dask", workers=2, cache=False,
              progress=False)
    assert r.scheduler.startswith("Dask LocalCluster") and r.workers == 2
    assert _essence(r) == _essence(serial_result)
    assert r.cache_hits == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_scheduler_and_two_worker_processes(serial_result, tiny_model, tmp_path):
    dask = shutil.which("dask", path=str(Path(sys.executable).parent)) or shutil.which("dask")
    assert dask, "the dask CLI is installed with distributed"
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")   # NPU_WORKBENCH_CACHE: the session's, shared
    logs = [open(tmp_path / f"{n}.log", "w") for n in ("scheduler", "w1", "w2")]
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], stdout=logs[0], stderr=subprocess.STDOUT, env=env)]
    try:
        from distributed import Client
        deadline = time.time() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.time() > deadline:
                    pytest.fail("dask scheduler did not start: " + (tmp_path / "scheduler.log").read_text())
                time.sleep(0.5)
        for i in (1, 2):
            procs.append(subprocess.Popen([dask, "worker", address, "--nworkers", "1", "--nthreads", "1",
                                           "--no-dashboard", "--name", f"w{i}"], stdout=logs[i],
                                          stderr=subprocess.STDOUT, env=env))
        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=120)
        r = sweep(tiny_model, spec=SweepSpec(model=tiny_model, **SPEC), scheduler=address, cache=False,
                  progress=False)
        assert r.scheduler == f"Dask scheduler {address}" and r.workers == 2
        assert _essence(r) == _essence(serial_result)
        assert len({c.worker for c in r.cells}) == 2          # both worker processes ran cells
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in logs:
            f.close()


def test_unreachable_scheduler_is_a_clear_error(tiny_model):
    from workbench.sweep.plan import SweepError
    port = _free_port()
    with pytest.raises(SweepError, match="cannot reach the Dask scheduler"):
        sweep(tiny_model, spec=SweepSpec(model=tiny_model, **{**SPEC, "sizes": (64,), "targets": ("imx8mp",)}),
              scheduler=f"tcp://127.0.0.1:{port}", cache=False, progress=False)


def test_a_rerun_of_cached_cells_starts_no_executor(serial_result, tiny_model):
    """Every cell a verified cache hit: the client answers alone (the scheduler is never contacted)."""
    r = sweep(tiny_model, spec=SweepSpec(model=tiny_model, **SPEC), scheduler=f"tcp://127.0.0.1:{_free_port()}",
              progress=False)
    assert r.cache_hits == len(r.cells) == 4 and r.workers == 0 and "no executor started" in r.scheduler
    assert _essence(r) == _essence(serial_result)
    assert all(c.worker.endswith("(client)") for c in r.cells)


def test_a_cached_cell_whose_quantized_model_changed_is_redone(serial_result, tiny_model):
    from workbench.sweep.cell import cached_result
    from workbench.sweep.run import resolve_model
    ok = next(c for c in serial_result.cells if c.ok)
    spec = SweepSpec(model=tiny_model, **SPEC)
    from workbench._io import sha256_file
    from workbench.data.loaders import load_dataset
    args = (ok.cell, spec, sha256_file(resolve_model(tiny_model, SPEC["dataset"])), load_dataset(SPEC["dataset"]).hash)
    assert cached_result(*args) is not None
    model = Path(ok.model_path)
    original = model.read_bytes()
    try:
        model.write_bytes(original[:-8] + b"tampered")
        assert cached_result(*args) is None            # the record names a model that is no longer the one measured
    finally:
        model.write_bytes(original)
    assert cached_result(*args) is not None


# a choice per target (two recipes whose host-CPU latencies differ by noise): the pick must not follow the noise
PICK_SPEC = dict(dataset="digits-conditions", targets=("imx8mp", "imx95"), recipes=("a8w8_pc", "a8w8_pt"),
                 strategies=("random",), sizes=(64,), exclusions=("none",), n_bootstrap=100)


def _picks(result: SweepResult) -> list[tuple]:
    """What a sweep recommends per target: the cell and whether it passed the gate (not the reason's numbers)."""
    return [(r.target, None if r.cell is None else r.cell.cell.label, r.passed_gate) for r in result.recommendations]


def test_the_same_sweep_picks_the_same_locally_and_on_a_dask_scheduler(tiny_model):
    """Issue 27: the same sweep gives the same picks serially and through a Dask scheduler (an in-process
    LocalCluster on loopback, one worker), each measuring its own host-CPU latencies (no cache)."""
    from distributed import LocalCluster
    spec = SweepSpec(model=tiny_model, **PICK_SPEC)
    serial = sweep(tiny_model, spec=spec, executor="serial", cache=False, progress=False)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=None) as cluster:
        on_dask = sweep(tiny_model, spec=spec, scheduler=cluster.scheduler_address, cache=False, progress=False)
    assert on_dask.scheduler == f"Dask scheduler {cluster.scheduler_address}" and on_dask.cache_hits == 0
    assert all(c.ok for c in serial.cells + on_dask.cells), [c.error for c in serial.cells + on_dask.cells]
    latencies = {(c.cell.label, run): c.latency_ms for run, r in (("serial", serial), ("dask", on_dask))
                 for c in r.cells}
    assert _picks(on_dask) == _picks(serial), latencies
    assert len(_picks(serial)) == 2 and all(cell is not None for _, cell, _ in _picks(serial))
