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


def test_a_changed_model_card_or_data_is_built_again(tmp_path, monkeypatch, capsys):
    """onnx2tf run on a zoo file itself simplifies it in place (onnxsim): the next fetch sees the sha256 differ
    and builds the folder again, from the pinned wheel."""
    from tests.zoo import fetch as zoo
    shared = zoo.zoo_dir() / "wheels"
    monkeypatch.setenv(zoo.ZOO_ENV, str(tmp_path))
    (tmp_path / "wheels").mkdir()
    for req in ("rapidocr-onnxruntime==1.4.4", "scikit-image==0.26.0"):   # the machine's copies (else downloaded)
        (tmp_path / "wheels" / zoo.WHEELS[req][0]).symlink_to(shared / zoo.WHEELS[req][0])
    first = zoo.fetch("ppocr-cls")
    assert zoo._sha256(first.model) == zoo.SOURCES["ppocr-cls"].model_sha256
    for damage in (lambda e: e.model.write_bytes(e.model.read_bytes()[:-1] + b"\0"),
                   lambda e: e.card.write_text(e.card.read_text().replace("bgr", "rgb")),
                   lambda e: next(e.data.rglob("*.png")).unlink()):
        damage(first)
        assert "changed" in _listed(zoo, capsys)
        again = zoo.fetch("ppocr-cls")
        assert "building it again" in capsys.readouterr().err
        assert zoo._sha256(again.model) == zoo.SOURCES["ppocr-cls"].model_sha256
        assert "fetched" in _listed(zoo, capsys) and zoo._damage(zoo.SOURCES["ppocr-cls"], again.folder,
                                                                   again.info) is None


def _listed(zoo, capsys):
    zoo.main(["--list", "ppocr-cls"])
    return capsys.readouterr().out.split()[3]


def test_a_wheel_that_cannot_be_downloaded_names_the_file_and_what_to_do(tmp_path, monkeypatch, capsys):
    from tests.zoo import fetch as zoo
    monkeypatch.setenv(zoo.ZOO_ENV, str(tmp_path))
    for key, value in {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "",
                       "PIP_RETRIES": "0", "PIP_TIMEOUT": "2", "PIP_NO_CACHE_DIR": "1"}.items():
        monkeypatch.setenv(key, value)
    filename, sha = zoo.WHEELS["facenet-pytorch==2.6.0"]
    assert zoo.main(["onet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m tests.zoo.fetch: error: onet: cannot download the wheel " + filename)
    assert "facenet-pytorch==2.6.0" in err and sha in err and str(tmp_path / "wheels") in err
    assert "PIP_INDEX_URL" in err and "Traceback" not in err
    assert not list((tmp_path / "wheels").iterdir())        # nothing half-downloaded left
