"""Three-way accuracy: FP32 on the host, INT8 on the host, INT8 on the board.

The host picks a bounded, seeded sample of the test split per deployment condition
(default 200 each), prepares the images as the model's float input (the model's
input contract, resolved as the accuracy stage does), and sends them to the board as a plain ``.npz``.
The board's Python runner quantizes them with the model's own input parameters,
runs them through the delegate and returns the outputs.  The host runs the same
inputs through its INT8 model (LiteRT) and, when given, the FP32 model.  The report
shows top-1 accuracy of all three and the host-vs-board INT8 agreement per
condition, flagging a condition whose agreement is below ``min_agreement``.

The metric is top-1 accuracy (the workbench's classification task); a model whose
first output is not a class-score vector is refused with the reason.
"""

from __future__ import annotations

import io
import math
import warnings
from dataclasses import dataclass
from typing import Any

from .._results import Result
from ..errors import BoardError, WorkbenchWarning

DEFAULT_SAMPLES = 200
DEFAULT_MIN_AGREEMENT = 0.98


@dataclass(frozen=True)
class AccuracySettings:
    """What the three-way accuracy runs on (plain data; the dataset is loaded by name)."""

    dataset: Any                          # a Dataset, or a name/path for load_dataset
    int8_model: str | None = None         # the host's INT8 model (default: the timed model)
    fp32_model: str | None = None         # the FP32 model for the host FP32 column
    samples: int = DEFAULT_SAMPLES        # per condition, from the test split
    min_agreement: float = DEFAULT_MIN_AGREEMENT
    split: str = "test"
    seed: int = 0
    contract: Any = None                  # input contract: InputContract, card mapping or YAML path
    #                                       (default: the card beside the model, else inferred)

    def __post_init__(self) -> None:
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or self.samples <= 0:
            raise BoardError(f"`accuracy_samples` must be a positive integer. Got {self.samples!r} "
                             "instead.")
        a = self.min_agreement
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not math.isfinite(a) \
                or not 0.0 <= a <= 1.0:
            raise BoardError(f"`min_agreement` must be a finite number in [0, 1]. Got {a!r} instead.")


@dataclass(frozen=True)
class BoardAccuracyRow(Result):
    """One deployment condition: top-1 of the three, and host-vs-board INT8 agreement."""

    condition: str
    n: int
    fp32_host: float | None
    int8_host: float
    int8_board: float
    agreement: float              # share of samples whose top-1 is the same on host and board
    flagged: bool


@dataclass(frozen=True)
class BoardAccuracy(Result):
    """FP32 host, INT8 host and INT8 board accuracy per condition (top-1)."""

    rows: tuple[BoardAccuracyRow, ...]
    where: str                    # the board label ("board evk via libvx_delegate.so", ...)
    metric: str = "top-1 accuracy"
    samples_per_condition: int = DEFAULT_SAMPLES
    min_agreement: float = DEFAULT_MIN_AGREEMENT
    split: str = "test"
    dataset: str = ""

    @property
    def flagged(self) -> tuple[str, ...]:
        """Conditions whose host-vs-board INT8 agreement is below ``min_agreement``."""
        return tuple(r.condition for r in self.rows if r.flagged)

    def summary(self) -> str:
        worst = min(self.rows, key=lambda r: r.agreement)
        text = (f"three-way {self.metric} on {sum(r.n for r in self.rows)} {self.split} samples "
                f"({len(self.rows)} conditions): lowest host-vs-board INT8 agreement "
                f"{worst.agreement:.1%} ({worst.condition})")
        if self.flagged:
            text += (f"; DISAGREEMENT below {self.min_agreement:.0%} on "
                     f"{', '.join(self.flagged)}")
        return text

    def _repr_html_(self) -> str:
        from .. import display

        def pct(v: float | None) -> str:
            return "-" if v is None else f"{v:.1%}"
        rows = [(r.condition, r.n, pct(r.fp32_host), pct(r.int8_host), pct(r.int8_board),
                 pct(r.agreement), "DISAGREES" if r.flagged else "ok") for r in self.rows]
        return (display.heading("Three-way accuracy")
                + display.paragraph(self.summary())
                + display.table(("condition", "n", "FP32 host", "INT8 host",
                                 f"INT8 {self.where}", "host-vs-board agreement", "check"), rows,
                                caption=f"{self.metric}; flagged below {self.min_agreement:.0%} "
                                        "agreement"))


def prepare_inputs(settings: AccuracySettings, int8_model: str) -> tuple[bytes, dict[str, Any]]:
    """The sample per condition: ``(npz bytes for the board, host-side data)``.

    Host-side data: ``labels`` and ``int8_host`` / ``fp32_host`` outputs per condition.
    """
    import numpy as np

    from ..data.loaders import load_dataset
    from ..models.contract import resolve_contract
    from ..models.predict import load_predictor

    data = load_dataset(settings.dataset)
    held_out = data.select(split=settings.split)
    # the same contract the accuracy stage uses (compare_accuracy): the FP32 model's card or inference
    contract = resolve_contract(settings.fp32_model or int8_model, settings.contract)
    host = load_predictor(int8_model, contract=contract)
    fp32 = load_predictor(settings.fp32_model, contract=contract) if settings.fp32_model else None
    arrays: dict[str, Any] = {}
    host_data: dict[str, Any] = {"labels": {}, "int8_host": {}, "fp32_host": {},
                                 "dataset": data.name}
    rng = np.random.default_rng(settings.seed)
    for cond in held_out.conditions:
        subset = held_out.select(condition=cond)
        n = min(settings.samples, len(subset))
        idx = np.sort(rng.choice(len(subset), size=n, replace=False))
        x = np.asarray(subset.x[idx])
        arrays[cond] = host.prepare(x).astype(np.float32)
        host_data["labels"][cond] = np.asarray(subset.y[idx])
        host_data["int8_host"][cond] = host.predict(x)
        if fp32 is not None:
            host_data["fp32_host"][cond] = fp32.predict(x)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue(), host_data


def compare(host_data: dict[str, Any], payload: dict[str, Any], *, where: str,
            settings: AccuracySettings) -> BoardAccuracy:
    """Score the board's outputs against the labels and the host's INT8 outputs."""
    import numpy as np

    outputs = payload.get("outputs") or {}
    rows = []
    for cond, labels in host_data["labels"].items():
        if cond not in outputs:
            raise BoardError(f"{where}: the board returned no outputs for condition {cond!r}. "
                             "Next: re-run; the inputs file may not have reached the board whole.")
        board = np.asarray(outputs[cond], dtype=np.float32)
        host = np.asarray(host_data["int8_host"][cond], dtype=np.float32)
        if board.ndim != 2 or board.shape[0] != len(labels) or board.shape[1] < 2:
            raise BoardError(f"{where}: condition {cond!r}: the board returned outputs of shape "
                             f"{board.shape} for {len(labels)} samples; {settings.dataset!r} needs "
                             "class scores (N, classes). Next: three-way accuracy is for classifiers.")
        if not np.all(np.isfinite(board)):
            raise BoardError(f"{where}: condition {cond!r}: the board returned NaN or infinite "
                             "outputs. Next: check the delegate; the INT8 run is broken there.")
        top_board, top_host = board.argmax(axis=1), host.reshape(len(labels), -1).argmax(axis=1)
        fp32 = host_data["fp32_host"].get(cond)
        agreement = float(np.mean(top_board == top_host))
        rows.append(BoardAccuracyRow(
            condition=cond, n=int(len(labels)),
            fp32_host=None if fp32 is None else float(np.mean(np.asarray(fp32).argmax(axis=1) == labels)),
            int8_host=float(np.mean(top_host == labels)),
            int8_board=float(np.mean(top_board == labels)),
            agreement=agreement, flagged=agreement < settings.min_agreement))
    result = BoardAccuracy(rows=tuple(rows), where=where, samples_per_condition=settings.samples,
                           min_agreement=settings.min_agreement, split=settings.split,
                           dataset=str(host_data.get("dataset", "")))
    if result.flagged:
        warnings.warn(f"{where}: host and board INT8 disagree beyond the threshold: "
                      + result.summary(), WorkbenchWarning, stacklevel=3)
    return result
