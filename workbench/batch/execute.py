"""Notebook execution with papermill: one stage notebook per call, a failed cell marked, and the
executed notebook exported to HTML (with code, and code-hidden for sharing)."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._io import atomic_write_json, atomic_write_text
from .._results import Result
from ..runs import RunFolder
from ..vocab import SUMMARY_NOTEBOOK
from .export import Scrubber, export_html

KERNEL = "npu-workbench"
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

    def summary(self) -> str:
        return f"{self.target}/{self.stage}: {self.status} in {self.seconds:.1f} s" + (
            f" ({self.error})" if self.error else "")


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
    """Executes notebooks and exports them; one progress bar per target."""

    def __init__(self, out_dir: Path, notebooks: Path, kernel: str, timeout: float | None, progress: bool,
                 scrubber: Scrubber) -> None:
        self.out_dir, self.notebooks, self.kernel, self.timeout = out_dir, notebooks, kernel, timeout
        self.progress, self.scrub = progress, scrubber
        self.bars: list[Any] = []
        self.lock = threading.Lock()

    def _bar(self, desc: str, total: int, position: int) -> Any:
        from tqdm.auto import tqdm
        bar = tqdm(total=total, desc=desc, position=position, leave=True, disable=not self.progress,
                   unit="stage", file=sys.stderr, dynamic_ncols=True)
        with self.lock:
            self.bars.append(bar)
        return bar

    def close(self) -> None:
        for bar in self.bars:
            bar.close()

    def run_target(self, target: str, position: int, stages: list[str], params: dict[str, Any],
                   declared: dict[str, set[str]]) -> TargetRun:
        folder = self.out_dir / params["run_dir"] / target
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "error.json").unlink(missing_ok=True)
        bar = self._bar(target, len(stages), position)
        done: list[StageRun] = []
        for stage in stages:
            bar.set_postfix_str(stage)
            result = self._execute(target, stage, {k: v for k, v in params.items() if k in declared[stage]})
            done.append(result)
            bar.update(1)
            if result.status != "ok":
                atomic_write_json(folder / "error.json", {"stage": stage, "message": result.error,
                                                          "cell": result.failed_cell, "notebook": result.notebook})
                bar.set_postfix_str(f"FAILED at {stage}")
                break
        else:
            bar.set_postfix_str("done")
        manifest = RunFolder(self.out_dir / params["run_dir"], target=target,
                             model=params.get("model", "reference"), dataset=params.get("dataset", ""))
        run_manifest = manifest.manifest()
        atomic_write_json(folder / "manifest.json", run_manifest.to_dict())
        for stage_run in done:
            self._export(stage_run, run_manifest._repr_html_())
        failed = next((s for s in done if s.status != "ok"), None)
        return TargetRun(target=target, status="failed" if failed else "ok", stages=tuple(done),
                         failed_stage=failed.stage if failed else None, error=failed.error if failed else None)

    def run_summary(self, position: int, params: dict[str, Any], declared: set[str]) -> StageRun | None:
        bar = self._bar("summary", 1, position)
        result = self._execute("summary", SUMMARY_NOTEBOOK, {k: v for k, v in params.items() if k in declared})
        bar.update(1)
        bar.close()
        self._export(result, "")
        return result

    def _execute(self, target: str, stage: str, params: dict[str, Any]) -> StageRun:
        import papermill
        from papermill.exceptions import PapermillExecutionError
        rel = f"{target}/{stage}"
        output = self.out_dir / f"{rel}.ipynb"
        output.parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        error, cell = None, None
        try:
            # The kernel's working folder goes through nbclient's `resources`, not papermill's `cwd`:
            # papermill's `cwd` is a process-wide chdir, which races between the --jobs threads.
            papermill.execute_notebook(
                str(self.notebooks / f"{stage}.ipynb"), str(output), parameters=params, kernel_name=self.kernel,
                resources={"metadata": {"path": str(self.out_dir)}}, progress_bar=False, log_output=False,
                execution_timeout=self.timeout)
        except PapermillExecutionError as exc:
            error, cell = self.scrub.text(f"{exc.ename}: {exc.evalue}"), exc.exec_count
        except Exception as exc:  # a kernel that dies or cannot start: still a failed stage, not a crash
            error = self.scrub.text(f"{type(exc).__name__}: {exc}")
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

