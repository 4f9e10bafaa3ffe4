"""The cells of a sweep and the fallback-aware exclusion sets.

A :class:`SweepSpec` names the axes (targets, recipes, calibration strategies and
sizes, exclusion sets); :func:`plan_cells` crosses them.  Exclusion sets are named:

- ``none``: full integer;
- ``cpu-ops``: the op types the target runs on the CPU anyway (read from the
  placement of the full-integer model of the same recipe: a compiler may place one
  recipe's op on the NPU and another's on the CPU): keeping them in float costs no NPU op;
- ``worst-K``: the K tensors with the largest quantization error relative to their
  scale (:func:`workbench.quantize.layer_errors`), kept in float; on an NPU that is a
  CPU island unless the op is at an end of the graph, and the recommendation states its
  latency cost.

Exclusion sets are resolved per target before the cells run (:func:`resolve_exclusions`).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from .._results import Result
from .._validation import check_choice
from ..errors import WorkbenchError
from ..pipeline.options import CalibrationOptions, EvaluationOptions, PlacementOptions
from ..vocab import STRATEGIES, TARGETS


class SweepError(WorkbenchError):
    """A sweep that cannot be planned or run (bad axis value, unreachable scheduler)."""


DEFAULT_RECIPES = ("a8w8_pc", "a8w8_pt", "a8w8_pt+cle")
DEFAULT_STRATEGIES = ("random", "stratified")
DEFAULT_SIZES = (64, 256)
DEFAULT_EXCLUSIONS = ("none",)
#: the RunSpec options a sweep takes whole (timing: the sweep times each cell on the host itself)
SPEC_OPTIONS = ("calibration", "evaluation", "placement")
_EXCLUSION = re.compile(r"^(none|cpu-ops|worst-[1-9][0-9]*)$")


@dataclass(frozen=True)
class SweepCell(Result):
    """One point of the sweep: where, how to quantize, which calibration, what stays in float."""

    target: str
    recipe: str
    strategy: str
    size: int
    exclusion: str = "none"             # the exclusion set's name
    exclude: tuple[str, ...] = ()       # its resolved ops / tensor names

    @property
    def label(self) -> str:
        return f"{self.target} {self.recipe} {self.strategy}/{self.size}" + (
            "" if self.exclusion == "none" else f" excl {self.exclusion}")

    def summary(self) -> str:
        return self.label + (f" ({', '.join(self.exclude)})" if self.exclude else "")


@dataclass(frozen=True)
class SweepSpec(Result):
    """The axes of a sweep (validated when built)."""

    model: str = "tradeoff"
    dataset: str = "digits-conditions"
    targets: tuple[str, ...] = TARGETS
    recipes: tuple[str, ...] = DEFAULT_RECIPES
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    sizes: tuple[int, ...] = DEFAULT_SIZES
    exclusions: tuple[str, ...] = DEFAULT_EXCLUSIONS
    seed: int = 0
    n_bootstrap: int = 500
    use_vela: bool = True
    time_host_cpu: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    input_spec: str = ""            # the model's input contract (a card YAML path); empty: the card beside it
    # the stages' options every cell starts from, whole (None: the defaults); the axes above replace their
    # fields (n, strategy, seed, n_bootstrap, use_compiler): any other option reaches every cell as given
    calibration: CalibrationOptions | None = None
    evaluation: EvaluationOptions | None = None
    placement: PlacementOptions | None = None

    def command(self) -> str:
        """The ``workbench sweep`` command line that runs this spec (the sweep report states it)."""
        import shlex
        return " ".join(["workbench sweep", "--model", shlex.quote(self.model), "--data", shlex.quote(self.dataset),
                         "--targets", ",".join(self.targets), "--recipes", ",".join(self.recipes),
                         "--strategies", ",".join(self.strategies), "--sizes", ",".join(map(str, self.sizes)),
                         "--exclusions", ",".join(self.exclusions)]
                        + (["--no-vela"] if not self.use_vela else [])
                        + (["--input-spec", shlex.quote(self.input_spec)] if self.input_spec else []))

    def __post_init__(self) -> None:
        from ..quantize.recipe import get_recipe
        from ..targets import target_ids
        for name in ("targets", "recipes", "strategies", "sizes", "exclusions"):
            value = getattr(self, name)
            if isinstance(value, str):          # "a,b" from a notebook parameter or the CLI
                value = tuple(v.strip() for v in value.split(",") if v.strip())
            elif isinstance(value, int):
                value = (value,)
            value = tuple(value)
            if name == "sizes":
                try:
                    value = tuple(int(v) if isinstance(v, str) else v for v in value)
                except ValueError:
                    raise SweepError(f"calibration `sizes` must be positive integers. Got {value!r} instead.") from None
            if not value:
                raise SweepError(f"`{name}` must name at least one value. Got an empty list instead.")
            object.__setattr__(self, name, value)
        for t in self.targets:
            check_choice("target", t, target_ids(), error=SweepError)
        for s in self.strategies:
            check_choice("strategy", s, STRATEGIES, error=SweepError)
        for r in self.recipes:
            try:
                get_recipe(r)
            except WorkbenchError as exc:
                raise SweepError(f"recipe {r!r}: {exc}") from None
        for n in self.sizes:
            if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                raise SweepError(f"calibration `sizes` must be positive integers. Got {n!r} instead.")
        for e in self.exclusions:
            if not _EXCLUSION.match(e):
                raise SweepError(f"exclusion set {e!r} is unknown; use 'none', 'cpu-ops' or 'worst-K' "
                                 "(K a positive integer, e.g. 'worst-2').")

    def options(self) -> dict[str, Any]:
        """The stages' options of every cell (:class:`~workbench.pipeline.RunSpec`'s ``calibration``,
        ``evaluation``, ``placement``) with the sweep's seed, bootstrap draws and compiler choice."""
        import dataclasses

        from ..pipeline.spec import OPTION_GROUPS
        given = {name: getattr(self, name) or OPTION_GROUPS[name]() for name in SPEC_OPTIONS}
        return {"calibration": dataclasses.replace(given["calibration"], seed=self.seed),
                "evaluation": dataclasses.replace(given["evaluation"], n_bootstrap=self.n_bootstrap, seed=self.seed),
                "placement": dataclasses.replace(given["placement"], use_compiler=self.use_vela)}

    def options_key(self) -> dict[str, Any]:
        """The options given beyond the defaults, for a cell's content key (empty when none: the keys of the
        sweeps made before the options were a field stay the same)."""
        from ..pipeline.spec import OPTION_GROUPS
        return {name: getattr(self, name).to_dict() for name in SPEC_OPTIONS
                if getattr(self, name) is not None and getattr(self, name) != OPTION_GROUPS[name]()}

    @property
    def n_cells(self) -> int:
        return (len(self.targets) * len(self.recipes) * len(self.strategies) * len(self.sizes)
                * len(self.exclusions))

    def summary(self) -> str:
        return (f"sweep of {self.model} on {self.dataset}: {len(self.targets)} target(s) x {len(self.recipes)} "
                f"recipe(s) x {len(self.strategies)} strategy(ies) x {len(self.sizes)} size(s) x "
                f"{len(self.exclusions)} exclusion set(s) = {self.n_cells} cells")


def plan_cells(spec: SweepSpec, exclusions: dict[tuple[str, ...], tuple[str, ...]] | None = None
               ) -> tuple[SweepCell, ...]:
    """Every cell of ``spec``; ``exclusions[(target, name, recipe)]`` (or ``[(target, name)]`` for every
    recipe) gives a set's resolved ops."""
    found = exclusions or {}
    cells = []
    for target, recipe, strategy, size, excl in itertools.product(
            spec.targets, spec.recipes, spec.strategies, spec.sizes, spec.exclusions):
        ops = () if excl == "none" else found.get((target, excl, recipe), found.get((target, excl), ()))
        if excl != "none" and not ops:
            continue          # nothing to exclude on this target: the cell equals the 'none' cell
        cells.append(SweepCell(target=target, recipe=recipe, strategy=strategy, size=size,
                               exclusion=excl, exclude=tuple(ops)))
    return tuple(cells)


def resolve_exclusions(spec: SweepSpec, model_path: str, dataset: Any) -> dict[tuple[str, ...], tuple[str, ...]]:
    """The ops/tensors of each named exclusion set: ``{(target, name, recipe): ...}`` or ``{(target, name): ...}``.

    ``cpu-ops``: per target and recipe, the op types placed on the CPU in that recipe's
    full-integer model (first strategy and size).  ``worst-K``: the K tensors with the largest
    RMSE/scale in the first recipe's quantization (layer errors on the calibration samples),
    the same on every target and recipe.
    """
    names = [e for e in spec.exclusions if e != "none"]
    if not names:
        return {}
    import dataclasses

    from ..pipeline import MemoStore, Pipeline, RunSpec
    from ..quantize.layer_errors import layer_errors
    recipe = next((r for r in spec.recipes if "+" not in r), spec.recipes[0])
    options = spec.options()
    base = RunSpec(model_path, dataset, target=spec.targets[0], recipe=recipe, input_spec=spec.input_spec,
                   calibration=dataclasses.replace(options["calibration"], n=spec.sizes[0],
                                                   strategy=spec.strategies[0]),
                   evaluation=options["evaluation"], placement=options["placement"])
    store = MemoStore()            # one calibration, one quantization per recipe, shared by the targets
    calib = Pipeline(base, store).calibrate()
    out: dict[tuple[str, ...], tuple[str, ...]] = {}
    if "cpu-ops" in names:
        for r in spec.recipes:
            for t in spec.targets:
                report = Pipeline(base.replace(target=t, recipe=r), store).place()
                out[(t, "cpu-ops", r)] = tuple(sorted({o.type for o in report.ops if o.placement == "CPU"
                                                       and o.type not in ("QUANTIZE", "DEQUANTIZE")}))
    worst = [e for e in names if e.startswith("worst-")]
    if worst:
        errors = layer_errors(model_path, recipe, calib, dataset=base.data)
        ranked = [r.tensor for r in errors.worst(len(errors.rows))
                  if r.op not in ("QUANTIZE", "DEQUANTIZE") and r.tensor]
        for e in worst:
            k = int(e.split("-")[1])
            for t in spec.targets:
                out[(t, e)] = tuple(ranked[:k])
    return out
