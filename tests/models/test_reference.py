import json
from pathlib import Path

import numpy as np
import pytest

from workbench._io import check_folder_seal, sha256_file
from workbench.errors import ModelError
from workbench.models.builtin import builtin_path
from workbench.models.formats import model_format
from workbench.models.reference import reference_model
from workbench.models.tflite_graph import read_tflite


def test_reference_model_exports_and_accuracy(reference):
    assert reference.accuracy["daylight"] >= 0.97
    assert set(reference.accuracy) >= {"daylight", "low-light", "overexposed", "motion-blur", "sensor-noise"}
    assert model_format(reference.keras) == "keras"
    assert model_format(reference.saved_model) == "saved_model"
    assert model_format(reference.tflite) == "tflite"
    assert model_format(builtin_path("reference", export="onnx")) == "onnx"


def test_the_onnx_export_is_made_when_first_asked_for_into_the_sealed_folder(reference):
    """What the batch builds (no `exports`) runs no tf2onnx; asking for the .onnx adds it to the cached
    folder and its seal, once."""
    import os
    if not os.environ.get("NPU_WORKBENCH_TEST_CACHE"):      # built in this run (else maybe asked for earlier)
        assert reference.onnx is None
    folder = Path(reference.keras).parent
    onnx_path = builtin_path("reference", export="onnx")
    assert Path(onnx_path) == folder / "model.onnx" and model_format(onnx_path) == "onnx"
    seal = json.loads((folder / "SEAL.json").read_text())["files"]
    assert seal["model.onnx"] == sha256_file(onnx_path) and check_folder_seal(folder) is None
    mtime = Path(onnx_path).stat().st_mtime_ns
    again = reference_model()
    assert again.cache_hit and again.onnx == onnx_path and Path(onnx_path).stat().st_mtime_ns == mtime


def test_reference_exports_static_batch_one_and_target_friendly_ops(reference):
    graph = read_tflite(reference.tflite)
    assert graph.input_tensors()[0].shape_signature == (1, 32, 32, 1)
    assert set(graph.op_types()) <= {"CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D",
                                     "RESHAPE", "FULLY_CONNECTED"}
    import onnx
    dims = onnx.load(builtin_path("reference", export="onnx")).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [1, 32, 32, 1]


def test_reference_exports_agree(reference, digits):
    """The FP32 TFLite and ONNX exports compute what the Keras model computes."""
    import keras
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter
    x = digits.select(split="test", condition="daylight").x[:4]
    want = np.concatenate([keras.saving.load_model(reference.keras)(x[i:i + 1]).numpy() for i in range(4)])
    interp = Interpreter(model_path=reference.tflite)
    interp.allocate_tensors()
    got = []
    for i in range(4):
        interp.set_tensor(interp.get_input_details()[0]["index"], x[i:i + 1])
        interp.invoke()
        got.append(interp.get_tensor(interp.get_output_details()[0]["index"]))
    np.testing.assert_allclose(np.concatenate(got), want, atol=1e-4)
    sess = ort.InferenceSession(builtin_path("reference", export="onnx"), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    onnx_out = np.concatenate([sess.run(None, {name: x[i:i + 1]})[0] for i in range(4)])
    np.testing.assert_allclose(onnx_out, want, atol=1e-4)


def test_reference_is_cached(reference, digits):
    from workbench.models.reference import reference_model
    again = reference_model(dataset=digits)
    assert again.cache_hit and again.keras == reference.keras and again.accuracy == reference.accuracy


@pytest.mark.slow
def test_training_on_a_small_subset_learns(digits):
    """Real TensorFlow training on 300 samples for 6 epochs beats chance (10%) clearly."""
    from workbench.models.builtin import builtin_entry, score, train
    entry = builtin_entry("reference")
    model = train(entry, digits, epochs=6, train_limit=300, seed=1)
    assert model.inputs[0].shape[0] == 1                      # deployment model: batch 1
    acc = score(entry, model, digits)
    assert acc["daylight"] > 0.4


def test_model_format_errors(tmp_path):
    with pytest.raises(ModelError, match="model file or folder .* does not exist"):
        model_format(tmp_path / "nope.tflite")
    fake = tmp_path / "fake.tflite"
    fake.write_bytes(b"\0" * 16)
    with pytest.raises(ModelError, match="not a TFLite flatbuffer"):
        model_format(fake)
    (tmp_path / "folder").mkdir()
    with pytest.raises(ModelError, match="not a SavedModel"):
        model_format(tmp_path / "folder")
    other = tmp_path / "model.pt"
    other.write_bytes(b"x" * 16)
    with pytest.raises(ModelError, match="unsupported model format"):
        model_format(other)


def test_read_tflite_rejects_garbage(tmp_path):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"hello world, not a model")
    with pytest.raises(ModelError, match="not a TFLite flatbuffer"):
        read_tflite(bad)


def test_reference_uses_the_shipped_weights_and_reproduces_their_numbers(reference):
    """Every machine evaluates the same shipped model: the accuracy measured here is the one recorded
    when the weights were trained (same test split, same weights), to the sample."""
    from workbench.models.builtin import shipped_weights
    shipped = shipped_weights("reference")
    assert reference.origin == "shipped"
    assert reference.weights_sha256 == shipped["weights_sha256"]
    assert reference.accuracy == pytest.approx(shipped["accuracy"], abs=1e-9)
    assert "tensorflow" in shipped["trained_with"] and shipped["seed"] == 0


def test_damaged_shipped_weights_are_refused(tmp_path, monkeypatch):
    import dataclasses
    import shutil

    from workbench.models import builtin
    entry = builtin.builtin_entry("reference")
    copy = tmp_path / "weights"
    shutil.copytree(entry.weights, copy)
    data = bytearray((copy / "reference.npz").read_bytes())
    data[-10] ^= 0xFF
    (copy / "reference.npz").write_bytes(bytes(data))
    monkeypatch.setitem(builtin.BUILTIN_MODELS, "reference", dataclasses.replace(entry, weights=copy))
    with pytest.raises(ModelError, match=r"reference.npz: sha256 .* differs .*restore them"):
        builtin.shipped_weights("reference")


def test_a_damaged_export_in_the_cache_is_rebuilt(tmp_path, digits, reference):
    import shutil

    from workbench.errors import WorkbenchWarning
    from workbench.models.reference import reference_model
    built = Path(reference.keras).parent           # the run's reference model, copied: one rebuild here, not two
    shutil.copytree(built, tmp_path / built.name)
    first = reference_model(dataset=digits, cache_root=tmp_path)
    assert first.cache_hit and Path(first.keras).parent == tmp_path / built.name
    with open(first.tflite, "r+b") as handle:       # truncate one export
        handle.truncate(100)
    with pytest.warns(WorkbenchWarning, match="model_fp32.tflite does not match its sha256.*computed again"):
        again = reference_model(dataset=digits, cache_root=tmp_path)
    assert not again.cache_hit and again.accuracy == first.accuracy
    assert read_tflite(again.tflite).op_types()
