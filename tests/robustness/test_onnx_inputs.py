"""ONNX files as a careless or hostile user hands them to `workbench convert` / `quantize`.

Every model here is built with onnx.helper in the test (a real ONNX file, real onnx checker, real onnx2tf
op inventory); each refusal is exit 2 naming the tensor, the op or the file, before anything is allocated
or converted."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .conftest import run_cli, snapshot


def _conv_model(path: Path, *, shape=(1, 3, 8, 8), op="Relu", domain="", external: bool = False,
                extra_nodes=(), opset=13) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(4, shape[1], 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node(op, ["c"], ["y"], name="act", domain=domain), *extra_nodes]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [shape[0], 4, *shape[2:]])], [w])
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    if external:
        onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                  location="weights.bin", size_threshold=0)
    else:
        onnx.save(model, str(path))
    return path


def _limited(args, gib=4):
    """Run the CLI in a child process with its address space limited (an allocation of 100+ GiB cannot happen)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (gib << 30, gib << 30))
    return subprocess.run([sys.executable, "-m", "workbench", *map(str, args)], capture_output=True, text=True,
                          timeout=600, preexec_fn=limit, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


@pytest.mark.parametrize("shape,phrase", [
    ((1, 3, 200000, 200000), "declares dimension 2 = 200000"),
    ((1, 3, 20000, 20000), "needs 4.47 GiB per sample"),
    ((1, 3, 65536, 65536), "needs 48 GiB per sample"),
])
@pytest.mark.parametrize("command", ["convert", pytest.param("quantize", marks=pytest.mark.slow)])
def test_huge_declared_dims_are_refused_before_any_allocation(tmp_path, shape, phrase, command):
    model = _conv_model(tmp_path / "huge.onnx", shape=shape)
    args = (["model", "convert", model] if command == "convert" else
            ["quantize", model, "--recipe", "a8w8_pt", "-o", tmp_path / "out"])
    proc = _limited(args)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert phrase in proc.stderr and "input 'x'" in proc.stderr and "Traceback" not in proc.stderr


def test_an_unsupported_op_is_named_before_onnx2tf_starts(tmp_path):
    model = _conv_model(tmp_path / "odd.onnx", op="Relu", extra_nodes=())
    import onnx
    m = onnx.load(str(model))
    m.graph.node[1].op_type = "NoSuchOpAnywhere"
    onnx.save(m, str(model))
    result = run_cli("model", "convert", model)
    assert result.code == 2, result
    assert "NoSuchOpAnywhere" in result.err and "Traceback" not in result.err


def test_a_custom_domain_op_is_named(tmp_path):
    model = _conv_model(tmp_path / "custom.onnx", op="MyPlugin", domain="com.example")
    result = run_cli("model", "convert", model)
    assert result.code == 2, result
    assert "onnx2tf cannot convert these op(s): com.example:MyPlugin x1 (first: 'act')" in result.err


def test_a_malformed_graph_is_refused_by_the_checker(tmp_path):
    import onnx
    model = _conv_model(tmp_path / "broken.onnx")
    m = onnx.load(str(model))
    m.graph.node[1].input[0] = "nowhere"              # an input no node produces
    onnx.save(m, str(model))
    result = run_cli("model", "convert", model)
    assert result.code == 2, result
    assert "the ONNX checker refuses the graph" in result.err and "nowhere" in result.err


@pytest.mark.parametrize("content", [b"", b"\x08\x07garbage" * 10, b"not a protobuf at all"])
def test_a_file_that_is_not_onnx_is_named(tmp_path, content):
    path = tmp_path / "model.onnx"
    path.write_bytes(content)
    result = run_cli("model", "convert", path)
    assert result.code == 2 and "model.onnx" in result.err and "Traceback" not in result.err, result


def test_external_data_outside_the_model_folder_is_refused(tmp_path):
    """A model must not make the workbench read another file of this machine."""
    import onnx
    model = _conv_model(tmp_path / "m" / "model.onnx", external=True)
    secret = tmp_path / "secret.bin"
    (tmp_path / "m" / "weights.bin").rename(secret)
    m = onnx.load(str(model), load_external_data=False)
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../secret.bin"
    onnx.save(m, str(model))
    result = run_cli("model", "convert", model)
    assert result.code == 2 and "outside the model's folder" in result.err and "'w'" in result.err, result


def test_missing_or_truncated_external_data_is_named(tmp_path):
    model = _conv_model(tmp_path / "m" / "model.onnx", external=True)
    data = tmp_path / "m" / "weights.bin"
    data.write_bytes(data.read_bytes()[:10])
    result = run_cli("model", "convert", model)
    assert result.code == 2 and "weights.bin" in result.err and "truncated" in result.err, result
    data.unlink()
    result = run_cli("model", "convert", model)
    assert result.code == 2 and "'weights.bin', which is not beside the model" in result.err, result


def test_external_data_is_inlined_and_its_bytes_enter_the_key(tmp_path):
    from workbench.models.onnx_preflight import preflight
    model = _conv_model(tmp_path / "m" / "model.onnx", external=True)
    before = snapshot(tmp_path / "m")
    inlined = preflight(model)
    assert inlined != model and inlined.name == "model.onnx"
    import onnx
    m = onnx.load(str(inlined))
    assert all(t.data_location != onnx.TensorProto.EXTERNAL for t in m.graph.initializer)
    data = tmp_path / "m" / "weights.bin"
    raw = bytearray(data.read_bytes())
    raw[0] ^= 0xFF
    data.write_bytes(bytes(raw))
    assert preflight(model) != inlined                # other weights, another self-contained copy
    assert snapshot(tmp_path / "m").keys() == before.keys()   # the user's folder is only read


@pytest.mark.slow
def test_a_model_with_external_data_converts(tmp_path):
    """How PyTorch saves big models (model.onnx + weights.bin): converted, checked against ONNX Runtime."""
    model = _conv_model(tmp_path / "m" / "model.onnx", external=True)
    result = run_cli("model", "convert", model, "--no-cache")
    assert result.code == 0, result
    assert "cosine" in result.out
