"""``BatchResult``: what a batch produced (its own module: the summary writers read it, the verb makes it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._results import Result
from ..evaluate.gate import GateResult
from .execute import StageRun, TargetRun

EXIT_OK, EXIT_FAILED = 0, 1


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
    summary_report: str | None = None
    gate: GateResult | None = None
    seconds: float = 0.0
    notes: tuple[str, ...] = ()
    sweep: StageRun | None = None       # the 60_sweep execution (``sweep=True``), else None

    @property
    def failed(self) -> tuple[TargetRun, ...]:
        return tuple(t for t in self.targets if t.status != "ok")

    @property
    def ok(self) -> bool:
        return (not self.failed and (self.gate is None or self.gate.passed)
                and (self.sweep is None or self.sweep.status == "ok"))

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.ok else EXIT_FAILED

    @property
    def index_path(self) -> Path:
        return Path(self.out_dir) / self.index

    def summary(self) -> str:
        parts = [f"batch {self.run_id}: {len(self.targets) - len(self.failed)}/{len(self.targets)} target(s) ok"]
        parts += [t.summary() for t in self.failed]
        if self.sweep is not None and self.sweep.status != "ok":
            parts.append(f"sweep FAILED: {self.sweep.error}")
        if self.gate is not None:
            parts.append(self.gate.summary())
        return "; ".join(parts) + f" ({self.seconds:.0f} s)"

    def _repr_html_(self) -> str:
        from .. import display
        rows = [(t.target, t.status, t.failed_stage or "", t.error or "") for t in self.targets]
        styles = [display.BAD_STYLE if t.status != "ok" else "" for t in self.targets]
        html = display.heading("Batch") + display.paragraph(self.summary()) + display.table(
            ("target", "status", "failed stage", "error"), rows, row_styles=styles)
        return html + (self.gate._repr_html_() if self.gate is not None else "")
