"""The input contract: cards, validation, the one apply(), inference from the model, pixel guards."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import DataError, ModelError
from workbench.models.contract import (
    ContractError,
    InputContract,
    card_path,
    check_pixels,
    contract_from_mapping,
    read_card,
    resolve_contract,
    write_card,
)


def _onnx_model(path, shape=(1, 3, 12, 10)):
    """A one-node ONNX model (GlobalAveragePool) with a channels-first input of ``shape``."""
    import onnx
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [shape[0], shape[1], 1, 1])
    graph = helper.make_graph([helper.make_node("GlobalAveragePool", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.fixture
def pixels():
    return np.random.default_rng(0).random((3, 6, 8, 3), dtype=np.float32)


# -- normalisation --------------------------------------------------------------------------------

def test_range_maps_pixels_linearly(pixels):
    c = InputContract(color="rgb", range=(-1.0, 1.0))
    np.testing.assert_allclose(c.apply(pixels), pixels * 2 - 1, atol=1e-6)
    assert c.input_range == (-1.0, 1.0)
    assert "range [-1, 1]" in c.normalization()


def test_mean_std_per_channel_in_pixel_units(pixels):
    mean, std = (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)
    c = InputContract(color="rgb", mean=mean, std=std, pixel_max=255.0)
    expected = (pixels * 255.0 - np.array(mean)) / np.array(std)
    np.testing.assert_allclose(c.apply(pixels), expected, rtol=1e-5, atol=1e-5)


def test_scale_offset_and_identity(pixels):
    assert InputContract(color="rgb").is_identity
    c = InputContract(color="rgb", scale=(255.0,), offset=(-128.0,))
    np.testing.assert_allclose(c.apply(pixels), pixels * 255 - 128, rtol=1e-5, atol=1e-4)


def test_uint8_pixels_are_read_as_fractions():
    c = InputContract(color="grayscale", range=(-1.0, 1.0))
    x = np.array([0, 51, 255], np.uint8).reshape(1, 1, 3, 1)
    np.testing.assert_allclose(c.apply(x).ravel(), [-1.0, -0.6, 1.0], atol=1e-6)


# -- colour, size, layout ---------------------------------------------------------------------------

def test_color_conversions(pixels):
    bgr = InputContract(color="bgr").apply(pixels)
    np.testing.assert_array_equal(bgr, pixels[..., ::-1])
    gray = InputContract(color="grayscale").apply(pixels)
    np.testing.assert_allclose(gray[..., 0], pixels @ np.array([0.299, 0.587, 0.114], np.float32), rtol=1e-5)
    rgb = InputContract(color="rgb").apply(pixels[..., :1])
    assert rgb.shape == (3, 6, 8, 3) and np.array_equal(rgb[..., 0], rgb[..., 2])


@pytest.mark.parametrize("policy", ["stretch", "center-crop", "letterbox"])
def test_resize_policies(pixels, policy):
    c = InputContract(color="rgb", size=(4, 4), resize=policy)
    out = c.apply(pixels)
    assert out.shape == (3, 4, 4, 3)
    if policy == "letterbox":          # 6x8 into 4x4: 3x4, one padded row of black
        assert np.all(out[:, 0] == 0) or np.all(out[:, -1] == 0)
    else:
        assert out.min() > 0


def test_size_mismatch_without_a_policy_is_an_error(pixels):
    c = contract_from_mapping({}, model_input=(4, 4, 3))          # size inferred, resize not stated
    with pytest.raises(ContractError, match="images are 8x6 but the model takes 4x4 .*states no resize policy") as e:
        c.apply(pixels)
    assert e.value.issue.code == "pixels-size"
    with pytest.raises(ContractError, match="says resize: none"):
        InputContract(color="rgb", size=(4, 4), resize="none").apply(pixels)


def test_nchw_layout(pixels):
    out = InputContract(color="rgb").apply(pixels, layout="NCHW")
    assert out.shape == (3, 3, 6, 8)
    np.testing.assert_array_equal(out, pixels.transpose(0, 3, 1, 2))


# -- validation ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, phrase", [
    ({"layout": "HWC"}, "`layout` must be one of 'NHWC', 'NCHW'. Got 'HWC' instead"),
    ({"color": "yuv"}, "`color` must be one of 'grayscale', 'rgb', 'bgr'"),
    ({"resize": "crop"}, "`resize` must be one of"),
    ({"task": "segmentation"}, "`task` must be one of"),
    ({"size": (0, 4)}, "`size` must be \\[height, width\\]"),
    ({"range": (1.0, -1.0)}, "`range` must be \\[low, high\\]"),
    ({"range": (0.0, 1.0), "mean": (0.5,), "std": (0.5,)}, "normalisation twice \\(range and mean/std\\)"),
    ({"mean": (0.5,)}, "`mean` and `std` go together"),
    ({"color": "rgb", "mean": (0.5, 0.5), "std": (1.0,)}, "`mean` must hold 1 or 3"),
    ({"mean": (0.5,), "std": (0.0,)}, "`std` must be > 0"),
    ({"scale": (0.0,)}, "`scale` must not be 0"),
    ({"range": (0.0, float("nan"))}, "finite"),
])
def test_invalid_contracts_are_rejected_at_construction(kwargs, phrase):
    with pytest.raises(ModelError, match=phrase):
        InputContract(**kwargs)


def test_card_keys_are_checked(tmp_path):
    with pytest.raises(ModelError, match="unknown model-card key\\(s\\) 'rnage'"):
        contract_from_mapping({"rnage": [0, 1]})
    bad = tmp_path / "m.card.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(ModelError, match="a model card is a mapping"):
        read_card(bad)
    with pytest.raises(ModelError, match="input spec / model card file .* does not exist"):
        read_card(tmp_path / "missing.yaml")


def test_card_that_contradicts_the_model(tmp_path):
    with pytest.raises(ModelError, match="says size \\[10, 10\\] but the model takes 12x10"):
        contract_from_mapping({"size": [10, 10]}, model_input=(12, 10, 3))
    with pytest.raises(ModelError, match="says color 'grayscale' but the model's input has 3 channel"):
        contract_from_mapping({"color": "grayscale"}, model_input=(12, 10, 3))


# -- cards beside models, inference ---------------------------------------------------------------

def test_card_path_convention(tmp_path):
    assert card_path(tmp_path / "net.onnx") == tmp_path / "net.card.yaml"
    (tmp_path / "saved").mkdir()
    assert card_path(tmp_path / "saved") == tmp_path / "saved" / "card.yaml"


def test_inferred_from_an_nchw_onnx_model(tmp_path):
    model = _onnx_model(tmp_path / "net.onnx")
    c = resolve_contract(model)
    assert (c.layout, c.color, c.size) == ("NCHW", "rgb", (12, 10))
    assert {"size", "color", "range", "layout"} <= set(c.inferred)
    assert c.source == "inferred from the model" and "(assumed)" in c.normalization()


def test_card_beside_the_model_and_input_spec_override(tmp_path):
    model = _onnx_model(tmp_path / "net.onnx")
    (tmp_path / "labels.txt").write_text("cat\ndog\nbird\n")
    (tmp_path / "net.card.yaml").write_text(
        "color: bgr\nrange: [-1, 1]\nresize: center-crop\ntask: classification\nclasses_file: labels.txt\n"
        "outputs:\n  - {name: logits, kind: class_scores}\n")
    c = resolve_contract(model)
    assert c.source.endswith("net.card.yaml")
    assert (c.color, c.range, c.size, c.resize, c.classes) == ("bgr", (-1.0, 1.0), (12, 10), "center-crop",
                                                               ("cat", "dog", "bird"))
    assert c.output_kind(0) == "class_scores" and c.output_name(0) == "logits"
    spec = tmp_path / "spec.yaml"
    spec.write_text("input:\n  mean: [0.485, 0.456, 0.406]\n  std: [0.229, 0.224, 0.225]\n")
    override = resolve_contract(model, spec)
    assert override.mean == (0.485, 0.456, 0.406) and override.source == str(spec)
    assert resolve_contract(model, {"range": [0, 255]}).range == (0.0, 255.0)


def test_round_trip_card_dict_and_html(tmp_path):
    c = contract_from_mapping({"color": "rgb", "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25], "task": "keypoints",
                               "outputs": [{"name": "kp", "kind": "keypoints", "meaning": "x, y"}]},
                              source="test", model_input=(8, 8, 3))
    assert InputContract.from_dict(c.to_dict()) == c
    write_card(c, tmp_path / "m.card.yaml")
    again = contract_from_mapping(read_card(tmp_path / "m.card.yaml"), source="test", model_input=(8, 8, 3))
    assert again.to_params() == c.to_params() and again.outputs == c.outputs
    html = c._repr_html_()
    assert "Input contract" in html and "mean [0.5, 0.5, 0.5]" in html and "keypoints" in html
    assert "8x8" in c.summary()


# -- pixel guards ---------------------------------------------------------------------------------

def test_float_pixels_in_0_255_are_an_error_naming_the_sample(pixels):
    with pytest.raises(ContractError, match="sample 'b' has pixel values in .* but datasets hold pixels in "
                                            "\\[0, 1\\].*0..255 values stored as float") as e:
        check_pixels(np.concatenate([pixels[:1], pixels[1:] * 255]), ids=["a", "b", "c"], where="data.npz")
    assert e.value.issue.code == "pixels-out-of-range" and e.value.issue.evidence["sample"] == "'b'"
    assert isinstance(e.value, DataError)


def test_uint16_and_nan_pixels_are_errors(pixels):
    with pytest.raises(ContractError, match="images are uint16 \\(0..65535\\)") as e:
        check_pixels((pixels * 65535).astype(np.uint16))
    assert e.value.issue.code == "pixels-dtype"
    bad = pixels.copy()
    bad[2, 0, 0, 0] = np.nan
    with pytest.raises(ContractError, match="sample #2 has NaN or infinite pixel values") as e:
        InputContract(color="rgb").apply(bad)
    assert e.value.issue.to_dict()["evidence"]["index"] == 2


def test_the_one_reduction_accept_agrees_with_the_exact_range_check():
    # check_pixels accepts a batch by one max over its bits when every value is in [+0, 1 + tolerance];
    # every other batch (negatives within the tolerance, -0.0, values at the edge, NaN) is decided by
    # min/max.  Here each batch is also judged the plain way, in float64.
    top = np.float32(1.0001)
    edge = [np.nextafter(top, np.float32(0)), top, np.nextafter(top, np.float32(2)), np.float32(1.0),
            np.float32(-0.0), np.float32(-1e-4), np.float32(-1.0001e-4), np.float32(np.nan), np.float32(np.inf),
            np.float32(1e-45), np.float32(-1e-45)]
    rng = np.random.default_rng(3)
    for value in edge:
        for count in (1, 5):
            x = rng.random((4, 3, 3, 1), dtype=np.float32)
            x.flat[rng.choice(x.size, count, replace=False)] = value
            plain = x.astype(np.float64)
            ok = bool(np.isfinite(plain).all() and plain.min() >= -1e-4 and plain.max() <= 1.0 + 1e-4)
            if ok:
                assert check_pixels(x) is x or np.array_equal(check_pixels(x), x)
            else:
                with pytest.raises(ContractError, match="sample #"):      # names the sample (no IndexError)
                    check_pixels(x)


# -- the board runner applies the same contract from plain JSON parameters --------------------------

@pytest.mark.parametrize("card", [{"color": "grayscale", "range": [-1, 1]},
                                  {"color": "bgr", "mean": [123.7, 116.3, 103.5], "std": [58.4, 57.1, 57.4],
                                   "pixel_max": 255},
                                  {"color": "rgb", "layout": "NCHW", "scale": [2.0], "offset": [-0.5]}])
def test_board_runner_prepares_pixels_exactly_as_the_contract(card, pixels):
    import json

    from workbench.board.remote_runner import apply_contract
    contract = contract_from_mapping(card, source="test")
    params = json.loads(json.dumps(contract.to_params()))          # what travels to the board
    u8 = (pixels * 255).astype(np.uint8)
    for images in (pixels, u8):
        np.testing.assert_array_equal(apply_contract(np, images, params),
                                      contract.apply(images, layout=contract.layout))


def test_board_runner_runs_pixels_with_a_contract(tmp_path):
    import json
    import subprocess
    import sys

    import tensorflow as tf

    from workbench.board import remote_runner
    from workbench.models.predict import load_predictor
    w = np.random.default_rng(0).normal(size=(48, 4)).astype(np.float32)
    fn = tf.function(lambda x: tf.matmul(tf.reshape(x, [1, 48]), w),
                     input_signature=[tf.TensorSpec((1, 4, 4, 3), tf.float32)])
    model = tmp_path / "m.tflite"
    model.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()]).convert())
    contract = contract_from_mapping({"color": "bgr", "range": [-1, 1]}, source="test", model_input=(4, 4, 3))
    pixels = np.random.default_rng(1).integers(0, 256, size=(5, 4, 4, 3), dtype=np.uint8)
    np.savez(tmp_path / "in.npz", day=pixels)
    proc = subprocess.run([sys.executable, remote_runner.__file__, "--model", str(model), "--runs", "1",
                           "--warmup", "0", "--inputs", str(tmp_path / "in.npz"),
                           "--contract", json.dumps(contract.to_params())], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    board = np.array(json.loads(proc.stdout.strip().splitlines()[-1])["outputs"]["day"])
    host = load_predictor(model, contract=contract).predict(pixels)
    np.testing.assert_allclose(board, host, rtol=1e-5, atol=1e-5)
