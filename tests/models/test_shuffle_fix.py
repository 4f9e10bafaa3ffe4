"""A channel shuffle on a cube-shaped tensor (C == H == W), which onnx2tf leaves in NCHW, is converted again right."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


def _shuffle_onnx(path: Path, *, size: int = 8, channels: int | None = None) -> Path:
    """``image`` (1, 3, S, S) -> Conv 1x1 (3 -> S) -> channel shuffle (groups 2) on (1, S, S, S) -> grouped Conv 3x3
    stride 2 (groups 4, PyTorch padding) -> ``y``: gnet's block, where onnx2tf 1.29.24 loses the layout."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    s, c = size, channels or size
    inits = [numpy_helper.from_array(rng.normal(0, 0.5, (c, 3, 1, 1)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.normal(0, 0.3, (c, c // 4, 3, 3)).astype(np.float32), "w2"),
             numpy_helper.from_array(np.array([1, 2, c // 2, s, s], np.int64), "shape5"),
             numpy_helper.from_array(np.array([1, c, s, s], np.int64), "shape4")]
    nodes = [helper.make_node("Conv", ["image", "w1"], ["a"], name="conv1"),
             helper.make_node("Reshape", ["a", "shape5"], ["r5"], name="split_groups"),
             helper.make_node("Transpose", ["r5"], ["t5"], perm=[0, 2, 1, 3, 4], name="shuffle"),
             helper.make_node("Reshape", ["t5", "shape4"], ["shuffled"], name="merge_groups"),
             helper.make_node("Conv", ["shuffled", "w2"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2], group=4,
                              name="conv2")]
    graph = helper.make_graph(nodes, "cubic_shuffle",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, s, s])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, s // 2, s // 2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_cubic_shuffles_are_found_in_the_onnx_graph(tmp_path):
    from workbench.models.convert.shuffle_fix import cubic_shuffles
    assert cubic_shuffles(_shuffle_onnx(tmp_path / "cube.onnx")) == [("merge_groups", "shuffled")]
    assert cubic_shuffles(_shuffle_onnx(tmp_path / "flat.onnx", channels=16)) == []     # (1, 16, 8, 8): no mix-up
    from tests.models.onnx_tiny import tiny_nchw_onnx
    assert cubic_shuffles(tiny_nchw_onnx(tmp_path / "tiny.onnx")) == []


@pytest.mark.slow
def test_a_cubic_shuffle_converts_to_what_onnx_runtime_computes(tmp_path):
    """onnx2tf alone leaves the shuffle in NCHW and the next convolution reads channels as height (checked: the
    first run's .tflite has it); the conversion runs again with a transpose to NHWC and agrees with ONNX Runtime."""
    from ai_edge_litert.interpreter import Interpreter

    from workbench.models.convert import convert_onnx
    from workbench.models.convert.onnx2tf_run import ort_session
    from workbench.models.convert.shuffle_fix import nchw_left
    from workbench.models.tflite_graph import parse_tflite_bytes
    from workbench.models.tflite_passes import apply_passes
    src = _shuffle_onnx(tmp_path / "cube.onnx")
    x = np.random.default_rng(4).uniform(0, 1, (4, 8, 8, 3)).astype(np.float32)
    conv = convert_onnx(src, samples=x, cache=False)
    assert any("cube-shaped" in r and "1 Reshape node(s)" in r for r in conv.rewrites), conv.rewrites
    data = Path(conv.tflite).read_bytes()
    assert nchw_left(data) == 0
    worst = max(a.max_abs_error / a.max_abs_reference for a in conv.agreement)
    assert worst < 1e-5, conv.agreement                 # not float reassociation: the same arithmetic
    session = ort_session(src)
    interp = Interpreter(model_content=data)
    interp.allocate_tensors()
    for i in range(len(x)):
        ref = session.run(None, {"image": x[i:i + 1].transpose(0, 3, 1, 2)})[0].transpose(0, 2, 3, 1)
        interp.set_tensor(interp.get_input_details()[0]["index"], x[i:i + 1])
        interp.invoke()
        got = interp.get_tensor(interp.get_output_details()[0]["index"])
        assert np.allclose(ref, got, atol=1e-5)
    after, _ = apply_passes(data)                         # the shuffle on NHWC: one TRANSPOSE, as in the source
    assert sum(op.type == "TRANSPOSE" for op in parse_tflite_bytes(after).ops) == 1
