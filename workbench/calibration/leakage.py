"""Calibration leakage by content: calibration samples whose pixels are test images.

A check by id misses test images copied into a calibration folder under new names.  Here every
calibration sample and every test image is hashed by its pixels:

- **exact**: sha256 of the image at 8-bit levels (``round(x * 255)``) with its shape;
- **after resize**: the image resized to the model's input size (the contract's ``size``; the dataset's own
  size when no contract says one) with the bilinear filter the contract uses, then to a 16x16 thumbnail:
  a pair whose thumbnails differ by at most ``NEAR_TOLERANCE`` on average (a copy saved at another
  resolution or re-encoded) is the same image to the model.

A calibration sample whose id is itself a test id is ``calibration.test-ids``, not counted here.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

#: mean absolute pixel difference of two 16x16 thumbnails (after the contract's resize) that makes them one image
NEAR_TOLERANCE = 3.0 / 255
THUMBNAIL = (16, 16)


def pixel_hashes(x: np.ndarray, *, size: Sequence[int] | None = None, bits: int = 8) -> list[str]:
    """One hash per NHWC float image in [0, 1] at ``bits`` levels, after resizing to ``size`` (H, W) if given."""
    x = np.asarray(x, dtype=np.float32)
    if size is not None and tuple(x.shape[1:3]) != tuple(size):
        from ..models.contract import resize_images
        x = resize_images(x, (int(size[0]), int(size[1])), "stretch")
    levels = (1 << bits) - 1
    q = np.clip(np.rint(x * levels), 0, levels).astype(np.uint8)
    shape = str(q.shape[1:]).encode()
    return [hashlib.sha256(shape + q[i].tobytes()).hexdigest()[:32] for i in range(len(q))]


def content_leaks(sample_ids: Iterable[str], dataset: Any, *, size: Sequence[int] | None = None,
                  split: str = "test") -> list[dict[str, str]]:
    """``[{"calibration": id, "test": id, "match": "exact" | "after resize"}]``: calibration samples of
    ``dataset`` (by id) whose pixels are an image of its ``split`` under another id.

    Remembered per process by the dataset's content hash, the ids, ``size`` and ``split``: a batch asks
    again for every report it exports (the set's findings, the run summary, each target's verdict)."""
    ids = list(dict.fromkeys(str(s) for s in sample_ids))
    content = getattr(dataset, "hash", None)
    key = (content, tuple(ids), tuple(size) if size else None, split) if isinstance(content, str) else None
    with _MEMO_LOCK:                    # the batch exports reports from one thread per target
        hit = _MEMO.get(key) if key is not None else None
    if hit is not None:
        return [dict(leak) for leak in hit]
    leaks = _content_leaks(ids, dataset, size=size, split=split)
    if key is not None:
        with _MEMO_LOCK:
            while len(_MEMO) >= _MEMO_SIZE:
                _MEMO.pop(next(iter(_MEMO)))
            _MEMO[key] = [dict(leak) for leak in leaks]
    return leaks


_MEMO: dict[tuple, list[dict[str, str]]] = {}
_MEMO_SIZE = 16
_MEMO_LOCK = threading.Lock()


def _content_leaks(ids: list[str], dataset: Any, *, size: Sequence[int] | None, split: str) -> list[dict[str, str]]:
    known = set(np.asarray(dataset.ids).astype(str).tolist())
    test = dataset.select(split=split)
    test_ids = np.asarray(test.ids).astype(str).tolist()
    ids = [s for s in ids if s in known and s not in set(test_ids)]
    if not ids or not len(test):
        return []
    cal = dataset.take(ids)
    cal_ids = np.asarray(cal.ids).astype(str).tolist()
    exact = dict(zip(pixel_hashes(test.x), test_ids))
    found: dict[str, dict[str, str]] = {}
    for cid, h in zip(cal_ids, pixel_hashes(cal.x)):
        if h in exact:
            found[cid] = {"calibration": cid, "test": exact[h], "match": "exact"}
    rest = [i for i, cid in enumerate(cal_ids) if cid not in found]
    if rest:
        target = tuple(size) if size else tuple(test.x.shape[1:3])
        nearest = _nearest(_thumbnails(cal.x[rest], target), _thumbnails(test.x, target))
        for j, k in enumerate(nearest):
            if k >= 0:
                cid = cal_ids[rest[j]]
                found[cid] = {"calibration": cid, "test": test_ids[int(k)], "match": "after resize"}
    return [found[c] for c in cal_ids if c in found]


def _thumbnails(x: np.ndarray, size: tuple[int, ...]) -> np.ndarray:
    """Images resized to ``size`` (the model's input), then to a grey 16x16 thumbnail, flattened."""
    from ..models.contract import resize_images
    x = np.asarray(x, dtype=np.float32)
    if tuple(x.shape[1:3]) != tuple(size):
        x = resize_images(x, (int(size[0]), int(size[1])), "stretch")
    x = x.mean(axis=3, keepdims=True)
    if tuple(x.shape[1:3]) != THUMBNAIL:
        x = resize_images(x, THUMBNAIL, "stretch")
    return x.reshape(len(x), -1)


def _coarse(thumbs: np.ndarray) -> np.ndarray:
    """16x16 thumbnails (flattened) -> their 4x4 block means (flattened): 16 numbers per image."""
    blocks = thumbs.reshape(len(thumbs), 4, THUMBNAIL[0] // 4, 4, THUMBNAIL[1] // 4)
    return blocks.mean(axis=(2, 4)).reshape(len(thumbs), -1)


def _nearest(cal: np.ndarray, test: np.ndarray) -> np.ndarray:
    """Per calibration thumbnail: the index of its nearest test thumbnail (mean absolute difference) when
    within ``NEAR_TOLERANCE``, else -1.

    The mean absolute difference of the 4x4 block means never exceeds that of the thumbnails (a block
    mean's difference is the mean of the block's differences), so only pairs within the tolerance on
    16 block means are compared pixel by pixel: the same answer as comparing every pair, without a
    (calibration x test x 256) array (3.6 CPU s and 0.5 GB for 200 x 2700 digits)."""
    out = np.full(len(cal), -1, dtype=np.int64)
    if not len(cal) or not len(test):
        return out
    c_coarse, t_coarse = _coarse(cal), _coarse(test)
    bound = NEAR_TOLERANCE + 1e-6                       # float32 rounding of the block means
    for start in range(0, len(cal), 256):
        lower = np.concatenate([np.abs(c_coarse[start:start + 256, None, :] - t_coarse[None, t:t + 4096, :])
                                .mean(axis=2) for t in range(0, len(test), 4096)], axis=1)
        for j in np.flatnonzero((lower <= bound).any(axis=1)):
            candidates = np.flatnonzero(lower[j] <= bound)
            dist = np.abs(cal[start + j][None, :] - test[candidates]).mean(axis=1)
            k = int(dist.argmin())
            if dist[k] <= NEAR_TOLERANCE:
                out[start + j] = candidates[k]
    return out


def leak_findings(sample_ids: Iterable[str], dataset: Any, *, where: str, target: str = "",
                  size: Sequence[int] | None = None) -> list[Any]:
    """``calibration.test-content`` when calibration samples are pixel copies of test images."""
    from ..findings import make
    ids = list(sample_ids)
    leaks = content_leaks(ids, dataset, size=size)
    if not leaks:
        return []
    n_exact = sum(leak["match"] == "exact" for leak in leaks)
    shown = ", ".join(f"{leak['calibration']} = {leak['test']}" for leak in leaks[:4])
    return [make("calibration.test-content",
                 f"{where}: {len(leaks)} of {len(set(map(str, ids)))} calibration samples are test images under "
                 f"other ids ({n_exact} exact pixel copies, {len(leaks) - n_exact} after resize), e.g. {shown}",
                 target=target, evidence={"n_leaks": len(leaks), "n_exact": n_exact,
                                          "n_after_resize": len(leaks) - n_exact, "n_ids": len(set(map(str, ids))),
                                          "resized_to": list(size) if size else None,
                                          "leaks": leaks[:50]})]
