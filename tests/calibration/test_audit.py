"""The coverage audit: clipping where the calibration set does not reach, none where it does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from workbench.calibration.audit import CoverageAudit, audit_coverage
from workbench.data.dataset import Dataset
from workbench.errors import CalibrationError, WorkbenchWarning


@pytest.fixture(scope="module")
def bright_case(reference, digits):
    """Daylight calibration, and a test split with daylight and a 'bright' condition beyond its range.

    'bright' raises the exposure of the daylight test images (gain 1.25 without the sensor
    clip): paper and strokes get brighter than anything calibrated.
    """
    cal = digits.select(split="calibration", condition="daylight")
    test = digits.select(split="test", condition="daylight")
    x = np.concatenate([cal.x, test.x, test.x * 1.25])
    n_cal, n_test = len(cal), len(test)
    data = Dataset(
        name="bright-case", x=x.astype(np.float32), y=np.concatenate([cal.y, test.y, test.y]),
        condition=np.array(["daylight"] * (n_cal + n_test) + ["bright"] * n_test),
        split=np.array(["calibration"] * n_cal + ["test"] * (2 * n_test)),
        ids=np.array([*cal.ids.tolist(), *test.ids.tolist(), *[f"{i}@bright" for i in test.ids.tolist()]]),
        classes=digits.classes, condition_order=("daylight", "bright"))
    audit = audit_coverage(reference, data.select(split="calibration"), dataset=data)
    return data, audit


def test_condition_beyond_the_calibrated_range_clips(bright_case):
    _, audit = bright_case
    assert audit.conditions == ("daylight", "bright")
    assert audit.clip_rate("input", "bright") > 0.5
    # the overshoot reaches the first convolution too (the model was trained with brightness jitter,
    # so later layers mostly absorb it)
    assert audit.row("conv1_relu", "bright").at_risk
    assert audit.clip_rate("conv1_relu", "bright") > audit.clip_rate("conv1_relu", "daylight")
    assert audit.add_conditions[0] == "bright"
    assert any(f.startswith("bright:") and "add bright samples" in f for f in audit.findings)
    assert audit.row("input", "bright").clip_high_rate == audit.clip_rate("input", "bright")
    assert audit.clip_rate("input", "daylight") < audit.clip_rate("input", "bright") / 100


def test_calibration_data_itself_clips_nowhere(reference, bright_case):
    data, _ = bright_case
    cal = data.select(split="calibration")
    audit = audit_coverage(reference, cal, dataset=cal, split="calibration")
    assert audit.conditions == ("daylight",)
    assert np.all(audit.matrix() == 0.0)
    assert audit.add_conditions == () and not audit.at_risk()
    assert "no layer clips" in audit.summary()
    # each layer's calibrated range is exactly what the data spans, so utilisation is full
    assert np.allclose(audit.matrix("utilisation")[1:], 1.0, atol=1e-6)


def test_daylight_heavy_set_flags_the_builtin_conditions(daylight_audit):
    audit = daylight_audit
    assert audit.conditions == ("daylight", "low-light", "overexposed", "motion-blur", "sensor-noise")
    assert audit.calibration_conditions == {"daylight": 359}
    assert "overexposed" in audit.add_conditions
    assert audit.clip_rate("input", "overexposed") > 0.1       # overexposed paper is whiter than any daylight scan
    assert audit.clip_rate("input", "daylight") == 0.0
    assert "add overexposed" in audit.summary()


def test_round_trip_json_rows_and_html(daylight_audit):
    audit = daylight_audit
    data = json.loads(audit.to_json())
    assert {"layer", "condition", "clip_rate"} <= set(data["rows"][0])
    assert len(data["rows"]) == len(audit.layers) * len(audit.conditions)
    back = CoverageAudit.from_dict(data)
    assert back == audit and isinstance(back.calibrated_ranges["classifier"], tuple)
    import matplotlib
    matplotlib.use("Agg")
    html = audit._repr_html_()
    assert "data:image/png;base64," in html and "overexposed" in html


def test_plots(daylight_audit):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ax = daylight_audit.plot()
    assert len(ax.texts) == len(daylight_audit.layers) * len(daylight_audit.conditions)
    ax = daylight_audit.plot_ranges()
    assert len(ax.lines) == len(daylight_audit.layers) * len(daylight_audit.conditions)
    plt.close("all")


def test_audit_errors(reference, digits, daylight_audit):
    cal = digits.select(split="calibration")
    with pytest.raises(CalibrationError, match="`conditions` must be one of"):
        audit_coverage(reference, cal, dataset=digits, conditions=["night"])
    with pytest.raises(CalibrationError, match=r"`clip_threshold` must be in \[0.0, 1.0\]"):
        audit_coverage(reference, cal, dataset=digits, clip_threshold=2.0)
    with pytest.raises(CalibrationError, match="`calibration` must be a CalibrationSet or a Dataset"):
        audit_coverage(reference, digits.x[:10], dataset=digits)
    with pytest.raises(CalibrationError, match="`layer` must be one of"):
        daylight_audit.row("conv7", "daylight")


def test_audit_of_a_model_file_is_cached(reference, bright_case, workbench_cache):
    """The same model file, calibration and data give the cached audit back; a damaged entry is redone."""
    from pathlib import Path
    data, first = bright_case
    entries = [e for e in Path(workbench_cache, "audit").glob("*.json")      # sealed: {"sha256", "data"}
               if json.loads(e.read_text())["data"].get("dataset") == "bright-case"]
    assert len(entries) == 1, "the audit of a model file was not cached"
    again = audit_coverage(reference, data.select(split="calibration"), dataset=data)
    assert again.to_dict() == first.to_dict()
    fresh = audit_coverage(reference, data.select(split="calibration"), dataset=data, cache=False)
    assert fresh.to_dict() == first.to_dict()
    entries[0].write_text("{not json")
    with pytest.warns(WorkbenchWarning, match="damaged"):
        redone = audit_coverage(reference, data.select(split="calibration"), dataset=data)
    assert redone.to_dict() == first.to_dict()
    assert json.loads(entries[0].read_text())["data"]["calibration_hash"] == first.calibration_hash


def test_audit_cache_key_covers_every_activation_tap_module(digits, tmp_path, monkeypatch):
    """A change to audit.py or to either module that reads activations (activations.py, graph_taps.py:
    the ONNX / LiteRT / SavedModel taps split out of activations.py) gives cached audits a new key."""
    from workbench.calibration import audit
    model = tmp_path / "model.tflite"
    model.write_bytes(b"the bytes of a model file")
    key = audit._cache_file(model, digits, "cal", "test", ("daylight",), 0.01, 8)
    real = audit.sha256_file
    for name in ("audit.py", "activations.py", "graph_taps.py"):
        monkeypatch.setattr(audit, "sha256_file",
                            lambda path, name=name: "edited" if Path(path).name == name else real(path))
        assert audit._cache_file(model, digits, "cal", "test", ("daylight",), 0.01, 8) != key, \
            f"an edit of calibration/{name} would leave cached audits valid"
    monkeypatch.setattr(audit, "sha256_file", real)
    assert audit._cache_file(model, digits, "cal", "test", ("daylight",), 0.01, 8) == key
