"""One options object per stage of the pipeline (plain, validated data).

:class:`CalibrationOptions` (how the calibration set is drawn; :mod:`workbench.chain` re-exports it),
:class:`EvaluationOptions`, :class:`PlacementOptions` and :class:`TimingSettings` say how the accuracy is
measured, how ops are placed and where the model is timed.  This module imports no stage: the CLI reads
the options' fields to build its flags (:mod:`workbench.pipeline.flags`).  Each is a frozen
:class:`~workbench._results.Result` (``to_dict``/``from_dict``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._results import Result
from .._validation import check_choice, check_finite, check_positive_int
from ..errors import BoardError, CalibrationError, EvaluationError
from ..vocab import STRATEGIES

if TYPE_CHECKING:
    from ..calibration.curate import CalibrationSet

__all__ = ["CalibrationOptions", "EvaluationOptions", "PlacementOptions", "TimingSettings"]


@dataclass(frozen=True)
class CalibrationOptions(Result):
    """How the calibration set is drawn: the parameters of
    :func:`~workbench.calibration.curate.curate_calibration_set` besides the dataset and the model.

    ``n`` samples from the ``pool`` split with ``strategy`` (``random``, ``stratified``,
    ``coverage``) and ``seed``; ``condition_weights`` the expected deployment mix (None: the
    dataset's conditions, equally).
    """

    n: int = 200
    strategy: str = "stratified"
    seed: int = 0
    condition_weights: dict[str, float] | None = None
    pool: str = "calibration"

    def __post_init__(self) -> None:
        check_positive_int("n", self.n, error=CalibrationError)
        check_choice("strategy", self.strategy, STRATEGIES, error=CalibrationError)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise CalibrationError(f"`seed` must be an integer. Got {self.seed!r} instead.")
        if self.condition_weights is not None:
            if not isinstance(self.condition_weights, Mapping):
                raise CalibrationError(f"`condition_weights` must be a mapping {{condition: weight}}. "
                                       f"Got {self.condition_weights!r} instead.")
            weights = {str(c): check_finite(f"condition_weights[{c!r}]", w, error=CalibrationError)
                       for c, w in self.condition_weights.items()}
            object.__setattr__(self, "condition_weights", weights)

    def fits(self, calibration: CalibrationSet, dataset_hash: str) -> bool:
        """``calibration`` was drawn with these options from the dataset with ``dataset_hash``."""
        saved_weights = calibration.params.get("condition_weights") if calibration.params else None
        return ((calibration.n, calibration.strategy, calibration.seed, calibration.dataset_hash, calibration.pool)
                == (self.n, self.strategy, self.seed, dataset_hash, self.pool)
                and (saved_weights or None) == (self.condition_weights or None))

    def summary(self) -> str:
        weights = f", weights {self.condition_weights}" if self.condition_weights else ""
        return f"{self.strategy} calibration of {self.n} from {self.pool!r} (seed {self.seed}{weights})"



@dataclass(frozen=True)
class EvaluationOptions(Result):
    """How the INT8 model is compared with FP32 (the parameters of
    :func:`~workbench.evaluate.accuracy.compare_accuracy` besides the models and the dataset).

    ``metric``: ``top1``, ``pck`` or ``module:function``; empty: the dataset's default."""

    metric: str = ""
    split: str = "test"
    n_bootstrap: int = 1000
    seed: int = 0
    num_threads: int | None = None
    conditions: tuple[str, ...] = ()          # empty: every condition of the split

    def __post_init__(self) -> None:
        object.__setattr__(self, "conditions", tuple(self.conditions or ()))
        check_positive_int("n_bootstrap", self.n_bootstrap, error=EvaluationError)
        if self.num_threads is not None:
            check_positive_int("num_threads", self.num_threads, error=EvaluationError)

    def summary(self) -> str:
        return f"{self.metric or 'default metric'} on {self.split!r} ({self.n_bootstrap} bootstrap draws)"


@dataclass(frozen=True)
class PlacementOptions(Result):
    """How ops are placed (:func:`~workbench.placement.analyze.analyze_placement`): with the target's
    compiler when it is installed (``use_compiler``; Vela on imx93, the Neutron converter on imx95),
    else from the rule table."""

    use_compiler: bool = True

    def summary(self) -> str:
        return "placed by the target's compiler when installed" if self.use_compiler else "placed by the rule table"


@dataclass(frozen=True)
class TimingSettings(Result):
    """Where and how the timing stage runs: a ``board`` of ``boards.yaml`` (empty: the host CPU,
    labelled not an NPU) or a ``replay`` recording, ``runs`` timed after ``warmup``, ``record`` the
    board session to a folder, ``accuracy_samples`` per condition for the on-board accuracy (0 skips)."""

    board: str = ""
    replay: str = ""
    record: str = ""
    runs: int = 100
    warmup: int = 10
    accuracy_samples: int = 200

    def __post_init__(self) -> None:
        check_positive_int("timing_runs", self.runs, error=BoardError)
        for name in ("warmup", "accuracy_samples"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise BoardError(f"`{name}` must be an integer >= 0. Got {value!r} instead.")
        if self.board and self.replay:
            raise BoardError("give a board (time on it) or a replay folder (replay a recording), not both.")
        if self.record and not self.board:
            raise BoardError("`record` keeps a board session: it needs a board.")

    @property
    def on_board(self) -> bool:
        """Timed on a board or from a board's recording (not on the host CPU)."""
        return bool(self.board or self.replay)

    def summary(self) -> str:
        where = f"board {self.board}" if self.board else f"replay {self.replay}" if self.replay else "host CPU"
        return f"{self.runs} runs after {self.warmup} warm-up on {where}"
