"""Deployment conditions: named, seeded, severity-graded image transforms.

In the spirit of the ImageNet-C corruption benchmark (Hendrycks & Dietterich,
2019): each condition maps a batch of float32 images in [0, 1] (NHWC) to the
same shape, at a severity from 1 (mild) to 5 (harsh), deterministically for a
seed.  ``daylight`` is the identity; the others model what a camera sees:

- ``low-light``: exposure cut, sensor gamma, Poisson shot noise from few
  photons plus Gaussian read noise, then quantization to 8 bits, as at night;
- ``overexposed``: gain and offset, clipped at the sensor's full well;
- ``motion-blur``: a horizontal box point-spread function (camera pan);
- ``sensor-noise``: signal-independent Gaussian noise (hot sensor, high ISO).

Users add their own with :func:`register_condition`.  Folder, CSV and ``.npz``
datasets carry real conditions and need no transform.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._validation import check_choice
from ..errors import DataError

Transform = Callable[[np.ndarray, int, np.random.Generator], np.ndarray]


@dataclass(frozen=True)
class Condition:
    """A registered deployment condition."""

    name: str
    description: str
    transform: Transform

    def apply(self, images: np.ndarray, *, severity: int = 3, seed: int = 0) -> np.ndarray:
        check_choice("severity", severity, (1, 2, 3, 4, 5), error=DataError)
        images = np.asarray(images, dtype=np.float32)
        if images.ndim != 4:
            raise DataError(f"condition {self.name!r} expects images as NHWC (4 dims); got shape {images.shape}.")
        # The seed is mixed with the condition's name so two conditions never share noise.
        rng = np.random.default_rng([seed, severity, zlib.crc32(self.name.encode())])
        out = self.transform(images.copy(), severity, rng)
        return np.clip(out, 0.0, 1.0).astype(np.float32)


_REGISTRY: dict[str, Condition] = {}


def register_condition(name: str, transform: Transform, *, description: str = "",
                       overwrite: bool = False) -> Condition:
    """Register ``transform(images, severity, rng) -> images`` under ``name``.

    ``images`` is float32 NHWC in [0, 1]; the result is clipped to [0, 1].
    """
    if not name or not isinstance(name, str):
        raise DataError(f"a condition needs a non-empty string name; got {name!r}.")
    if name in _REGISTRY and not overwrite:
        raise DataError(f"condition {name!r} is already registered; pass overwrite=True to replace it.")
    condition = Condition(name, description or name, transform)
    _REGISTRY[name] = condition
    return condition


def get_condition(name: str) -> Condition:
    check_choice("condition", name, list(_REGISTRY), error=DataError)
    return _REGISTRY[name]


def list_conditions() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def apply_condition(images: np.ndarray, name: str, *, severity: int = 3, seed: int = 0) -> np.ndarray:
    """Render ``images`` (float32 NHWC in [0, 1]) as seen under condition ``name``."""
    return get_condition(name).apply(images, severity=severity, seed=seed)


# -- built-in conditions -------------------------------------------------------------------

def _daylight(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    return x


def _low_light(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    exposure = (0.45, 0.32, 0.22, 0.15, 0.10)[severity - 1]     # fraction of daylight exposure
    photons = (1000.0, 600.0, 350.0, 200.0, 120.0)[severity - 1]  # full-well photons at exposure 1
    read_noise = (0.004, 0.006, 0.008, 0.011, 0.015)[severity - 1]
    gamma = 1.0 / 2.2
    linear = np.power(x, 2.2) * exposure                        # back to scene light, cut exposure
    shot = rng.poisson(linear * photons) / photons               # photon (shot) noise
    signal = shot + rng.normal(0.0, read_noise, size=x.shape)    # read noise
    signal = np.power(np.clip(signal, 0.0, 1.0), gamma)          # camera gamma
    return np.round(signal * 255.0) / 255.0                      # 8-bit sensor output


def _overexposed(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    gain = (1.3, 1.6, 2.0, 2.5, 3.0)[severity - 1]
    offset = (0.05, 0.10, 0.15, 0.20, 0.25)[severity - 1]
    return x * gain + offset                                     # clipped to 1.0 by apply()


def _motion_blur(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    length = (3, 5, 7, 9, 11)[severity - 1]
    out = np.zeros_like(x)
    pad = length // 2
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (0, 0)), mode="edge")
    for shift in range(length):                                  # horizontal box PSF
        out += padded[:, :, shift:shift + x.shape[2], :]
    return out / length


def _sensor_noise(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    sigma = (0.04, 0.07, 0.10, 0.14, 0.18)[severity - 1]
    return x + rng.normal(0.0, sigma, size=x.shape)


register_condition("daylight", _daylight, description="identity: what the training data looks like")
register_condition("low-light", _low_light,
                   description="exposure cut, gamma, Poisson shot noise and read noise (night)")
register_condition("overexposed", _overexposed, description="gain and offset clipped at full well")
register_condition("motion-blur", _motion_blur, description="horizontal box blur (camera pan)")
register_condition("sensor-noise", _sensor_noise, description="Gaussian sensor noise (high ISO)")

BUILTIN_CONDITIONS = ("daylight", "low-light", "overexposed", "motion-blur", "sensor-noise")
