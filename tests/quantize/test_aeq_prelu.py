"""What AI Edge Quantizer leaves for the workbench to finish: PRELU in float, constants after the flatbuffer."""

from __future__ import annotations

import collections
import contextlib
import io

import numpy as np
import pytest


def _prelu_tflite(tmp_path):
    """A float .tflite with a per-channel PReLU between two convolutions (MediaPipe's landmark models' block),
    and the TFLite converter's own INT8 model of the same Keras model (the reference)."""
    import keras
    import tensorflow as tf
    keras.utils.set_random_seed(0)
    inp = keras.Input((16, 16, 3), batch_size=1, name="image")
    h = keras.layers.Conv2D(8, 3, padding="same")(inp)
    prelu = keras.layers.PReLU(shared_axes=[1, 2])
    h = prelu(h)
    model = keras.Model(inp, keras.layers.Conv2D(4, 1)(h))
    prelu.set_weights([np.random.default_rng(0).uniform(-0.5, 1.5, (1, 1, 8)).astype(np.float32)])
    with contextlib.redirect_stdout(io.StringIO()):
        data = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    path = tmp_path / "prelu.tflite"
    path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def prelu_model(tmp_path_factory):
    return _prelu_tflite(tmp_path_factory.mktemp("prelu"))


def _run(data, x):
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    i, o = it.get_input_details()[0], it.get_output_details()[0]
    out = []
    for s in x:
        v = s[None]
        if i["dtype"] != np.float32:
            scale, zp = i["quantization"]
            v = np.clip(np.round(v / scale + zp), -128, 127).astype(i["dtype"])
        it.set_tensor(i["index"], v)
        it.invoke()
        y = it.get_tensor(o["index"]).astype(np.float32)
        if o["dtype"] != np.float32:
            scale, zp = o["quantization"]
            y = (y - zp) * scale
        out.append(y[0])
    return np.stack(out)


def _ops(data):
    from ai_edge_litert.tools import flatbuffer_utils as fu
    m = fu.read_model_from_bytearray(bytearray(data))
    sg = m.subgraphs[0]
    names = {v: k for k, v in vars(__import__("ai_edge_litert.schema_py_generated", fromlist=["x"]).BuiltinOperator)
             .items() if not k.startswith("_")}
    ops = []
    for op in sg.operators:
        c = m.operatorCodes[op.opcodeIndex]
        ops.append((names[max(c.builtinCode, c.deprecatedBuiltinCode)], [sg.tensors[i].type for i in op.inputs]))
    return ops


@pytest.mark.slow
def test_prelu_becomes_int8_and_keeps_its_numbers(prelu_model):
    from workbench.quantize.aeq_backend import quantize_float_tflite
    from workbench.quantize.recipe import get_recipe
    x = np.random.default_rng(1).uniform(0, 1, (40, 16, 16, 3)).astype(np.float32)
    data, entry = quantize_float_tflite(prelu_model, get_recipe("a8w8_pc"), x[:24])
    ops = _ops(data)
    kinds = collections.Counter(name for name, _ in ops)
    assert kinds["PRELU"] == 1 and kinds["DEQUANTIZE"] == 0, ops      # no float island left around it
    (prelu_inputs,) = [types for name, types in ops if name == "PRELU"]
    assert prelu_inputs == [9, 9], prelu_inputs                        # int8 input, int8 alpha
    assert any("PRELU quantized to INT8" in c for c in entry["prepared"])
    ref = _run(prelu_model.read_bytes(), x[24:])
    got = _run(data, x[24:])
    sqnr = 10 * np.log10(np.sum(ref ** 2) / np.sum((ref - got) ** 2))
    assert sqnr > 25, sqnr


@pytest.mark.slow
def test_an_excluded_prelu_stays_float(prelu_model):
    import dataclasses

    from workbench.quantize.aeq_backend import quantize_float_tflite
    from workbench.quantize.recipe import get_recipe
    x = np.random.default_rng(1).uniform(0, 1, (24, 16, 16, 3)).astype(np.float32)
    recipe = dataclasses.replace(get_recipe("a8w8_pc"), exclude=("PRELU",), allow_float_fallback=True)
    data, entry = quantize_float_tflite(prelu_model, recipe, x)
    (prelu_inputs,) = [types for name, types in _ops(data) if name == "PRELU"]
    assert prelu_inputs == [0, 0], prelu_inputs                        # float, as the recipe asks
    assert not any("PRELU quantized" in c for c in entry["prepared"])


@pytest.mark.slow
def test_constants_stay_inside_the_flatbuffer_for_the_bsp_vela(tmp_path):
    """AI Edge Quantizer writes the constants of a model with >= 256 KB of them after the flatbuffer
    (Buffer.offset/size). Vela 3.10.0 (BSP lf-6.6.3_1.0.0) reads each such constant as empty and left 44 of
    MediaPipe hand_landmark_lite's 65 ops on the imx93 CPU. Every constant must be readable in place."""
    import keras
    import tensorflow as tf
    from ai_edge_litert import schema_py_generated as fb

    from workbench.quantize.aeq_backend import quantize_float_tflite
    from workbench.quantize.recipe import get_recipe
    keras.utils.set_random_seed(0)
    inp = keras.Input((8, 8, 64), batch_size=1, name="image")
    h = keras.layers.Conv2D(256, 3, padding="same", activation="relu")(inp)     # 147k weights
    h = keras.layers.Conv2D(256, 3, padding="same")(h)                          # 590k weights: 737 KB as INT8
    model = keras.Model(inp, h)
    with contextlib.redirect_stdout(io.StringIO()):
        (tmp_path / "big.tflite").write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    x = np.random.default_rng(0).uniform(0, 1, (8, 8, 8, 64)).astype(np.float32)
    data, _ = quantize_float_tflite(tmp_path / "big.tflite", get_recipe("a8w8_pc"), x)
    m = fb.Model.GetRootAs(data, 0)
    sg = m.Subgraphs(0)
    produced = {sg.Operators(i).Outputs(k) for i in range(sg.OperatorsLength())
                for k in range(sg.Operators(i).OutputsLength())}
    inputs = {sg.Inputs(i) for i in range(sg.InputsLength())}
    constants = [sg.Tensors(t) for t in range(sg.TensorsLength()) if t not in produced and t not in inputs
                 and sg.Tensors(t).Buffer() > 0]
    assert len(constants) >= 4
    for t in constants:         # what Vela 3.10.0's reader takes: the data inside the buffer, not an offset
        assert m.Buffers(t.Buffer()).DataLength() > 0 and m.Buffers(t.Buffer()).Offset() <= 1, t.Name()
