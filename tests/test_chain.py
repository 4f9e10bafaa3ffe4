"""The one calibrate -> quantize -> place chain (workbench/chain.py), on the real reference model.

Its users (run folders, the explorer, the calibration experiment) rely on it computing exactly what
their own copies computed before: the same quantize cache key as a direct ``quantize`` call, and
the reuse rules a run folder applies to saved records.
"""

from __future__ import annotations

import json
import warnings

import pytest

from workbench.chain import CalibrationOptions, ChainResult, StageChain, resolve_recipe
from workbench.errors import CalibrationError, ModelError, QuantizationError, TargetError, WorkbenchWarning

N = 60


@pytest.fixture(scope="module")
def chain(reference, digits):
    return StageChain(reference.keras, digits, target="imx93")


@pytest.fixture(scope="module")
def result(chain):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkbenchWarning)      # 60 samples: the small-set warning
        return chain.run(CalibrationOptions(n=N, seed=3))


def test_run_calibrates_quantizes_and_places(result, digits):
    assert isinstance(result, ChainResult)
    assert result.calibration.n == N and result.calibration.seed == 3
    assert result.calibration.dataset_hash == digits.hash
    assert result.quantized.recipe.name == "a8w8_pc"             # imx93's default for "auto"
    assert result.quantized.calibration_hash == result.calibration.hash
    assert result.placement is not None and result.placement_error == ""
    assert result.placement.target == "imx93" and result.placement.model_sha256 == result.quantized.sha256
    back = ChainResult.from_json(result.to_json())
    assert back == result
    assert "imx93" in result.summary() and "<table" in result._repr_html_()


def test_same_cache_key_as_a_direct_quantize(chain, result, reference, digits):
    """The chain adds no parameter of its own: its quantization is the cache entry a direct call makes."""
    from workbench.quantize.engine import quantize
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkbenchWarning)
        direct = quantize(reference.keras, "a8w8_pc", result.calibration, dataset=digits)
        again = chain.quantize(result.calibration)
    assert direct.cache_hit and again.cache_hit
    assert direct.cache_key == again.cache_key == result.quantized.cache_key
    assert again.sha256 == result.quantized.sha256


def test_a_run_folder_builds_its_chain(chain, reference, digits):
    """A run folder's stages go through StageChain with the folder's model, target and input contract."""
    from workbench.runs import RunFolder
    folder = RunFolder.__new__(RunFolder)      # no folder on disk: only the chain it would build
    folder.model_name, folder.dataset_name, folder.target, folder.input_spec = "reference", "digits-conditions", \
        "imx93", None
    folder.__dict__.update(data=digits, reference=reference)
    built = folder.chain()
    assert (built.model, built.target, built.recipe_name, built.input_spec) == (chain.model, "imx93", "a8w8_pc", None)
    assert folder.source_model == reference.keras and folder.fp32_baseline == reference.tflite
    assert folder.recipe("auto") == "a8w8_pc" and folder.recipe("a16w8_pc") == "a16w8_pc"


def test_reuse_rules(chain, result, tmp_path):
    options = CalibrationOptions(n=N, seed=3)
    assert chain.calibration_fits(result.calibration, options)
    assert not chain.calibration_fits(result.calibration, CalibrationOptions(n=N, seed=4))
    assert not chain.calibration_fits(result.calibration, CalibrationOptions(n=N, seed=3, strategy="random"))
    assert not chain.calibration_fits(result.calibration, CalibrationOptions(n=N, seed=3,
                                                                             condition_weights={"daylight": 1}))
    assert chain.quantized_fits(result.quantized, result.calibration)
    other_recipe = StageChain(chain.model, chain.dataset, target="imx93", recipe="a8w8_pt")
    assert not other_recipe.quantized_fits(result.quantized, result.calibration)
    from workbench.quantize.recipe import get_recipe
    same_fields = StageChain(chain.model, chain.dataset, target="imx93", recipe=get_recipe("a8w8_pc"))
    assert same_fields.quantized_fits(result.quantized, result.calibration)
    onnx = StageChain(chain.model, chain.dataset, target="imx93", recipe=get_recipe("a8w8_pc", backend="onnx"))
    assert not onnx.quantized_fits(result.quantized, result.calibration)     # same name, another backend
    assert chain.placement_fits(result.placement, result.quantized)
    elsewhere = StageChain(chain.model, chain.dataset, target="imx95")
    assert not elsewhere.placement_fits(result.placement, result.quantized)
    other_bsp = StageChain(chain.model, chain.dataset, target="imx93", bsp="lf-0.0.0")
    assert not other_bsp.placement_fits(result.placement, result.quantized)
    # a damaged INT8 file is not reused, and the warning names it
    import dataclasses
    copy = tmp_path / "model.tflite"
    copy.write_bytes(b"not the model")
    moved = dataclasses.replace(result.quantized, path=str(copy))
    with pytest.warns(WorkbenchWarning, match="not the model the quantize record names"):
        assert not chain.quantized_fits(moved, result.calibration)


def test_run_folder_reuses_and_recomputes_through_the_chain(reference, digits, tmp_path):
    from workbench.runs import RunFolder
    folder = RunFolder(tmp_path / "run", target="imx8mp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkbenchWarning)
        cal = folder.calibration_set(size=N, seed=3)
    assert json.loads(folder.file("calibration").read_text())["result"]["hash"] == cal.hash
    with warnings.catch_warnings():
        warnings.simplefilter("error", WorkbenchWarning)           # a fitting record: reused without a word
        assert folder.calibration_set(size=N, seed=3) == cal
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other = folder.calibration_set(size=N, seed=5)
    assert any("computed with other parameters" in str(w.message) for w in caught)
    assert other.seed == 5


def test_resolve_recipe():
    assert resolve_recipe("auto", "imx8mp") == "a8w8_pt"
    assert resolve_recipe("", "imx95") == "a8w8_pc"
    assert resolve_recipe("a16w8_pc", None) == "a16w8_pc"
    with pytest.raises(QuantizationError, match="no target is given"):
        resolve_recipe("auto", None)


def test_bad_chains_and_options_name_what_is_wrong(reference, digits):
    with pytest.raises(QuantizationError, match="no target is given"):
        StageChain(reference.keras, digits)
    with pytest.raises(TargetError, match="`target` must be one of"):
        StageChain(reference.keras, digits, target="imx8m")
    with pytest.raises(ModelError, match="path of an FP32 model file"):
        StageChain(42, digits, recipe="a8w8_pc")           # type: ignore[arg-type]
    no_target = StageChain(reference, digits, recipe="a8w8_pc")     # a ReferenceModel quantizes from its .keras
    assert no_target.model == reference.keras
    with pytest.raises(TargetError, match="no target to place"):
        no_target.place(None)                              # type: ignore[arg-type]
    with pytest.raises(CalibrationError, match="`strategy` must be one of"):
        CalibrationOptions(strategy="best")
    with pytest.raises(CalibrationError, match="`n` must be a positive integer"):
        CalibrationOptions(n=0)
    with pytest.raises(CalibrationError, match="`seed` must be an integer"):
        CalibrationOptions(seed="1")                       # type: ignore[arg-type]
    with pytest.raises(CalibrationError, match="condition_weights"):
        CalibrationOptions(condition_weights={"daylight": float("nan")})
