"""The calibration samples :func:`~workbench.quantize.engine.quantize` feeds the converter: an array, a dataset or
a curated calibration set resolved to checked float32 samples with an id and a content hash, then taken through
the model's input contract (its card or ``input_spec``), and the contract as the manifest records it."""

from __future__ import annotations

import hashlib
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CalibrationError, WorkbenchWarning

MIN_CALIBRATION_SAMPLES = 50


@dataclass(frozen=True)
class Calibration:
    x: np.ndarray
    id: str
    hash: str
    sample_ids: tuple[str, ...]
    strategy: str


def _array_hash(x: np.ndarray) -> str:
    digest = hashlib.sha256(np.ascontiguousarray(x).tobytes())
    digest.update(str(tuple(x.shape)).encode())
    digest.update(str(x.dtype).encode())
    return digest.hexdigest()


def resolve_calibration(calibration: Any, dataset: Any, size: int | None) -> Calibration:
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
        raise CalibrationError(f"`calibration_size` must be a positive integer. Got {size!r} instead.")
    if calibration is None:
        if dataset is None:
            raise CalibrationError("no calibration data: pass `calibration` (an array, a Dataset or a "
                                   "calibration set with `dataset=`) or `dataset=` to use its calibration split.")
        splits = getattr(dataset, "splits", ())
        calibration = dataset.select(split="calibration") if "calibration" in splits else dataset
    from ..data.images import ImageFiles
    if isinstance(calibration, ImageFiles):      # a dataset's lazily decoded pixels (dataset.x)
        calibration = np.asarray(calibration)
    if isinstance(calibration, np.ndarray):
        x = calibration
        ids: tuple[str, ...] = ()
        cid, chash, strategy = "array", None, "array"
    elif hasattr(calibration, "sample_ids") and hasattr(calibration, "hash"):
        if dataset is None:
            raise CalibrationError(
                f"calibration set {getattr(calibration, 'id', calibration.hash[:12])!r} holds sample ids only; "
                "pass the dataset it was drawn from as `dataset=`.")
        ids = tuple(str(s) for s in calibration.sample_ids)
        if ids and hasattr(calibration, "images"):
            # a curated set is checked as the audit checks it: test-split ids, repeated ids, another dataset
            x = calibration.images(dataset).x
        else:
            x = dataset.take(ids).x if ids else np.zeros((0, *dataset.input_shape), np.float32)
        strategy = str(getattr(calibration, "strategy", "unknown"))
        cid = str(getattr(calibration, "id", "") or f"{strategy}:{calibration.hash[:12]}")
        chash = str(calibration.hash)
    elif hasattr(calibration, "x") and hasattr(calibration, "ids"):
        x = calibration.x
        ids = tuple(str(s) for s in calibration.ids.tolist())
        cid, chash, strategy = f"dataset:{calibration.name}", str(calibration.hash), "dataset"
    else:
        raise CalibrationError(f"`calibration` must be an (N, H, W, C) float32 array, a Dataset or a calibration "
                               f"set (with sample_ids and hash). Got {type(calibration).__name__} instead.")
    x = np.asarray(x)
    if size is not None:
        if size > len(x):
            warnings.warn(f"calibration_size={size} but only {len(x)} calibration samples exist; using all.",
                          WorkbenchWarning, stacklevel=3)
        else:
            x, ids = x[:size], ids[:size]
            chash = None if chash is None else hashlib.sha256(f"{chash}:{size}".encode()).hexdigest()
    if len(x) == 0:
        raise CalibrationError(f"calibration {cid!r} has zero samples; the selection (split, condition or "
                               "sample ids) matched nothing. Choose a calibration set with samples.")
    if not np.issubdtype(x.dtype, np.floating):
        raise CalibrationError(f"calibration samples have dtype {x.dtype}; float32 images in [0, 1] are expected "
                               "(divide uint8 images by 255).")
    if x.ndim != 4:
        raise CalibrationError(f"calibration samples have shape {tuple(x.shape)}; (N, H, W, C) is expected.")
    if not np.all(np.isfinite(x)):
        raise CalibrationError(f"calibration {cid!r} contains NaN or infinite values.")
    x = np.ascontiguousarray(x, dtype=np.float32)
    if len(x) < MIN_CALIBRATION_SAMPLES:
        warnings.warn(f"only {len(x)} calibration samples (fewer than {MIN_CALIBRATION_SAMPLES}); activation "
                      "ranges may be poorly estimated.", WorkbenchWarning, stacklevel=3)
    return Calibration(x=x, id=cid, hash=chash or _array_hash(x), sample_ids=ids, strategy=strategy)


def apply_contract(calib: Calibration, source: Path, input_spec: Any) -> Calibration:
    """Calibration pixels -> model inputs through the model's input contract (its card or
    ``input_spec``); unchanged when there is neither, or when the contract changes nothing."""
    from ..models.contract import card_path, resolve_contract
    if input_spec is None and not card_path(source).is_file():
        return calib
    contract = resolve_contract(source, input_spec)
    x = contract.apply(calib.x, ids=calib.sample_ids or None, where=f"calibration {calib.id}")
    if x.shape == calib.x.shape and np.array_equal(x, calib.x):
        return calib
    import dataclasses
    return dataclasses.replace(calib, x=np.ascontiguousarray(x, np.float32), hash=_contract_hash(calib.hash, contract))


def contract_record(source: Path, input_spec: Any) -> dict[str, Any]:
    """What the manifest and the ``quantize`` output say about the input contract calibration went through."""
    from ..models.contract import card_path, resolve_contract
    if input_spec is None and not card_path(source).is_file():
        return {"source": "none", "summary": "input contract: none (no card beside the model, no input_spec): "
                                             "calibration pixels go in as the dataset holds them"}
    contract = resolve_contract(source, input_spec)
    origin = f"card {card_path(source).name}" if input_spec is None else "input_spec"
    summary = contract.summary()
    for given in (card_path(source), input_spec):     # the card by its name: the manifest is shared
        if isinstance(given, str | os.PathLike) and str(given) and str(given) in summary:
            summary = summary.replace(str(given), Path(given).name)
    return {"source": origin, "summary": summary, "params": contract.to_params()}


def _contract_hash(calibration_hash: str, contract: Any) -> str:
    from .._io import stable_hash
    return hashlib.sha256(f"{calibration_hash}:{stable_hash(contract.to_params())}".encode()).hexdigest()


def calibration_hashes(calibration_hash: str, model: str | os.PathLike, input_spec: Any = None) -> frozenset[str]:
    """The ``calibration_hash`` a :func:`quantize` of ``model`` with calibration ``calibration_hash`` and
    ``input_spec`` (or the card beside ``model``) records: both candidates when the contract's
    normalisation is the identity (it may then leave the pixels unchanged), for reusing a saved result."""
    from ..models.contract import card_path, resolve_contract
    if input_spec is None and not card_path(model).is_file():
        return frozenset({calibration_hash})
    contract = resolve_contract(model, input_spec)
    with_contract = _contract_hash(calibration_hash, contract)
    return frozenset({with_contract, calibration_hash}) if contract.is_identity else frozenset({with_contract})
