"""``curate_calibration_set``: choose which pool samples calibrate the INT8 ranges.

Three strategies, all reproducible from their seed:

- ``random``: a plain draw from the pool, the baseline most tutorials use.  On a
  pool that is 90% daylight, the set is 90% daylight too.
- ``stratified``: quotas per deployment condition (equal, or ``condition_weights``
  such as the expected deployment mix), and within each condition quotas per
  class.  A condition whose pool is smaller than its quota gives all it has; the
  shortfall is shared among the other conditions in proportion to their weights
  (and the same for classes inside a condition), with a warning that names it.
- ``coverage``: k-center greedy on the FP32 model's penultimate-layer embeddings
  (the input of the last layer): each pick is the pool sample farthest from
  everything picked so far, so rare situations get in.

A :class:`CalibrationSet` holds sample ids, not images: ``quantize(model, recipe,
calibration_set, dataset=...)`` and :func:`audit_coverage` take the images from
the dataset by id.  Its ``hash`` covers the ids and the dataset's content hash.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._io import atomic_write_json, read_json, stable_hash
from .._results import Result
from .._validation import check_choice, check_positive_int
from ..errors import CalibrationError, WorkbenchWarning, missing_file
from ..vocab import STRATEGIES
from .strategies import _stratified, _target_shares, k_center_greedy

RECOMMENDED_MIN = 200          # 200-1000 samples is the usual advice for MinMax calibration
UNDER_REPRESENTED = 0.5        # a condition below half its target share is under-represented
FORMAT_VERSION = 1


@dataclass(frozen=True)
class CalibrationSet(Result):
    """Which samples calibrate the model, and what they cover.

    ``sample_ids`` are ids of ``dataset`` (in pool order); ``conditions`` and
    ``classes`` are histograms of the chosen samples; ``pool_conditions`` is what the
    pool offered; ``target_shares`` the share each deployment condition should have.
    """

    sample_ids: tuple[str, ...]
    strategy: str
    seed: int
    n: int
    dataset: str
    dataset_hash: str
    pool: str
    conditions: dict[str, int]
    classes: dict[str, int]
    pool_conditions: dict[str, int]
    target_shares: dict[str, float]
    params: dict[str, Any] = field(default_factory=dict)
    hash: str = ""

    def __post_init__(self) -> None:
        if len(self.sample_ids) != self.n:
            raise CalibrationError(f"calibration set holds {len(self.sample_ids)} sample ids but n={self.n}.")
        expected = content_hash(self.sample_ids, self.dataset_hash)
        if not self.hash:
            object.__setattr__(self, "hash", expected)
        elif self.hash != expected:
            raise CalibrationError(
                f"calibration set hash {self.hash[:12]} does not match its sample ids and dataset hash "
                f"(expected {expected[:12]}); the file was edited or corrupted. Curate the set again.")

    @property
    def id(self) -> str:
        """A short name: ``<strategy>-<n>-<hash prefix>``."""
        return f"{self.strategy}-{self.n}-{self.hash[:12]}"

    def shares(self) -> dict[str, float]:
        """Share of each condition in the set (conditions the pool offers, zero included)."""
        names = list(dict.fromkeys([*self.target_shares, *self.pool_conditions, *self.conditions]))
        return {c: self.conditions.get(c, 0) / self.n for c in names}

    def images(self, dataset: Any) -> Any:
        """The chosen samples of ``dataset`` as a ``Dataset`` (checks it is the same dataset)."""
        if getattr(dataset, "hash", None) != self.dataset_hash:
            raise CalibrationError(
                f"calibration set {self.id} was drawn from dataset {self.dataset!r} (hash {self.dataset_hash[:12]}) "
                f"but got {getattr(dataset, 'name', type(dataset).__name__)!r} (hash "
                f"{str(getattr(dataset, 'hash', None))[:12]}); load the dataset it was made from, or curate again.")
        chosen = dataset.take(self.sample_ids)
        self._check_against(chosen)
        return chosen

    def _check_against(self, chosen: Any) -> None:
        """The ids are unique, come from the pool split, and match the histograms the set claims.

        The hash only proves the file is self-consistent (anyone can recompute it): a hand-edited
        set of test ids, or one id repeated, under metadata that still claims a stratified mix,
        is refused here.
        """
        from collections import Counter
        counts = Counter(self.sample_ids)
        repeated = [sid for sid, k in counts.items() if k > 1]
        if repeated:
            raise CalibrationError(
                f"calibration set {self.id}: sample id {repeated[0]!r} appears {counts[repeated[0]]} times"
                f"{f' (and {len(repeated) - 1} more ids repeat)' if len(repeated) > 1 else ''}; a set holds "
                "each sample once. Curate the set again with `workbench calibrate`.")
        split = np.asarray(chosen.split).astype(str)
        outside = np.flatnonzero(split != self.pool)
        if len(outside):
            k = int(outside[0])
            raise CalibrationError(
                f"calibration set {self.id}: sample {self.sample_ids[k]!r} is in split {str(split[k])!r}, not the "
                f"pool {self.pool!r} ({len(outside)} such samples); calibrating on held-out samples makes their "
                "accuracy look better than it is. Curate the set again from the pool.")
        actual = {c: k for c, k in Counter(np.asarray(chosen.condition).astype(str).tolist()).items()}
        claimed = {c: int(k) for c, k in self.conditions.items() if int(k)}
        if actual != claimed:
            raise CalibrationError(
                f"calibration set {self.id}: the file claims conditions {claimed} but its sample ids hold "
                f"{actual}; the file was edited. Curate the set again with `workbench calibrate`.")

    # -- files ------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write the set as JSON (atomically)."""
        return atomic_write_json(path, {"format": "npu-workbench/calibration-set", "version": FORMAT_VERSION,
                                        **self.to_dict()})

    @classmethod
    def load(cls, path: str | os.PathLike) -> CalibrationSet:
        """Read a set written by :meth:`save`; a file whose hash does not match is refused."""
        path = Path(path)
        try:
            data = read_json(path)
        except FileNotFoundError:
            raise missing_file("calibration set file", path, "create one with `workbench calibrate ... -o FILE`",
                               CalibrationError) from None
        except ValueError as exc:
            raise CalibrationError(f"{path}: not a calibration set (invalid JSON: {exc}).") from None
        if not isinstance(data, dict) or data.get("format") != "npu-workbench/calibration-set":
            raise CalibrationError(f"{path}: not a calibration set file (no 'format': "
                                   "'npu-workbench/calibration-set'); create one with `workbench calibrate`.")
        try:
            return cls.from_dict(data)
        except CalibrationError as exc:
            raise CalibrationError(f"{path}: {exc}") from None
        except TypeError as exc:
            raise CalibrationError(f"{path}: incomplete calibration set ({exc}).") from None

    # -- display ----------------------------------------------------------------------------
    def summary(self) -> str:
        parts = ", ".join(f"{c} {k}" for c, k in self.conditions.items())
        return f"calibration set {self.id}: {self.n} samples from {self.dataset}[{self.pool}] ({parts})"

    def plot(self, ax: Any = None) -> Any:
        """Bars: share of each condition in the set, the pool and the target."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3))
        names = list(self.shares())
        pool_total = max(sum(self.pool_conditions.values()), 1)
        pos = np.arange(len(names))
        ax.bar(pos - 0.27, [self.pool_conditions.get(c, 0) / pool_total for c in names], 0.27, label="pool")
        ax.bar(pos, [self.shares()[c] for c in names], 0.27, label=f"set ({self.strategy})")
        ax.bar(pos + 0.27, [self.target_shares.get(c, 0.0) for c in names], 0.27, label="target")
        ax.set_xticks(pos, names, rotation=20)
        ax.set_ylabel("share of samples")
        ax.set_title(f"{self.id}")
        ax.legend(fontsize=10)
        return ax

    def _repr_html_(self) -> str:
        from .. import display
        pool_total = max(sum(self.pool_conditions.values()), 1)
        shares = self.shares()
        rows, styles = [], []
        for c in shares:
            target = self.target_shares.get(c, 0.0)
            rows.append((c, self.conditions.get(c, 0), f"{shares[c]:.1%}", f"{target:.1%}",
                         f"{self.pool_conditions.get(c, 0) / pool_total:.1%}"))
            styles.append(display.BAD_STYLE if target > 0 and shares[c] < UNDER_REPRESENTED * target else "")
        return (display.heading("Calibration set") + display.paragraph(self.summary())
                + display.paragraph(f"strategy {self.strategy}, seed {self.seed}, params {self.params}, "
                                    f"dataset hash {self.dataset_hash[:12]}, set hash {self.hash[:12]}")
                + display.table(("condition", "samples", "share", "target", "pool share"), rows,
                                row_styles=styles, caption="Conditions")
                + display.table(("class", "samples"), list(self.classes.items()), caption="Classes"))


def content_hash(sample_ids: tuple[str, ...] | list[str], dataset_hash: str) -> str:
    """sha256 of the sample ids (in order) and the dataset's content hash."""
    return stable_hash({"sample_ids": list(sample_ids), "dataset_hash": dataset_hash})


# -- the verb -------------------------------------------------------------------------------------
def curate_calibration_set(dataset: Any, n: int, *, strategy: str = "stratified", seed: int = 0,
                           condition_weights: Mapping[str, float] | None = None, pool: str = "calibration",
                           model: Any = None, batch_size: int = 256, input_spec: Any = None) -> CalibrationSet:
    """Choose ``n`` calibration samples from ``dataset``'s ``pool`` split.

    Parameters
    ----------
    dataset : a ``Dataset`` or a name/path ``load_dataset`` takes.
    n : number of samples (200-1000 is the usual advice; fewer warns).
    strategy : ``"random"``, ``"stratified"`` or ``"coverage"``.
    seed : drives every random choice; the same seed gives the same set.
    condition_weights : ``{condition: weight}``, the expected deployment mix.  Stratified
        quotas follow it; for every strategy it defines the deployment conditions whose
        absence or under-representation warns.  Default: the dataset's conditions, equally.
    pool : the split to choose from (default ``"calibration"``).
    model : the FP32 Keras model (``.keras`` path, ``ReferenceModel`` or ``keras.Model``);
        needed by ``coverage`` only.
    batch_size : batch size for the embeddings (``coverage``).
    input_spec : the model's input contract for the embeddings (``coverage``): an ``InputContract``,
        a card mapping or a YAML path; default the card beside ``model`` (``<model>.card.yaml``).
        The pool's pixels go through its ``apply`` as they do for quantization and evaluation.
    """
    from ..data.loaders import load_dataset
    data = load_dataset(dataset)
    check_choice("strategy", strategy, STRATEGIES, error=CalibrationError)
    check_positive_int("n", n, error=CalibrationError)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise CalibrationError(f"`seed` must be an integer. Got {seed!r} instead.")
    seed = int(seed)
    check_choice("pool", pool, data.splits, error=CalibrationError)
    targets = _target_shares(data, condition_weights)
    pool_set = data.select(split=pool)
    if n > len(pool_set):
        raise CalibrationError(
            f"the {pool!r} pool of dataset {data.name!r} holds {len(pool_set)} samples "
            f"({', '.join(f'{c} {k}' for c, k in pool_set.counts()[pool].items())}); cannot choose n={n}. "
            f"Ask for at most {len(pool_set)}, or add samples to the pool (another split with pool=..., "
            "or a larger dataset).")
    rng = np.random.default_rng(seed)
    params: dict[str, Any] = {}
    if condition_weights is not None:
        params["condition_weights"] = {c: float(w) for c, w in condition_weights.items()}
    if strategy == "random":
        index = rng.choice(len(pool_set), size=n, replace=False)
    elif strategy == "stratified":
        index = _stratified(pool_set, n, targets, rng)
    else:
        if model is None:
            raise CalibrationError("strategy 'coverage' needs the FP32 model (`model=`: a .keras file, a "
                                   "ReferenceModel or a keras.Model) to compute embeddings; CLI: --model FILE.")
        from .activations import embeddings, model_label
        x, contract = _model_inputs(model, pool_set, input_spec)
        feats = embeddings(model, x, batch_size=batch_size)
        index = k_center_greedy(feats, n, seed=seed)
        params.update({"model": model_label(model), "embedding": "penultimate", "metric": "euclidean"})
        if contract is not None:
            params["input_contract"] = {"source": contract.source, "normalization": contract.normalization()}
    index = np.sort(np.asarray(index, dtype=np.int64))
    chosen = pool_set._subset(index, "[calibration-set]")
    pool_counts = pool_set.counts()[pool]
    cal = CalibrationSet(
        sample_ids=tuple(str(s) for s in chosen.ids.tolist()), strategy=strategy, seed=seed, n=int(n),
        dataset=data.name, dataset_hash=data.hash, pool=pool,
        conditions={c: int(np.sum(chosen.condition == c)) for c in pool_set.conditions},
        classes={name: int(np.sum(chosen.y == i)) for i, name in enumerate(data.classes)},
        pool_conditions={c: int(k) for c, k in pool_counts.items()},
        target_shares=targets, params=params)
    _warn_coverage(cal)
    return cal


def model_contract(model: Any, input_spec: Any = None) -> Any:
    """The input contract that feeds ``model``: ``input_spec``, else the card beside the model; None
    when there is neither (the pixels then go as they are, as :func:`~workbench.quantize.engine.quantize`
    feeds them).  Coverage embeddings and the coverage audit use it, as quantization and evaluation do."""
    from ..errors import ModelError
    from ..models.contract import card_path, resolve_contract
    from ..models.predict import resolve_model_path
    try:
        path: str | None = resolve_model_path(model)
    except ModelError:   # a keras.Model object
        path = None
    if input_spec is None and (path is None or not card_path(path).is_file()):
        return None
    if path is not None:
        return resolve_contract(path, input_spec)
    shape = tuple(getattr(model, "inputs", [None])[0].shape[1:]) if getattr(model, "inputs", None) else None
    return resolve_contract(None, input_spec, model_input=shape)


def contract_inputs(contract: Any, data: Any, where: str) -> np.ndarray:
    """``data``'s images as the model takes them through ``contract`` (None: as they are)."""
    if contract is None:
        return data.x
    x = contract.apply(data.x, ids=[str(i) for i in data.ids.tolist()], where=where)
    return np.ascontiguousarray(x, np.float32)


def _model_inputs(model: Any, pool_set: Any, input_spec: Any) -> tuple[np.ndarray, Any]:
    """The pool's pixels as ``model`` takes them, and the contract applied (or None)."""
    contract = model_contract(model, input_spec)
    return contract_inputs(contract, pool_set, "coverage embeddings"), contract


def _warn_coverage(cal: CalibrationSet) -> None:
    if cal.n < RECOMMENDED_MIN:
        warnings.warn(f"calibration set has {cal.n} samples, fewer than {RECOMMENDED_MIN}; 200-1000 is the usual "
                      "advice for stable activation ranges. Ask for more if the pool allows.",
                      WorkbenchWarning, stacklevel=3)
    shares = cal.shares()
    missing = [c for c, t in cal.target_shares.items() if t > 0 and cal.conditions.get(c, 0) == 0]
    under = [c for c, t in cal.target_shares.items()
             if t > 0 and 0 < cal.conditions.get(c, 0) and shares[c] < UNDER_REPRESENTED * t]
    short = [c for c in missing + under if cal.pool_conditions.get(c, 0) < cal.target_shares[c] * cal.n]
    fix = ("add samples of " + ", ".join(short) + " to the pool" if short and cal.strategy == "stratified"
           else "use strategy='stratified' (with condition_weights for the deployment mix)"
           + (" and add samples of " + ", ".join(short) + " to the pool" if short else ""))
    if missing:
        warnings.warn(f"deployment condition(s) {', '.join(missing)} missing from calibration set {cal.id}: their "
                      f"activation ranges are not calibrated and may clip. To fix, {fix}; `audit_coverage` shows "
                      "the risk per layer.", WorkbenchWarning, stacklevel=3)
    if under:
        detail = ", ".join(f"{c} {shares[c]:.1%} (target {cal.target_shares[c]:.1%})" for c in under)
        warnings.warn(f"deployment condition(s) under-represented in calibration set {cal.id}: {detail}. "
                      f"To fix, {fix}.", WorkbenchWarning, stacklevel=3)
