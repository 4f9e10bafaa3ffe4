"""The types every target table is made of, and small helpers to write checks.

A :class:`Constraint` is data: an ``id``, a general ``reason`` built from the
same numbers its check uses, the op types it ``applies_to`` (``None`` = every
op) and a ``check(graph, op)`` that returns the instance detail
(``"CONV_2D #3 input is FLOAT32"``) or ``None`` when the op satisfies it.
Targets evaluate every constraint on every op and keep all violations.

A :class:`ModelCheck` looks at the whole model (full integer, per-channel
weights, dynamic shapes) and returns its findings as data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..models.tflite_graph import OpInfo, TensorInfo, TFLiteGraph

OpCheck = Callable[[TFLiteGraph, OpInfo], "str | None"]
GraphCheck = Callable[[TFLiteGraph], "tuple[str, ...]"]

INTEGER_DTYPES = frozenset({"INT8", "UINT8", "INT16", "INT32", "INT64"})
QUANT_DTYPES = frozenset({"INT8", "UINT8"})
FLOAT_DTYPES = frozenset({"FLOAT32", "FLOAT16", "FLOAT64", "BFLOAT16"})

#: Ops whose input 1 holds weights and input 2 a bias (when present).
WEIGHTED_OPS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "CONV_3D"})


@dataclass(frozen=True)
class Reason:
    """One violated constraint on one op: which constraint and the instance detail."""

    constraint: str
    detail: str


@dataclass(frozen=True)
class Constraint:
    """A rule an op must satisfy to run on the NPU."""

    id: str
    reason: str
    check: OpCheck = field(repr=False, compare=False)
    applies_to: frozenset[str] | None = None
    source: str = ""
    exempt: frozenset[str] = frozenset()     # op types the rule does not apply to (an exception, as data)

    def applies(self, op: OpInfo) -> bool:
        return (self.applies_to is None or op.type in self.applies_to) and op.type not in self.exempt

    def evaluate(self, graph: TFLiteGraph, op: OpInfo) -> Reason | None:
        if not self.applies(op):
            return None
        detail = self.check(graph, op)
        return None if detail is None else Reason(self.id, detail)

    def describe_scope(self) -> str:
        scope = "all ops" if self.applies_to is None else ", ".join(sorted(self.applies_to))
        return scope + (f" except {', '.join(sorted(self.exempt))}" if self.exempt else "")


@dataclass(frozen=True)
class Finding:
    """A model-level observation (quantization, shapes) with its severity."""

    check: str
    severity: str          # "error" (blocks the NPU path) or "warning" (likely slowdown)
    detail: str


@dataclass(frozen=True)
class ModelCheck:
    """A whole-model check; ``check(graph)`` returns one detail string per problem."""

    id: str
    reason: str
    severity: str
    check: GraphCheck = field(repr=False, compare=False)
    source: str = ""

    def evaluate(self, graph: TFLiteGraph) -> tuple[Finding, ...]:
        return tuple(Finding(self.id, self.severity, d) for d in self.check(graph))


# --------------------------------------------------------------------------- helpers

def label(op: OpInfo) -> str:
    """``CONV_2D #3`` - how every detail names an op."""
    return f"{op.type} #{op.index}"


def tensor_at(graph: TFLiteGraph, op: OpInfo, position: int) -> TensorInfo | None:
    if position >= len(op.inputs):
        return None
    return graph.tensor(op.inputs[position])


def activations(graph: TFLiteGraph, op: OpInfo) -> list[TensorInfo]:
    """Non-constant inputs and all outputs: the feature maps of an op."""
    return [t for t in graph.op_inputs(op) if not t.is_constant] + graph.op_outputs(op)


def first(items: Iterable[str | None]) -> str | None:
    """Join the non-empty details (one constraint may hit several tensors)."""
    found = [i for i in items if i]
    return "; ".join(found) if found else None


def ops_set(*names: str) -> frozenset[str]:
    return frozenset(names)


def is_float_tensor(t: TensorInfo) -> bool:
    return t.dtype in FLOAT_DTYPES


def non_integer_ops(graph: TFLiteGraph) -> tuple[int, ...]:
    """Ops with a float feature map (input or output that is not a constant)."""
    return tuple(op.index for op in graph.ops
                 if any(is_float_tensor(t) for t in activations(graph, op)))


def has_integer_activations(graph: TFLiteGraph) -> bool:
    """True when at least one op reads or writes a quantized integer feature map.

    INT8/UINT8, and INT16 with quantization parameters (the 16x8 recipe ``a16w8_pc``): whether a
    target then runs a 16-bit op is for its constraints to say, not a reason to call it float.
    """
    return any(t.dtype in QUANT_DTYPES or (t.dtype == "INT16" and t.is_quantized)
               for op in graph.ops for t in activations(graph, op))


def dynamic_tensors(graph: TFLiteGraph) -> tuple[str, ...]:
    """One detail per model input or op tensor whose signature has a -1 dimension."""
    seen: dict[int, str] = {}
    for t in graph.input_tensors():
        if t.is_dynamic:
            seen[t.index] = f"input '{t.name}' has shape signature {list(t.shape_signature)}"
    for op in graph.ops:
        for t in activations(graph, op):
            if t.index not in seen and t.is_dynamic:
                seen[t.index] = f"{label(op)} tensor '{t.name}' has shape signature {list(t.shape_signature)}"
    return tuple(seen.values())


def check_dynamic_shapes(graph: TFLiteGraph) -> tuple[str, ...]:
    found = dynamic_tensors(graph)
    if not found:
        return ()
    return (f"{len(found)} tensor(s) with dynamic dimensions, first: {found[0]}. "
            "Re-export with a fixed input shape and batch 1.",)


def check_full_integer(graph: TFLiteGraph) -> tuple[str, ...]:
    idx = non_integer_ops(graph)
    if not idx:
        return ()
    ops = [graph.ops[i] for i in idx]
    listed = ", ".join(label(o) for o in ops[:8]) + (" ..." if len(ops) > 8 else "")
    return (f"{len(ops)} op(s) with float feature maps: {listed}",)


# --------------------------------------------------------------------------- BSP releases

@dataclass(frozen=True)
class BspRelease:
    """One NXP BSP release a target knows: the toolchain it ships and the rules that apply to it.

    ``toolchain`` pairs a component with its version (``("vela", "3.10.0")``,
    ``("delegate", "tflite-ethosu-delegate-imx lf-6.6.3_1.0.0 (6fb32a1)")``).  ``compiler`` /
    ``compiler_version`` name the tool that decides placement for this release (Vela on the i.MX 93;
    the delegate's own op map elsewhere).  ``tool_env`` is the :mod:`workbench.toolenv` name that
    runs that compiler here ("" when none can run off the board).  ``supported_ops`` and
    ``constraints`` replace the target's tables for this release when they differ; ``has_rules``
    is False for a release whose version the facts state but whose operator rules they do not.
    """

    id: str
    toolchain: tuple[tuple[str, str], ...]
    source: str
    compiler: str = ""
    compiler_version: str = ""
    tool_env: str = ""
    supported_ops: frozenset[str] | None = None
    constraints: tuple[Constraint, ...] | None = None
    has_rules: bool = True
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.toolchain)


# --------------------------------------------------------------------------- target

@dataclass(frozen=True)
class Target:
    """One i.MX NPU as data: what it is, which ops it takes, and the rules it applies."""

    id: str
    name: str
    soc: str
    npu: str
    delegate: str                        # the library benchmark_model loads
    runtime: str                         # BSP / tool version the table describes
    sources: tuple[str, ...]
    supported_ops: frozenset[str]
    constraints: tuple[Constraint, ...]
    model_checks: tuple[ModelCheck, ...]
    authority: str                       # "vela" or "rule table (predicted)"
    dtypes: tuple[str, ...] = ("INT8", "UINT8")
    npu_custom_ops: frozenset[str] = frozenset()   # custom codes already compiled for this NPU
    recipe: str = "a8w8_pc"              # the quantization recipe to run for this target
    notes: tuple[str, ...] = ()
    bsp_releases: tuple[BspRelease, ...] = ()   # oldest first
    bsp: str = ""                        # the release whose rules this table holds
    compiler: str = ""                   # the tool whose output decides placement when installed: "vela",
    #                                      "neutron-converter"; "" = the rule table decides (the delegate compiles)
    compiler_estimates_latency: bool = False   # the compiler reports a latency estimate (Vela)
    deploys_compiled: bool = False       # the board loads the compiler's output, not the INT8 .tflite
    per_channel_fast: bool = True        # per-channel weights run at per-tensor speed on this NPU

    @property
    def delegate_path(self) -> str:
        """Where the BSP usually installs the delegate library on the board."""
        return self.delegate if self.delegate.startswith("/") else f"/usr/lib/{self.delegate}"

    @property
    def default_bsp(self) -> str:
        """The newest release the tables have rules for."""
        with_rules = [r.id for r in self.bsp_releases if r.has_rules]
        return with_rules[-1] if with_rules else ""

    @property
    def release(self) -> BspRelease | None:
        """The :class:`BspRelease` this table describes (None for a target without releases)."""
        for r in self.bsp_releases:
            if r.id == (self.bsp or self.default_bsp):
                return r
        return None

    def for_bsp(self, bsp: str | None = None) -> Target:
        """This target with the rules of BSP release ``bsp`` (default: the newest with rules).

        Raises :class:`~workbench.errors.TargetError` naming the known releases for an
        unknown one, and for a release the facts give a version but no operator rules for.
        """
        from .._validation import check_choice
        from ..errors import TargetError
        if bsp is None or bsp == "":
            bsp = self.default_bsp
        if bsp == self.bsp:
            return self
        check_choice("bsp", bsp, [r.id for r in self.bsp_releases], error=TargetError)
        rel = next(r for r in self.bsp_releases if r.id == bsp)
        if not rel.has_rules:
            usable = ", ".join(r.id for r in self.bsp_releases if r.has_rules)
            raise TargetError(
                f"{self.id}: BSP {bsp} ships {rel.describe()}, but the tables have no operator rules "
                f"for it ({rel.source}). Use one of: {usable}.")
        import dataclasses
        return dataclasses.replace(
            self, bsp=bsp,
            supported_ops=rel.supported_ops if rel.supported_ops is not None else self.supported_ops,
            constraints=rel.constraints if rel.constraints is not None else self.constraints)

    def evaluate_op(self, graph: TFLiteGraph, op: OpInfo) -> tuple[Reason, ...]:
        """Every violated constraint of ``op`` (empty when the op can run on the NPU)."""
        if op.type in self.npu_custom_ops:
            return ()
        return tuple(r for r in (c.evaluate(graph, op) for c in self.constraints) if r is not None)

    def evaluate_model(self, graph: TFLiteGraph) -> tuple[Finding, ...]:
        return tuple(f for check in self.model_checks for f in check.evaluate(graph))

    def constraint(self, constraint_id: str) -> Constraint:
        for c in self.constraints:
            if c.id == constraint_id:
                return c
        raise KeyError(constraint_id)

    def summary(self) -> str:
        return (f"{self.id}: {self.name} ({self.npu}), {len(self.supported_ops)} ops, "
                f"{len(self.constraints)} constraints, placement by {self.authority}")

    def to_dict(self) -> dict:
        return {
            "id": self.id, "name": self.name, "soc": self.soc, "npu": self.npu,
            "delegate": self.delegate, "runtime": self.runtime, "sources": list(self.sources),
            "authority": self.authority, "dtypes": list(self.dtypes), "recipe": self.recipe,
            "supported_ops": sorted(self.supported_ops),
            "npu_custom_ops": sorted(self.npu_custom_ops),
            "constraints": [{"id": c.id, "reason": c.reason, "applies_to": (
                None if c.applies_to is None else sorted(c.applies_to)), "source": c.source}
                for c in self.constraints],
            "model_checks": [{"id": m.id, "reason": m.reason, "severity": m.severity,
                              "source": m.source} for m in self.model_checks],
            "notes": list(self.notes),
            "bsp": self.bsp or self.default_bsp,
            "bsp_releases": [{"id": r.id, "toolchain": [list(kv) for kv in r.toolchain],
                              "compiler": r.compiler, "compiler_version": r.compiler_version,
                              "tool_env": r.tool_env, "has_rules": r.has_rules, "source": r.source,
                              "notes": list(r.notes)} for r in self.bsp_releases],
        }

    def to_markdown(self) -> str:
        """The generated ``docs/targets/<id>.md`` page (kept in sync by a test)."""
        def cell(text: str) -> str:
            return str(text).replace("|", "\\|").replace("\n", " ")

        lines = [
            f"# {self.id}: {self.name}",
            "",
            "<!-- Generated by `workbench targets --docs` from "
            f"workbench/targets/{self.id}.py. Do not edit by hand. -->",
            "",
            "| field | value |",
            "| --- | --- |",
            f"| SoC | {cell(self.soc)} |",
            f"| NPU | {cell(self.npu)} |",
            f"| delegate | `{cell(self.delegate)}` |",
            f"| runtime / tool version described | {cell(self.runtime)} |",
            f"| placement authority | {cell(self.authority)} |",
            f"| data types | {', '.join(self.dtypes)} |",
            f"| recipe to run | `{self.recipe}` |",
            "",
        ]
        if self.notes:
            lines += ["## Notes", ""] + [f"- {n}" for n in self.notes] + [""]
        lines += ["## Sources", ""] + [f"- {s}" for s in self.sources] + [""]
        if self.bsp_releases:
            lines += ["## BSP releases", "",
                      f"`--bsp` picks one; the default is the newest with rules (`{self.default_bsp}`). "
                      f"The tables below are those of `{self.bsp or self.default_bsp}`.", "",
                      "| release | toolchain | placement by | rules | source |",
                      "| --- | --- | --- | --- | --- |"]
            for r in reversed(self.bsp_releases):
                by = f"{r.compiler} {r.compiler_version}".strip() or "rule table"
                if r.tool_env:
                    by += f" (tool env `{r.tool_env}`)"
                rules = "yes" if r.has_rules else "no (version only)"
                if r.supported_ops is not None or r.constraints is not None:
                    rules += "; own op set/constraints" if r.has_rules else ""
                lines.append(f"| `{r.id}` | {cell(r.describe())} | {cell(by)} | {rules} | {cell(r.source)} |")
            for r in reversed(self.bsp_releases):
                lines += [f"- `{r.id}`: {cell(n)}" for n in r.notes]
            lines.append("")
        lines += [f"## Operators on the NPU ({len(self.supported_ops)})", "",
                  ", ".join(sorted(self.supported_ops)), ""]
        if self.npu_custom_ops:
            lines += ["Custom ops already compiled for this NPU: "
                      + ", ".join(f"`{c}`" for c in sorted(self.npu_custom_ops)), ""]
        lines += [f"## Op constraints ({len(self.constraints)})", "",
                  "An op runs on the NPU only if it satisfies every constraint that applies to it.",
                  "", "| id | applies to | reason | source |", "| --- | --- | --- | --- |"]
        for c in self.constraints:
            lines.append(f"| `{c.id}` | {cell(c.describe_scope())} | {cell(c.reason)} | {cell(c.source)} |")
        lines += ["", f"## Model checks ({len(self.model_checks)})", "",
                  "| id | severity | reason | source |", "| --- | --- | --- | --- |"]
        for m in self.model_checks:
            lines.append(f"| `{m.id}` | {m.severity} | {cell(m.reason)} | {cell(m.source)} |")
        return "\n".join(lines) + "\n"
