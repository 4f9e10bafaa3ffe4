"""compare_accuracy on the real reference model and real INT8 conversions of it."""

from __future__ import annotations

import types

import numpy as np
import pytest

from workbench.data.dataset import Dataset
from workbench.errors import DataError, EvaluationError, ModelError
from workbench.evaluate import cache as eval_cache
from workbench.evaluate.accuracy import AccuracyReport, compare_accuracy


def plain_loop_correct(path, x, y):
    """Independent check: one invoke per sample on the raw interpreter, manual (de)quantization."""
    from ai_edge_litert.interpreter import Interpreter
    interp = Interpreter(model_path=str(path))
    interp.allocate_tensors()
    inp, out = interp.get_input_details()[0], interp.get_output_details()[0]
    in_scale, in_zp = inp["quantization"]
    out_scale, out_zp = out["quantization"]
    correct = 0
    for i in range(len(x)):
        sample = x[i:i + 1]
        if inp["dtype"] != np.float32:
            limits = np.iinfo(inp["dtype"])
            sample = np.clip(np.round(sample / in_scale + in_zp), limits.min, limits.max).astype(inp["dtype"])
        interp.set_tensor(inp["index"], sample)
        interp.invoke()
        logits = interp.get_tensor(out["index"])[0]
        if out["dtype"] != np.float32:
            logits = (logits.astype(np.float64) - out_zp) * out_scale
        correct += int(np.argmax(logits) == y[i])
    return correct


def test_accuracy_matches_an_independent_plain_loop(report, reference, digits, int8_models):
    paths = {"fp32": reference.tflite, "pc": int8_models["pc"], "pt": int8_models["pt"]}
    assert report.conditions == digits.select(split="test").conditions
    for cond in ("daylight", "overexposed", "sensor-noise"):
        subset = digits.select(split="test", condition=cond)
        for model, path in paths.items():
            row = report.row(cond, model)
            assert row.n == len(subset) == 540
            assert row.correct == plain_loop_correct(path, subset.x, subset.y), (cond, model)
            assert row.accuracy == pytest.approx(row.correct / row.n)


def test_uint8_io_model_matches_plain_loop_and_int8_twin(reference, digits, int8_models):
    rep = compare_accuracy(reference.tflite, [int8_models["pc_uint8"], int8_models["pc"]], digits,
                           conditions=["low-light"], cache=False)
    assert rep.models == ("fp32", "reference_pc_uint8", "reference_pc")
    subset = digits.select(split="test", condition="low-light")
    row = rep.row("low-light", "reference_pc_uint8")
    assert row.correct == plain_loop_correct(int8_models["pc_uint8"], subset.x, subset.y)
    # the uint8 model is the int8 model with shifted zero points: same decisions
    assert row.agreement > 0.97
    assert abs(row.accuracy - rep.accuracy("low-light", "reference_pc")) < 0.02


def test_fp32_rows_equal_the_reference_models_own_keras_accuracy(report, reference):
    for cond, acc in reference.accuracy.items():
        assert report.accuracy(cond, "fp32") == pytest.approx(acc, abs=1.5 / 540)


def test_drop_agreement_confusion_and_per_class_are_consistent(report):
    for r in report.rows:
        fp32 = report.row(r.condition, "fp32")
        assert r.drop_pp == pytest.approx((fp32.accuracy - r.accuracy) * 100)
        assert r.ci_low <= r.accuracy <= r.ci_high
        assert r.drop_ci_low <= r.drop_pp <= r.drop_ci_high
        confusion = np.array(r.confusion)
        assert confusion.shape == (10, 10) and confusion.sum() == r.n
        assert np.trace(confusion) == r.correct
        assert sum(r.class_counts) == r.n
        for c, acc in enumerate(r.per_class):
            assert acc == pytest.approx(confusion[c, c] / confusion[c].sum())
        if r.is_reference:
            assert (r.drop_pp, r.agreement) == (0.0, 1.0)
        else:
            assert 0.5 < r.agreement <= 1.0
    assert report.candidates == ("pc", "pt")
    assert report.drop("daylight", "pt") == report.row("daylight", "pt").drop_pp


def test_report_round_trips_and_renders(report):
    again = AccuracyReport.from_json(report.to_json())
    assert again == report
    assert isinstance(again.rows[0].confusion[0], tuple)
    html = report._repr_html_()
    assert "<table" in html and "low-light" in html and "data:image/png;base64" in html
    assert "largest drop" in report.summary()
    text = report.text()
    assert "sensor-noise" in text and "drop CI" in text


def test_scores_are_cached_per_model_dataset_split_condition(reference, digits, int8_models):
    first = compare_accuracy(reference.tflite, int8_models["pt"], digits, conditions="daylight,motion-blur")
    second = compare_accuracy(reference.tflite, int8_models["pt"], digits, conditions="daylight,motion-blur")
    assert second.cache_hits == 4 and set(second.modes.values()) == {"cached"}
    assert second.rows == first.rows
    # a corrupt cache file is a miss, and is replaced
    key = eval_cache.cache_key(second.model_sha256["reference_pt"], digits.hash, "test", "daylight",
                               contract=second.contract.to_params())
    eval_cache.cache_path(key).write_bytes(b"not an npz")
    third = compare_accuracy(reference.tflite, int8_models["pt"], digits, conditions="daylight,motion-blur")
    assert third.cache_hits == 3 and third.rows == first.rows
    assert third.modes["reference_pt"] == "batched"


def test_accepts_quantized_and_reference_model_objects(reference, digits, int8_models):
    qm = types.SimpleNamespace(path=int8_models["pc"], recipe=types.SimpleNamespace(name="a8w8_pc"))
    rep = compare_accuracy(reference, qm, digits, conditions=["daylight"])
    assert rep.models == ("fp32", "a8w8_pc")
    assert rep.model_paths["fp32"] == reference.keras
    assert rep.modes["fp32"] in ("batched", "cached")


def _tiny(digits, *, size=None, labels=None, classes=None):
    test = digits.select(split="test", condition="daylight")
    x = test.x[:20]
    if size:
        x = x[:, :size, :size]
    y = test.y[:20] if labels is None else labels
    return Dataset(name="tiny", x=np.ascontiguousarray(x), y=y, condition=test.condition[:20],
                   split=test.split[:20], ids=test.ids[:20], classes=classes or test.classes)


def test_input_shape_that_does_not_fit_names_model_and_dataset(reference, digits, int8_models):
    with pytest.raises(ModelError, match=r"takes images of shape \(32, 32, 1\) but dataset 'tiny' has \(16, 16, 1\)"):
        compare_accuracy(reference.tflite, int8_models["pc"], _tiny(digits, size=16), cache=False)


def test_missing_condition_names_what_exists(reference, digits, int8_models):
    with pytest.raises(DataError, match=r"no samples for condition\(s\) 'fog'; conditions present: daylight"):
        compare_accuracy(reference.tflite, int8_models["pc"], digits, conditions=["daylight", "fog"])
    with pytest.raises(DataError, match="`conditions` is empty"):
        compare_accuracy(reference.tflite, int8_models["pc"], digits, conditions="")


def test_labels_outside_the_models_classes(reference, digits, int8_models):
    labels = np.full(20, 11, dtype=np.int64)
    data = _tiny(digits, labels=labels, classes=tuple(str(i) for i in range(12)))
    with pytest.raises(EvaluationError, match=r"labels 11 \('11'\) of dataset 'tiny\[test\]' are outside the 10 "
                                              r"output classes \(0\.\.9\) of model 'fp32'"):
        compare_accuracy(reference.tflite, int8_models["pc"], data, cache=False)


def test_names_are_checked(reference, digits, int8_models):
    with pytest.raises(EvaluationError, match="`names` has 1 entries for 2 candidate"):
        compare_accuracy(reference.tflite, [int8_models["pc"], int8_models["pt"]], digits, names=["a"])
    with pytest.raises(EvaluationError, match="model name 'fp32' is used twice"):
        compare_accuracy(reference.tflite, {"fp32": int8_models["pc"]}, digits)
    with pytest.raises(EvaluationError, match="cannot be combined with a dict"):
        compare_accuracy(reference.tflite, {"a": int8_models["pc"]}, digits, names=["b"])
    with pytest.raises(ModelError, match="model file or folder of .* does not exist"):
        compare_accuracy(reference.tflite, "/nonexistent/model.tflite", digits)
    with pytest.raises(EvaluationError, match="`n_bootstrap` must be a positive integer"):
        compare_accuracy(reference.tflite, int8_models["pc"], digits, n_bootstrap=0)


def test_duplicate_stems_get_distinct_names(reference, digits, int8_models, tmp_path):
    other = tmp_path / "reference_pc.tflite"
    other.write_bytes(open(int8_models["pc"], "rb").read())
    rep = compare_accuracy(reference.tflite, [int8_models["pc"], str(other)], digits, conditions=["daylight"])
    assert rep.models == ("fp32", "reference_pc", "reference_pc_2")
    assert rep.rows[1].correct == rep.rows[2].correct


def test_fidelity_rows_per_condition_candidate_and_output(report):
    assert {(f.condition, f.model) for f in report.fidelity} == {(c, m) for c in report.conditions
                                                                 for m in report.candidates}
    for f in report.fidelity:
        assert f.output_index == 0 and f.kind == "class_scores" and f.values == 10 and f.n == 540
        assert f.topk[0] == 1 and f.topk_agreement[0] == pytest.approx(report.row(f.condition, f.model).agreement)
        assert f.sqnr_ci_low <= f.sqnr_db <= f.sqnr_ci_high and 10 < f.sqnr_db < 60
        assert f.cosine_ci_low <= f.cosine <= f.cosine_ci_high <= 1.0
    assert report.contract is not None and report.contract.size == (32, 32)
    assert "fidelity per output" in report.text() and "FP32 vs INT8 fidelity" in report._repr_html_()


def test_lazy_8bit_images_give_the_same_outputs_as_decoded_floats(tmp_path, digits, int8_models, reference):
    """Folder images go to an INT8 model through a pixel lookup table: bit-identical to the float path."""
    from PIL import Image

    from workbench.data.images import ImageFiles
    from workbench.data.loaders import load_dataset
    from workbench.models.contract import InputContract
    from workbench.models.predict import load_predictor
    test = digits.select(split="test", condition="daylight")
    for i in range(40):
        folder = tmp_path / "ds" / "test" / "daylight" / str(int(test.y[i]))
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray((np.asarray(test.x[i])[..., 0] * 255).round().astype(np.uint8)).save(folder / f"{i}.png")
    ds = load_dataset(tmp_path / "ds")
    assert isinstance(ds.x, ImageFiles)
    cards = ({"range": [0, 1]}, {"range": [-1, 1]}, {"mean": [0.5], "std": [0.2]})
    for model, card in [(int8_models["pc"], c) for c in cards] + [(reference.tflite, cards[1])]:
        contract = InputContract(color="grayscale", size=(32, 32), **{k: tuple(v) for k, v in card.items()})
        lazy = load_predictor(model, batch_size=16, contract=contract)
        eager = load_predictor(model, batch_size=16, contract=contract)
        np.testing.assert_array_equal(lazy.predict(ds.x), eager.predict(np.asarray(ds.x)))
        assert lazy._lut is not None and getattr(eager, "_lut", None) is None
