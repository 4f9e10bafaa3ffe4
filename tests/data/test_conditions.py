import numpy as np
import pytest

from workbench.data.conditions import apply_condition, list_conditions, register_condition
from workbench.errors import DataError


@pytest.fixture(scope="module")
def images(digits):
    return digits.select(split="test", condition="daylight").x[:64]


def test_builtin_conditions_registered():
    assert {"daylight", "low-light", "overexposed", "motion-blur", "sensor-noise"} <= set(list_conditions())


@pytest.mark.parametrize("name", ["low-light", "overexposed", "motion-blur", "sensor-noise"])
def test_deterministic_for_a_seed(images, name):
    a = apply_condition(images, name, seed=7)
    b = apply_condition(images, name, seed=7)
    c = apply_condition(images, name, seed=8)
    np.testing.assert_array_equal(a, b)
    assert a.dtype == np.float32 and a.shape == images.shape
    assert 0.0 <= a.min() and a.max() <= 1.0
    if name in ("low-light", "sensor-noise"):  # noisy conditions differ across seeds
        assert not np.array_equal(a, c)


def test_daylight_is_identity(images):
    np.testing.assert_array_equal(apply_condition(images, "daylight"), images)


def _noise(x):
    """High-frequency energy: residual after a 3x3 box blur."""
    from scipy.ndimage import uniform_filter
    return float(np.std(x - uniform_filter(x, size=(1, 3, 3, 1))))


def test_low_light_darker_and_noisier(images):
    dark = apply_condition(images, "low-light", severity=3)
    assert dark.mean() < 0.7 * images.mean()
    # relative to the signal level, low light is noisier
    assert _noise(dark) / dark.mean() > _noise(images) / images.mean()


def test_low_light_severity_monotone(images):
    means = [apply_condition(images, "low-light", severity=s).mean() for s in (1, 3, 5)]
    assert means[0] > means[1] > means[2]


def test_overexposed_clips(images):
    bright = apply_condition(images, "overexposed", severity=3)
    assert bright.mean() > images.mean()
    assert np.mean(bright >= 1.0) > 0.3 > np.mean(images >= 1.0)


def test_motion_blur_smooths_horizontally(images):
    blurred = apply_condition(images, "motion-blur", severity=4)
    horizontal = lambda x: np.mean(np.abs(np.diff(x, axis=2)))
    assert horizontal(blurred) < 0.8 * horizontal(images)


def test_sensor_noise_adds_noise(images):
    assert _noise(apply_condition(images, "sensor-noise")) > 2 * _noise(images)


def test_register_custom_condition(images):
    register_condition("test-invert", lambda x, s, rng: 1.0 - x, overwrite=True)
    np.testing.assert_allclose(apply_condition(images, "test-invert"), 1.0 - images, atol=1e-6)
    with pytest.raises(DataError, match="already registered"):
        register_condition("test-invert", lambda x, s, rng: x)


def test_unknown_condition_and_bad_severity(images):
    with pytest.raises(DataError, match="must be one of"):
        apply_condition(images, "fog")
    with pytest.raises(DataError, match="`severity` must be one of"):
        apply_condition(images, "low-light", severity=9)
