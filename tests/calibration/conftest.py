"""Fixtures of the calibration tests: small synthetic datasets and shared (session) audits."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.data.dataset import Dataset


def make_dataset(parts, *, name="tiny", n_classes=10, shape=(4, 4, 1), seed=0) -> Dataset:
    """A Dataset from ``[(split, condition, count), ...]``: random images, labels cycling over classes."""
    rng = np.random.default_rng(seed)
    xs, ys, conds, splits, ids = [], [], [], [], []
    for split, cond, count in parts:
        xs.append(rng.random((count, *shape), dtype=np.float32))
        ys.append(np.arange(count) % n_classes)
        conds += [cond] * count
        splits += [split] * count
        ids += [f"{split}-{cond}-{i}" for i in range(count)]
    return Dataset(name=name, x=np.concatenate(xs), y=np.concatenate(ys).astype(np.int64),
                   condition=np.array(conds), split=np.array(splits), ids=np.array(ids),
                   classes=tuple(str(i) for i in range(n_classes)))


@pytest.fixture(scope="session")
def daylight_audit(reference, digits):
    """The audit of a calibration 'set' that is all daylight: the built-in pool without its other conditions."""
    from workbench.calibration.audit import audit_coverage
    calibration = digits.select(split="calibration", condition="daylight")
    return audit_coverage(reference, calibration, dataset=digits)
