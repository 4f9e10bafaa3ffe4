"""``workbench diff RUN_A RUN_B``: what changed between two run folders, and did it regress.

Per target present in both runs (``runs/<run-id>/<target>/``, see :mod:`workbench.runs`):

- **what changed**: model, dataset, calibration, recipe and INT8 model hashes, tool
  versions (toolchain) and the board's BSP fingerprint, from each run's manifest;
- **accuracy per condition**: INT8 top-1 of B minus A in percentage points with a 95%
  CI.  The CI treats the two runs as independent samples (normal approximation on the
  two proportions); on the same test images it is conservative (too wide), never too
  narrow;
- **placement per op**: ops whose placement (NPU/CPU) differs, matched by op type and
  occurrence, plus ops only one run has;
- **latency**: B minus A, only when both latencies have the same kind (board, host CPU,
  Vela estimate); otherwise the two kinds are stated and no difference is computed.

A regression is an INT8 accuracy decrease beyond ``max_drop_pp`` under any condition whose 95% CI
excludes zero (a decrease within sampling noise is reported, not called a regression),
an NPU op share decrease beyond ``max_npu_share_drop``, or a latency increase beyond
``max_latency_increase`` (a fraction) of the same kind.  ``workbench diff`` exits 1
when there is one (for CI on pull requests), 2 on bad input.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._results import Result
from .errors import WorkbenchError
from .vocab import TARGETS

Z95 = 1.959963984540054


class DiffError(WorkbenchError):
    """Two runs that cannot be compared (missing folder, no common target)."""


@dataclass(frozen=True)
class FieldChange:
    """One manifest field that differs between the runs."""

    field: str
    a: str
    b: str


@dataclass(frozen=True)
class ConditionDiff:
    """INT8 accuracy of B minus A under one condition (percentage points) with its 95% CI."""

    condition: str
    a: float | None
    b: float | None
    diff_pp: float | None
    ci_low: float | None
    ci_high: float | None
    n_a: int | None
    n_b: int | None
    regression: bool = False


@dataclass(frozen=True)
class OpChange:
    """An op whose placement differs (``a``/``b`` is ``NPU``, ``CPU`` or ``absent``)."""

    op: str
    a: str
    b: str


@dataclass(frozen=True)
class TargetDiff(Result):
    """The comparison of one target."""

    target: str
    changes: tuple[FieldChange, ...]
    accuracy: tuple[ConditionDiff, ...]
    placement: tuple[OpChange, ...]
    npu_share_a: float | None
    npu_share_b: float | None
    cpu_islands_a: int | None
    cpu_islands_b: int | None
    latency_a_ms: float | None
    latency_b_ms: float | None
    latency_kind_a: str
    latency_kind_b: str
    latency_note: str
    regressions: tuple[str, ...]

    def summary(self) -> str:
        changes = [(c.diff_pp, c.condition) for c in self.accuracy if c.diff_pp is not None]
        worst = min(changes, key=lambda change: change[0], default=None)
        acc = "" if worst is None else f"; worst accuracy change {worst[0]:+.2f} pp ({worst[1]})"
        return (f"{self.target}: {len(self.changes)} input(s) changed{acc}; {len(self.placement)} op(s) moved; "
                + (f"REGRESSION: {'; '.join(self.regressions)}" if self.regressions else "no regression"))


@dataclass(frozen=True)
class RunDiff(Result):
    """The comparison of run B against run A, per common target."""

    run_a: str
    run_b: str
    targets: tuple[TargetDiff, ...]
    thresholds: dict[str, float | None]
    only_in_a: tuple[str, ...] = ()
    only_in_b: tuple[str, ...] = ()

    @property
    def regressed(self) -> bool:
        return any(t.regressions for t in self.targets)

    def summary(self) -> str:
        head = f"diff {Path(self.run_a).name} -> {Path(self.run_b).name}: "
        return head + ("REGRESSION" if self.regressed else "no regression") + " (" + "; ".join(
            t.summary() for t in self.targets) + ")"

    def text(self) -> str:
        """The plain-text report ``workbench diff`` prints."""
        out = [f"diff {self.run_a} -> {self.run_b}"]
        if self.only_in_a or self.only_in_b:
            out.append(f"targets only in A: {', '.join(self.only_in_a) or '-'}; only in B: "
                       f"{', '.join(self.only_in_b) or '-'}")
        for t in self.targets:
            out += ["", f"== {t.target}"]
            out.append("what changed:" if t.changes else "what changed: nothing in the manifests")
            out += [f"  {c.field}: {c.a} -> {c.b}" for c in t.changes]
            out.append("INT8 top-1 per condition (B - A, 95% CI):")
            for c in t.accuracy:
                if c.diff_pp is None:
                    out.append(f"  {c.condition:<14} only in {'A' if c.b is None else 'B'}")
                    continue
                out.append(f"  {c.condition:<14} {c.a:.2%} -> {c.b:.2%}  {c.diff_pp:+.2f} pp "
                           f"[{c.ci_low:+.2f}, {c.ci_high:+.2f}]" + ("  REGRESSION" if c.regression else ""))
            share = lambda v: "-" if v is None else f"{v:.0%}"  # noqa: E731
            out.append(f"placement: NPU share {share(t.npu_share_a)} -> {share(t.npu_share_b)}, CPU islands "
                       f"{t.cpu_islands_a if t.cpu_islands_a is not None else '-'} -> "
                       f"{t.cpu_islands_b if t.cpu_islands_b is not None else '-'}")
            out += [f"  {o.op}: {o.a} -> {o.b}" for o in t.placement]
            out.append(f"latency: {t.latency_note}")
            out.append("regressions: " + ("; ".join(t.regressions) if t.regressions else "none"))
        out += ["", self.summary().split(" (")[0]]
        return "\n".join(out)

    def _repr_html_(self) -> str:
        from . import display
        verdict = "REGRESSION" if self.regressed else "no regression"
        parts = [display.heading("Run diff"), display.paragraph(f"{self.run_a} -> {self.run_b}: {verdict}")]
        for t in self.targets:
            parts.append(display.heading(t.target))
            parts.append(display.table(("field", "A", "B"), [(c.field, c.a, c.b) for c in t.changes]
                                       or [("-", "nothing changed", "")], caption="What changed"))
            rows = [(c.condition, "-" if c.a is None else f"{c.a:.2%}", "-" if c.b is None else f"{c.b:.2%}",
                     "-" if c.diff_pp is None else f"{c.diff_pp:+.2f}",
                     "-" if c.ci_low is None else f"{c.ci_low:+.2f}..{c.ci_high:+.2f}") for c in t.accuracy]
            styles = [display.BAD_STYLE if c.regression else "" for c in t.accuracy]
            parts.append(display.table(("condition", "A", "B", "B - A (pp)", "95% CI"), rows, row_styles=styles,
                                       caption="INT8 top-1"))
            parts.append(display.table(("op", "A", "B"), [(o.op, o.a, o.b) for o in t.placement]
                                       or [("-", "no op moved", "")], caption="Placement changes"))
            parts.append(display.paragraph(f"Latency: {t.latency_note}"))
            parts.append(display.paragraph("Regressions: " + ("; ".join(t.regressions) or "none")))
        return "".join(parts)

    def plot(self, ax: Any = None) -> Any:
        """Accuracy change per condition and target with CI whiskers."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 3.2))
        width = 0.8 / max(len(self.targets), 1)
        conds = sorted({c.condition for t in self.targets for c in t.accuracy if c.diff_pp is not None})
        for i, t in enumerate(self.targets):
            rows = {c.condition: (c.diff_pp, c.ci_low, c.ci_high) for c in t.accuracy
                    if c.diff_pp is not None and c.ci_low is not None and c.ci_high is not None}
            xs = [j + i * width for j, c in enumerate(conds) if c in rows]
            ys = [rows[c][0] for c in conds if c in rows]
            err = [[rows[c][0] - rows[c][1] for c in conds if c in rows],
                   [rows[c][2] - rows[c][0] for c in conds if c in rows]]
            ax.bar(xs, ys, width=width, yerr=err, capsize=3, label=t.target)
        ax.axhline(0, color="grey", lw=1)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(conds))], conds, fontsize=10)
        ax.set_ylabel("INT8 top-1, B - A (pp)")
        ax.legend(fontsize=10)
        return ax


# ------------------------------------------------------------------------------------- the verb

def diff_runs(run_a: str | os.PathLike, run_b: str | os.PathLike, *, targets: Any = None,
              max_drop_pp: float = 1.0, max_npu_share_drop: float | None = 0.0,
              max_latency_increase: float | None = None) -> RunDiff:
    """Compare run folder ``run_b`` against ``run_a`` (each ``runs/<run-id>``).

    ``max_drop_pp``: an INT8 accuracy decrease (pp) beyond it under any condition is a
    regression; ``max_npu_share_drop``: an NPU op share decrease (fraction) beyond it;
    ``max_latency_increase``: a latency increase beyond this fraction (same kind only).
    ``None`` turns a check off.
    """
    from ._validation import check_range
    from .run_findings import resolve_run
    from .run_summary import summarize_target
    for p in (Path(run_a), Path(run_b)):
        if not p.is_dir():
            raise DiffError(f"{p}: no such run folder; give runs/<run-id> folders written by `workbench batch` or "
                            "the stage notebooks, or the batch's --out folder (its latest run is read).")
    try:
        where_a, where_b = resolve_run(run_a), resolve_run(run_b)
    except WorkbenchError as exc:
        raise DiffError(str(exc)) from None
    a, b = where_a.run_dir, where_b.run_dir
    check_range("max_drop_pp", max_drop_pp, 0.0, None, error=DiffError)
    if max_npu_share_drop is not None:
        check_range("max_npu_share_drop", max_npu_share_drop, 0.0, 1.0, error=DiffError)
    if max_latency_increase is not None:
        check_range("max_latency_increase", max_latency_increase, 0.0, None, error=DiffError)
    in_a = [t for t in TARGETS if (a / t).is_dir()]
    in_b = [t for t in TARGETS if (b / t).is_dir()]
    chosen = list(targets) if targets else [t for t in in_a if t in in_b]
    if isinstance(targets, str):
        chosen = [t.strip() for t in targets.split(",") if t.strip()]
    if not chosen:
        raise DiffError(f"{a} and {b} have no target folder in common (A: {', '.join(in_a) or 'none'}; "
                        f"B: {', '.join(in_b) or 'none'}).")
    for t in chosen:
        for run, have in ((a, in_a), (b, in_b)):
            if t not in have:
                raise DiffError(f"{run}: no folder for target {t!r} (it has: {', '.join(have) or 'none'}).")
    for t in chosen:
        for run in (a, b):
            _require_readable(run, t)
    diffs = []
    for t in chosen:
        sa, sb = summarize_target(a, t), summarize_target(b, t)
        pa, pb = _placement(a, t), _placement(b, t)
        diffs.append(_target_diff(t, sa, sb, pa, pb, max_drop_pp, max_npu_share_drop, max_latency_increase))
    return RunDiff(run_a=_named(where_a), run_b=_named(where_b), targets=tuple(diffs),
                   thresholds={"max_drop_pp": max_drop_pp, "max_npu_share_drop": max_npu_share_drop,
                               "max_latency_increase": max_latency_increase},
                   only_in_a=tuple(t for t in in_a if t not in in_b), only_in_b=tuple(t for t in in_b if t not in in_a))


def _named(where: Any) -> str:
    """The run folder as the user gave it, with the run read inside a batch output folder named."""
    return str(where.given) if not where.note else str(Path(where.given) / "runs" / where.run_id)


def _require_readable(run: Path, target: str) -> None:
    """Every stage record of ``run/target`` loads; an unreadable one is refused (never "no regression")."""
    from .runs import RunFolder
    from .vocab import STAGES
    folder = RunFolder.__new__(RunFolder)          # read-only: no folder is created
    folder.root, folder.target, folder.path = run, target, run / target
    for stage in STAGES:
        if not folder.file(stage).exists():
            continue
        try:
            folder.load(stage)
        except (WorkbenchError, OSError, TypeError, ValueError, KeyError, AttributeError) as exc:
            raise DiffError(f"{folder.file(stage)}: the {stage} record cannot be read ({exc}); a diff against it "
                            f"would hide that stage. Next: run the {stage} stage (or the batch) again.") from None


def _placement(run: Path, target: str) -> Any:
    if not (run / target / "placement.json").is_file():
        return None
    from .runs import RunFolder
    return RunFolder(run, target=target).load("placement")


def _manifest_fields(s: Any) -> dict[str, str]:
    m = s.manifest
    if m is None:
        return {"recipe": str(s.recipe or "-")}
    out = {"model": m.model, "model sha256": m.model_sha256, "dataset": m.dataset, "dataset hash": m.dataset_hash,
           "calibration": m.calibration_id, "calibration hash": m.calibration_hash,
           "calibration size": m.calibration_size, "recipe": m.recipe or s.recipe,
           "INT8 model sha256": m.quantized_sha256, "latency measured on": m.latency_where, "board": m.board}
    out.update({f"board {k}": v for k, v in (m.board_fingerprint or {}).items()})
    out.update({f"version {k}": v for k, v in (m.tools or {}).items()})
    return {k: ("-" if v in (None, "") else str(v)) for k, v in out.items()}


def _target_diff(target: str, sa: Any, sb: Any, pa: Any, pb: Any, max_drop: float, max_share_drop: float | None,
                 max_lat: float | None) -> TargetDiff:
    fa, fb = _manifest_fields(sa), _manifest_fields(sb)
    changes = tuple(FieldChange(field=k, a=fa.get(k, "-"), b=fb.get(k, "-"))
                    for k in list(dict.fromkeys([*fa, *fb])) if fa.get(k, "-") != fb.get(k, "-"))
    regressions = []
    acc_a = {c.condition: c for c in sa.accuracy}
    acc_b = {c.condition: c for c in sb.accuracy}
    rows = []
    for cond in list(dict.fromkeys([*acc_a, *acc_b])):
        ca, cb = acc_a.get(cond), acc_b.get(cond)
        va = None if ca is None else ca.int8
        vb = None if cb is None else cb.int8
        if ca is None or cb is None or va is None or vb is None:
            rows.append(ConditionDiff(condition=cond, a=va, b=vb, diff_pp=None, ci_low=None, ci_high=None,
                                      n_a=None if ca is None else ca.n, n_b=None if cb is None else cb.n))
            continue
        d = 100.0 * (vb - va)
        na, nb = (ca.n or 0), (cb.n or 0)
        se = 100.0 * math.sqrt((va * (1 - va) / na if na else 0.0) + (vb * (1 - vb) / nb if nb else 0.0))
        low, high = d - Z95 * se, d + Z95 * se
        bad = regressed(d, high, max_drop)
        if bad:
            regressions.append(f"{cond}: INT8 top-1 {va:.1%} -> {vb:.1%} ({d:+.2f} pp, 95% CI [{low:+.2f}, "
                               f"{high:+.2f}]: more than {max_drop:g} pp down, beyond noise)")
        rows.append(ConditionDiff(condition=cond, a=va, b=vb, diff_pp=d, ci_low=low, ci_high=high,
                                  n_a=na, n_b=nb, regression=bad))
    moved = _op_changes(pa, pb)
    if (max_share_drop is not None and sa.npu_share is not None and sb.npu_share is not None
            and sa.npu_share - sb.npu_share > max_share_drop + 1e-12):
        regressions.append(f"NPU op share {sa.npu_share:.0%} -> {sb.npu_share:.0%}")
    ka, kb = sa.latency_kind or "", sb.latency_kind or ""
    la, lb = sa.latency_ms, sb.latency_ms
    if la is None or lb is None:
        note = f"A {_ms(la)} ({ka or 'none'}), B {_ms(lb)} ({kb or 'none'}): not both measured"
    elif (sa.latency_source or ka) != (sb.latency_source or kb):
        note = (f"A {_ms(la)} ({ka}), B {_ms(lb)} ({kb}): different kinds of latency, not compared")
    else:
        note = f"{_ms(la)} -> {_ms(lb)} ({lb - la:+.3f} ms, {100 * (lb - la) / la:+.1f}%; {kb})"
        if max_lat is not None and la > 0 and (lb - la) / la > max_lat + 1e-12:
            regressions.append(f"latency {_ms(la)} -> {_ms(lb)} ({kb}), more than {max_lat:.0%} up")
    return TargetDiff(target=target, changes=changes, accuracy=tuple(rows), placement=moved,
                      npu_share_a=sa.npu_share, npu_share_b=sb.npu_share, cpu_islands_a=sa.cpu_islands,
                      cpu_islands_b=sb.cpu_islands, latency_a_ms=la, latency_b_ms=lb, latency_kind_a=ka,
                      latency_kind_b=kb, latency_note=note, regressions=tuple(regressions))


def regressed(diff_pp: float, ci_high: float, max_drop: float) -> bool:
    """B - A of ``diff_pp`` is a regression: down by more than ``max_drop`` pp AND its 95% CI excludes zero."""
    return -diff_pp > max_drop + 1e-9 and ci_high < 0


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f} ms"


def _op_changes(pa: Any, pb: Any) -> tuple[OpChange, ...]:
    """Ops whose placement differs, matched by type and occurrence (the n-th CONV_2D of A with B's)."""
    if pa is None or pb is None:
        return ()

    def keyed(report: Any) -> dict[str, str]:
        seen: dict[str, int] = {}
        out = {}
        for o in report.ops:
            seen[o.type] = seen.get(o.type, 0) + 1
            out[f"{o.type} #{seen[o.type]}"] = o.placement
        return out

    ka, kb = keyed(pa), keyed(pb)
    return tuple(OpChange(op=k, a=ka.get(k, "absent"), b=kb.get(k, "absent"))
                 for k in list(dict.fromkeys([*ka, *kb])) if ka.get(k, "absent") != kb.get(k, "absent"))


# ------------------------------------------------------------------------------------- the command

def register(sub: argparse._SubParsersAction) -> None:
    from ._cli import add_json_flag
    from ._validation import finite_float
    p = sub.add_parser("diff", help="compare two run folders: inputs, accuracy per condition, placement, latency",
                       description="What changed between RUN_A and RUN_B (runs/<run-id> folders): model, dataset, "
                                   "calibration and recipe hashes, tool and BSP versions; INT8 accuracy per "
                                   "condition with its 95%% CI; ops that moved between NPU and CPU; latency "
                                   "change of the same kind. Exit 1 when B regresses past a threshold.")
    p.add_argument("run_a", metavar="RUN_A", help="the baseline run folder (runs/<run-id>), or a batch --out "
                   "folder (its latest run)")
    p.add_argument("run_b", metavar="RUN_B", help="the run to check against it (a run or a batch --out folder)")
    p.add_argument("--targets", help="comma-separated targets (default: every target both runs have)")
    p.add_argument("--max-drop", type=finite_float, default=1.0, metavar="PP",
                   help="INT8 top-1 decrease (percentage points) under any condition that fails when its 95%% CI "
                        "also excludes zero (default 1.0)")
    p.add_argument("--max-npu-share-drop", type=finite_float, default=0.0, metavar="F",
                   help="NPU op share decrease (fraction) that fails (default 0: any op moving to the CPU)")
    p.add_argument("--max-latency-increase", type=finite_float, metavar="F",
                   help="latency increase (fraction, same kind of latency only) that fails (default: not checked)")
    add_json_flag(p)
    p.set_defaults(func=_diff)


def _diff(args: argparse.Namespace) -> int:
    from ._cli import EXIT_GATE_FAILED, EXIT_OK, emit
    from .findings import resolve_run
    from .runs import check_run_records
    for run in (args.run_a, args.run_b):     # a damaged record is refused, never left out of the verdict
        if Path(run).is_dir():
            check_run_records(resolve_run(run).run_dir)
    result = diff_runs(args.run_a, args.run_b, targets=args.targets, max_drop_pp=args.max_drop,
                       max_npu_share_drop=args.max_npu_share_drop, max_latency_increase=args.max_latency_increase)
    emit(result, as_json=args.json, text=result.text())
    return EXIT_GATE_FAILED if result.regressed else EXIT_OK
