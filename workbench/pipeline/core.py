"""``Pipeline(spec, store)``: calibrate -> quantize -> evaluate -> place -> time, each step once.

Each step loads its result from the store when it still fits the request (the rules of
:mod:`workbench.chain`: same options and dataset, same recipe and calibration, the same INT8 file,
target and BSP), else computes it and saves it.  The step before is taken the same way, so
``Pipeline(spec, store).place()`` calibrates and quantizes only what is missing.

This is the one place that calls the stages' compute functions in a row; the clients (stage
notebooks, run folders, the explorer, the sweep's cells, the batch and the calibration experiment)
build a :class:`~workbench.pipeline.spec.RunSpec` and a store, and ask the pipeline.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from .._io import stable_hash
from ..chain import StageChain
from ..errors import BatchError
from ..vocab import STAGES
from .spec import RunSpec
from .store import MemoStore, Store

__all__ = ["Pipeline", "accuracy_fits", "timing_fits"]


def accuracy_fits(saved: Any, quantized: Any, spec: RunSpec) -> bool:
    """``saved`` (an ``AccuracyReport``) measured this INT8 file on this dataset with these options."""
    ev = spec.evaluation
    return (quantized.sha256 in saved.model_sha256.values() and saved.dataset_hash == spec.dataset_hash
            and saved.split == ev.split and saved.n_bootstrap == ev.n_bootstrap and saved.seed == ev.seed
            and (not ev.metric or saved.metric == ev.metric))


def timing_fits(saved: Any, model_sha256: str, spec: RunSpec) -> bool:
    """``saved`` (a ``TimingResult``) timed this file where the spec says, with as many runs.  A board is
    timed again every time (a measurement, not a computation); the host CPU and a replay are reused."""
    t = spec.timing
    if t.board:
        return False
    return (saved.model_sha256 == model_sha256 and saved.n_runs == t.runs and saved.n_warmup == t.warmup
            and saved.on_board == bool(t.replay))


class Pipeline:
    """One :class:`RunSpec` through the stages, with results kept in ``store`` (default: in memory)."""

    def __init__(self, spec: RunSpec, store: Store | None = None) -> None:
        if not isinstance(spec, RunSpec):
            raise TypeError(f"`spec` must be a RunSpec. Got {type(spec).__name__} instead.")
        if not spec.resolved:
            raise BatchError("a Pipeline needs a resolved RunSpec (built with resolve=True).")
        self.spec = spec
        self.store: Store = store if store is not None else MemoStore()
        recipe = spec.recipe if not isinstance(spec.recipe, str) else spec.recipe_name
        self.chain = StageChain(spec.source_model, spec.data, target=spec.target, recipe=recipe,
                                input_spec=spec.stage_input_spec, bsp=spec.bsp or None)
        self.computed: list[str] = []          # the stages computed (not loaded) by this pipeline, in order

    def __repr__(self) -> str:
        return f"Pipeline({self.spec.summary()!r}, {self.store!r})"

    # -- one step ----------------------------------------------------------------------------------
    def _step(self, stage: str, key_parts: dict[str, Any], fits: Callable[[Any], bool],
              compute: Callable[[], Any]) -> Any:
        key = stable_hash({"stage": stage, **key_parts})[:24]
        saved = self.store.get(stage, key)
        if saved is not None:
            if fits(saved):
                return saved
            self.store.rejected(stage)
        result = compute()
        self.store.put(stage, key, result, self.spec.to_parameters(stage=stage))
        self.computed.append(stage)
        return result

    def _contract_key(self) -> Any:
        return self.spec.contract.to_params() if self.spec.contract_stated else None

    # -- the stages ----------------------------------------------------------------------------
    def calibrate(self) -> Any:
        """The calibration set (``spec.calibration``) drawn from the dataset."""
        options = self.spec.calibration
        return self._step("calibration", {"dataset": self.spec.dataset_hash, "options": options.to_dict(),
                                          "model": self.spec.source_model, "contract": self._contract_key()},
                          lambda saved: self.chain.calibration_fits(saved, options),
                          lambda: self.chain.calibrate(options))

    def quantize(self, calibration: Any = None, *, output: str | os.PathLike | None = None) -> Any:
        """The INT8 model quantized with the spec's recipe from ``calibration`` (default: :meth:`calibrate`).
        ``output``: where the model goes (default: the store's place for it, else the workbench cache)."""
        cal = calibration if calibration is not None else self.calibrate()
        where = output if output is not None else self.store.output("quantize")
        return self._step("quantize", {"calibration": cal.hash, "recipe": self.spec.quant_recipe.key(),
                                       "model": self.spec.source_model, "contract": self._contract_key()},
                          lambda saved: self.chain.quantized_fits(saved, cal),
                          lambda: self.chain.quantize(cal, output=where))

    def evaluate(self, quantized: Any = None) -> Any:
        """FP32 against the INT8 model on every condition of the evaluation split (an ``AccuracyReport``)."""
        q = quantized if quantized is not None else self.quantize()
        spec, ev = self.spec, self.spec.evaluation
        return self._step("accuracy", {"model": q.sha256, "fp32": spec.fp32_model, "dataset": spec.dataset_hash,
                                       "options": ev.to_dict(), "contract": self._contract_key()},
                          lambda saved: accuracy_fits(saved, q, spec),
                          lambda: self.compare({q.recipe.name: q.path}))

    def compare(self, candidates: Any, *, fp32_model: Any = None) -> Any:
        """The FP32 model (default: the spec's baseline) against several ``candidates`` (``{name: model}``) with
        the spec's dataset, input contract and evaluation options, not kept in the store (the calibration
        experiment compares its strategies this way)."""
        from ..evaluate.accuracy import compare_accuracy
        spec, ev = self.spec, self.spec.evaluation
        return compare_accuracy(fp32_model if fp32_model is not None else spec.fp32_model, candidates, spec.data,
                                split=ev.split, conditions=list(ev.conditions) or None, n_bootstrap=ev.n_bootstrap,
                                seed=ev.seed, num_threads=ev.num_threads, input_spec=spec.contract,
                                metric=ev.metric or None)

    def place(self, quantized: Any = None) -> Any:
        """Every op of the INT8 model placed on the target under the spec's BSP release."""
        q = quantized if quantized is not None else self.quantize()
        use = self.spec.placement.use_compiler
        return self._step("placement", {"model": q.sha256, "target": self.spec.target, "bsp": self.spec.bsp_release,
                                        "options": self.spec.placement.to_dict()},
                          lambda saved: self.chain.placement_fits(saved, q),
                          lambda: self.chain.place(q, use_compiler=use))

    def deployable(self, quantized: Any, placement: Any = None) -> str:
        """The file a board loads: the target's compiled model when its compiler wrote one and the model goes
        to a board (or a board's recording), else the INT8 model (the host CPU has no NPU)."""
        from ..targets import get_target
        compiled = getattr(placement, "compiled_model", None) or getattr(placement, "vela_model", None)
        if (self.spec.timing.on_board and compiled and self.spec.target is not None
                and get_target(self.spec.target).deploys_compiled):
            return str(compiled)
        return str(quantized.path)

    def time(self, quantized: Any = None, placement: Any = None) -> Any:
        """Latency where ``spec.timing`` says: a board, a recording, or the host CPU (labelled, not an NPU)."""
        q = quantized if quantized is not None else self.quantize()
        p = placement if placement is not None else self.place(q)
        t, spec = self.spec.timing, self.spec
        model = self.deployable(q, p)
        from .._io import sha256_file
        model_sha = sha256_file(model)

        def compute() -> Any:
            from ..board.timing import time_on_board
            accuracy = (dict(dataset=spec.data, fp32_model=spec.source_model, int8_model=q.path,
                             samples=t.accuracy_samples) if t.board and t.accuracy_samples else None)
            return time_on_board(model, board=t.board or None, local=not t.on_board, replay=t.replay or None,
                                 record=t.record or None, runs=t.runs, warmup=t.warmup, placement=p,
                                 accuracy=accuracy)
        return self._step("timing", {"model": model_sha, "options": t.to_dict(), "target": spec.target},
                          lambda saved: timing_fits(saved, model_sha, spec), compute)

    def run(self, stages: Sequence[str] = STAGES) -> dict[str, Any]:
        """The results of ``stages`` (default all five), by stage name; the steps before are taken as needed."""
        out: dict[str, Any] = {}
        for stage in STAGES:
            if stage not in stages:
                continue
            if stage == "calibration":
                out[stage] = self.calibrate()
            elif stage == "quantize":
                out[stage] = self.quantize()
            elif stage == "accuracy":
                out[stage] = self.evaluate()
            elif stage == "placement":
                out[stage] = self.place()
            else:
                out[stage] = self.time()
        return out
