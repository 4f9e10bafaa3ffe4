"""The example outputs in ``docs/*.md`` and ``README.md``, regenerated from the real CLI.

Every block of product output in the docs sits between two markers::

    <!-- example: evaluate-gate -->
    ```
    $ workbench evaluate reference pc/model.tflite ...
    3 model(s) on 5 condition(s) ...
    ```
    <!-- /example -->

:data:`EXAMPLES` says how each block is made: the ``workbench`` commands it shows (run for real, in
one temporary folder, with the shipped reference model and the built-in data), and the commands that
prepare their inputs without being shown.  Rewrite every block, or check them::

    python -m workbench.docs                 # make docs: rewrite the blocks
    python -m workbench.docs --check         # exit 1 naming each doc and block that differs
    python -m workbench.docs --only evaluate-gate,quantize-reference

What a run measures afresh (seconds, milliseconds, run ids from the clock, the sha256 of an ONNX
Runtime QDQ file, whose bytes vary from run to run) is masked before two texts are compared
(:func:`stable`); accuracy numbers never are: they are the point.  A command that hits an internal
error (exit 3), or a batch that fails, stops the generator: a bug is never written into the docs as
output.  A block that cannot be made here (a board over SSH, an hour of conversions) is marked
instead::

    <!-- recorded: 2026-11-30, not regenerated: a board over SSH -->

and the drift test checks that every block starting with ``$ `` or ``>>> `` carries one marker or
the other.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

#: the checkout whose docs are regenerated
ROOT = Path(__file__).resolve().parents[1]
FIX = "make docs (or .venv/bin/python -m workbench.docs)"

MARK = re.compile(r"<!-- example: (?P<name>[\w.-]+) -->\n(?P<body>.*?)<!-- /example -->", re.DOTALL)
RECORDED = re.compile(r"<!-- recorded: (?P<date>\d{4}-\d{2}-\d{2})[^,>]*, not regenerated: (?P<why>[^>]+?) -->")


@dataclasses.dataclass(frozen=True)
class Example:
    """One block: ``shown`` commands (printed with their output), ``setup`` commands (run, not shown).

    A command is a shell-like line: ``workbench ...`` (run in-process through :func:`workbench.cli.main`),
    ``cp SRC DST``, or ``subprocess: ...`` (run as its own process, stdout and stderr as one stream: the
    batch's progress lines go to the terminal's descriptor, not to ``sys.stderr``)."""

    name: str
    doc: str                                  # relative to ROOT
    shown: tuple[str, ...]
    setup: tuple[str, ...] = ()
    slow: bool = False                        # minutes, not seconds (a batch): its own drift test
    in_checkout: bool = False                 # run in the checkout (read-only commands on committed fixtures)


_CAL100 = ("workbench quantize reference --recipe a8w8_pc --calibration 100 -o pc",
           "workbench quantize reference --recipe a8w8_pt --calibration 100 -o pt")
_REF_PC = ("workbench quantize reference --recipe a8w8_pc -o ref", "cp ref/model.tflite ref_a8w8_pc.tflite")
_BATCH = "subprocess: workbench batch --targets imx8mp,imx93,imx95 --out reports --jobs 2 --run-id latest"

EXAMPLES: tuple[Example, ...] = (
    Example("quantize-reference", "docs/quantize.md",
            shown=("workbench quantize reference --recipe a8w8_pc -o out/pc",
                   "workbench quantize reference --backend onnx -o out/onnx")),
    Example("evaluate-gate", "docs/evaluate.md", setup=_CAL100 + ("cp {ROOT}/gate.yaml gate.yaml",),
            shown=("workbench evaluate reference pc/model.tflite pt/model.tflite --names a8w8_pc,a8w8_pt "
                   "--gate gate.yaml",)),
    Example("calibrate-coverage", "docs/calibration.md",
            shown=("workbench calibrate --model reference --strategy coverage -n 200",)),
    Example("audit-daylight", "docs/calibration.md",
            shown=("workbench calibrate --strategy stratified --weights daylight=1 -n 300 -o day.json",
                   "workbench audit --model reference --calibration day.json")),
    Example("calibrate-experiment", "docs/calibration.md",
            shown=("workbench calibrate-experiment --model reference -n 200",)),
    Example("calibrate-experiment-daylight", "docs/calibration.md",
            shown=("workbench calibrate-experiment --model reference -n 300 --strategies random,stratified "
                   "--weights daylight=1",)),
    Example("placement-vela-versions", "docs/placement.md", setup=_REF_PC,
            shown=("workbench placement ref_a8w8_pc.tflite --target imx93 --vela-versions 3.10.0,5.2.0",)),
    Example("placement-all", "docs/placement.md", setup=_REF_PC,
            shown=("workbench placement ref_a8w8_pc.tflite --target all",)),
    Example("board-replay", "docs/board.md", in_checkout=True,
            shown=("workbench bench tests/board/fixtures/replay/tiny_int8.tflite --local --runs 200",
                   "workbench bench tests/board/fixtures/replay/tiny_int8.tflite --replay tests/board/fixtures/replay",
                   "workbench bench tests/board/fixtures/A1.log --replay tests/board/fixtures/replay",
                   "workbench parse-benchmark tests/board/fixtures/A1.log")),
    Example("explore-parameters", "docs/explore.md", in_checkout=True,
            shown=("subprocess: papermill --help-notebook notebooks/00_explore.ipynb",)),
    Example("make-run", "README.md", shown=(_BATCH,), slow=True),
)


# -- running commands --------------------------------------------------------------------------

class Session:
    """One temporary working folder shared by every example; each setup command runs once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.done: dict[str, str] = {}

    def run(self, command: str, *, in_checkout: bool = False) -> str:
        """The command's output as a terminal shows it (memoised: setup steps are shared)."""
        key = ("checkout: " if in_checkout else "") + command
        if key not in self.done:
            self.done[key] = self._run(command.replace("{ROOT}", str(ROOT)), ROOT if in_checkout else self.folder)
        return self.done[key]

    def _run(self, command: str, cwd: Path) -> str:
        if command.startswith("subprocess: "):
            return _subprocess(shlex.split(command.removeprefix("subprocess: ")), cwd)
        argv = shlex.split(command)
        if argv[0] == "cp":
            shutil.copyfile(cwd / argv[1], cwd / argv[2])
            return ""
        if argv[0] != "workbench":
            raise ValueError(f"docs example command {command!r}: expected workbench, cp or subprocess:")
        return _in_process(argv[1:], cwd)


_NOISE = re.compile(r"^(WARNING:absl:|INFO:|W\d{4} |I\d{4} |E\d{4} |WARNING: All log messages)")


def _in_process(argv: Sequence[str], cwd: Path) -> str:
    """``workbench ARGV`` in this process (TensorFlow loads once for every example); stdout and the
    workbench's own stderr lines (warnings, errors) in the order they were written."""
    import warnings

    from .cli import main
    buf = io.StringIO()
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            warnings.simplefilter("default")
            try:
                code = main(list(argv))
            except SystemExit as exc:              # argparse refusing a flag: exit 2 with its message
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(previous)
    lines = [line for line in buf.getvalue().splitlines() if not _NOISE.match(line)]
    text = "\n".join(lines)
    if code == 3:     # a bug (or another change half-landed in the tree) is never documented as output
        raise RuntimeError(f"docs example `workbench {' '.join(argv)}` hit an internal error:\n{text}")
    return text + (f"\n(exit code {code})" if code else "")


def _subprocess(argv: Sequence[str], cwd: Path) -> str:
    tool = Path(sys.executable).parent / argv[0]      # the tools of this environment, not whatever PATH finds
    exe = [str(tool), *argv[1:]] if argv[0] in ("workbench", "papermill") and tool.is_file() else list(argv)
    proc = subprocess.run(exe, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")})
    lines = [line for line in proc.stdout.splitlines() if not _NOISE.match(line)]
    if proc.returncode:   # a batch that failed (a target, a notebook) is a problem to fix, not an example
        raise RuntimeError(f"docs example `{' '.join(argv)}` exited {proc.returncode}:\n{proc.stdout[-3000:]}")
    return "\n".join(lines)


def _tidy(text: str, folder: Path) -> str:
    """Local paths out, cache-state words out: the same text on every machine and every run."""
    for path, short in ((str(folder.resolve()), "."), (str(folder), "."), (str(ROOT), "<npu-workbench>")):
        text = text.replace(path + "/", "").replace(path, short)
    from ._io import cache_dir
    text = text.replace(str(Path(cache_dir()).resolve()), "$NPU_WORKBENCH_CACHE")
    text = text.replace(" (cache hit)", "")
    return "\n".join(line.rstrip() for line in text.splitlines())


def render(example: Example, session: Session) -> str:
    """The block's text (without the fences): each shown command after ``$ ``, then its output."""
    for command in example.setup:
        session.run(command)
    parts = []
    for command in example.shown:
        lines = _tidy(session.run(command, in_checkout=example.in_checkout), session.folder).splitlines()
        shown = command.removeprefix("subprocess: ").replace("{ROOT}/", "")
        parts.append("\n".join([f"$ {shown}", *lines]))
    return "\n\n".join(parts).rstrip() + "\n"


# -- what may differ between two runs ----------------------------------------------------------

_MASKS = (
    (re.compile(r"\b\d+(\.\d+)? (s|ms)\b"), r"<\2>"),                           # measured times
    (re.compile(r"\(\d+(\.\d+)? s\)"), "(<s>)"),
    (re.compile(r"\b(p50|p99|mean) \d+\.\d+"), r"\1 <ms>"),
    (re.compile(r"\b\d{8}-\d{6}\b"), "<run-id>"),                                # run ids from the clock
    (re.compile(r"\bsha256 [0-9a-f]{12,64}\b"), "sha256 <hash>"),                 # ONNX Runtime's QDQ bytes vary
    (re.compile(r"(\$NPU_WORKBENCH_CACHE/[\w-]+/)[0-9a-f]{12,64}/"), r"\1<key>/"),  # cache folders
)


_PROGRESS = re.compile(r"^\[[\w-]+ *\] ")


def stable(text: str) -> str:
    """What two runs must agree on: ``text`` with timings and clock-made run ids masked, and a batch's
    progress lines (``[imx93  ] 20_quantize ok ...``) sorted within each run of them: with ``--jobs 2``
    the targets finish in any order."""
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)
    out: list[str] = []
    run: list[str] = []
    for line in [*text.split("\n"), None]:
        if line is not None and _PROGRESS.match(line):
            run.append(line)
            continue
        out += sorted(run)
        run = []
        if line is not None:
            out.append(line)
    return "\n".join(out)


# -- reading and writing the docs --------------------------------------------------------------

def fenced(text: str) -> str:
    return f"```\n{text}```\n"


def blocks(path: Path) -> dict[str, str]:
    """``{name: block text without fences}`` of every example marker in ``path``."""
    out = {}
    for m in MARK.finditer(path.read_text(encoding="utf-8")):
        body = m.group("body")
        if not (body.startswith("```\n") and body.endswith("```\n")):
            raise ValueError(f"{path.relative_to(ROOT)}: block {m.group('name')!r} must be one plain ``` fence "
                             "between its markers")
        out[m.group("name")] = body[4:-4]
    return out


def rewrite(path: Path, texts: dict[str, str]) -> bool:
    """Replace the blocks of ``path`` named in ``texts`` whose stable parts changed (new timings alone
    do not churn the docs); True when the file changed."""
    from ._io import atomic_write_text
    old = path.read_text(encoding="utf-8")

    def sub(m: re.Match[str]) -> str:
        name = m.group("name")
        body = m.group("body")
        if name not in texts or stable(body[4:-4]) == stable(texts[name]):
            return m.group(0)
        return f"<!-- example: {name} -->\n{fenced(texts[name])}<!-- /example -->"
    new = MARK.sub(sub, old)
    if new != old:
        atomic_write_text(path, new)
    return new != old


@contextlib.contextmanager
def session(folder: str | os.PathLike | None = None) -> Iterator[Session]:
    """A :class:`Session` in ``folder`` or a fresh temporary folder (removed afterwards)."""
    if folder is not None:
        folder = Path(folder)
        if folder.exists() and any(folder.iterdir()):
            raise ValueError(f"{folder}: not empty; the examples start from an empty folder (a batch into an "
                             "existing reports/ folder would reuse its notebooks)")
        folder.mkdir(parents=True, exist_ok=True)
        yield Session(folder)
        return
    with tempfile.TemporaryDirectory(prefix="wb-docs-") as tmp:
        yield Session(Path(tmp))


def select(only: str | Sequence[str] | None = None, *, slow: bool | None = None) -> tuple[Example, ...]:
    """The examples named in ``only`` (default all), optionally only the slow or the quick ones."""
    names = [n.strip() for n in only.split(",")] if isinstance(only, str) else list(only or [])
    known = {e.name for e in EXAMPLES}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown docs example(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return tuple(e for e in EXAMPLES if (not names or e.name in names) and (slow is None or e.slow == slow))


def differences(examples: Sequence[Example], texts: dict[str, str]) -> list[str]:
    """One message per block whose doc text differs (in its stable parts) from ``texts``."""
    problems = []
    for e in examples:
        path = ROOT / e.doc
        found = blocks(path)
        if e.name not in found:
            problems.append(f"{e.doc}: no block <!-- example: {e.name} --> ... <!-- /example -->; add the markers")
            continue
        if stable(found[e.name]) != stable(texts[e.name]):
            import difflib
            diff = "\n".join(list(difflib.unified_diff(
                stable(found[e.name]).splitlines(), stable(texts[e.name]).splitlines(),
                f"{e.doc} (committed)", "regenerated", lineterm="", n=1))[:40])
            problems.append(f"{e.doc}: example '{e.name}' is out of date; run `{FIX}`\n{diff}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.docs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write; exit 1 when a block differs")
    parser.add_argument("--only", default=None, metavar="NAME[,NAME...]", help="only these examples")
    parser.add_argument("--quick", action="store_true", help="leave out the slow examples (a batch)")
    parser.add_argument("--keep", default=None, metavar="DIR", help="work in DIR and keep it (default: a temp folder)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    examples = select(args.only, slow=False if args.quick else None)
    texts: dict[str, str] = {}
    with session(args.keep) as s:
        for e in examples:
            print(f"example {e.name} ({e.doc})", file=sys.stderr, flush=True)
            texts[e.name] = render(e, s)
    if args.check:
        problems = differences(examples, texts)
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    for doc in sorted({e.doc for e in examples}):
        changed = rewrite(ROOT / doc, {e.name: texts[e.name] for e in examples if e.doc == doc})
        print(f"{'rewrote' if changed else 'unchanged'} {doc}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
