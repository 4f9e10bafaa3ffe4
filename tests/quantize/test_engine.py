import hashlib
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from workbench.errors import CalibrationError, ModelError, QuantizationError, WorkbenchWarning
from workbench.quantize.engine import QuantizedModel, quantize
from workbench.quantize.inspect import ModelInspection, inspect_model
from workbench.quantize.manifest import verify_manifest
from workbench.quantize.recipe import get_recipe


def test_per_channel_and_per_tensor_read_from_the_files(quantized):
    pc = inspect_model(quantized["a8w8_pc"].path)
    pt = inspect_model(quantized["a8w8_pt"].path)
    assert {w.op.split()[0] for w in pc.weights} == {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"}
    for w in pc.weights:
        assert w.n_scales == w.channels > 1 and w.axis == w.expected_axis and w.symmetric
    assert [w.expected_axis for w in pc.weights] == [0, 3, 0]
    for w in pt.weights:
        assert w.n_scales == 1 and w.symmetric
    assert pc.weight_granularity == "per_channel" and pt.weight_granularity == "per_tensor"
    assert pc.full_integer and pt.full_integer and not pc.float_ops
    assert [p.dtype for p in pc.inputs + pc.outputs] == ["INT8", "INT8"]
    assert pc.inputs[0].scale > 0 and pc.min_runtime.startswith("TFLite runtime >=")


def test_a16w8_has_int16_activations(quantized):
    q = quantized["a16w8_pc"]
    insp = q.inspect()
    assert q.input_quantization.dtype == "INT16" and q.output_quantization.dtype == "INT16"
    acts = [t for t in insp.tensors if not t.is_constant and t.scales]
    assert acts and all(t.dtype in ("INT16", "INT32") for t in acts)
    assert all(w.dtype == "INT8" for w in insp.weights)


def test_manifest_hash_equals_the_file(quantized):
    q = quantized["a8w8_pc"]
    manifest = json.loads(Path(q.manifest_path).read_text())
    digest = hashlib.sha256(Path(q.path).read_bytes()).hexdigest()
    assert manifest["sha256"] == digest == q.sha256
    assert manifest["size_bytes"] == Path(q.path).stat().st_size
    for key in ("model_version", "min_runtime", "recipe", "calibration", "source", "toolchain"):
        assert manifest[key]
    assert manifest["recipe"]["name"] == "a8w8_pc"
    assert manifest["calibration"]["hash"] == q.calibration_hash
    assert manifest["source"]["sha256"] == q.source_sha256
    assert "tensorflow" in manifest["toolchain"]
    assert verify_manifest(q.path, q.manifest_path)


def test_repeated_call_is_a_cache_hit_with_the_same_bytes(models, calib, quantized, tmp_path):
    first = quantized["a8w8_pc"]
    again = quantize(models["keras"], "a8w8_pc", calib, output=tmp_path / "out")
    assert again.cache_hit and not first.cache_hit
    assert Path(again.path).read_bytes() == Path(first.path).read_bytes()
    assert Path(again.path) == tmp_path / "out" / "model.tflite"
    assert Path(again.manifest_path) == tmp_path / "out" / "model_manifest.json"
    assert verify_manifest(again.path)
    other = quantize(models["keras"], "a8w8_pc", calib[:60])
    assert not other.cache_hit and other.cache_key != first.cache_key


def test_a_broken_cache_entry_is_not_trusted(models, calib, quantized):
    first = quantized["a8w8_pt"]
    Path(first.path).write_bytes(Path(first.path).read_bytes()[:100])  # an interrupted copy
    again = quantize(models["keras"], "a8w8_pt", calib)
    assert not again.cache_hit and again.sha256 == first.sha256
    assert hashlib.sha256(Path(again.path).read_bytes()).hexdigest() == first.sha256


def test_two_models_in_one_folder_are_refused(models, calib, quantized, tmp_path):
    quantize(models["keras"], "a8w8_pc", calib, output=tmp_path / "pc.tflite")
    with pytest.raises(QuantizationError, match="already holds the manifest of 'pc.tflite'"):
        quantize(models["keras"], "a8w8_pt", calib, output=tmp_path / "pt.tflite")


def test_float_op_in_the_middle_is_caught(models, calib):
    with pytest.raises(QuantizationError) as info:
        quantize(models["sin"], "a8w8_pc", calib)
    assert "float ops left in a full-integer model" in str(info.value)
    assert "SIN #" in str(info.value)


def test_float_fallback_reports_the_float_ops(models, calib):
    q = quantize(models["sin"], get_recipe("a8w8_pc", allow_float_fallback=True), calib)
    assert not q.full_integer
    assert any(op.startswith("SIN #") for op in q.float_ops)
    assert any(op.startswith("DEQUANTIZE #") for op in q.float_ops)


def test_excluded_op_stays_float(models, calib):
    q = quantize(models["keras"], "a8w8_pc", calib, exclude=["MEAN"])
    assert q.recipe.exclude == ("MEAN",) and q.recipe.allow_float_fallback
    assert any(op.startswith("MEAN #") for op in q.float_ops)
    assert q.input_quantization.dtype == "INT8"


def test_16x8_unsupported_op_names_it(models, calib):
    with pytest.raises(QuantizationError, match="SIN"):
        quantize(models["sin"], "a16w8_pc", calib)


def test_result_round_trips_and_renders(quantized):
    q = quantized["a8w8_pc"]
    assert QuantizedModel.from_dict(q.to_dict()) == q
    assert "a8w8_pc" in q.summary() and "full integer" in q.summary()
    assert "<table" in q._repr_html_()
    insp = q.inspect()
    assert ModelInspection.from_dict(insp.to_dict()) == insp
    assert "CONV_2D" in insp._repr_html_() and "per-channel" in insp.summary()


def test_dataset_and_calibration_set_inputs(models, tiny_dataset, quantized):
    q = quantize(models["keras"], "a8w8_pc", tiny_dataset)
    assert q.calibration_hash == tiny_dataset.hash and q.calibration_size == 64

    class CalibSet:  # duck type of workbench.calibration.curate.CalibrationSet
        sample_ids = tuple(f"s{i}" for i in range(0, 64, 2))
        hash = "c" * 64
        strategy = "stratified"
    with pytest.warns(WorkbenchWarning, match="only 32 calibration samples"):
        q2 = quantize(models["keras"], "a8w8_pc", CalibSet(), dataset=tiny_dataset)
    assert q2.calibration_hash == "c" * 64 and q2.calibration_size == 32
    assert q2.calibration_id == "stratified:cccccccccccc"
    with pytest.raises(CalibrationError, match="pass the dataset it was drawn from"):
        quantize(models["keras"], "a8w8_pc", CalibSet())


@pytest.mark.parametrize("data, phrase", [
    (np.zeros((0, 8, 8, 1), np.float32), "has zero samples"),
    (np.zeros((4, 8, 8, 1), np.uint8), "dtype uint8"),
    (np.zeros((4, 8, 8), np.float32), "(N, H, W, C) is expected"),
    (np.full((4, 8, 8, 1), np.nan, np.float32), "NaN"),
    ("images.npy", "must be an (N, H, W, C) float32 array"),
])
def test_bad_calibration_data(models, data, phrase):
    with pytest.raises(CalibrationError) as info:
        quantize(models["keras"], "a8w8_pc", data)
    assert phrase in str(info.value)


def test_calibration_of_the_wrong_shape_names_both_shapes(models):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkbenchWarning)
        with pytest.raises(CalibrationError) as info:
            quantize(models["keras"], "a8w8_pc", np.zeros((4, 16, 16, 1), np.float32))
    assert "(16, 16, 1)" in str(info.value) and "(1, 8, 8, 1)" in str(info.value)


def test_bad_model_files(models, calib, tmp_path):
    corrupt = tmp_path / "broken.keras"
    corrupt.write_bytes(models["keras"].read_bytes()[:200])
    with pytest.raises(ModelError, match="broken.keras: cannot load the Keras model"):
        quantize(corrupt, "a8w8_pc", calib)
    truncated = tmp_path / "cut.onnx"
    truncated.write_bytes(models["onnx"].read_bytes()[:300])
    with pytest.raises(ModelError, match="cut.onnx: the ONNX file is corrupt or truncated"):
        quantize(truncated, "a8w8_pc", calib, backend="onnx")
    text = tmp_path / "model.txt"
    text.write_text("not a model")
    with pytest.raises(ModelError, match="unsupported model format"):
        quantize(text, "a8w8_pc", calib)
    with pytest.raises(ModelError, match="dynamic shape .*batch-1"):
        quantize(models["dynamic"], "a8w8_pc", calib)


def test_a_quantized_tflite_is_not_a_source(calib, quantized):
    # an FP32 .tflite is a source (tests/models/test_convert.py); an INT8 one is not
    with pytest.raises(ModelError, match="already a quantized .tflite file .*give the FP32 .tflite"):
        quantize(quantized["a8w8_pc"].path, "a8w8_pc", calib)


def test_wb_quantize_is_the_verb_after_subpackage_imports(tmp_path, calib):
    import workbench as wb
    import workbench.quantize.inspect  # noqa: F401 - Python binds the sub-package to `workbench.quantize`
    with pytest.raises(ModelError, match="missing.keras' does not exist"):
        wb.quantize(tmp_path / "missing.keras", "a8w8_pc", calib)
