"""No false alarms: clean models raise no finding of severity warning or above."""

from __future__ import annotations

import warnings

import pytest

from workbench.vocab import TARGETS

from .zoo import clean_onnx, clean_reference


def test_clean_onnx_model_has_no_warning(zoo_root):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = clean_onnx(zoo_root)
    assert not found.at_least("warning"), found.text()


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_reference_model_with_default_recipe_has_no_warning(target):
    """The built-in reference model, its target's default recipe and the default calibration set
    (stratified, 200): calibration, quantized file, placement and accuracy give no warning."""
    found = clean_reference(target)
    assert not found.at_least("warning"), found.text()
