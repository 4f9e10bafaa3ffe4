"""BlazeFace's score logits recover with ``minmax-global`` (issue 28, deliverable 5; docs/quantize.md).

The zoo's 24 calibration crops hold one face (the astronaut's; 14 photos, 10 repeated). AI Edge
Quantizer's min/max is a moving average of each sample's min/max, so the ranges of the features that
fire on that face, and of the positive score logits, are clipped: every positive logit becomes <= 0
(the face's probability <= 0.5). The global min/max keeps them; with 16-bit activations (a16w8_pc)
the daylight score SQNR goes from about 8 dB to about 16 dB, the weights-only limit. Checked with the
plain loop of tests/zoo/test_zoo.py (its own preprocessing, LiteRT, its own INT8 input quantization).
"""

from __future__ import annotations

import warnings

import pytest

from tests.zoo.test_zoo import _images, _preprocess, _sqnr, _tflite_outputs, _to_source_layout


@pytest.mark.zoo
@pytest.mark.heavy
def test_blazeface_scores_recover_with_minmax_global(tmp_path):
    import yaml

    from tests.zoo.fetch import fetch
    from workbench.data.loaders import load_dataset
    from workbench.quantize.engine import quantize
    from workbench.quantize.recipe import get_recipe

    entry = fetch("blazeface")
    card = yaml.safe_load(entry.card.read_text())
    dataset = load_dataset(str(entry.data))
    calibration = dataset.select(split="calibration")
    pixels, _ = _images(entry.data / "test" / "daylight")
    x = _preprocess(pixels, card)
    _, fp32 = _tflite_outputs(entry.model, x)
    scores = {}
    for calibrator in ("minmax", "minmax-global"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = quantize(entry.model, get_recipe("a16w8_pc", calibrator=calibrator), calibration,
                              dataset=dataset, output=tmp_path / calibrator, cache=False)
        _, int16 = _tflite_outputs(result.path, x)
        got = _to_source_layout(fp32, int16)
        k = next(i for i, y in enumerate(fp32) if y.size // len(y) == 896)        # classificators
        scores[calibrator] = (_sqnr(fp32[k], got[k]), float(got[k].max()), float(fp32[k].max()))
    moving, full = scores["minmax"], scores["minmax-global"]
    assert full[2] > 1.0                       # the float model sees the face (a logit > 1, p > 0.73)
    assert moving[0] < 10.0, scores           # collapsed (accuracy.output-collapsed) under the moving average
    assert full[1] > 1.0 and full[0] >= 14.0, scores
