"""The remedies measured on the spot, on the 1000x-spread trap model (the trained CNN whose first depthwise
layer's channels span 1000x in range, same FP32 function): exclusion keeps the layer its own findings name, and
the ops reading its spread activation, in float, and says what that gave."""

from __future__ import annotations

import warnings

import pytest


@pytest.mark.slow
def test_exclusion_keeps_the_spread_layer_and_its_readers_in_float_and_recovers_the_drop(zoo_root):
    import workbench as wb
    from workbench.evaluate.remedies import exclusion, try_fixes
    from workbench.findings import findings_for
    from workbench.quantize.engine import quantize

    from .zoo import spread_reference
    model = spread_reference(zoo_root)
    data = wb.load_dataset("digits-conditions")
    conditions = ["low-light", "overexposed"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = wb.curate_calibration_set(data, 200, strategy="stratified")
        q = quantize(model, "a8w8_pc", cal, dataset=data)
        label, names = exclusion(q.path, target="imx93")
        report = wb.compare_accuracy(str(model), {"a8w8_pc": q.path}, data, conditions=conditions,
                                     n_bootstrap=200, fidelity=False)
        assert all(r.drop_pp > 10 and r.drop_ci_low > 1 for r in report.rows if not r.is_reference)
        assert try_fixes(report, source_model=model, calibration=cal, dataset=data, recipe="a8w8_pc", recipes=[],
                         exclude=False).fix_trials == ()
        fixed = try_fixes(report, source_model=model, calibration=cal, dataset=data, recipe="a8w8_pc", recipes=[])
    # the depthwise layer the channel-range-spread finding names, and the 1x1 convolution reading its output
    assert label == "excluding DEPTHWISE_CONV_2D #1, CONV_2D #2"
    assert "dw1" in names[0] and "pw1" in names[1] and len(names) == 2
    assert [t.condition for t in fixed.fix_trials] == conditions
    for t in fixed.fix_trials:      # measured at 27.6 -> -0.6 pp (overexposed), 22.2 -> -0.2 pp (low-light)
        assert t.recipe == "a8w8_pc excluding DEPTHWISE_CONV_2D #1, CONV_2D #2" and t.exclude == names
        assert not t.error and t.drop_pp < 1.0 and t.drop_ci_low <= 0
    for f in findings_for(fixed, target="imx93", quantized=q).with_code("accuracy.drop"):
        assert f.evidence["fix"] == "a8w8_pc excluding DEPTHWISE_CONV_2D #1, CONV_2D #2"
        assert "measured on the spot: a8w8_pc excluding DEPTHWISE_CONV_2D #1, CONV_2D #2" in f.message
        assert "--exclude" in f.next_step
