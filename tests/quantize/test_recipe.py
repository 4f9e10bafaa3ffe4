import pytest

from workbench.errors import QuantizationError
from workbench.quantize.recipe import QuantRecipe, get_recipe, list_recipes


def test_named_recipes_follow_one_scheme():
    assert list_recipes() == ("a8w8_pc", "a8w8_pt", "a16w8_pc")
    pc, pt, a16 = (get_recipe(n) for n in list_recipes())
    assert (pc.weights, pt.weights, a16.weights) == ("per_channel", "per_tensor", "per_channel")
    assert (pc.activation_bits, a16.activation_bits) == (8, 16)
    assert a16.input_dtype == "int16" and pc.input_dtype == "int8"
    assert pc.full_integer and pc.backend == "tflite"


def test_onnx_variant_keeps_float_io():
    r = get_recipe("a8w8_pt", backend="onnx")
    assert (r.backend, r.input_dtype, r.output_dtype, r.weights) == ("onnx", "float32", "float32", "per_tensor")


def test_recipe_round_trips_and_is_frozen():
    r = get_recipe("a8w8_pc", backend="onnx", calibrator="percentile", percentile=99.9)
    assert QuantRecipe.from_dict(r.to_dict()) == r
    assert "percentile" in r.summary() and "full integer" in r.summary()
    with pytest.raises(Exception):
        r.backend = "tflite"


def test_unknown_recipe_is_an_error():
    with pytest.raises(QuantizationError, match="`recipe` must be one of 'a8w8_pc'"):
        get_recipe("int8")


@pytest.mark.parametrize("kwargs, phrase", [
    (dict(calibrator="entropy"), "TFLite backend has no 'entropy' calibrator"),
    (dict(backend="onnx", input_dtype="int8", output_dtype="float32"), "keep float32 inputs and outputs"),
    (dict(backend="onnx", activation_bits=16, input_dtype="float32", output_dtype="float32"),
     "16-bit activations are a TFLite mode"),
    (dict(activation_bits=16), "with 16-bit activations `input_dtype` must be one of"),
    (dict(input_dtype="int16"), "with 8-bit activations `input_dtype` must be one of"),
    (dict(exclude=("MEAN",)), "Set allow_float_fallback=True"),
    (dict(exclude=("MEAN",), allow_float_fallback=True, activation_bits=16, input_dtype="int16",
          output_dtype="int16"), "not available in the TFLite 16x8 mode"),
    (dict(exclude=("MEAN",), allow_float_fallback=True, input_dtype="uint8"), "not uint8"),
    (dict(weights="per_layer"), "`weights` must be one of 'per_channel', 'per_tensor'"),
    (dict(weight_bits=4), "`weight_bits` must be one of 8"),
    (dict(backend="onnx", input_dtype="float32", output_dtype="float32", calibrator="percentile",
          percentile=50.0), "`percentile` must be in [90.0, 100.0]"),
    (dict(exclude="MEAN", allow_float_fallback=True), "`exclude` must be a tuple"),
])
def test_invalid_combinations_are_rejected_when_built(kwargs, phrase):
    with pytest.raises(QuantizationError) as info:
        QuantRecipe(**kwargs)
    assert phrase in str(info.value)


def test_a16w8_has_no_onnx_variant():
    with pytest.raises(QuantizationError, match="16-bit activations"):
        get_recipe("a16w8_pc", backend="onnx")


def test_exclude_turns_float_fallback_on():
    r = get_recipe("a8w8_pc", exclude="MEAN, conv")
    assert r.exclude == ("MEAN", "conv") and r.allow_float_fallback and not r.full_integer
