"""Notebook execution with papermill: one stage notebook per call, a failed cell marked, and the
executed notebook exported to HTML (with code, and code-hidden for sharing).  Kernels are kept warm
between notebooks (:mod:`workbench.batch.kernels`)."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .._io import atomic_write_json, atomic_write_text, stable_hash
from .._results import Result
from ..runs import RunFolder, StageFailure
from ..vocab import STAGE_NOTEBOOKS, SUMMARY_NOTEBOOK
from . import reuse
from .console import Console
from .export import Scrubber, export_html
from .kernels import FRESH_KERNELS_ENV, KernelPool, warm_kernel_engine

KERNEL = "npu-workbench"
# Seconds nbclient waits for a cell's last output after the kernel replied.  papermill makes a
# miss an error and nbclient's default is 4 s, which a loaded 2-core machine exceeds (seen:
# 40_op_placement failed with "Timeout waiting for IOPub output" at load 15, then passed).
IOPUB_TIMEOUT = 60
#: the sweep notebook ``run_batch(sweep=True)`` executes once across the targets (``<out>/sweep/``)
SWEEP_NOTEBOOK = "60_sweep"
NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"


@dataclass(frozen=True)
class StageRun(Result):
    """One notebook execution: where its outputs are (relative to the output folder)."""

    target: str
    stage: str
    status: str                         # ok | failed
    seconds: float
    notebook: str
    html: str
    shared_html: str
    error: str | None = None
    failed_cell: int | None = None
    reused: bool = False                # inputs unchanged since an earlier batch: not executed again
    why: str | None = None              # why it was executed (which inputs changed), when not reused

    def summary(self) -> str:
        how = "reused (inputs unchanged)" if self.reused else f"{self.status} in {self.seconds:.1f} s"
        return f"{self.target}/{self.stage}: {how}" + (f" ({self.error})" if self.error else "")


@dataclass(frozen=True)
class TargetRun(Result):
    target: str
    status: str                         # ok | failed
    stages: tuple[StageRun, ...]
    failed_stage: str | None = None
    error: str | None = None

    def summary(self) -> str:
        if self.status == "ok":
            return f"{self.target}: {len(self.stages)} stage(s) ok"
        return f"{self.target}: FAILED at {self.failed_stage}: {self.error}"



def declared_parameters(path: Path) -> set[str]:
    """The parameter names a notebook's ``parameters`` cell declares."""
    import papermill
    return set(papermill.inspect_notebook(str(path)))


class Runner:
    """Executes notebooks and exports them; one console line per target and stage."""

    def __init__(self, out_dir: Path, notebooks: Path, kernel: str, timeout: float | None, progress: bool,
                 scrubber: Scrubber, reuse_unchanged: bool = True, console: Console | None = None) -> None:
        self.out_dir, self.notebooks, self.kernel, self.timeout = out_dir, notebooks, kernel, timeout
        self.progress, self.scrub, self.reuse_unchanged = progress, scrubber, reuse_unchanged
        self.console = console or Console(sys.stderr, enabled=progress)
        self.kernels = KernelPool(kernel, out_dir, fresh=os.environ.get(FRESH_KERNELS_ENV, "") not in ("", "0"))

    def close(self) -> None:
        """Shut the warm kernels down."""
        self.kernels.close()

    def run_target(self, target: str, position: int, stages: list[str], params: dict[str, Any],
                   declared: dict[str, set[str]]) -> TargetRun:
        folder = self.out_dir / params["run_dir"] / target
        folder.mkdir(parents=True, exist_ok=True)
        (folder / StageFailure.FILE).unlink(missing_ok=True)
        done: list[StageRun] = []
        upstream: list[dict[str, str]] = []          # files each earlier stage wrote: part of the next key
        keys: dict[str, dict[str, str]] = {}
        for stage in stages:
            stage_params = {k: v for k, v in params.items() if k in declared[stage]}
            rel = f"{target}/{stage}.ipynb"
            parts = reuse.key_parts(notebook=self.notebooks / f"{stage}.ipynb", params=stage_params,
                                    kernel=self.kernel, out_dir=self.out_dir, upstream=upstream)
            on_board = stage == STAGE_NOTEBOOKS["timing"] and bool(params.get("board"))
            record = (reuse.reusable(self.out_dir, rel, stable_hash(parts))
                      if self.reuse_unchanged and not on_board else None)
            if record is not None:
                result = StageRun(target=target, stage=stage, status="ok", seconds=0.0, notebook=rel,
                                  html=f"{target}/{stage}.html", shared_html=f"{target}/{stage}.shared.html",
                                  reused=True)
                upstream.append(dict(record.get("outputs", {})))
            else:
                why = ("a board measurement always runs" if on_board else "--rerun" if not self.reuse_unchanged
                       else reuse.why_changed(self.out_dir, rel, parts))
                reuse.forget(self.out_dir, rel)
                before = reuse.snapshot(folder, self.out_dir)
                result = replace(self._execute(target, stage, stage_params), why=why)
                upstream.append(reuse.changed(before, reuse.snapshot(folder, self.out_dir)))
                keys[stage] = parts
            done.append(result)
            self.console.stage(result)
            if result.status != "ok":
                failure = StageFailure(stage=stage, message=result.error, cell=result.failed_cell,
                                       notebook=result.notebook)
                atomic_write_json(folder / StageFailure.FILE, failure.to_dict())
                break
        manifest = RunFolder(self.out_dir / params["run_dir"], target=target,
                             model=params.get("model", "reference"), dataset=params.get("dataset", ""))
        run_manifest = manifest.manifest()
        atomic_write_json(folder / "manifest.json", run_manifest.to_dict())
        for stage_run, outputs in zip(done, upstream):
            if stage_run.reused:
                continue
            self._export(stage_run, run_manifest._repr_html_())
            if stage_run.status == "ok":
                reuse.remember(self.out_dir, stage_run.notebook, parts=keys[stage_run.stage], outputs=outputs,
                               reports=(stage_run.notebook, stage_run.html, stage_run.shared_html),
                               seconds=stage_run.seconds)
        failed = next((s for s in done if s.status != "ok"), None)
        return TargetRun(target=target, status="failed" if failed else "ok", stages=tuple(done),
                         failed_stage=failed.stage if failed else None, error=failed.error if failed else None)

    def run_summary(self, position: int, params: dict[str, Any], declared: set[str]) -> StageRun | None:
        stage_params = {k: v for k, v in params.items() if k in declared}
        rel = f"summary/{SUMMARY_NOTEBOOK}.ipynb"
        runs = reuse.snapshot(self.out_dir / params["run_dir"], self.out_dir)
        parts = reuse.key_parts(notebook=self.notebooks / f"{SUMMARY_NOTEBOOK}.ipynb", params=stage_params,
                                kernel=self.kernel, out_dir=self.out_dir,
                                upstream=[{k: v[0] for k, v in runs.items()}])
        if self.reuse_unchanged and reuse.reusable(self.out_dir, rel, stable_hash(parts)) is not None:
            reused = StageRun(target="summary", stage=SUMMARY_NOTEBOOK, status="ok", seconds=0.0, notebook=rel,
                              html=f"summary/{SUMMARY_NOTEBOOK}.html",
                              shared_html=f"summary/{SUMMARY_NOTEBOOK}.shared.html", reused=True)
            self.console.stage(reused)
            return reused
        why = reuse.why_changed(self.out_dir, rel, parts) if self.reuse_unchanged else "--rerun"
        reuse.forget(self.out_dir, rel)
        result = replace(self._execute("summary", SUMMARY_NOTEBOOK, stage_params), why=why)
        self.console.stage(result)
        self._export(result, "")
        if result.status == "ok":
            reuse.remember(self.out_dir, rel, parts=parts, outputs={},
                           reports=(result.notebook, result.html, result.shared_html), seconds=result.seconds)
        return result

    def run_sweep(self, params: dict[str, Any], declared: set[str]) -> StageRun:
        """The sweep notebook once across the targets, reused like a stage when its inputs did not change.

        Its inputs are the notebook, its parameters, the kernel, the workbench code and tool versions and
        the model, dataset and gate files; not the stages' outputs (a sweep quantizes for itself).  What it
        writes beside its report (``sweep/pareto.png``, ``sweep/sweep.json``) is recorded as its outputs.
        """
        stage_params = {k: v for k, v in params.items() if k in declared}
        rel = f"sweep/{SWEEP_NOTEBOOK}.ipynb"
        parts = reuse.key_parts(notebook=self.notebooks / f"{SWEEP_NOTEBOOK}.ipynb", params=stage_params,
                                kernel=self.kernel, out_dir=self.out_dir, upstream=[])
        if self.reuse_unchanged and reuse.reusable(self.out_dir, rel, stable_hash(parts)) is not None:
            reused = StageRun(target="sweep", stage=SWEEP_NOTEBOOK, status="ok", seconds=0.0, notebook=rel,
                              html=f"sweep/{SWEEP_NOTEBOOK}.html", shared_html=f"sweep/{SWEEP_NOTEBOOK}.shared.html",
                              reused=True)
            self.console.stage(reused)
            return reused
        why = reuse.why_changed(self.out_dir, rel, parts) if self.reuse_unchanged else "--rerun"
        reuse.forget(self.out_dir, rel)
        folder = self.out_dir / "sweep"
        before = reuse.snapshot(folder, self.out_dir)
        result = replace(self._execute("sweep", SWEEP_NOTEBOOK, stage_params), why=why)
        outputs = {k: v for k, v in reuse.changed(before, reuse.snapshot(folder, self.out_dir)).items()
                   if not k.startswith(f"sweep/{SWEEP_NOTEBOOK}.")}      # the reports are recorded as reports
        self.console.stage(result)
        self._export(result, "")
        if result.status == "ok":
            reuse.remember(self.out_dir, rel, parts=parts, outputs=outputs,
                           reports=(result.notebook, result.html, result.shared_html), seconds=result.seconds)
        return result

    def _execute(self, target: str, stage: str, params: dict[str, Any]) -> StageRun:
        import papermill
        from papermill.exceptions import PapermillExecutionError
        rel = f"{target}/{stage}"
        output = self.out_dir / f"{rel}.ipynb"
        output.parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        engine = warm_kernel_engine()

        def execute(km: Any) -> tuple[bool, tuple[str | None, int | None]]:
            # The kernel's working folder is the output folder (where the pool starts it), not papermill's
            # `cwd`: that is a process-wide chdir, which races between the --jobs threads.
            try:
                papermill.execute_notebook(
                    str(self.notebooks / f"{stage}.ipynb"), str(output), parameters=params, kernel_name=self.kernel,
                    engine_name=engine, km=km, progress_bar=False, log_output=False,
                    execution_timeout=self.timeout, iopub_timeout=IOPUB_TIMEOUT)
            except PapermillExecutionError as exc:   # a cell raised: the kernel is fine (reset before reuse)
                return True, (self.scrub.text(f"{exc.ename}: {exc.evalue}"), exc.exec_count)
            except Exception as exc:  # a kernel that dies, hangs or cannot start: a failed stage, a new kernel next
                return False, (self.scrub.text(f"{type(exc).__name__}: {exc}"), None)
            return True, (None, None)

        try:
            error, cell = self.kernels.run(execute)
        except Exception as exc:      # no kernel could be started: still a failed stage, not a crash
            error, cell = self.scrub.text(f"{type(exc).__name__}: {exc}"), None
        if output.is_file():  # the executed notebook is shared too: no absolute path of this machine in it
            atomic_write_text(output, self.scrub.text(output.read_text(encoding="utf-8")))
        return StageRun(target=target, stage=stage, status="failed" if error else "ok",
                        seconds=round(time.perf_counter() - start, 1), notebook=f"{rel}.ipynb",
                        html=f"{rel}.html", shared_html=f"{rel}.shared.html", error=error, failed_cell=cell)

    def _export(self, stage_run: StageRun, manifest_html: str) -> None:
        path = self.out_dir / stage_run.notebook
        if not path.is_file():
            return
        for name, hide_code in ((stage_run.html, False), (stage_run.shared_html, True)):
            html = export_html(path, hide_code=hide_code, header=manifest_html, scrubber=self.scrub,
                               title=f"{stage_run.target} · {stage_run.stage}")
            atomic_write_text(self.out_dir / name, html)

