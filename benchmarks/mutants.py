"""Mutation testing of the detectors: how many planted bugs in the findings, gate and stats modules do
their tests catch?

A small AST mutator (mutmut 3 wants its own copy layout and `mutants/` folder beside the package; this
repository's tests import ``workbench`` from the checkout, so a copy of the tree is mutated instead).
For each module of :data:`MODULES` every mutation point inside a rule or statistic (display helpers
such as ``summary``/``_repr_html_`` are left out: they decide nothing) is mutated once:

- comparisons: ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``, ``in`` <-> ``not in``, ``is`` <-> ``is not``;
- ``and`` <-> ``or``; ``not x`` -> ``x``; ``+`` <-> ``-``, ``*`` <-> ``/``;
- numbers: an int ``n`` -> ``n + 1``, a float ``f`` -> ``2 f`` (``0.0`` -> ``1.0``), outside f-strings,
  slices and ``round(..., digits)``; comparisons against a power (``n < 2**31``, an index dtype) are left out.

Each mutant is written into a copy of the checkout and the module's tests (:data:`MODULES`, chosen to be
fast: no model training) run against it with ``pytest -x``; a failing or timed-out run kills the mutant.
The trap zoo's shared bait is built once (``WB_ZOO_ROOT``).  Last line:
``killed=<k>/<n> score=<pct>`` (goal: >= 90%).  Survivors are listed with file, line and mutation; the
equivalent mutants of :data:`EQUIVALENT` (no test can tell them from the original) are listed with why and left
out of ``n``.

    .venv/bin/python benchmarks/mutants.py [--only findings,gate] [--limit N] [--list]
    make mutants
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: module -> the tests that must catch its mutants (fast ones: seconds a run, no SSH, board or batch; ``-k`` and ``-m``
#: expressions after "::k=" and "::m=", applied to every file of the list: name the fast files' modules in ``-k``)
MODULES: dict[str, list[str]] = {
    "workbench/findings.py": ["tests/test_findings.py", "tests/traps/test_run_folder.py"],
    "workbench/findings_catalogue.py": ["tests/test_findings.py"],
    "workbench/evaluate/stats.py": ["tests/evaluate/test_stats.py", "tests/evaluate/test_stats_definitions.py"],
    "workbench/board/stats.py": ["tests/board/test_stats.py", "tests/board/test_stats_definitions.py"],
    "workbench/evaluate/gate/limits.py": ["tests/evaluate/test_gate_parsing.py", "tests/evaluate/test_gate.py",
                                           "tests/evaluate/test_gate_boundaries.py", "::k=not cli_evaluate"],
    "workbench/evaluate/gate/schema.py": ["tests/evaluate/test_gate_parsing.py", "tests/evaluate/test_gate.py",
                                           "tests/evaluate/test_gate_boundaries.py", "::k=not cli_evaluate"],
    "workbench/evaluate/gate/checks.py": ["tests/evaluate/test_gate_parsing.py", "tests/evaluate/test_gate.py",
                                           "tests/evaluate/test_gate_boundaries.py", "::k=not cli_evaluate"],
    "workbench/evaluate/findings.py": ["tests/evaluate/test_accuracy_findings.py",
                                       "tests/evaluate/test_drop_threshold.py"],
    "workbench/evaluate/drops.py": ["tests/evaluate/test_accuracy_findings.py", "tests/evaluate/test_drop_threshold.py"],
    "workbench/calibration/findings.py": ["tests/calibration/test_findings_boundaries.py",
                                          "tests/calibration/test_leakage.py", "tests/traps/test_traps.py",
                                          "::k=test_findings_boundaries or test_leakage or calibration_ or clipping", "::m=not slow"],
    "workbench/board/findings.py": ["tests/board/test_findings_boundaries.py", "tests/traps/test_traps.py",
                                    "::k=test_findings_boundaries or warm", "::m=not slow"],
    "workbench/placement/findings.py": ["tests/placement/test_findings_boundaries.py"],
    "workbench/quantize/findings.py": ["tests/quantize/test_findings_boundaries.py", "tests/traps/test_traps.py",
                                       "::k=test_findings_boundaries or onnx or per_tensor or spread or dynamic or deployment",
                                       "::m=not slow"],
}
#: functions whose body only formats (left out: a mutant there changes words, not a decision)
DISPLAY = {"summary", "text", "_repr_html_", "findings_html", "_evidence_text", "catalogue_markdown", "_anchor",
           "write_docs", "rows", "plot", "_pct", "__repr__", "table_rows", "_evidence_html", "_group_row", "op_groups",
           "_drop_text", "_short_name", "_layer_names"}

_TOLERANCE = ("the float tolerance of a limit: a drop or an agreement moves in steps of one sample (100/n pp, 1/n), "
              "so no measured value lies between the limit and the limit plus or minus 1e-9 (or 2e-9): the tolerance "
              "and its strictness change no verdict (at the limit and one sample past it are tested)")

#: equivalent mutants, left out of the score: (module, a piece of the mutated line's code, the mutated expression
#: exactly or "" for any, mutation) -> why no test can tell the mutant from the original.  A survivor is a missing
#: test unless it is listed here with a reason.
EQUIVALENT: dict[tuple[str, str, str, str], str] = {
    ("workbench/evaluate/stats.py", "def paired_bootstrap(", "", "1000 -> 1001"):
        "a default resample count: 1001 resamples estimate the same percentile CI as 1000 (callers that gate "
        "pass n_bootstrap; the seeded draw of the first 1000 resamples is unchanged)",
    ("workbench/board/stats.py", "n_boot: int = 2000,", "", "2000 -> 2001"):
        "a default resample count: 2001 resamples estimate the same p99 CI as 2000 (the seeded draw of the "
        "first 2000 is unchanged)",
    **{("workbench/evaluate/gate/checks.py", "1e-9", node, what): _TOLERANCE for node, what in (
        ("1e-9", "1e-09 -> 2e-09"), ("drop > max_drop + 1e-9", "Gt -> GtE"), ("a.drop_pp > limit + 1e-9", "Gt -> GtE"))},
    **{("workbench/evaluate/gate/checks.py", "1e-12", node, what): _TOLERANCE for node, what in (
        ("1e-12", "1e-12 -> 2e-12"), ("row.agreement < min_agreement - 1e-12", "Lt -> LtE"),
        ("value < agreement - 1e-12", "Lt -> LtE"))},
    ("workbench/board/stats.py", "if ranks.std() == 0:", "0", "0 -> 1"):
        "ranks are a permutation of 0..n-1 (n >= MIN_RUNS_FOR_TREND): their std, sqrt((n*n - 1) / 12), is never 0 "
        "nor 1, so the guard (against a constant series' NaN correlation) never fires with either number",
    ("workbench/board/stats.py", "and rho < FALLING_RHO", "rho < FALLING_RHO", "Lt -> LtE"):
        "rho is numpy's float correlation of run index and rank: exactly -0.3 needs an exact sum of squared "
        "rank differences and a float result that rounds to it (a random search of rank orders found none)",
    ("workbench/evaluate/findings.py", "NEAR_CHANCE_FACTOR / max(n_classes, 1))", "1", "1 -> 2"):
        "max(n_classes, 1) only guards n_classes = 0: with 0, 1 or 2 classes FACTOR / 1 and FACTOR / 2 (2.0, 1.0) "
        "are both above the cap 0.5 that min() returns",
    ("workbench/calibration/findings.py", '"samples": cal.conditions.get(c, 0),', "0", "0 -> 1"):
        "an under-represented condition has samples (the rule asks conditions.get(c, 0) > 0), so the default of "
        ".get in its evidence is never read",
    ("workbench/calibration/findings.py", "shares.get(c, 0.0) < UNDER_REPRESENTED * t]", "0.0", "0.0 -> 1.0"):
        "CalibrationSet.shares() holds every condition of target_shares, so the default of .get is never read",
    ("workbench/calibration/findings.py", "shares.get(c, 0.0) < UNDER_REPRESENTED * t]", "t > 0", "Gt -> GtE"):
        "under-representation also needs share < UNDER_REPRESENTED * t: with t == 0 no share (>= 0) is below 0, "
        "so `t >= 0` flags nothing `t > 0` does not",
    ("workbench/placement/findings.py", '"int8_ops": {k: structure.get("int8_ops", {}).get(k, 0)', "0", "0 -> 1"):
        "the op types listed are converter-added (op_origin != 'model' needs structure['added'][k] > 0, and "
        "structural_diff adds k only when int8_ops[k] exceeds the source's count), so int8_ops always holds k and "
        "the default of .get is never read",
    ("workbench/quantize/findings.py", "top / max(int(live.min()), 1) >= COLLAPSE_SPREAD", "1", "1 -> 2"):
        "live holds levels > 0, so live.min() >= 1 and max(., 1) only guards nothing; with live.min() == 1 the "
        "ratio is top / 1 or top / 2, and top >= 32 makes both >= COLLAPSE_SPREAD (16): the same verdict",
    ("workbench/quantize/findings.py", ".reshape(w.channels, -1)", "1", "1 -> 2"):
        "numpy's reshape takes a negative size as the one dimension to infer (-2 as -1, numpy 2.x): the same array",
    ("workbench/evaluate/findings.py", "hint = _range_hint(quantized) if bad", "bad and quantized is not None",
     "And -> Or"):
        "the hint is read only inside the loop over `bad` (empty: never read), and _range_hint(None) is '' (its "
        "AttributeError caught): `or` computes a hint nobody reads, or the same ''",
}

_SWAP_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
             ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_SWAP_BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}


_FORK = False


@dataclass(frozen=True)
class Mutant:
    module: str
    index: int
    line: int
    what: str
    code: str = ""          # the mutated line of the original source
    node: str = ""          # the mutated expression's source

    @property
    def equivalent(self) -> str | None:
        """Why this mutant is equivalent (:data:`EQUIVALENT`), or None."""
        return next((why for (module, piece, node, what), why in EQUIVALENT.items()
                     if module == self.module and what == self.what and piece in self.code
                     and node in ("", self.node)), None)


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """ids of nodes not to mutate: display functions, docstrings, f-strings, slices, round() digits."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in DISPLAY:
            skip.update(id(n) for n in ast.walk(node))
        elif isinstance(node, (ast.JoinedStr, ast.Slice)):
            skip.update(id(n) for n in ast.walk(node))
        elif isinstance(node, ast.Compare) and any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow)
                                                   for n in ast.walk(node)):
            skip.update(id(n) for n in ast.walk(node))      # `n < 2**31` (an index dtype): untestable in memory
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "round"
              and len(node.args) > 1):
            skip.update(id(n) for n in ast.walk(node.args[1]))
    return skip


class _Mutator(ast.NodeTransformer):
    """Counts mutation points in source order; with ``target`` set, applies that one."""

    def __init__(self, skip: set[int], target: int | None = None) -> None:
        self.skip, self.target, self.count, self.found = skip, target, 0, []

    def _point(self, node: ast.AST, what: str) -> bool:
        here = self.count
        self.count += 1
        self.found.append((getattr(node, "lineno", 0), what, node))
        return here == self.target

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if id(node) in self.skip:
            return node
        for i, op in enumerate(node.ops):
            new = _SWAP_CMP.get(type(op))
            if new and self._point(node, f"{type(op).__name__} -> {new.__name__}"):
                node.ops[i] = new()
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        if id(node) in self.skip:
            return node
        new = ast.Or if isinstance(node.op, ast.And) else ast.And
        if self._point(node, f"{type(node.op).__name__} -> {new.__name__}"):
            node.op = new()
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if id(node) in self.skip or isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            return node
        new = _SWAP_BIN.get(type(node.op))
        if new and self._point(node, f"{type(node.op).__name__} -> {new.__name__}"):
            node.op = new()
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if id(node) not in self.skip and isinstance(node.op, ast.Not) and self._point(node, "not x -> x"):
            return node.operand
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        v = node.value
        if id(node) in self.skip or isinstance(v, bool) or not isinstance(v, (int, float)):
            return node
        new = v + 1 if isinstance(v, int) else (v * 2 if v else 1.0)
        if self._point(node, f"{v!r} -> {new!r}"):
            return ast.copy_location(ast.Constant(new), node)
        return node


def _functions_only(tree: ast.Module) -> set[int]:
    """Module-level statements outside functions and classes' methods are not mutated (tables, imports)."""
    keep: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            keep.update(id(n) for n in ast.walk(node))
    return {id(n) for n in ast.walk(tree)} - keep


def mutants_of(module: str, root: Path = ROOT) -> list[Mutant]:
    source = (root / module).read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    m = _Mutator(_skipped_nodes(tree) | _functions_only(tree))
    m.visit(tree)
    return [Mutant(module, i, line, what, lines[line - 1].strip() if 0 < line <= len(lines) else "",
                   ast.get_source_segment(source, node) or "")
            for i, (line, what, node) in enumerate(m.found)]


def mutated_source(module: str, index: int, root: Path = ROOT) -> str:
    tree = ast.parse((root / module).read_text())
    m = _Mutator(_skipped_nodes(tree) | _functions_only(tree), target=index)
    tree = m.visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree)


def _pytest_args(spec: list[str]) -> list[str]:
    args: list[str] = []
    for item in spec:
        if item.startswith("::k="):
            args += ["-k", item[4:]]
        elif item.startswith("::m="):
            args += ["-m", item[4:]]
        else:
            args.append(item)
    return args


#: imported once by the parent before it forks a test run per mutant (never ``workbench``: the child imports the
#: mutated tree); what each run would otherwise import again from scratch
PRELOAD = ("numpy", "yaml", "pytest", "_pytest.python", "_pytest.assertion.rewrite")


def _forked(copy: Path, spec: list[str], timeout: float, env: dict[str, str]) -> tuple[bool, float]:
    """:func:`_run` in a fork of this process (its preloaded modules shared): a fresh interpreter's startup is
    most of a run's time for these fast tests.  The child imports ``workbench`` from ``copy`` (never imported here)."""
    import signal
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:                                         # the child: run the tests, exit with their code
        code = 3
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.chdir(copy)
            os.environ.clear()
            os.environ.update(env)
            sys.dont_write_bytecode = True
            sys.path[:] = [str(copy)] + [p for p in sys.path if p and Path(p).resolve() != ROOT]
            import pytest
            code = int(pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-W", "ignore", *_pytest_args(spec)]))
        finally:
            os._exit(code)
    deadline = start + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) == 0, time.perf_counter() - start
        if time.perf_counter() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return False, time.perf_counter() - start
        time.sleep(0.05)


def _run(copy: Path, spec: list[str], timeout: float, env: dict[str, str]) -> tuple[bool, float]:
    """(tests passed, seconds) of ``spec`` run against the tree in ``copy``."""
    if _FORK:
        return _forked(copy, spec, timeout, env)
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-W", "ignore",
                               *_pytest_args(spec)], cwd=copy, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=timeout)
        ok = proc.returncode == 0
    except subprocess.TimeoutExpired:
        ok = False
    return ok, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated substrings of module paths (default: all)")
    parser.add_argument("--limit", type=int, default=0, help="at most N mutants per module, evenly spread")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--spawn", action="store_true",
                        help="a new interpreter per test run instead of a fork of this one (slower; no preloading)")
    args = parser.parse_args(argv)
    global _FORK
    _FORK = hasattr(os, "fork") and not args.spawn
    if _FORK:
        import importlib
        for name in PRELOAD:
            importlib.import_module(name)
    chosen = [m for m in MODULES if not args.only or any(o in m for o in args.only.split(","))]
    if args.list:
        for module in chosen:
            for mu in mutants_of(module):
                print(f"{module}:{mu.line}  #{mu.index}  {mu.what}" + ("  (equivalent)" if mu.equivalent else ""))
        return 0
    total = killed = equivalent = 0
    survivors: list[Mutant] = []
    with tempfile.TemporaryDirectory(prefix="wb-mutants-") as tmp:
        copy = Path(tmp) / "tree"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.egg-info",
                                                                  "reports", ".pytest_cache"))
        env = {**os.environ, "PYTHONPATH": str(copy), "WB_ZOO_ROOT": str(Path(tmp) / "zoo"),
               "PYTHONDONTWRITEBYTECODE": "1"}
        for module in chosen:
            spec = MODULES[module]
            if not all((copy / s).exists() for s in spec if not s.startswith("::")):
                print(f"SKIP  {module}: tests missing ({spec})")
                continue
            ok, base = _run(copy, spec, 1800, env)
            if not ok:
                print(f"SKIP  {module}: its tests fail unmutated")
                continue
            mutants = []
            for mu in mutants_of(module, copy):           # the copy: edits to the checkout meanwhile don't count
                if mu.equivalent:
                    equivalent += 1
                    print(f"EQUIVALENT {mu.module}:{mu.line} {mu.what}: {mu.equivalent}", flush=True)
                else:
                    mutants.append(mu)
            if args.limit and len(mutants) > args.limit:
                step = len(mutants) / args.limit
                mutants = [mutants[int(i * step)] for i in range(args.limit)]
            original = (copy / module).read_text()
            sources = {mu.index: mutated_source(module, mu.index, copy) for mu in mutants}
            k = 0
            try:
                for mu in mutants:
                    (copy / module).write_text(sources[mu.index])
                    passed, _ = _run(copy, spec, max(60.0, 4 * base), env)
                    if passed:
                        survivors.append(mu)
                        print(f"SURVIVED {mu.module}:{mu.line} {mu.what}", flush=True)
                    else:
                        k += 1
            finally:
                (copy / module).write_text(original)
            total += len(mutants)
            killed += k
            print(f"{module:<36} killed {k}/{len(mutants)} (tests {base:.0f}s)", flush=True)
    print(f"{len(survivors)} survivor(s) listed above")
    score = 100.0 * killed / total if total else 0.0
    print(f"{equivalent} equivalent mutant(s) left out (listed above with why)")
    print(f"killed={killed}/{total} score={score:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
