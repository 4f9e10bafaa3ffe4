"""The dataset type every stage shares.

A :class:`Dataset` is a set of samples, each with an image, a label, a
deployment ``condition`` and a ``split`` (``train``, ``calibration``, ``test``),
and a unique id.  Images are pixels: float32 NHWC in [0, 1], either an array or
a lazy :class:`~workbench.data.images.ImageFiles` (folder and CSV datasets,
decoded batch by batch); a model's input contract turns them into model inputs.
A label is a class index (``classes`` names them) or an array per sample
(keypoints, boxes...: ``y`` has more than one dimension, ``classes`` may be empty).
Selecting a split or condition returns another ``Dataset`` over the same
arrays; an empty selection is an error that says what exists.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..errors import DataError

SPLITS = ("train", "calibration", "test")


@dataclass(frozen=True, eq=False)
class Dataset:
    """Samples with ``x`` (float32 NHWC in [0, 1]), ``y``, ``condition``, ``split`` and ``ids``."""

    name: str
    x: np.ndarray
    y: np.ndarray
    condition: np.ndarray
    split: np.ndarray
    ids: np.ndarray
    classes: tuple[str, ...]
    source: str = ""
    condition_order: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        n = len(self.x)
        for attr in ("y", "condition", "split", "ids"):
            if len(getattr(self, attr)) != n:
                raise DataError(f"dataset {self.name!r}: {attr} has {len(getattr(self, attr))} entries "
                                f"but x has {n} samples; every sample needs one of each.")
        if self.x.ndim != 4:
            raise DataError(f"dataset {self.name!r}: images must be NHWC (4 dims); got shape {self.x.shape}.")

    # -- sizes and names --------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.x)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.x.shape[1:])

    @property
    def conditions(self) -> tuple[str, ...]:
        present = set(self.condition.tolist())
        ordered = [c for c in self.condition_order if c in present]
        return tuple(ordered + sorted(present - set(ordered)))

    @property
    def splits(self) -> tuple[str, ...]:
        present = set(self.split.tolist())
        return tuple([s for s in SPLITS if s in present] + sorted(present - set(SPLITS)))

    def counts(self) -> dict[str, dict[str, int]]:
        """``{split: {condition: n}}``."""
        out: dict[str, dict[str, int]] = {}
        for s in self.splits:
            mask = self.split == s
            out[s] = {c: int(np.sum(mask & (self.condition == c))) for c in self.conditions
                      if np.any(mask & (self.condition == c))}
        return out

    @property
    def is_classification(self) -> bool:
        """Labels are one class index per sample (not keypoints, boxes or other arrays)."""
        return self.y.ndim == 1 and self.y.dtype.kind in "iu" and len(self.classes) > 0

    def class_counts(self) -> dict[str, int]:
        if not self.is_classification:
            return {}
        return {c: int(np.sum(self.y == i)) for i, c in enumerate(self.classes)}

    @cached_property
    def hash(self) -> str:
        """Content hash of images, labels, conditions, splits and ids."""
        digest = hashlib.sha256()
        if hasattr(self.x, "fingerprint"):      # lazy image files: paths, sizes and mtimes
            digest.update(self.x.fingerprint().encode())
        else:
            digest.update(np.ascontiguousarray(self.x).tobytes())
        digest.update(str(self.x.shape).encode())
        y = np.asarray(self.y)
        if y.ndim == 1 and y.dtype.kind in "iub":
            digest.update(y.astype(np.int64).tobytes())
        else:
            digest.update(f"{y.dtype.str}{y.shape}".encode() + np.ascontiguousarray(y).tobytes())
        for arr in (self.condition, self.split, self.ids):
            digest.update("\0".join(map(str, arr.tolist())).encode())
        digest.update("\0".join(self.classes).encode())
        return digest.hexdigest()

    # -- selection ----------------------------------------------------------------------------
    def _subset(self, mask_or_index: np.ndarray, suffix: str) -> Dataset:
        return Dataset(
            name=f"{self.name}{suffix}", x=self.x[mask_or_index], y=self.y[mask_or_index],
            condition=self.condition[mask_or_index], split=self.split[mask_or_index],
            ids=self.ids[mask_or_index], classes=self.classes, source=self.source,
            condition_order=self.condition_order)

    def select(self, *, split: str | None = None, condition: str | Sequence[str] | None = None) -> Dataset:
        """The samples of one split and/or condition(s).  Empty selections raise :class:`DataError`."""
        mask = np.ones(len(self), dtype=bool)
        suffix = ""
        if split is not None:
            if split not in self.splits:
                raise DataError(f"dataset {self.name!r} has no samples in split {split!r}; "
                                f"splits present: {', '.join(self.splits) or 'none'}.")
            mask &= self.split == split
            suffix += f"[{split}]"
        if condition is not None:
            wanted = [condition] if isinstance(condition, str) else list(condition)
            missing = [c for c in wanted if not np.any(mask & (self.condition == c))]
            if missing:
                where = f" split {split!r}" if split else ""
                raise DataError(f"dataset {self.name!r}{where} has no samples for condition(s) "
                                f"{', '.join(map(repr, missing))}; conditions present: "
                                f"{', '.join(sorted(set(self.condition[mask].tolist()))) or 'none'}.")
            mask &= np.isin(self.condition, wanted)
            suffix += f"[{','.join(wanted)}]"
        return self._subset(mask, suffix)

    def take(self, ids: Iterable[str]) -> Dataset:
        """The samples with these ids, in the given order."""
        ids = list(ids)
        position = {sid: i for i, sid in enumerate(self.ids.tolist())}
        missing = [sid for sid in ids if sid not in position]
        if missing:
            raise DataError(f"dataset {self.name!r} has no sample(s) with id {', '.join(missing[:5])}"
                            f"{' ...' if len(missing) > 5 else ''}; was the calibration set made from "
                            "another dataset?")
        return self._subset(np.array([position[sid] for sid in ids], dtype=np.int64), "[ids]")

    def __repr__(self) -> str:
        return (f"Dataset({self.name!r}, n={len(self)}, input_shape={self.input_shape}, "
                f"classes={len(self.classes)}, conditions={list(self.conditions)}, splits={list(self.splits)})")

    def info(self) -> dict:
        """Plain-data description (the ``workbench data info --json`` object)."""
        return {"name": self.name, "source": self.source, "n": len(self),
                "input_shape": list(self.input_shape), "classes": list(self.classes),
                "conditions": list(self.conditions), "counts": self.counts(), "hash": self.hash}

    def _repr_html_(self) -> str:
        from .. import display
        rows = [(s, *[self.counts()[s].get(c, 0) for c in self.conditions]) for s in self.splits]
        return (display.heading(f"Dataset {self.name}")
                + display.paragraph(f"{len(self)} samples, input {self.input_shape}, "
                                    f"{len(self.classes)} classes")
                + display.table(("split", *self.conditions), rows))
