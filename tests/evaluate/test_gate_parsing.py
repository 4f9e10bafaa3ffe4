"""Each gate key parsed at its edges (what a gate file may say, and what it may not): fast, no model."""

from __future__ import annotations

import pytest

from workbench.errors import GateError
from workbench.evaluate.gate import Gate


def _acc(**keys):
    return Gate.from_mapping({"accuracy": keys})


def test_models_a_name_a_list_or_none():
    assert _acc(models=["a8w8_pc", "a8w8_pt"]).models == ("a8w8_pc", "a8w8_pt")
    assert _acc(models=("a8w8_pc",)).models == ("a8w8_pc",)
    assert _acc(models="a8w8_pc").models == ("a8w8_pc",)
    assert _acc(models=None).models == ()
    with pytest.raises(GateError, match="accuracy.models"):
        _acc(models=5)
    with pytest.raises(GateError, match="accuracy.models"):
        _acc(models={"a8w8_pc": 1})
