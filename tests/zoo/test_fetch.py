"""The zoo fetch: pinned wheels checked by sha256, folders built once and reused, cards the workbench reads."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.zoo


def test_fetch_is_idempotent_and_cards_resolve():
    from tests.zoo.fetch import SOURCES, fast_models, fetch
    from workbench.data.loaders import load_dataset
    from workbench.models.contract import resolve_contract
    assert set(fast_models()) == {"heatnet", "ppocr-cls"}
    for name in fast_models():
        first = fetch(name)
        stamp = (first.folder / "zoo.json").stat().st_mtime_ns
        again = fetch(name)
        assert again.model == first.model and (again.folder / "zoo.json").stat().st_mtime_ns == stamp
        contract = resolve_contract(str(first.model))
        assert contract.size == tuple(SOURCES[name].size) and "resize" not in contract.inferred
        data = load_dataset(first.data)
        assert set(data.conditions) == {"daylight", "low-light", "overexposed", "motion-blur", "sensor-noise"}
        assert tuple(data.input_shape[:2]) == contract.size


def test_a_wheel_whose_sha256_differs_is_refused(tmp_path, monkeypatch):
    from tests.zoo import fetch as zoo
    monkeypatch.setenv(zoo.ZOO_ENV, str(tmp_path))
    filename, _ = zoo.WHEELS["facenet-pytorch==2.6.0"]
    monkeypatch.setitem(zoo.WHEELS, "facenet-pytorch==2.6.0", (filename, "0" * 64))
    with pytest.raises(RuntimeError, match="refusing it"):
        zoo.wheel("facenet-pytorch==2.6.0")
    assert not (tmp_path / "wheels" / filename).exists()


def test_list_says_what_is_fetched(capsys):
    from tests.zoo.fetch import main
    assert main(["--list", "heatnet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("heatnet") and "(ours, torch-2.13)" in out and "zoo folder:" in out
