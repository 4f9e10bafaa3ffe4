"""Guards against a wrong input contract: a [-1, 1] model told [0, 1], outputs that are not the
dataset's classes, near-chance baselines, float and INT8 models in each other's roles."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from workbench.errors import EvaluationError, WorkbenchWarning
from workbench.evaluate.accuracy import AccuracyReport, compare_accuracy
from workbench.evaluate.guards import check_model_roles, model_precision


def _onnx_dense(path, n_out, *, quantized=False, seed=0):
    """Flatten a (N, 32, 32, 1) image and multiply by a random matrix: an untrained 'classifier'."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = np.random.default_rng(seed).normal(size=(1024, n_out)).astype(np.float32)
    nodes = [helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("MatMul", ["f", "w"], ["y"])]
    inits = [numpy_helper.from_array(w, "w")]
    if quantized:   # a QDQ pair on the input, as ONNX Runtime's quantizer writes
        nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                 helper.make_node("DequantizeLinear", ["q", "s", "z"], ["x2"]),
                 helper.make_node("Flatten", ["x2"], ["f"]), nodes[1]]
        inits += [numpy_helper.from_array(np.array(1 / 255, np.float32), "s"),
                  numpy_helper.from_array(np.array(0, np.uint8), "z")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 32, 32, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, n_out])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


@pytest.fixture(scope="module")
def pm1_model(tmp_path_factory, digits):
    """A small Keras classifier trained on digits scaled to [-1, 1] (as MobileNetV2 expects)."""
    import keras
    folder = tmp_path_factory.mktemp("pm1")
    train = digits.select(split="train", condition="daylight")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((32, 32, 1)), keras.layers.AveragePooling2D(4), keras.layers.Flatten(),
                              keras.layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(np.asarray(train.x) * 2 - 1, train.y, epochs=15, batch_size=64, verbose=0)
    path = folder / "pm1.keras"
    model.save(path)
    return path


def test_a_minus1_1_model_gets_its_true_accuracy_from_its_card(pm1_model, digits):
    (pm1_model.parent / "pm1.card.yaml").write_text("range: [-1, 1]\ntask: classification\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", WorkbenchWarning)     # no guard fires
        rep = compare_accuracy(pm1_model, [], digits, conditions=["daylight"], cache=False)
    assert rep.contract.range == (-1.0, 1.0) and rep.contract.source.endswith("pm1.card.yaml")
    assert rep.rows[0].accuracy > 0.9 and rep.issues == ()
    assert "range [-1, 1]" in rep.text() and "Input contract" in rep._repr_html_()


def test_the_same_model_with_a_0_1_card_is_flagged(pm1_model, digits):
    with pytest.warns(WorkbenchWarning, match="the input contract is probably wrong"):
        rep = compare_accuracy(pm1_model, [], digits, conditions=["daylight"], input_spec={"range": [0, 1]},
                               cache=False)
    issue = next(i for i in rep.issues if i.code == "contract-probably-wrong")
    assert issue.evidence["best_alternative"] == "range [-1, 1]"
    probe = issue.evidence["probe_top1"]
    assert probe["range [-1, 1]"] > probe["contract: range [0, 1]"] + 0.1
    assert "with range [-1, 1], on the same 256 samples" in issue.message
    assert rep.text().startswith("WARNING [contract-probably-wrong]")
    assert AccuracyReport.from_dict(rep.to_dict()).issues == rep.issues


def test_a_1000_class_model_on_a_10_class_dataset_is_an_error(tmp_path, digits):
    model = _onnx_dense(tmp_path / "imagenet_like.onnx", 1000)
    with pytest.raises(EvaluationError, match="gives 1000 class scores but dataset 'digits-conditions' has 10 "
                                              "classes .*name the model's classes in its card"):
        compare_accuracy(model, [], digits, conditions=["daylight"], cache=False)
    names = [f"c{i}" for i in range(1000)]
    names[500:510] = [str(d) for d in range(10)]                   # the card maps the dataset's classes
    (tmp_path / "labels.txt").write_text("\n".join(names))
    (tmp_path / "imagenet_like.card.yaml").write_text("classes_file: labels.txt\n")
    rep = compare_accuracy(model, [], digits, conditions=["daylight"], cache=False, check_contract=False)
    assert rep.rows[0].n == 540
    (tmp_path / "imagenet_like.card.yaml").write_text("classes: [a, b]\n")
    with pytest.raises(EvaluationError, match="names 2 classes but model 'fp32' .* gives 1000 class scores"):
        compare_accuracy(model, [], digits, conditions=["daylight"], cache=False)


def test_a_near_chance_baseline_is_flagged_with_what_was_checked(tmp_path, digits):
    model = _onnx_dense(tmp_path / "untrained.onnx", 10)
    with pytest.warns(WorkbenchWarning, match="near chance"):
        rep = compare_accuracy(model, [], digits, conditions=["daylight", "low-light"], cache=False)
    issue = next(i for i in rep.issues if i.code == "baseline-near-chance")
    assert issue.evidence["condition"] == "daylight" and issue.evidence["chance"] == 0.1
    assert "range [-1, 1]" in issue.message and "checked on 256 samples" in issue.message


def test_float_and_int8_models_in_each_others_roles(tmp_path):
    fp32 = _onnx_dense(tmp_path / "fp32.onnx", 10)
    int8 = _onnx_dense(tmp_path / "int8.onnx", 10, quantized=True)
    assert (model_precision(fp32), model_precision(int8)) == ("float", "quantized")
    assert check_model_roles([("fp32", fp32), ("int8", int8)], "fp32") == []
    issues = check_model_roles([("fp32", int8), ("cand", fp32)], "fp32")
    assert [i.code for i in issues] == ["baseline-is-quantized", "candidate-is-float"]
    assert "is a float model, not an INT8 candidate" in issues[1].message
    assert issues[0].evidence["path"] == int8


def test_roles_on_real_tflite_models(reference, int8_models):
    assert model_precision(reference.tflite) == "float"
    assert model_precision(int8_models["pc"]) == "quantized"
    assert model_precision(reference.keras) == "float"


def test_near_chance_finding_follows_the_guard_rule():
    """A binary classifier at 88.8% is not "near chance" (the old rule, 2 x chance = 100%, fired at any
    accuracy); at 40% it is, as guards.py's ``min(0.5, 2 x chance)`` says."""
    from tests.evaluate.test_gate import make_report
    from workbench.evaluate.findings import findings, near_chance_threshold
    assert near_chance_threshold(2) == 0.5 and near_chance_threshold(10) == pytest.approx(0.2)
    assert findings(make_report({"daylight": {"fp32": 0.888}, "fog": {"fp32": 0.86}})) == []
    low = findings(make_report({"daylight": {"fp32": 0.40}, "fog": {"fp32": 0.38}}))
    assert [f.code for f in low] == ["model.input-contract"] and low[0].evidence["threshold"] == 0.5
