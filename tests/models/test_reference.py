import numpy as np
import pytest

from workbench.models.formats import model_format
from workbench.models.tflite_graph import read_tflite
from workbench.errors import ModelError


def test_reference_model_exports_and_accuracy(reference):
    assert reference.accuracy["daylight"] >= 0.97
    assert set(reference.accuracy) >= {"daylight", "low-light", "overexposed", "motion-blur", "sensor-noise"}
    assert model_format(reference.keras) == "keras"
    assert model_format(reference.saved_model) == "saved_model"
    assert model_format(reference.tflite) == "tflite"
    assert model_format(reference.onnx) == "onnx"


def test_reference_exports_static_batch_one_and_target_friendly_ops(reference):
    graph = read_tflite(reference.tflite)
    assert graph.input_tensors()[0].shape_signature == (1, 32, 32, 1)
    assert set(graph.op_types()) <= {"CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D",
                                     "RESHAPE", "FULLY_CONNECTED"}
    import onnx
    dims = onnx.load(reference.onnx).graph.input[0].type.tensor_type.shape.dim
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
    sess = ort.InferenceSession(reference.onnx, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    onnx_out = np.concatenate([sess.run(None, {name: x[i:i + 1]})[0] for i in range(4)])
    np.testing.assert_allclose(onnx_out, want, atol=1e-4)


def test_reference_is_cached(reference, digits):
    from workbench.models.reference import reference_model
    again = reference_model(dataset=digits)
    assert again.cache_hit and again.keras == reference.keras and again.accuracy == reference.accuracy


def test_training_on_a_small_subset_learns(digits):
    """Real TensorFlow training on 300 samples for 6 epochs beats chance (10%) clearly."""
    from workbench.models.reference import accuracy_by_condition, train
    model = train(digits, epochs=6, train_limit=300, seed=1)
    assert model.inputs[0].shape[0] == 1                      # deployment model: batch 1
    acc = accuracy_by_condition(model, digits)
    assert acc["daylight"] > 0.4


def test_model_format_errors(tmp_path):
    with pytest.raises(ModelError, match="no such model"):
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
