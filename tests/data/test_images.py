"""Folder and CSV datasets read lazily; labels of any shape; pixel guards at load time."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from PIL import Image

from workbench.data.images import ImageFiles
from workbench.data.loaders import export_npz, load_dataset
from workbench.errors import DataError
from workbench.models.contract import ContractError


def _folder(root, n=3, size=(10, 6), mode="RGB"):
    rng = np.random.default_rng(0)
    for split in ("calibration", "test"):
        for cond in ("day", "night"):
            for cls in ("cat", "dog"):
                (root / split / cond / cls).mkdir(parents=True, exist_ok=True)
                for k in range(n):
                    arr = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
                    Image.fromarray(arr).convert(mode).save(root / split / cond / cls / f"{k}.png")
    return root


def test_folder_images_are_lazy_and_decode_to_the_same_pixels(tmp_path):
    ds = load_dataset(_folder(tmp_path / "ds"))
    assert isinstance(ds.x, ImageFiles) and ds.input_shape == (6, 10, 3) and len(ds) == 24
    night = ds.select(split="test", condition="night")
    assert isinstance(night.x, ImageFiles) and len(night.x) == 6            # still nothing decoded
    first = tmp_path / "ds" / night.ids[0]
    expected = np.asarray(Image.open(first), np.float32) / 255.0
    np.testing.assert_allclose(np.asarray(night.x)[0], expected, atol=1e-7)
    np.testing.assert_array_equal(night.x.uint8()[0], np.asarray(Image.open(first)))
    np.testing.assert_allclose(night.x[0], expected, atol=1e-7)           # int index decodes one image
    assert night.x.max() <= 1.0                                            # ndarray methods work on the pixels


def test_dataset_hash_follows_the_files(tmp_path):
    root = _folder(tmp_path / "ds")
    before = load_dataset(root).hash
    assert load_dataset(root).hash == before
    target = root / "test" / "day" / "cat" / "0.png"
    Image.new("RGB", (10, 6), (1, 2, 3)).save(target)
    assert load_dataset(root).hash != before


def test_lazy_x_predicts_batch_by_batch_like_an_array(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    from workbench.models.contract import InputContract
    from workbench.models.predict import load_predictor
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 6, 10, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])
    graph = helper.make_graph([helper.make_node("ReduceMean", ["x"], ["y"], axes=[1, 2], keepdims=0)], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "mean.onnx")
    ds = load_dataset(_folder(tmp_path / "ds", n=9))
    contract = InputContract(color="rgb", range=(-1.0, 1.0))
    lazy = load_predictor(tmp_path / "mean.onnx", batch_size=5, contract=contract).predict(ds.x, ids=ds.ids)
    eager = load_predictor(tmp_path / "mean.onnx", batch_size=64).predict(np.asarray(ds.x) * 2 - 1)
    np.testing.assert_allclose(lazy, eager, rtol=1e-5, atol=1e-6)


def test_folder_with_a_labels_file_takes_labels_of_any_shape(tmp_path):
    root = _folder(tmp_path / "ds")
    ids = sorted(str(p.relative_to(root)) for p in root.glob("*/*/*/*.png"))
    y = np.arange(len(ids) * 4, dtype=np.float32).reshape(len(ids), 2, 2)
    np.savez(root / "labels.npz", ids=np.array(ids), y=y)
    ds = load_dataset(root)
    assert ds.y.shape == (24, 2, 2) and not ds.is_classification and ds.classes == ()
    sample = ds.take([ids[5]])
    np.testing.assert_array_equal(sample.y[0], y[5])
    np.savez(root / "labels.npz", ids=np.array(ids[1:]), y=y[1:])
    with pytest.raises(DataError, match="the labels file has no label for image"):
        load_dataset(root)


def test_csv_with_a_labels_file_needs_no_label_column(tmp_path):
    root = _folder(tmp_path / "img", n=1)
    files = sorted(root.glob("*/*/*/*.png"))
    manifest = tmp_path / "set.csv"
    with open(manifest, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["path", "condition", "split"])
        for f in files:
            writer.writerow([str(f.relative_to(tmp_path)), f.parts[-3], f.parts[-4]])
    with pytest.raises(DataError, match="needs the columns path,label,condition,split"):
        load_dataset(manifest)
    ids = [str(f.relative_to(tmp_path)) for f in files]
    np.savez(tmp_path / "set.labels.npz", ids=np.array(ids), y=np.ones((len(ids), 4), np.float32))
    ds = load_dataset(manifest)
    assert ds.y.shape == (len(files), 4) and isinstance(ds.x, ImageFiles)


def _npz(path, x, y=None):
    n = len(x)
    np.savez(path, x=x, y=np.zeros(n, np.int64) if y is None else y, condition=np.array(["day"] * n),
             split=np.array(["test"] * n), ids=np.array([f"s{i}" for i in range(n)]))
    return path


@pytest.mark.parametrize("make, phrase, code", [
    (lambda x: x * 255.0, "sample 's0' has pixel values in .*0..255 values stored as float", "pixels-out-of-range"),
    (lambda x: (x * 65535).astype(np.uint16), "images are uint16", "pixels-dtype"),
    (lambda x: np.where(np.arange(len(x))[:, None, None, None] == 2, np.nan, x), "sample 's2' has NaN",
     "pixels-nonfinite"),
])
def test_npz_pixels_that_break_the_contract_are_rejected_at_load(tmp_path, make, phrase, code):
    x = np.random.default_rng(0).random((4, 5, 5, 1), dtype=np.float32)
    path = _npz(tmp_path / "bad.npz", make(x))
    with pytest.raises(ContractError, match=phrase) as e:
        load_dataset(path)
    assert str(path) in str(e.value) and e.value.issue.code == code


def test_npz_with_array_labels_round_trips(tmp_path):
    x = np.random.default_rng(0).random((4, 5, 5, 1), dtype=np.float32)
    ds = load_dataset(_npz(tmp_path / "kp.npz", x, y=np.ones((4, 3, 2), np.float32)))
    assert ds.y.shape == (4, 3, 2) and ds.classes == ()
    again = load_dataset(export_npz(ds, tmp_path / "out.npz", split="test"))
    np.testing.assert_array_equal(again.y, ds.y)


def test_builtin_keypoint_dataset():
    kp = load_dataset("digits-keypoints")
    digits = load_dataset("digits-conditions")
    assert kp.y.shape == (len(digits), 3, 2) and kp.x is digits.x
    assert np.all((kp.y >= 0) & (kp.y <= 1))
    centroid, top_left, bottom_right = kp.y[:, 0], kp.y[:, 1], kp.y[:, 2]
    assert np.all(top_left <= centroid) and np.all(centroid <= bottom_right)
    # the same scan has the same keypoints under every condition (paired test set)
    test = kp.select(split="test")
    ids = test.ids.tolist()
    day = ids.index(next(i for i in ids if i.endswith("@daylight")))
    twin = ids.index(ids[day].replace("@daylight", "@low-light"))
    np.testing.assert_array_equal(test.y[day], test.y[twin])
