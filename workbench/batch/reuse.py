"""Warm batches: an executed notebook is reused when nothing it was computed from changed.

A stage notebook's *inputs* are its source, the parameters papermill injects, the kernel, the
workbench code and installed tool versions, the model and dataset files its parameters name, and
the files the target's earlier stages wrote into the run folder.  After a stage ran (and was
exported), a record beside the executed notebook keeps the sha256 of those inputs and of
everything the stage produced::

    <out>/<target>/<stage>.reuse.json   {"key": ..., "outputs": {relpath: sha256}, "reports": {...}}

The next batch computes the key again; when it matches and every recorded output and report is on
disk with its recorded sha256, the stage is not executed again (no kernel starts).  A changed
parameter, model, notebook, workbench version, an earlier stage that produced other files, or a
damaged output means the stage runs.  A stage timed on a board is always run again: a board
measurement is an observation, not a function of the inputs.

The record is written last, after the stage's outputs and reports, so an interrupted batch never
leaves a record that vouches for half-written files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from .._io import atomic_write_json, read_json, sha256_file, stable_hash

RECORD_SUFFIX = ".reuse.json"
#: notebook parameters that name an input file or folder (its content is part of the key)
PATH_PARAMETERS = frozenset({"model", "dataset", "input_spec", "metric", "replay", "gate", "run_a", "run_b"})
_PACKAGE = Path(__file__).resolve().parents[1]
_FINGERPRINT_LIMIT = 2000   # a dataset folder with more files is fingerprinted by names, sizes and mtimes


@lru_cache(maxsize=1)
def code_version() -> str:
    """sha256 over the workbench package (sources and shipped data) and the installed tool versions."""
    from ..runs import tool_versions
    files = sorted(p for p in _PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                   and p.suffix not in (".pyc",))
    return stable_hash({"files": {p.relative_to(_PACKAGE).as_posix(): sha256_file(p) for p in files},
                        "tools": tool_versions()})


def path_fingerprint(value: Any, base: Path) -> str | None:
    """A content fingerprint of a file or folder a parameter names (None when it names no path)."""
    if not isinstance(value, str) or not value:
        return None
    path = (base / value) if not os.path.isabs(value) else Path(value)
    if not path.exists():
        return None
    if path.is_file():
        return sha256_file(path)
    files = sorted(p for p in path.rglob("*") if p.is_file())
    if len(files) <= _FINGERPRINT_LIMIT:
        return sha256_file(path)
    return stable_hash([(p.relative_to(path).as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in files])


def snapshot(folder: Path, out_dir: Path) -> dict[str, tuple[str, int]]:
    """``{path relative to out_dir: (sha256, mtime_ns)}`` of every file in ``folder`` (empty when none)."""
    if not folder.is_dir():
        return {}
    return {p.relative_to(out_dir).as_posix(): (sha256_file(p), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.startswith(".") and p.suffix != ".log"}   # logs are no stage output


def changed(before: Mapping[str, tuple[str, int]], after: Mapping[str, tuple[str, int]]) -> dict[str, str]:
    """``{path: sha256}`` of the files a stage wrote: new, or rewritten (even with the same bytes)."""
    return {k: v[0] for k, v in after.items() if before.get(k) != v}


def stage_key(*, notebook: Path, params: Mapping[str, Any], kernel: str, out_dir: Path,
              upstream: Iterable[Mapping[str, str]]) -> str:
    """The key of one stage execution (see the module doc for what goes in)."""
    return stable_hash(key_parts(notebook=notebook, params=params, kernel=kernel, out_dir=out_dir, upstream=upstream))


def key_parts(*, notebook: Path, params: Mapping[str, Any], kernel: str, out_dir: Path,
              upstream: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """What a stage key is made of, each part hashed: kept in the record to say why a stage ran again."""
    # only parameters that name an input file count by content; the run folder (where the stages
    # write) counts through `upstream`, stage by stage
    paths = {name: path_fingerprint(value, out_dir) for name, value in params.items() if name in PATH_PARAMETERS}
    return {"notebook": sha256_file(notebook), "parameters": stable_hash(dict(params)), "kernel": kernel,
            "workbench code and tool versions": code_version(),
            "model and dataset files": stable_hash({k: v for k, v in paths.items() if v}),
            "earlier stages' outputs": stable_hash([dict(u) for u in upstream])}


def why_changed(out_dir: Path, notebook_rel: str, parts: Mapping[str, str]) -> str:
    """Which inputs differ from the recorded execution ("no earlier execution" when there is none)."""
    try:
        recorded = read_json(record_path(out_dir, notebook_rel)).get("parts", {})
    except (OSError, ValueError, AttributeError):
        return "no earlier execution"
    names = [name for name, value in parts.items() if recorded.get(name) != value]
    return ", ".join(names) + " changed" if names else "an output or report was missing or damaged"


def record_path(out_dir: Path, notebook_rel: str) -> Path:
    return out_dir / (notebook_rel[: -len(".ipynb")] + RECORD_SUFFIX)


def reusable(out_dir: Path, notebook_rel: str, key: str) -> dict[str, Any] | None:
    """The record of an earlier execution with this key whose files are all intact, else None."""
    path = record_path(out_dir, notebook_rel)
    try:
        record = read_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("key") != key:
        return None
    files = {**record.get("outputs", {}), **record.get("reports", {})}
    for rel, digest in files.items():
        target = out_dir / rel
        if not target.is_file() or report_digest(target) != digest:
            return None
    return record


def report_digest(path: Path) -> str:
    """sha256 of a file; of an HTML report without its verdict block (the batch rewrites that block at its end,
    with what every target's stages found: a reused report is refreshed, not damaged)."""
    if path.suffix != ".html":
        return sha256_file(path)
    import hashlib

    from .verdict import without_block
    return hashlib.sha256(without_block(path.read_text(encoding="utf-8")).encode("utf-8")).hexdigest()


def forget(out_dir: Path, notebook_rel: str) -> None:
    """Remove the record before a stage runs again (a failed rerun must not be vouched for)."""
    record_path(out_dir, notebook_rel).unlink(missing_ok=True)


def remember(out_dir: Path, notebook_rel: str, *, parts: Mapping[str, str], outputs: Mapping[str, str],
             reports: Iterable[str], seconds: float) -> None:
    """Write the record, last: the outputs and reports exist and are hashed as they are now."""
    hashed = {rel: report_digest(out_dir / rel) for rel in reports if (out_dir / rel).is_file()}
    atomic_write_json(record_path(out_dir, notebook_rel),
                      {"key": stable_hash(dict(parts)), "parts": dict(parts), "outputs": dict(outputs),
                       "reports": hashed, "seconds": seconds})
