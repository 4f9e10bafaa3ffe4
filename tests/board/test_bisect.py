"""`workbench bisect`: the first tensor where a board's INT8 run departs from the host's.

The "board" is this machine over the loopback sshd, running the workbench's Python runner
with TFLite's *reference* kernels, while the host runs the same file with its default
kernels (XNNPACK).  The two really differ in rounding on some ops: nothing is planted.
Each test checks the bisection's answer against an independent run of both kernel sets
over every tensor (``experimental_preserve_all_tensors``), written here.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from workbench.errors import BoardError, ModelError


@pytest.fixture(scope="module")
def digits_int8(tmp_path_factory) -> Path:
    """A small real INT8 CNN for the built-in digits images (32x32x1), calibrated on them."""
    import keras
    import tensorflow as tf

    from workbench.data.loaders import load_dataset

    keras.utils.set_random_seed(3)
    inp = keras.Input((32, 32, 1))
    x = keras.layers.Conv2D(8, 3, activation="relu", padding="same")(inp)
    x = keras.layers.DepthwiseConv2D(3, padding="same", activation="relu6")(x)
    x = keras.layers.AveragePooling2D(2)(x)
    x = keras.layers.Conv2D(16, 1, activation="hard_swish")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    out = keras.layers.Dense(10)(x)
    model = keras.Model(inp, out)
    images = load_dataset("digits-conditions").select(split="calibration").x[:64].astype(np.float32)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([images[i:i + 1]] for i in range(len(images)))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    path = tmp_path_factory.mktemp("bisect") / "digits_int8.tflite"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        path.write_bytes(conv.convert())
    return path


def _every_tensor(path: Path, feeds: np.ndarray, kernels: str) -> dict[int, np.ndarray]:
    """Independent truth: every tensor of ``path`` with the given kernels (not the workbench's code)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    kind = {"default": OpResolverType.AUTO, "reference": OpResolverType.BUILTIN_REF}[kernels]
    out: dict[int, list] = {}
    for sample in feeds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            it = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True,
                             experimental_op_resolver_type=kind)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], sample[None])
        it.invoke()
        for op in it._get_ops_details():        # XNNPACK's nodes too (one per op with all tensors kept)
            for t in op["outputs"]:
                out.setdefault(int(t), []).append(np.array(it.get_tensor(t)))
    return {t: np.concatenate(v) for t, v in out.items()}


def _feeds(path: Path, n: int = 3) -> dict[str, np.ndarray]:
    from workbench.board.divergence import sample_inputs
    feeds, _ = sample_inputs(path, "digits-conditions", condition="low-light", samples=n)
    return feeds


def test_expose_tensors_makes_an_intermediate_an_output_and_refuses_what_is_not_computed(digits_int8):
    from ai_edge_litert.interpreter import Interpreter

    from workbench.models.tflite_edit import expose_tensors
    from workbench.models.tflite_graph import parse_tflite_bytes
    content = digits_int8.read_bytes()
    graph = parse_tflite_bytes(content)
    conv_out = graph.ops[0].outputs[0]
    edited = expose_tensors(content, [conv_out])
    it = Interpreter(model_content=edited)
    it.allocate_tensors()
    outs = [d["index"] for d in it.get_output_details()]
    assert outs == [*graph.outputs, conv_out]
    assert [d["dtype"] for d in it.get_output_details()][-1] == np.int8
    assert parse_tflite_bytes(edited).op_types() == graph.op_types()      # same ops, nothing re-converted
    weights = next(t.index for t in graph.tensors if t.is_constant)
    with pytest.raises(ModelError, match="is a constant"):
        expose_tensors(content, [weights])
    with pytest.raises(ModelError, match="is a model input"):
        expose_tensors(content, [graph.inputs[0]])
    with pytest.raises(ModelError, match="out of range"):
        expose_tensors(content, [len(graph.tensors) + 5])


def test_bisect_over_ssh_names_the_first_tensor_where_reference_kernels_depart(digits_int8, remote, tmp_path):
    from workbench.board.divergence import BoardRunner, bisect, candidates, max_board_runs
    from workbench.board.session import TimingOptions, _open_session
    from workbench.findings import findings_for
    from workbench.models.tflite_graph import read_tflite

    feeds = _feeds(digits_int8)
    host = _every_tensor(digits_int8, feeds["input_0"], "default")
    board = _every_tensor(digits_int8, feeds["input_0"], "reference")
    order = [c.tensor for c in candidates(read_tflite(digits_int8))]
    truth = [t for t in order if t in host and not np.array_equal(host[t], board[t])]
    assert truth, "the reference kernels agree with XNNPACK everywhere on this model: nothing to bisect"

    session = _open_session(board=None, boards_file=None, host=remote["host"], ssh_config=remote["ssh_config"],
                            known_hosts=None, local=False,
                            options=TimingOptions(python=remote["python"], workdir=remote["workdir"]))
    result = bisect(digits_int8, feeds, BoardRunner(session, kernels="reference"), tolerance=0)
    assert result.board_runs <= math.ceil(math.log2(len(order))) + 2 == result.max_runs
    assert result.max_runs == max_board_runs(len(order))
    d = result.first_divergence
    assert d is not None and not d.agrees and d.differing > 0
    assert not np.array_equal(host[d.tensor], board[d.tensor])          # it really departs there
    assert all(t.agrees for t in result.op_inputs)                       # ... while the op's inputs agree
    for t in result.op_inputs:
        assert np.array_equal(host[t.tensor], board[t.tensor])
    if result.outputs_agree:                                             # op-by-op run: the very first one
        assert d.tensor == truth[0]
    assert "reference kernels" in result.where and "first departure at op #" in result.summary()
    (finding,) = findings_for(result)
    assert finding.code == "board.tensor-divergence" and f"op #{d.op_index} {d.op}" in finding.message


def test_agreeing_kernels_are_shown_bit_exact_op_by_op_in_two_runs(digits_int8):
    from workbench.board.divergence import BoardRunner, bisect, candidates
    from workbench.board.session import TimingOptions, _open_session
    from workbench.findings import findings_for
    from workbench.models.tflite_graph import read_tflite

    session = _open_session(board=None, boards_file=None, host=None, ssh_config=None, known_hosts=None,
                            local=True, options=TimingOptions())
    result = bisect(digits_int8, _feeds(digits_int8), BoardRunner(session, kernels="default"))
    assert result.outputs_agree and result.first_divergence is None and result.op_by_op_agree
    assert result.board_runs == 2
    assert {t.tensor for t in result.compared} >= {c.tensor for c in candidates(read_tflite(digits_int8))}
    assert all(t.differing == 0 for t in result.compared)
    assert "agree bit-exact op by op" in result.summary()
    assert not findings_for(result)


def test_a_recorded_bisection_replays_to_the_same_answer_and_refuses_an_edited_run(digits_int8, remote, tmp_path):
    from workbench.board.divergence import run_bisect
    common = dict(data="digits-conditions", condition="low-light", samples=3, placement=False)
    live = run_bisect(digits_int8, host=remote["host"], ssh_config=remote["ssh_config"], python=remote["python"],
                      workdir=remote["workdir"], kernels="reference", record=tmp_path / "rec",
                      out=tmp_path / "live.json", **common)
    replayed = run_bisect(digits_int8, replay=tmp_path / "rec", **common)
    assert replayed.first_divergence == live.first_divergence
    assert replayed.probes == live.probes and replayed.board_runs == live.board_runs
    assert replayed.replayed_from and replayed.replayed_from.startswith("replayed from")
    assert json.loads((tmp_path / "live.json").read_text())["first_divergence"]["tensor"] == \
        live.first_divergence.tensor
    with pytest.raises(BoardError, match="made with feeds_sha256"):
        run_bisect(digits_int8, replay=tmp_path / "rec", **{**common, "samples": 2})
    run_file = tmp_path / "rec" / "run_01.txt"
    run_file.write_text(run_file.read_text().replace('"ok": true', '"ok": true, "x": 1'))
    with pytest.raises(BoardError, match="run_01.txt: its sha256 is not the one recorded"):
        run_bisect(digits_int8, replay=tmp_path / "rec", **common)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", "bisect", *args], capture_output=True, text=True,
                          timeout=600)


def test_cli_prints_the_departing_op_draws_it_on_the_graph_and_refuses_bad_input(digits_int8, tmp_path):
    proc = _cli(str(digits_int8), "--local", "--kernels", "reference", "--data", "digits-conditions",
                "--samples", "2", "--target", "imx8mp", "--graph", str(tmp_path / "g.html"),
                "--out", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    page = (tmp_path / "g.html").read_text()
    assert "<svg" in page and "Host against board, tensor by tensor" in page
    if result["first_divergence"]:                       # the first departing op is marked on the graph
        op = result["first_divergence"]["op_index"]
        assert f"#{op} {result['first_divergence']['op']}</text>" in page
        assert page.count("board departs first") == 1
    assert page.count("board") >= len({t["op_index"] for t in result["compared"] if t["op_index"] is not None})
    again = _cli(str(digits_int8), "--local", "--data", "digits-conditions", "--graph", str(tmp_path / "g.html"))
    assert again.returncode == 2 and "--graph" in again.stderr and "is not overwritten" in again.stderr
    assert "first departure at op #" in proc.stdout and "finding: error board.tensor-divergence" in proc.stdout \
        or "agree bit-exact op by op" in proc.stdout
    assert "on imx8mp" in proc.stdout or "agree" in proc.stdout
    bad = _cli(str(digits_int8), "--local", "--data", "digits-conditions", "--tolerance", "-1")
    assert bad.returncode == 2 and "`tolerance` must be a whole number of codes >= 0" in bad.stderr
    bad = _cli(str(digits_int8), "--local", "--data", "digits-conditions", "--condition", "fog")
    assert bad.returncode == 2 and "condition 'fog' is not in 'digits-conditions'" in bad.stderr
    bad = _cli(str(digits_int8), "--local", "--data", "digits-conditions", "--record", str(tmp_path / "r"))
    assert bad.returncode == 2 and "`record` keeps a board session" in bad.stderr
    bad = _cli(str(tmp_path / "nope.tflite"), "--local", "--data", "digits-conditions")
    assert bad.returncode == 2 and "does not exist" in bad.stderr


@pytest.mark.zoo
@pytest.mark.slow
def test_bisect_names_a_real_departure_on_mediapipe_blazeface_over_ssh(remote, tmp_path):
    """MediaPipe's BlazeFace (the test zoo), quantized by the workbench, on the loopback board with the
    reference kernels: the departure the bisection names is real (checked here tensor by tensor)."""
    from tests.zoo.fetch import fetch
    from workbench.board.divergence import candidates, run_bisect, sample_inputs
    from workbench.data.loaders import load_dataset
    from workbench.models.tflite_graph import read_tflite
    from workbench.quantize.engine import quantize

    entry = fetch("blazeface")
    int8 = tmp_path / "q" / "blazeface_int8.tflite"
    quantize(entry.model, dataset=load_dataset(entry.data), output=int8)
    result = run_bisect(int8, data=entry.data, condition="daylight", samples=2, host=remote["host"],
                        ssh_config=remote["ssh_config"], python=remote["python"], workdir=remote["workdir"],
                        kernels="reference", target="imx95", record=tmp_path / "rec")
    order = [c.tensor for c in candidates(read_tflite(int8))]
    assert result.board_runs <= math.ceil(math.log2(len(order))) + 2
    feeds, _ = sample_inputs(int8, entry.data, condition="daylight", samples=2)
    host = _every_tensor(int8, feeds["input_0"], "default")
    board = _every_tensor(int8, feeds["input_0"], "reference")
    if result.first_divergence is None:                       # then it must be bit-exact op by op
        assert result.op_by_op_agree
        assert all(np.array_equal(host[t], board[t]) for t in order if t in host)
        return
    d = result.first_divergence
    assert not np.array_equal(host[d.tensor], board[d.tensor])
    for t in result.op_inputs:
        assert t.agrees and np.array_equal(host[t.tensor], board[t.tensor])
    assert result.placement and "imx95" in result.placement
    replayed = run_bisect(int8, data=entry.data, condition="daylight", samples=2, replay=tmp_path / "rec")
    assert replayed.first_divergence == d and replayed.board_runs == result.board_runs
