"""ONNX -> SavedModel + FP32 TFLite with onnx2tf (its own pinned tool environment), and quantizing
.onnx / FP32 .tflite sources with the TFLite recipes.

Real onnx2tf, ONNX Runtime, LiteRT and TensorFlow: the tiny NCHW model is converted once per
session (the conversion is cached by content under the session's workbench cache)."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from tests.models.onnx_tiny import nhwc_images, tiny_nchw_onnx
from workbench.errors import ModelError


@pytest.fixture(scope="session")
def tiny_onnx(tmp_path_factory):
    return tiny_nchw_onnx(tmp_path_factory.mktemp("onnx") / "tiny.onnx")


@pytest.fixture(scope="session")
def converted(tiny_onnx):
    from workbench.models.convert import convert_onnx
    return convert_onnx(tiny_onnx, samples=nhwc_images(24))


def test_conversion_records_the_layout_and_agrees_with_onnx_runtime(converted, tiny_onnx):
    from workbench.models.convert import ConvertedModel, convert_onnx
    assert converted.transposed_inputs == ("image",)
    (inp,) = converted.inputs
    assert (inp.onnx_shape, inp.tflite_shape) == ((1, 3, 16, 16), (1, 16, 16, 3))
    (out,) = converted.outputs
    assert out.name == "logits" and out.tflite_shape == (1, 4) and not out.transposed
    (agree,) = converted.agreement
    assert agree.ok and agree.max_abs_error < 1e-4 and agree.cosine > 0.99999 and converted.check_samples == 8
    assert converted.tools["onnx2tf"] == "1.29.24" and converted.tools["tensorflow"].startswith("2.19")
    assert "NCHW->NHWC for image" in converted.summary()
    assert ConvertedModel.from_dict(converted.to_dict()) == converted
    assert "ONNX Runtime vs converted FP32 TFLite" in converted._repr_html_()
    # the converted FP32 model computes what the ONNX model computes, on NHWC images
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter
    x = nhwc_images(3, seed=5)
    ref = ort.InferenceSession(str(tiny_onnx)).run(None, {"image": x[:1].transpose(0, 3, 1, 2)})[0]
    interp = Interpreter(model_path=converted.tflite)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x[:1])
    interp.invoke()
    assert np.allclose(interp.get_tensor(interp.get_output_details()[0]["index"]), ref, atol=1e-4)
    again = convert_onnx(tiny_onnx)
    assert again.cache_hit and again.tflite == converted.tflite


def test_a_diverging_conversion_names_the_output(converted, tmp_path):
    from workbench.models.convert import check_agreement
    other = tiny_nchw_onnx(tmp_path / "other.onnx", seed=1)   # same graph, other weights
    with pytest.raises(ModelError, match=r"diverges from ONNX Runtime at output 'logits': max abs error"):
        check_agreement(dataclasses.replace(converted, source_path=str(other)), nhwc_images(4))


def test_a_small_error_at_a_high_cosine_is_still_refused(converted, tmp_path):
    """A source whose outputs differ by a few 1e-3 of the largest value while keeping their direction (cosine
    above 0.99999) is what gnet's mis-converted channel shuffle looked like: refused, not taken for float
    reassociation."""
    import onnx
    from onnx import numpy_helper

    from workbench.models.convert import check_agreement
    model = onnx.load(str(converted.source_path))
    for init in model.graph.initializer:
        if init.name == "w3":
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * np.float32(1.004), "w3"))
    onnx.save(model, str(tmp_path / "scaled.onnx"))
    with pytest.raises(ModelError, match=r"diverges from ONNX Runtime at output 'logits'") as err:
        check_agreement(dataclasses.replace(converted, source_path=str(tmp_path / "scaled.onnx")), nhwc_images(8))
    cosine = float(str(err.value).split("cosine ")[1].split(" ")[0])
    assert cosine > 0.99999, str(err.value)


def test_damaged_cache_entries_are_never_trusted(converted, tmp_path):
    from pathlib import Path

    from workbench.models.convert import FLOAT_TFLITE, _load_entry
    entry = tmp_path / "entry"
    shutil.copytree(Path(converted.tflite).parent, entry)
    assert _load_entry(entry) is not None
    (entry / FLOAT_TFLITE).write_bytes((entry / FLOAT_TFLITE).read_bytes()[:100])
    assert _load_entry(entry) is None and not entry.exists()


# onnx2tf's own run, with only from_keras_model answered by from_saved_model (the driver before it stopped at
# the float16 file and ended without TensorFlow's teardown)
_PLAIN_DRIVER = """\
import sys

import tensorflow as tf

saved_model = sys.argv[sys.argv.index("-o") + 1]
from_saved_model = tf.lite.TFLiteConverter.from_saved_model
tf.lite.TFLiteConverter.from_keras_model = staticmethod(lambda model, *a, **k: from_saved_model(saved_model))
from onnx2tf import main

sys.argv[0] = "onnx2tf"
sys.exit(main())
"""


@pytest.mark.slow
def test_the_driver_stops_after_the_float32_file_with_the_same_bytes(tiny_onnx, tmp_path):
    from workbench import toolenv
    from workbench.models.convert.onnx2tf_run import DRIVER_SOURCE, FLOAT_TFLITE, TOOL, calibration_file
    env = toolenv.ensure(TOOL)
    out = {}
    for name, source, model in (("plain", _PLAIN_DRIVER, tiny_onnx), ("ours", DRIVER_SOURCE, tiny_onnx)):
        work = tmp_path / name
        work.mkdir()
        shutil.copyfile(model, work / "model.onnx")
        calibration_file(None, work)
        (work / "driver.py").write_text(source)
        proc = env.run(["python", "driver.py", "-i", "model.onnx", "-o", "out", "-coion", "-osd", "-v", "error"],
                       cwd=work, timeout=900)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out[name] = work / "out"
    assert (out["plain"] / "model_float16.tflite").is_file() and not (out["ours"] / "model_float16.tflite").exists()
    for kept in (FLOAT_TFLITE, "saved_model.pb"):
        assert (out["ours"] / kept).read_bytes() == (out["plain"] / kept).read_bytes(), kept
    broken = tmp_path / "broken"                  # a failing onnx2tf still fails through the driver
    broken.mkdir()
    (broken / "model.onnx").write_bytes(tiny_onnx.read_bytes()[:200])
    calibration_file(None, broken)
    (broken / "driver.py").write_text(DRIVER_SOURCE)
    proc = env.run(["python", "driver.py", "-i", "model.onnx", "-o", "out", "-coion", "-osd", "-v", "error"],
                   cwd=broken, timeout=900)
    assert proc.returncode != 0 and not (broken / "out" / FLOAT_TFLITE).exists()


@pytest.mark.slow
def test_two_conversions_of_one_model_at_once_share_one_entry(tmp_path):
    """A batch's targets on a cold cache convert the same model at once (a8w8_pt and a8w8_pc quantize under other
    keys): one converts, the other waits and finds the entry.  Before, the second failed "... is a folder; the
    workbench ... never replaces a folder" (make test-zoo on a fresh zoo: heatnet and ppocr-cls on imx8mp)."""
    import threading

    from workbench.models.convert import convert_onnx
    model = tiny_nchw_onnx(tmp_path / "fresh.onnx", seed=11)      # weights nothing has converted yet
    results, errors = [], []

    def run():
        try:
            results.append(convert_onnx(model, samples=nhwc_images(8)))
        except Exception as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)
    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(r.cache_hit for r in results) == [False, True] and results[0].tflite == results[1].tflite
    again = convert_onnx(model, samples=nhwc_images(8), cache=False)     # converts again, refreshing the entry
    assert not again.cache_hit and again.tflite == results[0].tflite and again.agreement[0].ok


def test_bad_onnx_inputs_are_clear_errors(tmp_path):
    from workbench.models.convert import convert_onnx, read_onnx_io
    spatial = tiny_nchw_onnx(tmp_path / "spatial.onnx", dynamic="spatial")
    with pytest.raises(ModelError, match=r"spatial.onnx: input 'image' has dynamic shape .*fixed input size"):
        read_onnx_io(spatial)
    batch = read_onnx_io(tiny_nchw_onnx(tmp_path / "batch.onnx", dynamic="batch"))
    assert batch.inputs == (("image", (1, 3, 16, 16), True),)
    with pytest.raises(ModelError, match="`input_layout` must be one of 'auto', 'nchw', 'nhwc'. Got 'hwc'"):
        convert_onnx(spatial, input_layout="hwc")


def _paddle_style(path, tmp_path):
    """The tiny NCHW model with dynamic H/W and Paddle2ONNX node names (``Conv@0``)."""
    import onnx
    model = onnx.load(str(tiny_nchw_onnx(path, dynamic="spatial")))
    for i, node in enumerate(model.graph.node):
        node.name = f"{node.op_type}@{i % 2}"
    onnx.save(model, str(path))
    return path


def test_card_size_fixes_dynamic_hw_and_names_are_sanitized(tmp_path):
    import onnx

    from workbench.models.convert import card_size, exact_rewrites, read_onnx_io
    src = _paddle_style(tmp_path / "paddle.onnx", tmp_path)
    with pytest.raises(ModelError, match=r"`size: \[H, W\]` in <model>.card.yaml"):
        read_onnx_io(src)
    assert card_size(src) is None
    (tmp_path / "paddle.card.yaml").write_text("layout: NCHW\nsize: [16, 16]\n", encoding="utf-8")
    assert card_size(src) == (16, 16)
    graph = read_onnx_io(src, size=(16, 16))
    assert graph.inputs == (("image", (1, 3, 16, 16), True),) and "image" in graph.fixed[0]
    with pytest.raises(ModelError, match=r"size \[12, 16\] given does not fit"):
        read_onnx_io(_fixed_h(tmp_path), size=(12, 16))
    done = exact_rewrites(src, tmp_path / "out.onnx", graph)
    out = onnx.load(str(tmp_path / "out.onnx"))
    names = [n.name for n in out.graph.node]
    assert all("@" not in n for n in names) and len(set(names)) == len(names), names
    dims = [d.dim_value for d in out.graph.input[0].type.tensor_type.shape.dim]
    assert dims[1:] == [3, 16, 16] and any("renamed" in d for d in done) and any("fixed" in d for d in done)
    onnx.checker.check_model(out)


def _fixed_h(tmp_path):
    """Dynamic W only, H fixed at 16: a card size with another H does not fit."""
    import onnx
    path = tiny_nchw_onnx(tmp_path / "dyn_w.onnx", dynamic="spatial")
    model = onnx.load(str(path))
    dim = model.graph.input[0].type.tensor_type.shape.dim[2]
    dim.Clear()
    dim.dim_value = 16
    onnx.save(model, str(path))
    return path


@pytest.mark.slow
def test_paddle_style_model_converts_with_its_card(tmp_path):
    from workbench.models.convert import convert_onnx
    src = _paddle_style(tmp_path / "paddle.onnx", tmp_path)
    (tmp_path / "paddle.card.yaml").write_text("layout: NCHW\nsize: [16, 16]\n", encoding="utf-8")
    conv = convert_onnx(src, samples=nhwc_images(8))
    assert conv.inputs[0].tflite_shape == (1, 16, 16, 3) and all(a.ok for a in conv.agreement)
    assert any("renamed" in r for r in conv.rewrites) and any("fixed" in r for r in conv.rewrites)


def test_input_layout_rule():
    from workbench.models.convert import nhwc_inputs
    from workbench.models.convert.onnx_source import _OnnxIO
    graph = _OnnxIO(inputs=(("nchw", (1, 3, 224, 224), False), ("nhwc", (1, 96, 96, 1), False),
                            ("vector", (1, 10), False)), outputs=("y",))
    assert nhwc_inputs(graph, "auto") == ("nhwc",)
    assert nhwc_inputs(graph, "nchw") == ()
    assert nhwc_inputs(graph, "nhwc") == ("nchw", "nhwc")


def test_calibration_file_holds_our_samples_resized(tmp_path):
    from workbench.models.convert import CALIBRATION_FILE, calibration_file
    gray = nhwc_images(5)[..., :1]
    path = calibration_file(gray, tmp_path)
    data = np.load(path)
    assert path.name == CALIBRATION_FILE and data.shape == (20, 128, 128, 3) and data.dtype == np.float32
    assert data.std() > 0.1 and np.allclose(data[..., 0], data[..., 2])   # gray repeated to RGB, not zeros
    assert np.load(calibration_file(None, tmp_path)).std() > 0.1


def test_quantize_onnx_with_the_tflite_recipes(converted, tiny_onnx, tmp_path):
    from workbench.quantize.engine import quantize  # not wb.quantize: importing workbench.quantize.* rebinds it
    x = nhwc_images(60, seed=2)
    q = quantize(tiny_onnx, "a8w8_pc", x, output=tmp_path / "int8")
    assert q.format == "tflite" and q.full_integer and q.weight_granularity == "per_channel"
    assert q.input_quantization.shape == (1, 16, 16, 3)             # NHWC after conversion
    manifest = q.manifest()
    conv = manifest["conversion"]
    assert conv["tool"] == "onnx2tf" and conv["transposed_inputs"] == ["image"]
    assert conv["versions"]["onnx2tf"] == "1.29.24" and conv["lock_sha256"] == converted.lock_sha256
    assert conv["agreement"][0]["output"] == "logits" and conv["agreement"][0]["cosine"] > 0.9999
    assert manifest["toolchain"]["onnx2tf"] == "1.29.24"
    assert manifest["toolchain"]["onnx2tf-env/tensorflow"].startswith("2.19")
    assert manifest["source"]["format"] == "onnx"
    assert "converted with" in q._repr_html_()
    # INT8 scores follow the ONNX model's FP32 scores
    from workbench.models.predict import load_predictor
    fp32 = load_predictor(tiny_onnx)
    fp32.adapt_layout(x.shape[1:])
    ref, got = fp32.predict(x), load_predictor(q.path).predict(x)
    cos = np.sum(ref * got, 1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(got, axis=1))
    assert np.median(cos) > 0.95
    pt = quantize(tiny_onnx, "a8w8_pt", x)
    assert pt.weight_granularity == "per_tensor" and pt.cache_key != q.cache_key
    # the ONNX Runtime backend takes the same NCHW model with NHWC calibration images
    qdq = quantize(tiny_onnx, "a8w8_pc", x, backend="onnx")
    assert qdq.format == "onnx" and qdq.manifest()["conversion"]["calibration_layout"] == "NHWC images fed as NCHW"


@pytest.mark.slow
def test_fp32_tflite_and_keras_sources_reach_both_backends(tmp_path):
    """FP32 .tflite -> INT8 .tflite as it is (AI Edge Quantizer, no round trip); Keras -> ONNX QDQ."""
    import contextlib
    import io

    import keras
    import tensorflow as tf

    from workbench.quantize.engine import quantize
    inp = keras.Input((12, 12, 1), batch_size=1, name="image")
    h = keras.layers.Conv2D(4, 3, activation="relu")(inp)
    h = keras.layers.GlobalAveragePooling2D()(h)
    model = keras.Model(inp, keras.layers.Dense(3)(h))
    keras_path = tmp_path / "m.keras"
    with contextlib.redirect_stdout(io.StringIO()):
        model.save(keras_path)
    tflite_path = tmp_path / "m_fp32.tflite"
    tflite_path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    x = np.random.default_rng(0).uniform(0, 1, (50, 12, 12, 1)).astype(np.float32)
    q = quantize(tflite_path, "a8w8_pc", x)
    conv = q.manifest()["conversion"]
    assert q.full_integer and conv["tool"] == "ai-edge-quantizer" and "onnx2tf" not in q.toolchain
    assert q.input_quantization.shape == (1, 12, 12, 1) and q.input_quantization.dtype == "INT8"
    assert q.op_summary == {"CONV_2D": 1, "MEAN": 1, "FULLY_CONNECTED": 1}, q.op_summary   # op for op
    qdq = quantize(keras_path, "a8w8_pc", x, backend="onnx")
    assert qdq.format == "onnx" and qdq.manifest()["conversion"]["tool"] == "tf2onnx"
    from workbench.models.predict import load_predictor
    ref = load_predictor(keras_path).predict(x)
    assert np.mean(np.argmax(load_predictor(q.path).predict(x), 1) == np.argmax(ref, 1)) > 0.8
    with pytest.raises(ModelError, match="already a quantized .tflite file"):
        quantize(q.path, "a8w8_pc", x)


def test_model_convert_cli(converted, tiny_onnx):
    import json
    import os
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "workbench", "model", "convert", str(tiny_onnx), "--json"],
                          capture_output=True, text=True, env=dict(os.environ), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    assert data["cache_hit"] and data["tflite"] == converted.tflite
    assert data["inputs"][0]["transposed"] and data["agreement"][0]["name"] == "logits"
    text = subprocess.run([sys.executable, "-m", "workbench", "model", "convert", str(tiny_onnx)],
                          capture_output=True, text=True, env=dict(os.environ), timeout=600).stdout
    assert "NCHW->NHWC" in text and "onnx2tf 1.29.24" in text


def test_placement_of_an_onnx_file_says_what_to_do(tiny_onnx):
    from workbench.placement.analyze import analyze_placement
    with pytest.raises(ModelError, match=r"tiny.onnx: an ONNX model; placement on imx93 reads the INT8 .tflite.*"
                                         r"Quantize the FP32 .onnx with a TFLite recipe"):
        analyze_placement(tiny_onnx, "imx93")


@pytest.mark.parametrize("size, kernel, rewritten", [(46, 3, True), (21, 3, False), (10, 2, True), (47, 3, False)])
def test_ceil_mode_max_pool_becomes_same_when_exact(tmp_path, size, kernel, rewritten):
    """ONet's ceil-mode pools: onnx2tf pads them with float32's lowest value (calibration scale ~1e36);
    where TensorFlow's SAME windows are the same, the pool is rewritten to SAME_UPPER, same outputs."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from workbench.models.convert import ceil_pools_as_same
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[kernel, kernel], strides=[2, 2], ceil_mode=1,
                            pads=[0, 0, 0, 0])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    before = model.SerializeToString()
    assert ceil_pools_as_same(model) == int(rewritten)
    attrs = {a.name: helper.get_attribute_value(a) for a in model.graph.node[0].attribute}
    assert (attrs.get("auto_pad") == b"SAME_UPPER") == rewritten and ("ceil_mode" in attrs) != rewritten
    x = -np.abs(np.random.default_rng(0).normal(3, 1, (1, 2, size, size))).astype(np.float32)   # all negative
    ref = ort.InferenceSession(before).run(None, {"x": x})[0]
    got = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    assert ref.shape == got.shape and np.array_equal(ref, got)


def test_paddle_minus_one_dims_are_dynamic_not_huge(tmp_path):
    """Paddle2ONNX writes dynamic dimensions as dim_value -1 (PaddleOCR: input (-1, 3, -1, -1), output
    (-1, 2)); the pre-flight took them for a declared size beyond its limit and refused the model."""
    import onnx

    from workbench.models.convert import read_onnx_io
    from workbench.models.onnx_preflight import preflight
    path = tiny_nchw_onnx(tmp_path / "p.onnx")
    model = onnx.load(str(path))
    for value in (model.graph.input[0], model.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_value = -1
    for dim in model.graph.input[0].type.tensor_type.shape.dim[2:]:
        dim.dim_value = -1
    onnx.save(model, str(path))
    assert preflight(path) == path
    assert read_onnx_io(path, size=(16, 16)).inputs == (("image", (1, 3, 16, 16), True),)
