"""INT8 versions of the reference model, converted here (not through workbench.quantize), once per session."""

from __future__ import annotations

import pytest


def _convert(saved_model, calibration, *, io_type: str, per_channel: bool) -> bytes:
    import tensorflow as tf
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model))
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([calibration[i:i + 1]] for i in range(len(calibration)))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = getattr(tf, io_type)
    converter.inference_output_type = getattr(tf, io_type)
    if not per_channel:
        converter._experimental_disable_per_channel = True
    return converter.convert()


@pytest.fixture(scope="session")
def int8_models(tmp_path_factory, reference, digits):
    """Paths: `pc` (int8 io, per-channel), `pt` (int8 io, per-tensor), `pc_uint8` (uint8 io, per-channel)."""
    folder = tmp_path_factory.mktemp("int8")
    calibration = digits.select(split="calibration").x[:100]
    out = {}
    for name, io_type, per_channel in (("pc", "int8", True), ("pt", "int8", False), ("pc_uint8", "uint8", True)):
        path = folder / f"reference_{name}.tflite"
        path.write_bytes(_convert(reference.saved_model, calibration, io_type=io_type, per_channel=per_channel))
        out[name] = str(path)
    return out


@pytest.fixture(scope="session")
def report(reference, digits, int8_models):
    """FP32 .tflite against the per-channel and per-tensor INT8 models on every test condition."""
    from workbench.evaluate.accuracy import compare_accuracy
    return compare_accuracy(reference.tflite, {"pc": int8_models["pc"], "pt": int8_models["pt"]}, digits)
