"""Steps 2-5 of ``time_on_board``: deploy the model, run it, fingerprint the board, compare accuracy,
summarise what the runner measured (and record it); or rebuild the same from a recording.
Each returns the fields of a ``TimingResult`` (``workbench.board.timing`` builds it)."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import warnings
from pathlib import Path
from typing import Any

from .._io import sha256_file
from ..errors import BoardError, ModelError, WorkbenchWarning
from .accuracy import AccuracySettings, BoardAccuracy
from .coverage import coverage_from_log
from .parse import BenchmarkLog
from .session import TimingOptions, _LocalShell, _Session, _session_label
from .stats import LatencyStats


def _measure(path: Path, session: _Session, options: TimingOptions, *,
             accuracy: AccuracySettings | None, record: Any) -> dict[str, Any]:
    """Steps 2-5: deploy, run, fingerprint, (accuracy), summarise; record when asked.

    Returns the fields of the ``TimingResult``."""
    from . import deploy as dep
    from . import runners as run_mod
    from .accuracy import compare, prepare_inputs

    digest = sha256_file(path)
    transport = session.transport
    if session.local:
        model_path = str(path.resolve())
        runner_path = str(Path(dep.__file__).with_name("remote_runner.py"))
    else:
        model_path = dep.deploy_model(transport, path, session.workdir).remote_path
        needs_runner = options.runner == "python" or accuracy is not None
        runner_path = dep.deploy_runner(transport, session.workdir).remote_path if needs_runner else ""

    delegate_options = dict(options.delegate_options)
    binary = None
    if options.runner == "python":
        raw = run_mod.run_python(transport, python=session.python, runner_path=runner_path,
                                 model_path=model_path, runs=options.runs, warmup=options.warmup,
                                 delegate=session.delegate, threads=options.threads,
                                 delegate_options=delegate_options, seed=options.seed,
                                 kernels=session.kernels)
    else:
        binary = session.benchmark_model or run_mod.find_benchmark_model(transport)
        dep.check_remote_file(transport, binary, what="benchmark_model", executable=True,
                              hint="set `benchmark_model:` in boards.yaml, or use the python runner")
        raw = run_mod.run_benchmark_model(transport, binary=binary, model_path=model_path,
                                          runs=options.runs, warmup=options.warmup,
                                          delegate=session.delegate, threads=options.threads)

    fp = None
    if options.fingerprint and not session.local:
        fp = dep.board_fingerprint(transport,
                                   python=session.python if options.runner == "python" else None,
                                   delegate=session.delegate, benchmark_model=binary)
    elif options.fingerprint:
        fp = dep.board_fingerprint(_LocalShell(), python=None, delegate=session.delegate)
        fp = dataclasses.replace(fp, tflite_runtime=raw.runtime)

    board_acc, acc_stdout, acc_params = None, None, {}
    if accuracy is not None:
        int8 = accuracy.int8_model or str(path)
        npz, host_data = prepare_inputs(accuracy, int8)
        if session.local:
            import tempfile
            with tempfile.NamedTemporaryFile(suffix=".npz", delete=False) as handle:
                handle.write(npz)
            inputs = handle.name
        else:
            inputs = dep.push_bytes(transport, npz, session.workdir, "inputs.npz",
                                    kind="inputs").remote_path
        try:
            payload, acc_stdout = run_mod.run_accuracy(
                transport, python=session.python, runner_path=runner_path, model_path=model_path,
                inputs_path=inputs, delegate=session.delegate, threads=options.threads,
                delegate_options=delegate_options, kernels=session.kernels)
        finally:
            if session.local:
                os.unlink(inputs)
        label = _session_label(session, raw)
        board_acc = compare(host_data, payload, where=label, settings=accuracy)
        acc_params = _accuracy_params(accuracy, npz, host_data)

    fields = _build(path, digest, raw, runner="local" if session.local else options.runner,
                    where=session.where + (f", {session.kernels} kernels" if session.kernels != "default"
                                           and options.runner == "python" else ""),
                    on_board=not session.local, warmup=options.warmup,
                    asked_runs=options.runs, board=session.board, target=session.target,
                    destination=session.destination, delegate=session.delegate, fingerprint=fp,
                    seed=options.seed,
                    measured_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                    accuracy=board_acc)
    if record is not None:
        from .record import Recording, save_recording
        save_recording(record, Recording(
            model_name=path.name, model_sha256=digest, runner=options.runner,
            recorded_at=fields["measured_at"], board=session.board or session.destination,
            target=session.target, delegate=session.delegate, runs=options.runs,
            warmup=options.warmup, returncode=raw.returncode, fingerprint=fp,
            accuracy_params=acc_params),
            stdout=raw.stdout, stderr=raw.stderr, accuracy_stdout=acc_stdout)
        fields["notes"] += (f"recorded to {Path(record).name}/ (runner output, fingerprint, model sha256)",)
    return fields


def _accuracy_params(settings: AccuracySettings, npz: bytes, host_data: dict) -> dict[str, Any]:
    from .._io import sha256_bytes
    return {"dataset": str(host_data.get("dataset", "")), "samples": settings.samples,
            "seed": settings.seed, "split": settings.split, "inputs_sha256": sha256_bytes(npz)}


def _build(path: Path, digest: str, raw: Any, *, runner: str, where: str, on_board: bool,
           warmup: int, asked_runs: int | None, board: str | None, target: str | None,
           destination: str | None, delegate: str | None, fingerprint: Any, seed: int,
           measured_at: str, accuracy: BoardAccuracy | None = None,
           replayed_from: str | None = None, replayed_at: str = "") -> dict[str, Any]:
    """Step 5: statistics, coverage and notes from what the runner measured: the fields of a ``TimingResult``."""
    from .stats import still_falling, summarize_latencies

    notes: list[str] = []
    if not on_board:
        notes.append("measured on this machine's CPU, not on an NPU: use it to compare models, "
                     "never as a board latency")
    falling = coverage = None
    if raw.log is None:
        latency = summarize_latencies(raw.runs_us, seed=seed)
        falling = still_falling(raw.runs_us)
        if falling:
            warnings.warn(f"{where}: {falling}", WorkbenchWarning, stacklevel=3)
        if latency.n < 100:
            notes.append(f"p99 from {latency.n} runs is close to the maximum; its bootstrap CI "
                         "is wide. Use runs >= 1000 for a tail you can quote")
        if delegate:
            notes.append("the python runner cannot see which ops the delegate took; use "
                         "runner='benchmark_model' for the delegate's node counts")
    else:
        latency = _latency_from_log(raw.log)
        total_ops = _count_ops(path) if raw.log.op_profile else None
        coverage = coverage_from_log(raw.log, total_ops=total_ops)
        notes.append("benchmark_model reports aggregates only: p90/p99 are not stated by the log "
                     "and are left empty; use the python runner for percentiles")
        if asked_runs is not None and latency.n != asked_runs:
            notes.append(f"benchmark_model ran {latency.n} regular runs (asked {asked_runs}; it "
                         "also runs for at least --min_secs)")
        notes.extend(f"benchmark log: {w}" for w in raw.log.log_warnings)
        if raw.log.ignored_delegate:
            warnings.warn(f"{where}: benchmark_model did not consume --external_delegate_path="
                          f"{raw.log.ignored_delegate} and no delegate line follows: this is a CPU "
                          "latency, labelled CPU only", WorkbenchWarning, stacklevel=3)
    if delegate and coverage is not None and coverage.coverage == "none":
        warnings.warn(f"{where}: the delegate was applied but runs none of the graph: this "
                      "latency is a CPU latency", WorkbenchWarning, stacklevel=3)
    if replayed_from:
        notes.append(f"replayed from the recording {replayed_from}/ made on {measured_at}: "
                     "no board was used now")
    return dict(
        model=str(path), model_sha256=digest, runner=runner, where=where, on_board=on_board,
        n_warmup=warmup, n_runs=latency.n, latency_us=latency,
        cold_start_us=raw.cold_start_us, first_inference_us=raw.first_inference_us,
        warmup_us=raw.warmup_us, runs_us=raw.runs_us, board=board, target=target,
        destination=destination, delegate=delegate, runtime=raw.runtime or (
            fingerprint.tflite_runtime if fingerprint is not None else None),
        still_falling=falling, coverage=coverage, fingerprint=fingerprint, log=raw.log,
        notes=tuple(notes), measured_at=measured_at, replayed_from=replayed_from,
        replayed_at=replayed_at, accuracy=accuracy)


def _replay(path: Path, folder: Path, accuracy: AccuracySettings | None) -> dict[str, Any]:
    """The fields of a TimingResult rebuilt from a recording folder (same parsing as a live run)."""
    from . import runners as run_mod
    from .accuracy import compare, prepare_inputs
    from .record import check_same_model, find_recording, load_recording

    folder = find_recording(folder, model_sha256=sha256_file(path))
    rec, stdout, acc_stdout = load_recording(folder)
    digest = check_same_model(rec, path, folder)
    label = f"recording {folder.name} of {rec.board or 'a board'}"
    if rec.runner == "python":
        raw = run_mod.raw_from_python_output(stdout, returncode=rec.returncode, label=label)
    else:
        raw = run_mod.raw_from_benchmark_output(stdout, returncode=rec.returncode, label=label)
    where = f"board {rec.board}" + (f" ({rec.target})" if rec.target else "")
    where += (f", delegate {os.path.basename(rec.delegate)}" if rec.delegate
              else ", CPU only (no delegate)")
    board_acc = None
    if accuracy is not None:
        if acc_stdout is None:
            raise BoardError(f"the recording in {folder} holds no accuracy outputs. Next: record "
                             "it again with accuracy, or replay without it.")
        npz, host_data = prepare_inputs(accuracy, accuracy.int8_model or str(path))
        params = _accuracy_params(accuracy, npz, host_data)
        if params["inputs_sha256"] != rec.accuracy_params.get("inputs_sha256"):
            raise BoardError(f"the recording in {folder} ran a different accuracy sample "
                             f"({rec.accuracy_params}) than asked now ({params}). Next: use the "
                             "recorded dataset, samples and seed.")
        payload = run_mod.accuracy_from_output(acc_stdout, label=label)
        board_acc = compare(host_data, payload, where=f"replayed {where}", settings=accuracy)
    return _build(path, digest, raw, runner=rec.runner, where=where, on_board=True,
                  warmup=rec.warmup or 0, asked_runs=rec.runs, board=rec.board, target=rec.target,
                  destination=None, delegate=rec.delegate, fingerprint=rec.fingerprint, seed=0,
                  measured_at=rec.recorded_at, accuracy=board_acc, replayed_from=folder.name,
                  replayed_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))


def _latency_from_log(log: BenchmarkLog) -> LatencyStats:
    """Steady-state statistics exactly as the log states them (no invented percentiles)."""
    stat = log.inference
    if stat is None:
        return LatencyStats(n=0, mean=log.inference_avg_us)
    same = stat.all_same or stat.count == 1
    mean = stat.avg if stat.avg is not None else (log.inference_avg_us if not same else stat.curr)
    return LatencyStats(n=stat.count, mean=mean, std=stat.std if not same else 0.0,
                        p50=stat.median if stat.median is not None else (stat.curr if same else None),
                        min=stat.min if not same else stat.curr,
                        max=stat.max if not same else stat.curr)


def _count_ops(path: Path) -> int | None:
    try:
        from ..models.tflite_graph import read_tflite
        return len(read_tflite(path).ops)
    except (ImportError, ModelError):
        return None
