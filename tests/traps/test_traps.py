"""Every trap of the zoo raises its finding, with the evidence that names what went wrong."""

from __future__ import annotations

import warnings

import pytest

from workbench.findings import CATALOGUE, Findings

from .zoo import TRAPS


def _run(name: str, root) -> Findings:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TRAPS[name][1](root)


def _one(name: str, root):
    code = TRAPS[name][0]
    found = _run(name, root).with_code(code)
    assert found, f"trap {name}: no {code} finding"
    f = found.items[0]
    assert f.severity in ("warning", "error") and f.stage == CATALOGUE[code].stage and f.next_step
    assert Findings.from_dict(found.to_dict()) == found
    return f


def test_every_trap_has_a_catalogue_code_and_every_warning_code_a_trap():
    assert {code for code, _ in TRAPS.values()} <= set(CATALOGUE)
    covered = {code for code, _ in TRAPS.values()}
    missing = [c for c, e in CATALOGUE.items() if e.severity != "info" and c not in covered]
    assert not missing, f"finding codes without a trap: {missing}"


def test_onnx_qdq_float_op_named(zoo_root):
    f = _one("onnx-qdq-float-op", zoo_root)
    assert f.evidence["format"] == "onnx"
    assert [(o["op"], o["name"]) for o in f.evidence["ops"]] == [("Sin", "sin")]
    assert "Sin #" in f.message and f.severity == "error"


def test_onnx_qdq_float_op_is_refused_by_a_full_integer_recipe(zoo_root):
    from workbench.errors import QuantizationError
    from workbench.quantize.engine import quantize

    from .zoo import _nchw_calibration, _onnx_model, _shared
    model = _shared(zoo_root, "sin.onnx", lambda p: _onnx_model(p, middle="Sin"))
    with pytest.raises(QuantizationError, match="Sin #"):
        quantize(model, "a8w8_pc", _nchw_calibration(), backend="onnx", cache=False)


def test_per_tensor_collapse_names_the_layer_and_what_the_target_allows(zoo_root):
    f = _one("per-tensor-collapse", zoo_root)
    (layer,) = f.evidence["layers"]
    assert layer["name"] == "depthwise" and layer["channels"] == 8 and layer["collapsed_channels"] >= 3
    assert layer["levels_max"] == 127 and layer["levels_min"] <= 4
    assert "a8w8_pt+cle" in f.message and "a8w8_pt+cle" in f.next_step


def test_per_channel_spread_is_info_only(zoo_root):
    found = _run("per-tensor-collapse", zoo_root)   # warm the shared model
    from .zoo import trap_channel_range_spread
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spread = trap_channel_range_spread(zoo_root)
    (f,) = spread.with_code("quantize.channel-range-spread")
    assert f.severity == "info" and f.evidence["layers"][0]["scale_ratio"] >= 100
    assert not spread.at_least("warning") and found


def test_dynamic_batch(zoo_root):
    f = _one("dynamic-batch", zoo_root)
    assert f.evidence["inputs"] == [{"tensor": "x", "shape": [None, 1, 8, 8], "dynamic_axes": [0]}]


@pytest.mark.parametrize("name", ["manifest-sha-mismatch", "toolchain-drift"])
def test_deployment_traps(zoo_root, name):
    f = _one(name, zoo_root)
    if name == "manifest-sha-mismatch":
        assert f.evidence["file_sha256"] != f.evidence["manifest_sha256"] and f.severity == "error"
    else:
        assert f.evidence["versions"]["onnxruntime"]["manifest"] == "1.16.3"
    from .zoo import _onnx_clean
    assert _onnx_clean(zoo_root, name).read_bytes() != _onnx_clean(zoo_root).read_bytes()   # its own model


def test_calibration_missing_condition():
    f = _one("condition-missing", None)
    assert f.evidence["missing"] == ["night"] and f.evidence["pool"] == {"night": 0}


def test_calibration_under_represented():
    f = _one("condition-under-represented", None)
    (row,) = f.evidence["conditions"]
    assert row["condition"] == "night" and row["share"] < 0.25 * row["target_share"] * 2


def test_calibration_too_small():
    f = _one("calibration-too-small", None)
    assert f.evidence["n"] == 60 and f.evidence["recommended_min"] == 200


def test_calibration_test_ids():
    f = _one("calibration-test-ids", None)
    assert f.evidence["n_test_ids"] == 5 and f.evidence["checked_against"] == "dataset splits"
    assert f.severity == "error"


def test_calibration_duplicates():
    f = _one("calibration-duplicates", None)
    assert f.evidence["duplicates"] == {"cal-day-7": 4} and f.evidence["n_unique"] == 197


def test_calibration_hash_mismatch(tmp_path):
    f = _one("calibration-hash-mismatch", tmp_path)
    assert f.evidence["stored_hash"] != f.evidence["computed_hash"] and f.evidence["n_ids"] == 200


@pytest.mark.slow
def test_cold_start_is_read_from_a_real_timing_over_ssh(zoo_root):
    """The step model timed by the python runner on the loopback board: its first 10 invokes do the start-up work,
    the runner keeps invoke 1 apart and warms up 5, so timed runs #0-#3 carry it; with 10 warm-ups none does."""
    from .zoo import trap_cold_start
    f = _one("cold-start", zoo_root)
    assert [r["run"] for r in f.evidence["runs"]] == [0, 1, 2, 3] and f.evidence["n_warmup"] == 5
    assert min(r["us"] for r in f.evidence["runs"]) > 10 * f.evidence["median_us"] and f.target == "imx8mp"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clean = trap_cold_start(zoo_root, warmup=10)
    assert not clean.with_code("timing.cold-start-in-steady-state") and not clean.at_least("warning")


@pytest.mark.slow
def test_still_falling_is_read_from_a_real_timing_over_ssh(zoo_root):
    """The slope model (every invoke cheaper than the one before) timed 200 times by the python runner on the
    loopback board: the stage's own trend check flags its runs."""
    f = _one("still-falling", zoo_root)
    assert "first-quarter median" in f.evidence["detail"] and f.evidence["n_runs"] == 200
    assert f.evidence["n_warmup"] == 1 and f.target == "imx8mp"


@pytest.mark.slow
def test_too_few_runs_from_a_real_timing_over_ssh(zoo_root):
    """20 real invocations by the python runner on the loopback board: the stated p99 is one of them."""
    f = _one("too-few-runs", zoo_root)
    assert (f.evidence["n_runs"], f.evidence["min_runs"]) == (20, 100) and f.target == "imx8mp"
    assert f.evidence["p99_us"] > 0 and f.message.startswith("board evk8mp (imx8mp), CPU only (no delegate): p99")


@pytest.mark.slow
def test_board_placement_mismatch_is_read_from_the_boards_op_profile(zoo_root):
    """The real timing stage over SSH to the loopback sshd, benchmark_model replaced by the test double replaying
    A2 (a recorded VX-delegate run with one op outside the delegate kernel): the stage counts the op profile's
    CPU rows against the model's 4 ops, the rule finds 3 of 4 on the NPU where placement predicted 4."""
    f = _one("board-placement-mismatch", zoo_root)
    ev = f.evidence
    assert f.target == "imx8mp" and (ev["predicted_npu_ops"], ev["predicted_share"]) == (4, 1.0)
    assert (ev["measured_npu_ops"], ev["measured_share"]) == (3, 0.75)
    assert ev["cpu_op_types"] == ["TFLite_Detection_PostProcess"] and f.message.startswith("board evk8mp (imx8mp)")


@pytest.mark.slow
def test_board_int8_disagreement_is_scored_from_the_boards_own_outputs(zoo_root):
    """Three-way accuracy by the real timing stage over SSH to the loopback board, whose runtime uses TFLite's
    reference kernels (its boards.yaml): under low-light the top-two margin is ~1 INT8 step and the board's
    rounding flips top-1 on more than 5% of 200 samples; daylight (wide margins) agrees."""
    f = _one("board-int8-disagreement", zoo_root)
    (row,) = f.evidence["conditions"]
    assert row["condition"] == "low-light" and row["n"] == 200 and row["agreement"] < 0.95
    assert f.target == "imx93" and f.evidence["min_agreement"] == 0.98
    assert f.message.startswith("board evk93 CPU only (no delegate), reference kernels: host-vs-board INT8")


def test_tflite_float_op_and_qdq_inside(zoo_root):
    f = _one("tflite-float-op", zoo_root)
    assert [o["op"] for o in f.evidence["ops"]] == ["SIN"] and f.evidence["format"] == "tflite"
    q = _one("tflite-qdq-inside", zoo_root)
    assert {o["op"] for o in q.evidence["ops"]} == {"QUANTIZE", "DEQUANTIZE"}


def test_cpu_island(zoo_root):
    f = _one("cpu-island", zoo_root)
    assert "SIN" in [o["op"] for o in f.evidence["ops"]] and f.evidence["first"] <= f.evidence["last"]


def test_per_channel_on_imx8mp(zoo_root):
    f = _one("per-channel-imx8mp", zoo_root)
    assert f.evidence["check"] == "vx.model.per_channel" and f.target == "imx8mp"


def test_int16_on_8bit_target(zoo_root):
    f = _one("int16-on-8bit", zoo_root)
    assert f.evidence["int16_ops"] >= 1 and any(o["op"] == "FULLY_CONNECTED" for o in f.evidence["ops"])


@pytest.mark.slow
def test_bsp_compiler(zoo_root):
    """Both Velas compile the trap's model (3.10.0 in its tool environment, 5.2 installed): the per-channel
    FULLY_CONNECTED is the BSP compiler's CPU op, with Vela 3.10.0's own reason."""
    f = _one("bsp-compiler", zoo_root)
    assert f.target == "imx93" and f.evidence["bsp"] == "lf-6.6.3_1.0.0"
    (op,) = f.evidence["ops"]
    assert op["bsp_compiler"] == "vela 3.10.0" and op["newest_compiler"] == "vela 5.2.0"
    assert (op["op"], op["bsp_placement"], op["newest_placement"]) == ("FULLY_CONNECTED", "CPU", "NPU")
    assert "Per-axis quantization is only supported" in op["reason"] and "vela 3.10.0" in f.message


def test_clipping(zoo_root):
    f = _one("clipping", zoo_root)
    assert f.evidence["condition"] == "glare" and f.evidence["worst_clip_rate"] > f.evidence["clip_threshold"]
    assert f.evidence["calibration_samples"] == 0


@pytest.mark.slow
def test_input_contract(zoo_root):
    f = _one("input-contract", zoo_root)
    assert f.evidence["n_classes"] == 10 and max(f.evidence["fp32_accuracy"].values()) < f.evidence["threshold"]


def test_warm_up_effects_on_the_host_cpu_are_info():
    from dataclasses import replace

    from workbench.findings import findings_for

    from .zoo import _steady, _timing
    runs = _steady(200)
    runs[0] = 4_000_000.0
    host = replace(_timing(runs, n_warmup=0), on_board=False, where="host CPU (not an NPU)")
    (f,) = findings_for(host).with_code("timing.cold-start-in-steady-state")
    assert f.severity == "info"


def test_wrong_card_is_found_off_daylight(zoo_root):
    """A BGR model with an RGB card passes on daylight (grey) and fails under 'tinted': the guard runs on every
    condition, and its result is a model.input-contract finding naming the condition and the better contract."""
    f = _one("wrong-card-bgr", zoo_root)
    assert f.severity == "error" and f.evidence["issue"] == "contract-probably-wrong"
    assert f.evidence["conditions"] == ["tinted"]
    (row,) = f.evidence["per_condition"]
    assert row["best_alternative"].startswith("BGR") and "tinted" in f.message and "BGR" in f.message
    assert "card" in f.next_step


@pytest.mark.slow
def test_activation_spread_drop_names_the_layer_the_cause_and_a_measured_fix(zoo_root):
    """The trained CNN whose first depthwise layer's channels span 1000x (same FP32 function), a8w8_pc on imx93:
    every condition drops beyond noise; the finding names the depthwise layer, per-channel activation ranges
    behind one per-tensor activation scale, and the +cle recipe measured on the spot to recover it."""
    found = _run("activation-spread", zoo_root).with_code("accuracy.drop")
    worst = max(found, key=lambda f: f.evidence["drop_pp"])
    assert worst.evidence["drop_pp"] > 10 and worst.evidence["drop_ci"][0] > 1
    cause = worst.evidence["cause"]
    assert cause["kind"].startswith("per-channel activation-range spread") and "dw1" in cause["layers"][0]
    assert worst.evidence["fix"].endswith("+cle")
    fixed = next(t for t in worst.evidence["fix_trials"] if t["recipe"] == worst.evidence["fix"])
    assert fixed["drop_pp"] < 1.0 and "measured on the spot" in worst.message and "dw1" in worst.message
    assert worst.next_step.startswith(f"Quantize with {worst.evidence['fix']}")


def test_renamed_test_images_are_named_by_content(zoo_root):
    f = _one("renamed-test-images", zoo_root)
    assert f.severity == "error" and f.evidence["n_leaks"] == 77 and f.evidence["n_exact"] == 60
    assert f.evidence["n_after_resize"] == 17 and "77 of 300 calibration samples are test images" in f.message


def test_one_model_per_trap():
    """Traps that build a model each build their own (a seed of their own per model family)."""
    from .zoo import MODEL_SEEDS
    sin = [MODEL_SEEDS[t] for t in ("tflite-float-op", "tflite-qdq-inside", "cpu-island")]
    keras = [MODEL_SEEDS[t] for t in ("per-channel-imx8mp", "bsp-compiler", "int16-on-8bit", "clipping",
                                      "output-collapsed", "board-placement-mismatch", "too-few-runs")]
    assert len(set(sin)) == len(sin) and len(set(keras)) == len(keras)
    onnx = [0] + [MODEL_SEEDS[t] for t in ("manifest-sha-mismatch", "toolchain-drift")]   # 0: the clean model
    pad = [MODEL_SEEDS[t] for t in ("absurd-scale", "xnnpack-refused")]
    assert len(set(onnx)) == len(onnx) and len(set(pad)) == len(pad)


@pytest.mark.slow
def test_a_float32_lowest_pad_is_named_as_an_absurd_scale_and_xnnpack_refuses_the_file(zoo_root):
    f = _one("absurd-scale", zoo_root)
    assert f.severity == "error" and f.evidence["op"] == "PADV2" and f.evidence["scale"] > 1e35
    f = _one("xnnpack-refused", zoo_root)
    assert "XNNPACK" in f.message and "builtin" in str(f.evidence["loaded_by"])
    from .zoo import _lowest_pad_int8
    own = [_lowest_pad_int8(zoo_root, t).read_bytes() for t in ("absurd-scale", "xnnpack-refused")]
    assert own[0] != own[1]     # one model per trap


@pytest.mark.slow
def test_range_outliers_name_the_tensor(zoo_root):
    f = _one("range-outliers", zoo_root)
    assert "conv" in f.message.lower() or "conv" in str(f.evidence).lower()


@pytest.mark.slow
def test_reference_kernels_depart_from_xnnpack_at_a_named_op(zoo_root):
    f = _one("tensor-divergence", zoo_root)
    assert f.evidence["op"] and f.evidence["op_index"] is not None and f.evidence["differing"] > 0
    assert f.evidence["board_kernels"] == "reference" and f.evidence["inputs_agree"] in (True, False)


@pytest.mark.slow
def test_an_nchw_flatten_gets_a_transpose_the_source_does_not_have(zoo_root):
    """Conv -> Flatten -> MatMul in ONNX through onnx2tf (NHWC): the TRANSPOSE that restores NCHW's flatten
    order is the conversion's, and it runs on imx93's CPU."""
    f = _one("added-ops", zoo_root)
    assert f.target == "imx93" and [o["op"] for o in f.evidence["ops"]] == ["TRANSPOSE"]
    assert f.evidence["ops"][0]["origin"] != "model" and "TRANSPOSE #" in f.message
    assert f.evidence["source_ops"] == {"TRANSPOSE": 0} and f.evidence["int8_ops"]["TRANSPOSE"] >= 1



@pytest.mark.slow
def test_a_strided_depthwise_with_multiplier_2_is_no_longer_depthwise(zoo_root):
    """A 2x1-strided depthwise Conv with depth multiplier 2 through onnx2tf: a grouped CONV_2D in the INT8 file."""
    f = _one("depthwise-lost", zoo_root)
    assert f.evidence["depthwise"] == {"source": 1, "int8": 0} and f.evidence["grouped_conv"]["int8"] == 1
    assert "1 of 1 depthwise convolution(s)" in f.message

@pytest.mark.slow
def test_dark_calibration_collapses_the_output_on_the_bright_condition(zoo_root):
    """Calibrated on dark images, evaluated on bright ones: the output is named with the bright condition's
    SQNR, the dark condition (the calibration's) is not."""
    f = _one("output-collapsed", zoo_root)
    assert f.severity == "error" and f.evidence["model"] == "a8w8_pc" and f.evidence["output"] == "output_0"
    assert list(f.evidence["conditions"]) == ["bright"]
    assert f.evidence["conditions"]["bright"]["sqnr_db"] < f.evidence["sqnr_threshold_db"]
    assert "'output_0'" in f.message and "bright SQNR" in f.message


@pytest.mark.zoo
@pytest.mark.heavy
@pytest.mark.slow
def test_blazeface_crashes_the_bsp_compiler_of_imx93(zoo_root):
    """MediaPipe BlazeFace (the test zoo's): Vela 3.10.0 asserts; the finding names the compiler, the
    exception and what Vela 5.x does with the same file."""
    f = _one("compiler-crash", zoo_root)
    assert f.target == "imx93" and f.evidence["version"] == "3.10.0" and "AssertionError" in f.evidence["reason"]
    assert f.evidence["other_npu_ops"] > 0 and "Vela 3.10.0" in f.message and "--bsp" in f.next_step
