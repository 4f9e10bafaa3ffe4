"""The model as a graph (workbench.placement.graph): placement per target, SQNR per op, one SVG."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from workbench.placement.analyze import analyze_placement
from workbench.placement.graph import COLORS, activation_sqnr, model_graph

from .conftest import _clean_keras, _convert


@pytest.fixture(scope="module")
def pair(models_dir):
    """The same Keras model converted twice: FP32 and INT8 (one weights draw)."""
    model = _clean_keras()
    return (_convert(model, models_dir / "graph_fp32.tflite", int8=False),
            _convert(model, models_dir / "graph_int8.tflite"))


def test_activation_sqnr_per_op_is_finite_and_high_for_a_clean_int8_model(pair):
    fp32, int8 = pair
    x = np.random.default_rng(1).random((8, 16, 16, 3), dtype=np.float32)
    sqnr = activation_sqnr(fp32, int8, x)
    assert len(sqnr) >= 4
    assert all(v > 10 for v in sqnr.values()), sqnr          # INT8 of a clean net: tens of dB, not noise
    # the FP32 model against itself: every op agrees exactly
    assert all(math.isinf(v) for v in activation_sqnr(fp32, fp32, x).values())
    # no FP32 .tflite to compare with: nothing, not a guess
    assert activation_sqnr(str(fp32).replace(".tflite", ".keras"), int8, x) == {}


def test_activation_sqnr_feeds_the_model_through_its_input_contract(pair, tmp_path):
    """Pixels become model inputs as in every other stage: MediaPipe's face_landmark (192 x 192) on 128 x 128
    photos crashed stage 40 (`cannot reshape array of size 49152`), and a [-1, 1] model got [0, 1] inputs."""
    from workbench.models.contract import InputContract
    fp32, int8 = pair
    pixels = np.random.default_rng(1).random((6, 12, 12, 3), dtype=np.float32)       # not the model's 16 x 16
    contract = InputContract(color="rgb", size=(16, 16), resize="stretch", range=(0.0, 0.5))
    got = activation_sqnr(fp32, int8, pixels, contract=contract)
    assert got and all(v > 10 for v in got.values())
    fed = contract.apply(pixels)
    assert fed.shape[1:3] == (16, 16) and 0.4 < fed.max() <= 0.5    # resized and scaled to [0, 0.5]
    identity = activation_sqnr(fp32, int8, fed, contract=InputContract(color="rgb", size=(16, 16)))
    assert identity == pytest.approx(got)
    card = tmp_path / "card.yaml"                                   # a card path works the same
    card.write_text("color: rgb\nsize: [16, 16]\nresize: stretch\nrange: [0, 0.5]\n")
    assert activation_sqnr(fp32, int8, pixels, contract=card) == pytest.approx(got)


def test_graph_colours_each_op_per_target_and_names_the_cpu_reason(pair, reject_tflite):
    _, int8 = pair
    x = np.random.default_rng(1).random((4, 16, 16, 3), dtype=np.float32)
    placements = {t: analyze_placement(int8, t, use_vela=False) for t in ("imx8mp", "imx95")}
    graph = model_graph(int8, placements, sqnr={"imx8mp": activation_sqnr(pair[0], int8, x)})
    svg = graph.to_svg()
    assert svg.startswith("<svg") and "<script" not in svg and "http" not in svg.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    assert len(graph.ops) == len(placements["imx8mp"].ops)
    assert svg.count(f'fill="{COLORS["NPU"]}"') >= 2 * len(graph.ops)       # a chip per op and target
    assert "SQNR" in svg and "imx8mp: NPU" in svg
    # a model with ops the targets refuse: an orange chip and the constraint named on the op
    rejected = {t: analyze_placement(reject_tflite, t, use_vela=False) for t in ("imx8mp", "imx95")}
    svg = model_graph(reject_tflite, rejected).to_svg()
    assert f'fill="{COLORS["CPU"]}"' in svg
    cpu = [o for o in rejected["imx95"].ops if o.placement == "CPU" and o.reasons]
    assert cpu and re.escape(cpu[0].reasons[0].constraint) and cpu[0].reasons[0].constraint in svg
