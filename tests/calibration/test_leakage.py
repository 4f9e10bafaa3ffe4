"""Calibration leakage by content: test images under other ids, found by pixel hashes, in every path that
takes a calibration set (the set's findings, the coverage audit, quantize, a run folder's views)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tests.traps.zoo import H, W, _calibration_set, leaky_dataset
from workbench.calibration.leakage import content_leaks, pixel_hashes


def test_pixel_hashes_and_copies_after_resize():
    from workbench.calibration.leakage import NEAR_TOLERANCE, _thumbnails
    rng = np.random.default_rng(0)
    x = (rng.integers(0, 64, (3, H, W, 1)) / 63.0).astype(np.float32)
    near = np.clip(x + 1.5 / 255, 0, 1)
    assert pixel_hashes(x) != pixel_hashes(near)                        # other 8-bit pixels
    assert len(set(pixel_hashes(x))) == 3
    assert pixel_hashes(x[:1], size=(4, 4))[0] != pixel_hashes(x[:1])[0]
    # smooth images (photos are smooth; pixel noise is the worst case of resampling) saved at 16x16
    yy, xx = np.mgrid[0:32, 0:32] / 32
    x = np.stack([0.5 + 0.4 * np.sin(2 * np.pi * (yy * a + xx * b) + p) for a, b, p in
                  rng.uniform(0.3, 1.2, (3, 3))])[..., None].astype(np.float32)
    near = np.clip(x + 1.5 / 255, 0, 1)
    big = np.repeat(np.repeat(x, 2, axis=1), 2, axis=2)
    d_big = np.abs(_thumbnails(big, (32, 32)) - _thumbnails(x, (32, 32))).mean(axis=1)
    d_near = np.abs(_thumbnails(near, (32, 32)) - _thumbnails(x, (32, 32))).mean(axis=1)
    d_other = np.abs(_thumbnails(x[1:], (32, 32)) - _thumbnails(x[:2], (32, 32))).mean(axis=1)
    assert (d_big <= NEAR_TOLERANCE).all() and (d_near <= NEAR_TOLERANCE).all() and (d_other > 0.05).all()


def test_renamed_test_images_are_found_exact_and_resized():
    data = leaky_dataset()
    pool = data.select(split="calibration")
    leaks = content_leaks(pool.ids, data)
    assert len(leaks) == 77 and sum(leak["match"] == "exact" for leak in leaks) == 60
    assert leaks[0] == {"calibration": "img-0000", "test": "img-0300", "match": "exact"}
    assert {"calibration": "img-0060", "test": "img-0360", "match": "after resize"} in leaks
    assert content_leaks(pool.ids[100:], data) == []                     # the clean part of the pool
    assert content_leaks(["img-0300"], data) == []                       # a test id is test-ids' finding


def test_the_set_findings_name_the_leak(tmp_path):
    from workbench.findings import findings_for
    data = leaky_dataset()
    cal = _calibration_set(data, [f"img-{i:04d}" for i in range(40, 300)])
    (f,) = findings_for(cal, target="imx93", dataset=data).with_code("calibration.test-content")
    assert f.severity == "error" and f.evidence["n_leaks"] == 37 and f.evidence["n_exact"] == 20
    assert "37 of 260 calibration samples are test images" in f.message and "img-0040 = img-0340" in f.message
    assert not findings_for(cal, target="imx93").with_code("calibration.test-content")  # no dataset: not checked


def test_every_view_of_a_run_names_the_leak(tmp_path, monkeypatch):
    """A run folder whose calibration set holds renamed test images: `workbench findings`, the run summary
    (summary.json, index.html, the gate) read the same finding; the dataset is an .npz the record names."""
    from workbench.evaluate.gate import Gate, check_quality_gate
    from workbench.findings import run_findings
    from workbench.runs import RunFolder, summarize_run
    data = leaky_dataset()
    npz = tmp_path / "leaky.npz"
    np.savez(npz, x=data.x, y=data.y, condition=data.condition, split=data.split, ids=data.ids,
             classes=np.array(data.classes))
    from workbench.data.loaders import load_dataset
    loaded = load_dataset(str(npz))
    cal = _calibration_set(loaded, [f"img-{i:04d}" for i in range(300)])
    monkeypatch.chdir(tmp_path)
    RunFolder("out/runs/r1", target="imx93", dataset="leaky.npz").save("calibration", cal)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    found = run_findings(tmp_path / "out")
    (f,) = found.with_code("calibration.test-content")
    assert f.evidence["n_leaks"] == 77
    summary = summarize_run(tmp_path / "out" / "runs" / "r1")
    assert "calibration.test-content" in {x.code for x in summary.targets[0].findings}
    gate = check_quality_gate(summary, Gate(findings_max_severity="warning"))
    assert any("calibration.test-content" in r for r in gate.reasons)


def test_quantize_refuses_test_and_repeated_ids_as_the_audit_does(tmp_path):
    """`quantize` (and so `workbench quantize --calibration FILE`) checks a curated set against the dataset."""
    from tests.traps.zoo import _onnx_model, small_dataset
    from workbench.errors import CalibrationError
    from workbench.quantize.engine import quantize
    model = tmp_path / "m.onnx"
    _onnx_model(model)
    data = small_dataset(pool_conditions={"day": 200, "night": 200})
    with_test = _calibration_set(data, [f"cal-day-{i}" for i in range(99)] + ["test-day-3"])
    repeated = _calibration_set(data, [f"cal-day-{i}" for i in range(99)] + ["cal-day-1"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CalibrationError, match="is in split 'test'"):
            quantize(model, "a8w8_pc", with_test, dataset=data, backend="onnx", cache=False)
        with pytest.raises(CalibrationError, match="appears 2 times"):
            quantize(model, "a8w8_pc", repeated, dataset=data, backend="onnx", cache=False)


def test_a_set_is_checked_only_against_the_dataset_it_was_drawn_from():
    import dataclasses

    from workbench.findings import findings_for
    data = leaky_dataset()
    cal = _calibration_set(data, [f"img-{i:04d}" for i in range(300)])
    other = dataclasses.replace(data, y=1 - data.y)        # same pixels and ids, another dataset
    assert other.hash != data.hash
    assert findings_for(cal, dataset=data).with_code("calibration.test-content")
    assert not findings_for(cal, dataset=other).with_code("calibration.test-content")


def test_a_condition_with_no_target_share_is_not_missing():
    from tests.traps.zoo import small_dataset
    from workbench.findings import findings_for
    data = small_dataset(pool_conditions={"day": 300, "night": 10})
    cal = _calibration_set(data, [f"cal-day-{i}" for i in range(200)])
    cal = type(cal)(**{**cal.__dict__, "target_shares": {"day": 1.0, "night": 0.0}})
    assert not findings_for(cal, dataset=data).with_code("calibration.condition-missing")
    cal = type(cal)(**{**cal.__dict__, "target_shares": {"day": 0.9, "night": 0.1}})
    assert findings_for(cal, dataset=data).with_code("calibration.condition-missing")


def test_the_prefiltered_nearest_match_is_every_pair_compared():
    """`_nearest` compares pixel by pixel only the pairs its 4x4 block means leave in: the same matches as
    comparing every pair, near copies just inside and just outside the tolerance included."""
    from workbench.calibration.leakage import NEAR_TOLERANCE, _nearest
    rng = np.random.default_rng(3)
    test = rng.uniform(0, 1, (700, 256)).astype(np.float32)
    test[600:] = test[:100] + rng.uniform(-1, 1, (100, 256)).astype(np.float32) * NEAR_TOLERANCE  # near twins
    cal = test[rng.choice(700, 300)].copy()
    signs = rng.choice([-1, 1], cal.shape)
    signs[::2] = 1                  # a uniform shift: the block means' bound is tight (a prefilter too strict misses it)
    cal += (signs * rng.uniform(0.5, 1.5, (300, 1)) * NEAR_TOLERANCE).astype(np.float32)
    dist = np.abs(cal[:, None, :] - test[None, :, :]).mean(axis=2)
    best = dist.argmin(axis=1)
    expected = np.where(dist[np.arange(len(cal)), best] <= NEAR_TOLERANCE, best, -1)
    assert 50 < (expected >= 0).sum() < 250                             # matches and misses both
    assert (_nearest(cal, test) == expected).all()
    assert (_nearest(cal[:0], test) == -1).all() and (_nearest(cal, test[:0]) == -1).all()


def test_leaks_are_remembered_per_dataset_content():
    """The memo of `content_leaks` is keyed by the dataset's content: the same ids in a dataset whose test
    images changed are checked again (no leak there), and a result the caller edits does not change it."""
    from dataclasses import replace
    data = leaky_dataset()
    ids = data.select(split="calibration").ids
    first = content_leaks(ids, data)
    assert len(first) == 77
    first.clear()
    assert len(content_leaks(ids, data)) == 77
    other = replace(data, x=np.where(data.split[:, None, None, None] == "test", 1.0 - data.x, data.x))
    assert content_leaks(ids, other) == []
    assert len(content_leaks(ids, data, size=(H, W))) == 77


def test_the_memo_keeps_its_newest_entries_only():
    from workbench.calibration import leakage
    data = leaky_dataset()
    ids = list(data.select(split="calibration").ids)
    for k in range(leakage._MEMO_SIZE + 3):
        assert len(leakage.content_leaks(ids[k:k + 5], data)) == 5        # img-0000.. are exact copies
    assert len(leakage._MEMO) == leakage._MEMO_SIZE
