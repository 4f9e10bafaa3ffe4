"""Cached predictions per (model hash, dataset hash, split, condition, input contract).

A model's outputs on one condition of one split never change while neither the
model file, the dataset nor the input contract changes, so they are kept under
``cache_dir("eval")`` as one ``.npz`` (every output tensor and the sample ids)
written atomically.  The key also holds a hash of the predictor and contract code.
A file whose ids do not match the samples is a miss; a file that cannot be read, or
whose arrays no longer match the sha256 stored with them (truncated, rewritten), is
removed with a WorkbenchWarning and computed again.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from .._io import atomic_path, cache_dir, damaged_cache_entry, sha256_bytes, sha256_file, stable_hash

CACHE_VERSION = 3  # 3: arrays stored with their sha256


@lru_cache(maxsize=1)
def _predictor_code() -> str:
    """Scores depend on how models are run: a change to the predictors invalidates the cache."""
    from ..models import contract, predict
    files = [f for package in (predict, contract) for f in sorted(Path(str(package.__file__)).parent.glob("*.py"))]
    return stable_hash([sha256_file(f) for f in files])[:32]    # every module of both packages


def cache_key(model_sha256: str, dataset_hash: str, split: str, condition: str, *,
              contract: dict | None = None) -> str:
    return stable_hash({"model": model_sha256, "dataset": dataset_hash, "split": split, "condition": condition,
                        "version": CACHE_VERSION, "code": _predictor_code(), "contract": contract})[:32]


def cache_path(key: str) -> Path:
    return cache_dir("eval") / f"{key}.npz"


def load_scores(key: str, ids: np.ndarray) -> np.ndarray | None:
    """Cached scores for these sample ids, or ``None`` (a miss)."""
    path = cache_path(key)
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            scores, cached_ids = data["scores"], data["ids"]
            stored = str(data["sha256"]) if "sha256" in data.files else ""
    except Exception as exc:  # noqa: BLE001 - numpy/zipfile raise many types for a damaged file
        damaged_cache_entry(path, f"{type(exc).__name__}: {exc}")
        return None
    if stored != _digest(cached_ids, scores):
        damaged_cache_entry(path, "its arrays do not match their sha256")
        return None
    if cached_ids.shape != ids.shape or not np.array_equal(cached_ids.astype(str), ids.astype(str)):
        return None
    return scores.astype(np.float32)


def save_scores(key: str, ids: np.ndarray, scores: np.ndarray) -> Path:
    path = cache_path(key)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            scores, ids = np.asarray(scores, np.float32), np.asarray(ids).astype(str)
            np.savez(handle, scores=scores, ids=ids, sha256=np.str_(_digest(ids, scores)))
    return path


def load_outputs(key: str, ids: np.ndarray) -> list[np.ndarray] | None:
    """Every cached output tensor for these sample ids, or ``None`` (a miss)."""
    path = cache_path(key)
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            cached_ids = data["ids"]
            n = int(data["n_outputs"])
            outputs = [data[f"out{k}"].astype(np.float32) for k in range(n)]
            stored = str(data["sha256"]) if "sha256" in data.files else ""
    except Exception as exc:  # noqa: BLE001 - numpy/zipfile raise many types for a damaged file
        damaged_cache_entry(path, f"{type(exc).__name__}: {exc}")
        return None
    if stored != _digest(cached_ids, *outputs):
        damaged_cache_entry(path, "its arrays do not match their sha256")
        return None
    if cached_ids.shape != ids.shape or not np.array_equal(cached_ids.astype(str), np.asarray(ids).astype(str)):
        return None
    return outputs


def save_outputs(key: str, ids: np.ndarray, outputs: list[np.ndarray]) -> Path:
    path = cache_path(key)
    arrays = {f"out{k}": np.asarray(o, np.float32) for k, o in enumerate(outputs)}
    ids = np.asarray(ids).astype(str)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, n_outputs=np.int64(len(outputs)), ids=ids,   # no pickles: load_outputs refuses them
                     sha256=np.str_(_digest(ids, *arrays.values())), allow_pickle=False, **arrays)
    return path


def _digest(ids: np.ndarray, *arrays: np.ndarray) -> str:
    """sha256 of the ids and every array's dtype, shape and bytes."""
    parts = [np.asarray(ids).astype(str).tobytes()]
    for a in arrays:
        a = np.ascontiguousarray(a, np.float32)
        parts += [str(a.shape).encode(), a.tobytes()]
    return sha256_bytes(b"\0".join(parts))
