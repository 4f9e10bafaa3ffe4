"""`quantize` says which input contract it calibrated with, and the manifest records it (issue 24).

A card dropped beside the model changes the calibration; before, nothing in the output or the manifest said so."""

from __future__ import annotations

import json

import pytest

from .conftest import run_cli


@pytest.mark.slow
def test_quantize_prints_and_records_the_contract_it_calibrated_with(tiny_keras, tmp_path):
    common = ("--recipe", "a8w8_pt", "--calibration", "32")
    plain = run_cli("quantize", tiny_keras, *common, "-o", tmp_path / "plain")
    assert plain.code == 0, plain
    assert "calibrated through the input contract: none (no card beside the model" in plain.out
    manifest = json.loads((tmp_path / "plain" / "model_manifest.json").read_text())
    assert manifest["calibration"]["input_contract"]["source"] == "none"
    card = tiny_keras.with_name("tiny.card.yaml")
    card.write_text("range: [-1, 1]\ntask: classification\n")
    try:
        carded = run_cli("quantize", tiny_keras, *common, "-o", tmp_path / "carded")
    finally:
        card.unlink()
    assert carded.code == 0, carded
    assert "calibrated through the input contract (tiny.card.yaml)" in carded.out and "[-1, 1]" in carded.out
    recorded = json.loads((tmp_path / "carded" / "model_manifest.json").read_text())["calibration"]
    assert recorded["input_contract"]["source"] == "card tiny.card.yaml"
    assert "[-1, 1]" in recorded["input_contract"]["summary"] and recorded["input_contract"]["params"]
    assert recorded["hash"] != manifest["calibration"]["hash"]
