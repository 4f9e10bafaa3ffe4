"""``run_batch``: the stage notebooks per target with papermill, reports people can share.

The pipeline, per target (targets run in parallel with ``jobs``):

1. execute ``10_calibration_set`` ... ``50_board_timing`` with papermill on the
   ``npu-workbench`` kernel; the kernel's working folder is the output folder and
   every path it gets is relative to it, so nothing absolute lands in a report;
2. a failing notebook stops that target (the executed notebook, marked at the
   failing cell by papermill, is kept and exported: it is the error report);
3. export each executed notebook to HTML twice (with code, and code-hidden for
   sharing), self-contained: figures inline, no scripts, no external links, local
   paths scrubbed, the run manifest on top.

Then, with ``sweep=True``, ``60_sweep`` once across the targets (``<out>/sweep/``);
then ``90_summary`` across targets, ``summary.json``, ``summary.csv``, the
quality gate, and ``index.html`` linking everything.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .._io import folder_lock
from .._validation import check_choice, check_plain, check_positive_int, check_range
from ..errors import BatchError, require_file
from ..evaluate.gate import check_quality_gate, load_gate
from ..pipeline.spec import RunSpec
from ..run_findings import RUN_GATE_FILE, save_run_gate
from ..run_summary import summarize_run
from ..runs import new_run_id
from ..vocab import STAGE_NOTEBOOKS as _STAGE_NOTEBOOKS
from ..vocab import SUMMARY_NOTEBOOK, TARGETS
from . import console as _console
from .execute import NOTEBOOKS_DIR, SWEEP_NOTEBOOK, Runner, TargetRun, declared_parameters
from .export import Scrubber
from .options import BatchOptions, batch_request
from .result import EXIT_FAILED, EXIT_OK, BatchResult  # noqa: F401 - the old import path
from .summary import refresh_verdicts, write_crash_index, write_index, write_summary

STAGE_NOTEBOOKS = tuple(_STAGE_NOTEBOOKS.values())
STAGE_NAMES = dict(_STAGE_NOTEBOOKS)


# -- the verb ----------------------------------------------------------------------------------
def run_batch(targets: Sequence[str] | str = TARGETS, *, spec: RunSpec | None = None,
              options: BatchOptions | None = None, **keywords: Any) -> BatchResult:
    """Execute the stage notebooks per target and write shareable reports to ``out``.

    What each target computes is a :class:`~workbench.pipeline.RunSpec` (``spec``, a template without a
    target: the batch sets each target and passes ``spec.to_parameters()`` to the stage notebooks); how the
    batch runs is :class:`~workbench.batch.options.BatchOptions` (``options``).  Their fields may be given
    as keywords instead (:func:`~workbench.batch.options.batch_request`): the spec's notebook parameters
    (``model``, ``dataset``, ``recipe``, ``calibration_strategy``, ``calibration_size``, ``seed``,
    ``input_spec``, ``bsp``, ``metric``, ``timing_runs``, ``timing_warmup``, ``replay``...) and the options below.

    Parameters
    ----------
    targets : target ids (a list or ``"imx8mp,imx93"``).
    model, dataset : ``"reference"`` or a model path; a dataset name or path.
    out : the output folder: ``index.html``, ``summary.json``, ``summary.csv``,
        ``<target>/<NN_stage>.{ipynb,html,shared.html}`` and ``runs/<run_id>/<target>/``.
    gate : a gate YAML file (or a :class:`~workbench.evaluate.gate.Gate`) checked at the end.
    jobs : targets executed at the same time.
    board : a board name in ``boards.yaml`` for every target, or ``{target: board}``;
        None times on the host CPU (labelled "host CPU (not an NPU)").
    replay : a board recording folder, or a folder of them (``workbench bench --record``):
        every target is timed from the recording of its deployable model, labelled
        "replayed from <board> <date>" (no board needed; a recording of another model is refused).
    record : with ``board``, keep each target's board session in ``record/<target>``.
    stages : a subset of ``calibration, quantize, accuracy, placement, timing`` (or
        notebook names); later stages compute what an earlier, skipped one would save.
    reuse : reuse an executed notebook (and its reports) from an earlier batch into the same
        ``out`` and run id when its inputs did not change (parameters, notebook, workbench code and
        tool versions, model and dataset files, earlier stages' outputs); see :mod:`.reuse`.
        ``False`` executes every notebook again.  A stage timed on a board always runs.
    progress : one line per target and stage on the terminal (standard error).
    quiet : send what the libraries print (TensorFlow, Jupyter, nbconvert, warnings) to
        ``runs/<run_id>/batch.log`` instead of the terminal while the batch runs.
    parameters : extra notebook parameters for every target; ``target_parameters``
        ``{target: {name: value}}`` for one target only.
    sweep : also execute ``60_sweep`` once across ``targets`` on the batch's model, dataset, seed and
        gate (its axes from ``parameters``: ``recipes``, ``strategies``, ``sizes``, ``exclusions``,
        ``workers``, ``serial``, ``scheduler``); its report, ``pareto.png`` and ``sweep.json`` are in
        ``<out>/sweep/``; reused like the stages.
    """
    started = time.perf_counter()
    # 1. validate everything before the first kernel starts
    spec, options = batch_request(spec, options, **keywords)
    o = options
    out, gate, jobs, run_id, board, record = o.out, o.gate, o.jobs, o.run_id, o.board, o.record
    parameters, target_parameters, stages = o.parameters, o.target_parameters, o.stages
    model, dataset, replay = spec.model, spec.dataset, spec.timing.replay or None
    targets = _targets(targets)
    check_positive_int("jobs", jobs, error=BatchError)
    notebooks = Path(o.notebooks_dir) if o.notebooks_dir else NOTEBOOKS_DIR
    stage_list = _stages(stages)
    extra_notebooks = (SWEEP_NOTEBOOK,) if o.sweep else ()
    for name in (*stage_list, *extra_notebooks, SUMMARY_NOTEBOOK):
        require_file(notebooks / f"{name}.ipynb", "stage notebook",
                     "run from a checkout of npu-workbench or pass notebooks_dir=", BatchError)
    quality_gate = None if gate is None else load_gate(gate)
    boards = _boards(board, targets)
    out_dir = Path(out).resolve()
    auto_id = run_id is None
    run_id = run_id or new_run_id()
    if not re.fullmatch(r"[A-Za-z0-9._-]+", run_id):
        raise BatchError(f"`run_id` must use letters, digits, '.', '_' or '-'. Got {run_id!r} instead.")
    run_dir = Path("runs") / run_id
    # the spec's notebook parameters (every path relative to the kernels' working folder), then the extras
    common = {k: v for k, v in spec.to_parameters().items() if k not in ("target", "board", "record")}
    common.update({"model": _relative(model, out_dir), "dataset": _relative(dataset, out_dir),
                   "run_dir": run_dir.as_posix(),
                   **({"input_spec": _relative(spec.input_spec, out_dir)} if spec.input_spec else {}),
                   **({"replay": os.path.relpath(Path(replay).resolve(), out_dir)} if replay else {}),
                   **dict(parameters or {})})
    declared = {name: declared_parameters(notebooks / f"{name}.ipynb")
                for name in (*stage_list, *extra_notebooks, SUMMARY_NOTEBOOK)}
    known = set().union(*declared.values())
    for extra in [*(parameters or {}), *(k for p in (target_parameters or {}).values() for k in p)]:
        check_choice("parameter", extra, sorted(known), error=BatchError)
    for t in target_parameters or {}:
        check_choice("target", t, targets, error=BatchError)
    # only plain data reaches a parameters cell (papermill writes tuple/set/bytes unescaped: code)
    for name, value in (parameters or {}).items():
        check_plain(f"parameter {name}", value, error=BatchError)
    for t, of_target in (target_parameters or {}).items():
        for name, value in of_target.items():
            check_plain(f"parameter {t}:{name}", value, error=BatchError)
    if replay is not None and not Path(replay).is_dir():
        raise BatchError(f"--replay {replay}: not a folder. Next: pass a folder written by `workbench bench "
                         "MODEL --board NAME --record DIR` (or a folder of such folders).")
    if replay is not None and board:
        raise BatchError("give --board (time on a board) or --replay (replay a recording), not both.")
    if record is not None and not board:
        raise BatchError("--record keeps a board session: it needs --board.")
    if o.timeout is not None:
        check_range("timeout", o.timeout, 0.0, None, error=BatchError, low_open=True)
    # a custom op in a float .tflite stops every target's quantization: named now, not after the kernels ran
    if isinstance(model, (str, os.PathLike)) and str(model).endswith(".tflite") and Path(model).is_file():
        from ..models.tflite_graph import check_no_custom_ops
        check_no_custom_ops(Path(model))
    if out_dir.exists() and not out_dir.is_dir():
        raise BatchError(f"--out {out}: is {'a file' if out_dir.is_file() else 'not a folder'}; the batch writes "
                         "a folder of reports. Give a folder (new or existing).")
    out_dir.mkdir(parents=True, exist_ok=True)
    # one batch at a time per output folder (a second one waits); an automatic run id never reuses a folder
    with folder_lock(out_dir, what="batch"), contextlib.ExitStack() as stack:
        if auto_id:
            run_id = _unused_run_id(out_dir, run_id)
            run_dir = Path("runs") / run_id
            common["run_dir"] = run_dir.as_posix()
        # the gate's drop limits judge the run's accuracy findings in every view (run_findings reads it)
        (out_dir / run_dir).mkdir(parents=True, exist_ok=True)
        if quality_gate is not None:
            save_run_gate(out_dir / run_dir, quality_gate)
        else:
            (out_dir / run_dir / RUN_GATE_FILE).unlink(missing_ok=True)     # a previous batch's, same run id
        terminal = stack.enter_context(_console.quiet(out_dir / run_dir / "batch.log", enabled=o.quiet))
        console = _console.Console(terminal, enabled=o.progress, width=max(len(t) for t in [*targets, "summary"]))
        log = out_dir / run_dir / "batch.log"
        console.line(f"batch {run_id}: {', '.join(targets)} x {len(stage_list)} stage(s), {min(jobs, len(targets))} "
                     f"at a time; library output goes to {log if o.quiet else 'the terminal (--verbose)'}")
        # 2. a built-in model once, before parallel kernels would each train it
        from ..models.builtin import builtin_model, is_builtin
        if is_builtin(model):
            console.line(f"preparing the built-in {model} model (trained once, then cached)")
            builtin_model(model)
        # 3.-5. a crash from here on still leaves an index.html of this run (write_crash_index), never
        # the previous run's
        target_runs: tuple[TargetRun, ...] = ()
        try:
            # 3. targets
            runner = Runner(out_dir, notebooks, o.kernel, o.timeout, o.progress, scrubber=Scrubber(out_dir),
                            reuse_unchanged=o.reuse, console=console)
            stack.callback(runner.close)        # the warm kernels, after the sweep and the summary
            plans = {t: {**common, "target": t, "board": boards.get(t, ""),
                         **({"record": os.path.relpath(Path(record).resolve() / t, out_dir)} if record else {}),
                         **dict((target_parameters or {}).get(t, {}))}
                     for t in targets}
            with ThreadPoolExecutor(max_workers=min(jobs, len(targets))) as pool:
                futures = [pool.submit(runner.run_target, t, i, stage_list, plans[t], declared)
                           for i, t in enumerate(targets)]
                target_runs = tuple(f.result() for f in futures)
            # 4. the sweep across the targets (its own quantizations: independent of the stages' outputs)
            sweep_stage = None
            if o.sweep:
                sweep_params = {**common, "targets": ",".join(targets), "plots_dir": "sweep",
                                "output": "sweep/sweep.json", "progress": False}
                if isinstance(gate, (str, os.PathLike)):        # the batch's gate file is the sweep's gate too
                    sweep_params["gate"] = os.path.relpath(Path(gate).resolve(), out_dir)
                sweep_stage = runner.run_sweep(sweep_params, declared[SWEEP_NOTEBOOK])
            # 5. summary across targets, gate, index
            summary = summarize_run(out_dir / run_dir, targets=targets)
            gate_report = check_quality_gate(summary, quality_gate) if quality_gate is not None else None
            summary_stage = runner.run_summary(len(targets), {"run_dir": run_dir.as_posix(),
                                                              "targets": ",".join(targets)},
                                               declared[SUMMARY_NOTEBOOK])
            result = BatchResult(
                out_dir=str(out_dir), run_id=run_id, run_dir=run_dir.as_posix(), targets=target_runs,
                index="index.html", summary_json="summary.json", summary_csv="summary.csv",
                summary_report=summary_stage.html if summary_stage else None, gate=gate_report,
                seconds=round(time.perf_counter() - started, 1),
                notes=(() if summary_stage is None or summary_stage.status == "ok"
                       else (f"summary notebook failed: {summary_stage.error}",)), sweep=sweep_stage)
            write_summary(out_dir, result, summary)
            write_index(out_dir, result, summary, summary_stage)
            refresh_verdicts(out_dir, result, summary)
            return result
        except BaseException as exc:
            try:
                write_crash_index(out_dir, run_id, run_dir.as_posix(), exc, target_runs)
            except Exception:  # noqa: BLE001 - the original error is the one to raise
                pass
            raise


def _unused_run_id(out_dir: Path, run_id: str) -> str:
    """``run_id``, or ``run_id-2``, ``-3``... when a run folder of that name exists (two batches in one second)."""
    candidate, k = run_id, 1
    while (out_dir / "runs" / candidate).exists():
        k += 1
        candidate = f"{run_id}-{k}"
    (out_dir / "runs" / candidate).mkdir(parents=True)
    return candidate


# -- validation helpers ------------------------------------------------------------------------
def _targets(targets: Sequence[str] | str) -> list[str]:
    names = [t.strip() for t in targets.split(",")] if isinstance(targets, str) else list(targets)
    names = [t for t in names if t]
    if not names:
        raise BatchError("no targets given; use some of " + ", ".join(TARGETS) + ".")
    from ..targets import target_ids
    for t in names:
        check_choice("target", t, target_ids(), error=BatchError)
    return list(dict.fromkeys(names))


def _stages(stages: Sequence[str] | str | None) -> list[str]:
    if stages is None:
        return list(STAGE_NOTEBOOKS)
    names = [s.strip() for s in stages.split(",")] if isinstance(stages, str) else list(stages)
    resolved = []
    for s in names:
        s = STAGE_NAMES.get(s, s)
        s = next((n for n in STAGE_NOTEBOOKS if n.split("_")[0] == s), s)   # "20" -> 20_quantize
        check_choice("stage", s, [*STAGE_NAMES, *STAGE_NOTEBOOKS], error=BatchError)
        resolved.append(s)
    return [s for s in STAGE_NOTEBOOKS if s in resolved]


def _boards(board: str | Mapping[str, str] | None, targets: list[str]) -> dict[str, str]:
    if not board:
        return {}
    if isinstance(board, str):
        return {t: board for t in targets}
    for t in board:
        check_choice("target", t, targets, error=BatchError)
    return dict(board)


def _relative(value: str, out_dir: Path) -> str:
    """A path the user gave, made relative to the kernels' working folder (``out``)."""
    from ..models.builtin import is_builtin
    if is_builtin(value) or not Path(value).exists():
        return value
    return os.path.relpath(Path(value).resolve(), out_dir)
