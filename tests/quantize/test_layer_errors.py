import matplotlib

from workbench.quantize.layer_errors import LayerErrors, layer_errors

matplotlib.use("Agg")


def test_tflite_layer_errors(models, calib):
    le = layer_errors(models["keras"], "a8w8_pc", calib[:16])
    ops = [r.op for r in le.rows]
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"} <= set(ops)
    for r in le.rows:
        assert r.rmse >= 0 and r.scale > 0 and abs(r.rmse_over_scale - r.rmse / r.scale) < 1e-9
        assert r.max_abs_error >= r.rmse * 0.999
    assert LayerErrors.from_dict(le.to_dict()) == le
    assert le.plot() is not None and "RMSE/scale" in le._repr_html_()
    assert le.worst(1)[0].rmse_over_scale == max(r.rmse_over_scale for r in le.rows)


def test_onnx_layer_errors(models, calib):
    le = layer_errors(models["onnx"], "a8w8_pc", calib[:16], backend="onnx")
    assert le.backend == "onnx" and le.n_samples == 16
    assert {"Conv", "MatMul"} <= {r.op for r in le.rows}
    assert all(r.scale > 0 and r.rmse >= 0 for r in le.rows)
    assert "worst" in le.summary()
