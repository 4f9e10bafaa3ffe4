"""``workbench findings``: every finding of a run folder (or of one model file), most severe first."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    from ._cli import add_json_flag
    p = sub.add_parser(
        "findings", help="list the findings (silent failures noticed) of a run folder or a model file",
        description="Every finding of RUN_DIR (the folder `workbench batch --out` or the stage notebooks "
                    "wrote: one folder per target), most severe first, with its evidence and next step. "
                    "A .tflite/.onnx file instead of a folder: the findings of that model file (and of "
                    "the model_manifest.json beside it). Exit code 1 when a finding is more severe than "
                    "--fail-above. The catalogue of codes is docs/findings.md.")
    p.add_argument("run_dir", nargs="?", metavar="RUN_DIR", help="a run folder, or a .tflite/.onnx model file")
    p.add_argument("--targets", default=None, help="comma-separated targets (default: every target folder)")
    p.add_argument("--target", default="", help="with a model file: the target to judge it for")
    p.add_argument("--min-severity", default="info", choices=("info", "warning", "error"),
                   help="list only findings at least this severe (default: info)")
    p.add_argument("--fail-above", default=None, choices=("info", "warning"),
                   help="exit 1 when a finding is more severe than this (like the gate's findings.max_severity)")
    p.add_argument("--docs", metavar="FILE", default=None,
                   help="write the catalogue of every finding code as Markdown to FILE (docs/findings.md) and exit")
    add_json_flag(p)
    p.set_defaults(func=_findings)


def _findings(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ._cli import EXIT_GATE_FAILED, EXIT_OK, emit
    from .errors import WorkbenchError
    from .findings import findings_for
    from .findings_docs import write_docs
    from .run_findings import resolve_run, run_findings
    if args.docs:
        path = write_docs(args.docs)
        emit({"docs": str(path)}, as_json=args.json, text=str(path))
        return EXIT_OK
    if not args.run_dir:
        raise WorkbenchError("give RUN_DIR (a run folder or a model file), or --docs FILE.")
    path = Path(args.run_dir)
    if path.is_file() and path.suffix.lower() in (".tflite", ".onnx"):
        from .quantize.findings import deployed_findings
        from .quantize.inspect import inspect_model
        found = findings_for(inspect_model(path), target=args.target) + deployed_findings(path, target=args.target)
        run, run_id, note = str(path), None, ""
    else:
        where = resolve_run(path)
        found = run_findings(where.run_dir, targets=args.targets or (list(where.targets) if where.note.startswith(
            "target folder") else None))
        run, run_id, note = str(path), where.run_id, where.note
    shown = found.at_least(args.min_severity)
    head = f"run {run_id}" + (f" ({note})" if note else "") + "\n" if run_id else ""
    emit({"run": run, "run_id": run_id, "resolved": note, "max_severity": found.max_severity,
          "counts": found.counts(), "findings": shown.to_list()} if args.json else shown, as_json=args.json,
         text=head + shown.text() if not args.json else None)
    if found.with_code("run.unreadable-record"):
        # listed above as an error finding (every view shows it); the damaged input is also exit 2, naming
        # the file and the value, so neither a reader nor a gate takes a partial list for the verdict
        _refuse_unreadable(Path(str(where.run_dir)), found.with_code("run.unreadable-record"))
    if args.fail_above and found.above(args.fail_above):
        return EXIT_GATE_FAILED
    return EXIT_OK


def _refuse_unreadable(run_dir: Any, unreadable: Any) -> None:
    """Raise :class:`BatchError` naming every unreadable record of ``unreadable`` (run.unreadable-record
    findings of ``run_dir``) with the reason its reading gives (the value that is not a number...)."""
    from .errors import BatchError
    from .runs import RunFolder
    reasons = []
    for f in unreadable:
        folder = RunFolder.__new__(RunFolder)          # read-only: no folder is created
        folder.root, folder.target, folder.path = run_dir, f.target, run_dir / f.target
        if f.evidence.get("stage") == "gate":          # the run's gate.json: the finding names it and why
            reasons.append(f.message)
            continue
        try:
            folder.load(f.evidence["stage"])
        except Exception as exc:                       # noqa: BLE001 - the reason is the message, whatever it is
            reasons.append(str(exc))
        else:                                          # pragma: no cover - read since the finding was made
            reasons.append(f.message)
    raise BatchError(f"{len(reasons)} stage record(s) of {run_dir} cannot be read (listed above as "
                     f"run.unreadable-record): " + " | ".join(reasons))


