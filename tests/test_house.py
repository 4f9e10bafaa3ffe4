"""The house rules that keep the package navigable: the import graph has no circle and no upward import
(the layer order below), no module grows past MAX_LINES, and the vocabulary's enums are what the code uses."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"
MAX_LINES = 450

#: the layers, lowest first: a module imports from its own layer or below, never from above (function-level
#: and TYPE_CHECKING imports included).  A name is a module or a package (its modules, unless listed apart).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("errors", "vocab", "_io", "_results", "_validation", "display", "toolenv", "_cli", "findings",
                    "findings_catalogue", "findings_html", "findings_docs")),
    ("inputs", ("data", "models", "targets")),
    ("stages", ("calibration", "quantize", "evaluate", "placement", "board", "models.convert",
                "models.tflite_passes", "models.tflite_fold", "models.tflite_edit")),
    ("built-in models", ("models.builtin", "models.reference", "models.tradeoff", "models.keypoints")),  # scored
    # with evaluate's metrics (top-1, PCK)
    ("pipeline", ("chain", "pipeline")),
    ("runs", ("runs",)),
    ("workflows", ("run_findings", "run_summary", "explore", "sweep", "diff", "calibration.experiment")),
    ("batch", ("batch",)),
    ("commands", ("cli", "__main__", "docs", "findings_commands", "toolenv_commands", "*.commands")),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> int:
    """The layer index of ``module`` (``calibration.curate``): the longest listed prefix decides."""
    if module.endswith(".commands") or module == "commands":
        return len(LAYERS) - 1
    best, level = "", None
    for i, (_, names) in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > len(best):
                best, level = name, i
    if level is None:
        raise AssertionError(f"workbench.{module} is in no layer of tests/test_house.py: add it to LAYERS")
    return level


def import_graph() -> dict[str, set[str]]:
    """``{module: modules it imports}`` inside workbench (every import statement, wherever it is)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".") if package else []
                    base = base[: len(base) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                elif (node.module or "").startswith("workbench"):
                    target = node.module.removeprefix("workbench").lstrip(".")
                else:
                    continue
                candidates = [f"{target}.{a.name}".lstrip(".") for a in node.names] + [target]
            elif isinstance(node, ast.Import):
                candidates = [a.name.removeprefix("workbench").lstrip(".") for a in node.names
                              if a.name.startswith("workbench")]
            else:
                continue
            hit = next((c for c in candidates if c in modules and c), None)   # the module itself, else its package
            if hit is not None and hit != name:
                found.add(hit)
        graph[name] = found
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})"
                  for m, targets in graph.items() if m for t in targets if t and layer_of(t) > layer_of(m))


def test_the_import_graph_has_no_circle():
    found = circles(import_graph())
    assert not found, f"import circles: {found}"


def test_no_module_imports_from_a_layer_above_it():
    found = upward(import_graph())
    assert not found, "upward imports:\n" + "\n".join(found)


def test_the_checks_see_a_circle_and_an_upward_import():
    graph = {"runs": {"findings"}, "findings": {"runs"}, "vocab": {"batch.summary"}, "batch.summary": set()}
    assert circles(graph) == [["findings", "runs"]]
    assert upward(graph) == ["findings (foundation) imports runs (runs)", "vocab (foundation) imports batch.summary "
                             "(batch)"]


#: modules allowed over MAX_LINES, each with why (the list only shrinks: a split takes its line off).
#: Empty since issue 26 split the last ones (calibration.activations last); keep it so.
OVERSIZE: dict[str, str] = {}


def test_no_module_is_over_the_line_limit():
    sizes = {module_name(p): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    over = {m: n for m, n in sorted(sizes.items()) if n > MAX_LINES and m not in OVERSIZE}
    assert not over, f"modules over {MAX_LINES} lines (split them by responsibility): {over}"
    stale = [m for m in OVERSIZE if sizes.get(m, 0) <= MAX_LINES]
    assert not stale, f"no longer over the limit: take them off OVERSIZE: {stale}"


@pytest.mark.parametrize("enum, values", [
    ("Placement", ("NPU", "CPU")), ("Severity", ("info", "warning", "error")),
    ("Status", ("ok", "failed", "incomplete")), ("Runner", ("python", "benchmark_model", "local")),
    ("Coverage", ("complete", "partial", "none", "unknown")), ("ModelOrigin", ("shipped", "retrained", "trained")),
])
def test_the_vocabulary_has_its_enums(enum, values):
    from workbench import vocab
    assert tuple(getattr(vocab, enum)) == values


def test_the_code_uses_the_vocabulary():
    from workbench import findings, vocab
    from workbench.board.runners import RUNNERS
    from workbench.placement.analyze import CPU, NPU
    assert findings.SEVERITIES == vocab.SEVERITIES and RUNNERS == vocab.BOARD_RUNNERS
    assert (NPU, CPU) == (vocab.Placement.NPU, vocab.Placement.CPU) and isinstance(NPU, vocab.Placement)
