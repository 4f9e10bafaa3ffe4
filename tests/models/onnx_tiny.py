"""A tiny NCHW ONNX image classifier built with onnx.helper (no exporter, no download).

``Conv(3->8, 3x3) -> BatchNormalization -> Relu -> Conv(8->8, 1x1) -> Clip(0, 6) -> GlobalAveragePool
-> Flatten -> Gemm(8->4)``, input ``image`` (1, 3, 16, 16), output ``logits`` (1, 4): what a PyTorch
export of a small CNN looks like (channels first, batch-norm and ReLU6 as separate nodes).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SHAPE = (1, 3, 16, 16)


def tiny_nchw_onnx(path: Path, *, seed: int = 0, dynamic: str | None = None) -> Path:
    """Write the model; ``dynamic="batch"`` frees the batch dimension, ``"spatial"`` also H and W."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)

    def init(name: str, shape: tuple[int, ...], scale: float = 0.3) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.normal(0, scale, shape).astype(np.float32), name)

    inits = [init("w1", (8, 3, 3, 3)), init("b1", (8,), 0.1),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn_scale"),
             init("bn_bias", (8,), 0.1), init("bn_mean", (8,), 0.1),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn_var"),
             init("w2", (8, 8, 1, 1)), init("b2", (8,), 0.1), init("w3", (4, 8)), init("b3", (4,), 0.1),
             numpy_helper.from_array(np.array(0.0, np.float32), "clip_lo"),
             numpy_helper.from_array(np.array(6.0, np.float32), "clip_hi")]
    nodes = [helper.make_node("Conv", ["image", "w1", "b1"], ["conv1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("BatchNormalization", ["conv1", "bn_scale", "bn_bias", "bn_mean", "bn_var"],
                              ["bn1"], name="bn1"),
             helper.make_node("Relu", ["bn1"], ["relu1"], name="relu1"),
             helper.make_node("Conv", ["relu1", "w2", "b2"], ["conv2"], name="conv2"),
             helper.make_node("Clip", ["conv2", "clip_lo", "clip_hi"], ["relu6"], name="relu6"),
             helper.make_node("GlobalAveragePool", ["relu6"], ["gap"], name="gap"),
             helper.make_node("Flatten", ["gap"], ["flat"], name="flat"),
             helper.make_node("Gemm", ["flat", "w3", "b3"], ["logits"], transB=1, name="fc")]
    dims: list[int | str] = list(SHAPE)
    if dynamic in ("batch", "spatial"):
        dims[0] = "N"
    if dynamic == "spatial":
        dims[2], dims[3] = "H", "W"
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("image", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [dims[0], 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def nhwc_images(n: int, *, seed: int = 0) -> np.ndarray:
    """``n`` float32 images in [0, 1], NHWC (16, 16, 3): what a dataset holds."""
    return np.random.default_rng(seed).uniform(0.0, 1.0, (n, SHAPE[2], SHAPE[3], SHAPE[1])).astype(np.float32)
