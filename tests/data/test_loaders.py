import csv

import numpy as np
import pytest
from PIL import Image

from workbench.data.loaders import export_npz, load_dataset
from workbench.errors import DataError


# -- built-in ---------------------------------------------------------------------------------

def test_builtin_digits_conditions(digits):
    assert digits.input_shape == (32, 32, 1)
    assert digits.classes == tuple(str(i) for i in range(10))
    counts = digits.counts()
    assert set(counts) == {"train", "calibration", "test"}
    assert len(counts["test"]) >= 5 and len(set(counts["test"].values())) == 1   # paired test set
    cal = counts["calibration"]
    assert 0.6 <= cal["daylight"] / sum(cal.values()) <= 0.7                     # daylight-heavy pool
    assert min(cal.values()) >= 40          # every condition can fill its share of a stratified set of 200
    assert set(counts["train"]) == {"daylight"}
    assert len(set(digits.ids.tolist())) == len(digits)
    assert digits.x.dtype == np.float32 and 0 <= digits.x.min() and digits.x.max() <= 1


def test_builtin_is_deterministic(digits):
    again = load_dataset("digits-conditions", seed=0)
    assert again.hash == digits.hash
    other = load_dataset("digits-conditions", seed=1)
    assert other.hash != digits.hash


def test_select_and_take(digits):
    low = digits.select(split="test", condition="low-light")
    assert set(low.condition.tolist()) == {"low-light"} and set(low.split.tolist()) == {"test"}
    picked = digits.take(low.ids[:3][::-1])
    assert picked.ids.tolist() == low.ids[:3][::-1].tolist()
    with pytest.raises(DataError, match="no samples for condition"):
        digits.select(split="train", condition="low-light")
    with pytest.raises(DataError, match="no sample"):
        digits.take(["nope"])


# -- folder -----------------------------------------------------------------------------------

def _write_png(path, size=(8, 8), value=128, mode="L"):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, size, value).save(path)


def _folder(root, size=(8, 8)):
    for split in ("calibration", "test"):
        for cond in ("day", "night"):
            for cls in ("cat", "dog"):
                for k in range(2):
                    _write_png(root / split / cond / cls / f"{k}.png", size, 60 if cond == "night" else 200)
    return root


def test_folder_loader(tmp_path):
    ds = load_dataset(_folder(tmp_path / "ds"))
    assert len(ds) == 16 and ds.classes == ("cat", "dog") and ds.input_shape == (8, 8, 1)
    assert ds.counts() == {"calibration": {"day": 4, "night": 4}, "test": {"day": 4, "night": 4}}
    night = ds.select(condition="night")
    assert np.allclose(night.x, 60 / 255)


def test_folder_empty(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="empty folder"):
        load_dataset(tmp_path / "empty")


def test_folder_condition_without_samples(tmp_path):
    root = _folder(tmp_path / "ds")
    (root / "test" / "fog" / "cat").mkdir(parents=True)
    with pytest.raises(DataError, match="condition 'fog' has no samples"):
        load_dataset(root)


def test_folder_split_without_samples(tmp_path):
    root = _folder(tmp_path / "ds")
    (root / "train").mkdir()
    with pytest.raises(DataError, match="split 'train' has no samples"):
        load_dataset(root)


def test_folder_unreadable_image(tmp_path):
    root = _folder(tmp_path / "ds")
    (root / "test" / "day" / "cat" / "broken.png").write_bytes(b"not a png")
    with pytest.raises(DataError, match="broken.png: unreadable image"):
        load_dataset(root)


def test_folder_mixed_sizes_need_resize(tmp_path):
    root = _folder(tmp_path / "ds")
    _write_png(root / "test" / "day" / "cat" / "big.png", size=(16, 12))
    with pytest.raises(DataError, match="mixed sizes.*resize"):
        load_dataset(root)
    ds = load_dataset(root, resize=(8, 8))
    assert ds.input_shape == (8, 8, 1)


def test_folder_unknown_label(tmp_path):
    root = _folder(tmp_path / "ds")
    with pytest.raises(DataError, match="unknown label 'dog'"):
        load_dataset(root, classes=("cat", "bird"))


# -- CSV and npz ------------------------------------------------------------------------------

def test_csv_manifest(tmp_path):
    rows = []
    for i, (cond, split) in enumerate([("day", "test"), ("night", "test"), ("day", "calibration")]):
        _write_png(tmp_path / "img" / f"{i}.png", mode="RGB", value=(10, 20, 30))
        rows.append({"path": f"img/{i}.png", "label": "a" if i else "b", "condition": cond, "split": split})
    manifest = tmp_path / "m.csv"
    with open(manifest, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["path", "label", "condition", "split"])
        writer.writeheader()
        writer.writerows(rows)
    ds = load_dataset(manifest)
    assert ds.input_shape == (8, 8, 3) and ds.classes == ("a", "b")
    assert ds.counts()["test"] == {"day": 1, "night": 1}


def test_csv_missing_columns_and_image(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("file,label\nx.png,a\n")
    with pytest.raises(DataError, match="needs the columns path,label,condition,split"):
        load_dataset(bad)
    missing = tmp_path / "missing.csv"
    missing.write_text("path,label,condition,split\nnope.png,a,day,test\n")
    with pytest.raises(DataError, match="missing.csv:2: image 'nope.png' not found"):
        load_dataset(missing)


def test_npz_roundtrip_and_export(tmp_path, digits):
    out = export_npz(digits, tmp_path / "t.npz", split="test", condition="overexposed")
    with np.load(out) as data:
        assert data["x"].dtype == np.float32 and data["x"].shape[1:] == (32, 32, 1)
        assert len(data["y"]) == 540
    ds = load_dataset(out)
    assert ds.counts() == {"test": {"overexposed": 540}}
    np.testing.assert_array_equal(ds.x, digits.select(split="test", condition="overexposed").x)


def test_npz_unknown_label_and_missing_arrays(tmp_path):
    x = np.zeros((3, 4, 4), dtype=np.uint8)
    path = tmp_path / "bad.npz"
    np.savez(path, x=x, y=np.array([0, 1, 5]), condition=np.array(["a"] * 3), split=np.array(["test"] * 3),
             classes=np.array(["zero", "one"]))
    with pytest.raises(DataError, match="unknown label 5"):
        load_dataset(path)
    np.savez(tmp_path / "partial.npz", x=x)
    with pytest.raises(DataError, match="missing array"):
        load_dataset(tmp_path / "partial.npz")


def test_unknown_dataset_name():
    with pytest.raises(DataError, match="no such dataset"):
        load_dataset("imagenet-please")
