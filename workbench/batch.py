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

Then ``90_summary`` across targets, ``summary.json``, ``summary.csv``, the
quality gate, and ``index.html`` linking everything.
"""

from __future__ import annotations

import csv
import io
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ._io import atomic_write_json, atomic_write_text, cache_dir
from ._results import Result
from ._validation import check_choice, check_positive_int, check_range
from .errors import BatchError
from .runs import TARGETS, RunFolder, RunSummary, new_run_id, summarize_run

KERNEL = "npu-workbench"
STAGE_NOTEBOOKS = ("10_calibration_set", "20_quantize", "30_accuracy_by_condition", "40_op_placement",
                   "50_board_timing")
SUMMARY_NOTEBOOK = "90_summary"
STAGE_NAMES = dict(zip(("calibration", "quantize", "accuracy", "placement", "timing"), STAGE_NOTEBOOKS))
NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
EXIT_OK, EXIT_FAILED = 0, 1


# -- results -----------------------------------------------------------------------------------
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
    error: Optional[str] = None
    failed_cell: Optional[int] = None

    def summary(self) -> str:
        return f"{self.target}/{self.stage}: {self.status} in {self.seconds:.1f} s" + (
            f" ({self.error})" if self.error else "")


@dataclass(frozen=True)
class TargetRun(Result):
    target: str
    status: str                         # ok | failed
    stages: tuple[StageRun, ...]
    failed_stage: Optional[str] = None
    error: Optional[str] = None

    def summary(self) -> str:
        if self.status == "ok":
            return f"{self.target}: {len(self.stages)} stage(s) ok"
        return f"{self.target}: FAILED at {self.failed_stage}: {self.error}"


@dataclass(frozen=True)
class BatchResult(Result):
    """What ``run_batch`` produced; paths are relative to ``out_dir`` except ``out_dir`` itself."""

    out_dir: str
    run_id: str
    run_dir: str
    targets: tuple[TargetRun, ...]
    index: str
    summary_json: str
    summary_csv: str
    summary_report: Optional[str] = None
    gate: Optional[GateReport] = None
    seconds: float = 0.0
    notes: tuple[str, ...] = ()

    @property
    def failed(self) -> tuple[TargetRun, ...]:
        return tuple(t for t in self.targets if t.status != "ok")

    @property
    def ok(self) -> bool:
        return not self.failed and (self.gate is None or self.gate.passed)

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.ok else EXIT_FAILED

    @property
    def index_path(self) -> Path:
        return Path(self.out_dir) / self.index

    def summary(self) -> str:
        parts = [f"batch {self.run_id}: {len(self.targets) - len(self.failed)}/{len(self.targets)} target(s) ok"]
        parts += [t.summary() for t in self.failed]
        if self.gate is not None:
            parts.append(self.gate.summary())
        return "; ".join(parts) + f" ({self.seconds:.0f} s)"

    def _repr_html_(self) -> str:
        from . import display
        rows = [(t.target, t.status, t.failed_stage or "", t.error or "") for t in self.targets]
        styles = [display.BAD_STYLE if t.status != "ok" else "" for t in self.targets]
        html = display.heading("Batch") + display.paragraph(self.summary()) + display.table(
            ("target", "status", "failed stage", "error"), rows, row_styles=styles)
        return html + (self.gate._repr_html_() if self.gate is not None else "")


# -- the verb ----------------------------------------------------------------------------------
def run_batch(targets: Sequence[str] | str = TARGETS, *, model: str = "reference",
              dataset: str = "digits-conditions", out: str | os.PathLike = "reports",
              gate: str | os.PathLike | QualityGate | None = None, jobs: int = 1, run_id: str | None = None,
              recipe: str = "auto", calibration_strategy: str = "stratified", calibration_size: int = 200,
              seed: int = 0, board: str | Mapping[str, str] | None = None, timing_runs: int = 100,
              timing_warmup: int = 10, stages: Sequence[str] | None = None,
              parameters: Mapping[str, Any] | None = None,
              target_parameters: Mapping[str, Mapping[str, Any]] | None = None,
              kernel: str = KERNEL, notebooks_dir: str | os.PathLike | None = None,
              timeout: float | None = None, progress: bool = True) -> BatchResult:
    """Execute the stage notebooks per target and write shareable reports to ``out``.

    Parameters
    ----------
    targets : target ids (a list or ``"imx8mp,imx93"``).
    model, dataset : ``"reference"`` or a model path; a dataset name or path.
    out : the output folder: ``index.html``, ``summary.json``, ``summary.csv``,
        ``<target>/<NN_stage>.{ipynb,html,shared.html}`` and ``runs/<run_id>/<target>/``.
    gate : a gate YAML file (or a :class:`~workbench.gate.QualityGate`) checked at the end.
    jobs : targets executed at the same time.
    board : a board name in ``boards.yaml`` for every target, or ``{target: board}``;
        None times on the host CPU (labelled "host CPU (not an NPU)").
    stages : a subset of ``calibration, quantize, accuracy, placement, timing`` (or
        notebook names); later stages compute what an earlier, skipped one would save.
    parameters : extra notebook parameters for every target; ``target_parameters``
        ``{target: {name: value}}`` for one target only.
    """
    started = time.perf_counter()
    # 1. validate everything before the first kernel starts
    targets = _targets(targets)
    check_positive_int("jobs", jobs, error=BatchError)
    notebooks = Path(notebooks_dir) if notebooks_dir else NOTEBOOKS_DIR
    stage_list = _stages(stages)
    for name in (*stage_list, SUMMARY_NOTEBOOK):
        if not (notebooks / f"{name}.ipynb").is_file():
            raise BatchError(f"{notebooks / (name + '.ipynb')}: stage notebook missing; run from a checkout of "
                             "npu-workbench or pass notebooks_dir=.")
    quality_gate = gate if isinstance(gate, QualityGate) or gate is None else load_gate(gate)
    boards = _boards(board, targets)
    out_dir = Path(out).resolve()
    run_id = run_id or new_run_id()
    if not re.fullmatch(r"[A-Za-z0-9._-]+", run_id):
        raise BatchError(f"`run_id` must use letters, digits, '.', '_' or '-'. Got {run_id!r} instead.")
    run_dir = Path("runs") / run_id
    common = {"model": _relative(model, out_dir), "dataset": _relative(dataset, out_dir), "recipe": recipe,
              "calibration_strategy": calibration_strategy, "calibration_size": calibration_size, "seed": seed,
              "timing_runs": timing_runs, "timing_warmup": timing_warmup, "run_dir": run_dir.as_posix(),
              **dict(parameters or {})}
    declared = {name: _declared(notebooks / f"{name}.ipynb") for name in (*stage_list, SUMMARY_NOTEBOOK)}
    known = set().union(*declared.values())
    for extra in [*(parameters or {}), *(k for p in (target_parameters or {}).values() for k in p)]:
        check_choice("parameter", extra, sorted(known), error=BatchError)
    for t in target_parameters or {}:
        check_choice("target", t, targets, error=BatchError)
    out_dir.mkdir(parents=True, exist_ok=True)
    # 2. the reference model once, before parallel kernels would each train it
    if model == "reference":
        from .models.reference import reference_model
        reference_model()
    # 3. targets
    runner = _Runner(out_dir, notebooks, kernel, timeout, progress, scrubber=_Scrubber(out_dir))
    plans = {t: {**common, "target": t, "board": boards.get(t, ""), **dict((target_parameters or {}).get(t, {}))}
             for t in targets}
    with ThreadPoolExecutor(max_workers=min(jobs, len(targets))) as pool:
        futures = [pool.submit(runner.run_target, t, i, stage_list, plans[t], declared)
                   for i, t in enumerate(targets)]
        target_runs = tuple(f.result() for f in futures)
    runner.close()
    # 4. summary across targets, gate, index
    summary = summarize_run(out_dir / run_dir, targets=targets)
    gate_report = check_quality_gate(summary, quality_gate) if quality_gate is not None else None
    summary_stage = runner.run_summary(len(targets), {"run_dir": run_dir.as_posix(), "targets": ",".join(targets)},
                                       declared[SUMMARY_NOTEBOOK])
    result = BatchResult(
        out_dir=str(out_dir), run_id=run_id, run_dir=run_dir.as_posix(), targets=target_runs,
        index="index.html", summary_json="summary.json", summary_csv="summary.csv",
        summary_report=summary_stage.html if summary_stage else None, gate=gate_report,
        seconds=round(time.perf_counter() - started, 1),
        notes=(() if summary_stage is None or summary_stage.status == "ok"
               else (f"summary notebook failed: {summary_stage.error}",)))
    _write_summary(out_dir, result, summary)
    _write_index(out_dir, result, summary, summary_stage)
    return result


# -- validation helpers ------------------------------------------------------------------------
def _targets(targets: Sequence[str] | str) -> list[str]:
    names = [t.strip() for t in targets.split(",")] if isinstance(targets, str) else list(targets)
    names = [t for t in names if t]
    if not names:
        raise BatchError("no targets given; use some of " + ", ".join(TARGETS) + ".")
    for t in names:
        check_choice("target", t, TARGETS, error=BatchError)
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
    if value == "reference" or not Path(value).exists():
        return value
    return os.path.relpath(Path(value).resolve(), out_dir)


def _declared(path: Path) -> set[str]:
    import papermill
    return set(papermill.inspect_notebook(str(path)))


# -- execution ---------------------------------------------------------------------------------
class _Runner:
    """Executes notebooks and exports them; one progress bar per target."""

    def __init__(self, out_dir: Path, notebooks: Path, kernel: str, timeout: float | None, progress: bool,
                 scrubber: _Scrubber) -> None:
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


# -- HTML export -------------------------------------------------------------------------------
class _Scrubber:
    """Replaces local absolute paths (output folder, cache, checkout, venv, home, temp) in text."""

    def __init__(self, out_dir: Path) -> None:
        repo = Path(__file__).resolve().parent.parent
        pairs = [(out_dir, "."), (Path(cache_dir()).resolve(), "$NPU_WORKBENCH_CACHE"),
                 (Path(sys.prefix).resolve(), "<venv>"), (Path(sys.base_prefix).resolve(), "<python>"),
                 (repo, "<npu-workbench>"), (Path.home().resolve(), "~"),
                 (Path(tempfile.gettempdir()).resolve(), "<tmp>")]
        raw = [(str(p), r) for p, r in pairs] + [(os.path.realpath(str(p)), r) for p, r in pairs]
        raw += [(str(p).replace(str(Path.home()), "~", 1), r) for p, r in pairs if str(p).startswith(str(Path.home()))]
        self.pairs = sorted({p: r for p, r in raw if len(p) > 1}.items(), key=lambda pr: -len(pr[0]))

    def text(self, text: str) -> str:
        for prefix, replacement in self.pairs:
            text = text.replace(prefix + "/", replacement + "/").replace(prefix, replacement)
        return text

    def notebook(self, nb: Any) -> Any:
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            for out in cell.get("outputs", []):
                if "text" in out:
                    out["text"] = self.text(out["text"])
                if "traceback" in out:
                    out["traceback"] = [self.text(line) for line in out["traceback"]]
                if "evalue" in out:
                    out["evalue"] = self.text(out["evalue"])
                for mime in ("text/plain", "text/html", "text/markdown"):
                    if mime in out.get("data", {}):
                        value = out["data"][mime]
                        out["data"][mime] = ([self.text(v) for v in value] if isinstance(value, list)
                                             else self.text(value))
        return nb


_EXTERNAL_TAG = re.compile(r"<(script|link|iframe)\b[^>]*\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//[^>]*>"
                           r"(?:\s*</\1>)?", re.IGNORECASE)
_EXTERNAL_ANCHOR = re.compile(r"<a\b[^>]*\bhref\s*=\s*[\"']?(?:https?:)?//[^>]*>(.*?)</a>",
                              re.IGNORECASE | re.DOTALL)
_SCRIPT = re.compile(r"<script\b.*?</script>", re.IGNORECASE | re.DOTALL)


def make_self_contained(html: str) -> str:
    """Drop scripts and external references (``src``/``href`` to http(s)); keep link texts."""
    html = _EXTERNAL_TAG.sub("", html)
    html = _EXTERNAL_ANCHOR.sub(r"\1", html)
    return _SCRIPT.sub("", html)


def external_references(html: str) -> list[str]:
    """``src``/``href`` values that point outside the report (should be empty)."""
    return re.findall(r"\b(?:src|href)\s*=\s*[\"']?((?:https?:)?//[^\"' >]+)", html, re.IGNORECASE)


def export_html(notebook: str | os.PathLike, *, hide_code: bool = False, header: str = "",
                title: str | None = None, scrubber: _Scrubber | None = None) -> str:
    """An executed notebook as one self-contained HTML page (``hide_code``: outputs only)."""
    import nbformat
    from nbconvert import HTMLExporter
    from pygments.formatters import HtmlFormatter
    from . import display
    nb = nbformat.read(str(notebook), as_version=4)
    if scrubber is not None:
        nb = scrubber.notebook(nb)
    exporter = HTMLExporter(template_name="basic", embed_images=True, exclude_input=hide_code,
                            exclude_input_prompt=hide_code, exclude_output_prompt=hide_code)
    body, _ = exporter.from_notebook_node(nb)
    css = HtmlFormatter(style="default").get_style_defs(".highlight")
    page = display.page(title or Path(notebook).stem, header + make_self_contained(body), extra_css=css)
    left = external_references(page)
    if left:
        raise BatchError(f"{notebook}: the HTML export still references {left[:3]}; report this as a bug.")
    return page


# -- quality gate ------------------------------------------------------------------------------
LATENCY_SOURCES = ("measured", "board", "vela")
LATENCY_STATISTICS = ("p50", "p99")
GATE_KEYS = {"accuracy": ("max_drop_pp", "per_condition"), "placement": ("min_npu_share", "max_cpu_islands"),
             "latency": ("max_ms", "statistic", "source")}


@dataclass(frozen=True)
class QualityGate(Result):
    """Limits a batch must meet (a YAML file, see ``gate.yaml``).

    ``max_drop_pp``: largest allowed FP32 -> INT8 top-1 drop in percentage points for every
    condition, ``max_drop_pp_by_condition`` per condition (overrides it); ``min_npu_share``
    per target (``"*"`` for all); ``max_cpu_islands``; ``max_latency_ms`` of ``latency_statistic``
    (p50/p99) taken from ``latency_source``: ``measured`` (what the timing stage measured, on a
    board or, labelled, on the host CPU), ``board`` (board measurements only; host timings are
    not checked) or ``vela`` (the Vela estimate, imx93 only).
    """

    source: str = ""
    max_drop_pp: Optional[float] = None
    max_drop_pp_by_condition: dict[str, float] = field(default_factory=dict)
    min_npu_share: dict[str, float] = field(default_factory=dict)
    max_cpu_islands: Optional[int] = None
    max_latency_ms: Optional[float] = None
    latency_statistic: str = "p50"
    latency_source: str = "measured"

    def __post_init__(self) -> None:
        where = f"{self.source}: " if self.source else ""
        try:
            if self.max_drop_pp is not None:
                check_range("accuracy.max_drop_pp", self.max_drop_pp, 0.0, 100.0, error=BatchError)
            for c, v in self.max_drop_pp_by_condition.items():
                check_range(f"accuracy.per_condition.{c}", v, 0.0, 100.0, error=BatchError)
            for t, v in self.min_npu_share.items():
                check_choice("placement.min_npu_share target", t, ("*", *TARGETS), error=BatchError)
                check_range(f"placement.min_npu_share.{t}", v, 0.0, 1.0, error=BatchError)
            if self.max_cpu_islands is not None and (isinstance(self.max_cpu_islands, bool) or
                                                     not isinstance(self.max_cpu_islands, int)
                                                     or self.max_cpu_islands < 0):
                raise BatchError(f"`placement.max_cpu_islands` must be an integer >= 0. "
                                 f"Got {self.max_cpu_islands!r} instead.")
            if self.max_latency_ms is not None:
                check_range("latency.max_ms", self.max_latency_ms, 0.0, None, error=BatchError)
            check_choice("latency.statistic", self.latency_statistic, LATENCY_STATISTICS, error=BatchError)
            check_choice("latency.source", self.latency_source, LATENCY_SOURCES, error=BatchError)
        except BatchError as exc:
            raise BatchError(f"{where}{exc}") from None

    def share_for(self, target: str) -> Optional[float]:
        return self.min_npu_share.get(target, self.min_npu_share.get("*"))

    def summary(self) -> str:
        parts = []
        if self.max_drop_pp is not None or self.max_drop_pp_by_condition:
            parts.append(f"accuracy drop <= {self.max_drop_pp} pp"
                         + (f" ({self.max_drop_pp_by_condition})" if self.max_drop_pp_by_condition else ""))
        if self.min_npu_share:
            parts.append(f"NPU share >= {self.min_npu_share}")
        if self.max_cpu_islands is not None:
            parts.append(f"CPU islands <= {self.max_cpu_islands}")
        if self.max_latency_ms is not None:
            parts.append(f"{self.latency_statistic} latency ({self.latency_source}) <= {self.max_latency_ms} ms")
        return "gate: " + ("; ".join(parts) or "no limits")


def load_gate(path: str | os.PathLike) -> QualityGate:
    """Read a gate YAML file (sections ``accuracy``, ``placement``, ``latency``)."""
    import yaml
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise BatchError(f"{path}: no such gate file; copy gate.yaml from the project root and edit it.") from None
    except yaml.YAMLError as exc:
        raise BatchError(f"{path}: not valid YAML ({exc}).") from None
    if not isinstance(data, dict):
        raise BatchError(f"{path}: a gate file is a mapping with sections accuracy, placement, latency.")
    for section, body in data.items():
        if section not in GATE_KEYS:
            raise BatchError(f"{path}: unknown section {section!r}; sections are {', '.join(GATE_KEYS)}.")
        if not isinstance(body, dict):
            raise BatchError(f"{path}: section {section!r} must be a mapping of limits.")
        for key in body:
            if key not in GATE_KEYS[section]:
                raise BatchError(f"{path}: unknown key {section}.{key}; {section} takes "
                                 f"{', '.join(GATE_KEYS[section])}.")
    acc, place, lat = (data.get(k) or {} for k in ("accuracy", "placement", "latency"))
    share = place.get("min_npu_share")
    shares = {} if share is None else ({"*": share} if not isinstance(share, dict) else dict(share))
    try:
        return QualityGate(
            source=path.name, max_drop_pp=_num(acc.get("max_drop_pp")),
            max_drop_pp_by_condition={str(k): float(v) for k, v in (acc.get("per_condition") or {}).items()},
            min_npu_share={str(k): float(v) for k, v in shares.items()},
            max_cpu_islands=place.get("max_cpu_islands"), max_latency_ms=_num(lat.get("max_ms")),
            latency_statistic=str(lat.get("statistic", "p50")), latency_source=str(lat.get("source", "measured")))
    except (TypeError, ValueError) as exc:
        raise BatchError(f"{path}: a limit is not a number ({exc}).") from None


def _num(value: Any) -> Optional[float]:
    return None if value is None else float(value)


@dataclass(frozen=True)
class GateViolation(Result):
    target: str
    check: str                      # accuracy.max_drop_pp | placement.min_npu_share | ...
    reason: str
    condition: Optional[str] = None
    limit: Optional[float] = None
    value: Optional[float] = None

    def summary(self) -> str:
        return self.reason


@dataclass(frozen=True)
class GateReport(Result):
    gate: QualityGate
    passed: bool
    violations: tuple[GateViolation, ...] = ()
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        if self.passed:
            return f"quality gate passed ({self.gate.summary()})"
        return f"quality gate FAILED: {len(self.violations)} violation(s)"

    def _repr_html_(self) -> str:
        from . import display
        rows = [(v.target, v.check, v.reason) for v in self.violations]
        return (display.heading("Quality gate") + display.paragraph(self.summary())
                + display.paragraph(self.gate.summary())
                + (display.table(("target", "check", "reason"), rows,
                                 row_styles=[display.BAD_STYLE] * len(rows)) if rows else "")
                + "".join(display.paragraph(n) for n in self.notes))


def check_quality_gate(summary: RunSummary, gate: QualityGate) -> GateReport:
    """Check every target of ``summary`` against ``gate``; every violation, not the first."""
    out: list[GateViolation] = []
    notes: list[str] = []

    def add(target: str, check: str, reason: str, **kw: Any) -> None:
        out.append(GateViolation(target=target, check=check, reason=f"{target}: {reason}", **kw))

    for t in summary.targets:
        if t.status == "failed":
            add(t.target, "target.failed", f"the run failed at {t.failed_stage or '?'} ({t.error}); nothing to check")
            continue
        if gate.max_drop_pp is not None or gate.max_drop_pp_by_condition:
            if not t.accuracy:
                add(t.target, "accuracy.max_drop_pp", "no accuracy results (the accuracy stage did not run)")
            for a in t.accuracy:
                limit = gate.max_drop_pp_by_condition.get(a.condition, gate.max_drop_pp)
                if limit is None or a.drop_pp is None:
                    continue
                if a.drop_pp > limit:
                    add(t.target, "accuracy.max_drop_pp", f"accuracy drop under {a.condition} is {a.drop_pp:.2f} pp "
                        f"(FP32 {a.fp32:.2%} -> INT8 {a.int8:.2%}), above the limit of {limit:g} pp",
                        condition=a.condition, limit=limit, value=a.drop_pp)
        share = gate.share_for(t.target)
        if share is not None:
            if t.npu_share is None:
                add(t.target, "placement.min_npu_share", "no placement result (the placement stage did not run)")
            elif t.npu_share < share:
                add(t.target, "placement.min_npu_share", f"NPU op share is {t.npu_share:.1%} ({t.npu_ops}/"
                    f"{(t.npu_ops or 0) + (t.cpu_ops or 0)} ops), below the minimum of {share:.1%}",
                    limit=share, value=t.npu_share)
        if gate.max_cpu_islands is not None:
            if t.cpu_islands is None:
                add(t.target, "placement.max_cpu_islands", "no placement result (the placement stage did not run)")
            elif t.cpu_islands > gate.max_cpu_islands:
                add(t.target, "placement.max_cpu_islands", f"{t.cpu_islands} CPU island(s) between NPU segments, "
                    f"above the maximum of {gate.max_cpu_islands}", limit=gate.max_cpu_islands, value=t.cpu_islands)
        if gate.max_latency_ms is not None:
            _check_latency(t, gate, add, notes)
    return GateReport(gate=gate, passed=not out, violations=tuple(out), notes=tuple(notes))


def _check_latency(t: Any, gate: QualityGate, add: Any, notes: list[str]) -> None:
    limit = gate.max_latency_ms
    if gate.latency_source == "vela":
        if t.target != "imx93":
            notes.append(f"{t.target}: latency not checked (a Vela estimate exists for imx93 only)")
        elif t.vela_estimate_ms is None:
            add(t.target, "latency.max_ms", "no Vela estimate (the placement stage did not run)")
        elif t.vela_estimate_ms > limit:
            add(t.target, "latency.max_ms", f"Vela-estimated latency is {t.vela_estimate_ms:.3f} ms, above the limit "
                f"of {limit:g} ms (a compiler estimate, not a board measurement)", limit=limit,
                value=t.vela_estimate_ms)
        return
    value = t.latency_ms if gate.latency_statistic == "p50" else t.latency_p99_ms
    if t.latency_kind is None or value is None:
        add(t.target, "latency.max_ms", f"no {gate.latency_statistic} latency (the timing stage did not run)")
        return
    on_board = t.latency_kind.startswith("measured on board")
    if gate.latency_source == "board" and not on_board:
        notes.append(f"{t.target}: latency not checked (timed on the {t.latency_kind}; the gate asks for a board)")
        return
    if value > limit:
        add(t.target, "latency.max_ms", f"{gate.latency_statistic} latency is {value:.3f} ms ({t.latency_kind}), "
            f"above the limit of {limit:g} ms", limit=limit, value=value)


# -- summary files and index -------------------------------------------------------------------
def _write_summary(out_dir: Path, result: BatchResult, summary: RunSummary) -> None:
    runs = {t.target: t for t in result.targets}
    data = {"run_id": result.run_id, "run_dir": result.run_dir, "ok": result.ok, "exit_code": result.exit_code,
            "seconds": result.seconds,
            "targets": {t.target: {**t.to_dict(), "reports": {s.stage: {"html": s.html, "shared_html": s.shared_html,
                                                                         "notebook": s.notebook}
                                                              for s in runs[t.target].stages},
                                   "batch_status": runs[t.target].status}
                        for t in summary.targets},
            "gate": result.gate.to_dict() if result.gate is not None else None, "notes": list(result.notes)}
    atomic_write_json(out_dir / result.summary_json, data)
    rows = summary.csv_rows()
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["target"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(out_dir / result.summary_csv, buf.getvalue())


def _write_index(out_dir: Path, result: BatchResult, summary: RunSummary, summary_stage: StageRun | None) -> None:
    from . import display
    rows, styles = [], []
    for t in result.targets:
        links = " ".join(
            f"{display.esc(s.stage)}{' (FAILED)' if s.status != 'ok' else ''}: "
            f"{display.link(s.shared_html, 'report')} · {display.link(s.html, 'with code')} · "
            f"{display.link(s.notebook, 'notebook')}<br/>" for s in t.stages)
        status = "ok" if t.status == "ok" else f"FAILED at {display.esc(t.failed_stage)}"
        rows.append((display.esc(t.target), status, display.esc(t.error or ""), links))
        styles.append(display.BAD_STYLE if t.status != "ok" else display.GOOD_STYLE)
    body = [display.heading(f"npu-workbench batch {result.run_id}", 2),
            display.paragraph(result.summary()),
            display.raw_table(("target", "status", "why", "reports"), rows, row_styles=styles, caption="Targets")]
    if summary_stage is not None:
        body.append(display.paragraph("Across targets:") + display.link(summary_stage.shared_html, "summary report")
                    + " · " + display.link(summary_stage.html, "with code"))
    body.append(display.link(result.summary_json, "summary.json") + " · "
                + display.link(result.summary_csv, "summary.csv"))
    if result.gate is not None:
        body.append(result.gate._repr_html_())
    body.append(summary._repr_html_())
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        ax = summary.plot()
        body.append(display.figure_html(ax.figure, alt="accuracy per condition and target"))
        plt.close(ax.figure)
    except Exception as exc:  # a plot must not cost the index
        body.append(display.paragraph(f"(no plot: {exc})"))
    scrub = _Scrubber(out_dir)
    html = display.page(f"npu-workbench batch {result.run_id}", scrub.text("\n".join(body)))
    atomic_write_text(out_dir / result.index, make_self_contained(html))
