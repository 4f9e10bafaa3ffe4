"""The trap zoo: one constructed model, dataset, calibration file or run result per silent failure.

Each trap builds its bait in a folder (small: seconds), runs the workbench's own stage code on it
and returns the :class:`~workbench.findings.Findings` the workbench reports.  ``TRAPS`` maps a trap
name to ``(expected code, build)``; the tests in this folder assert the code and its evidence, and
``benchmarks/bench_traps.py`` counts how many traps are flagged and how many clean models raise a
false alarm (a finding of severity warning or above).

The timing traps (cold start, still falling, too few runs) and the board traps run the real timing stage over SSH
on a loopback sshd (``tests/board/loopback.py``); cold start and still falling time a model whose invocations
really cost more at first (a counter in a resource variable sets the trip count of a loop of real ops), and two
board traps replace ``benchmark_model`` by the TEST DOUBLE replaying a recorded board log (no board exists here);
every other trap runs the real converter, quantizer, inspector, placement (both Velas) or accuracy stage.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from workbench.findings import Findings, findings_for
from workbench.quantize.engine import (
    quantize,  # not wb.quantize: importing workbench.quantize.* rebinds that name
)

H = W = 8


# -- shared bait ---------------------------------------------------------------------------------------
def _shared(root: Path, name: str, build: Callable[[Path], Any]) -> Path:
    """``root/_shared/name``, built once per zoo folder."""
    path = root / "_shared" / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        if tmp.exists():
            shutil.rmtree(tmp) if tmp.is_dir() else tmp.unlink()
        build(tmp)
        tmp.rename(path)
    return path


def calibration_images(n: int = 60, seed: int = 0, shape: tuple[int, ...] = (H, W, 1)) -> np.ndarray:
    return np.random.default_rng(seed).random((n, *shape)).astype(np.float32)


def _onnx_model(path: Path, *, middle: str | None = None, depthwise_spread: float | None = None,
                batch: Any = 1, seed: int = 0) -> None:
    """A small ONNX CNN (NCHW 1x1x8x8): Conv -> [middle op] -> Conv(depthwise) -> Conv.

    ``depthwise_spread``: the depthwise conv's per-channel weight ranges span this factor.
    ``batch``: ``"N"`` gives a dynamic batch dimension; ``seed``: its weights."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    c = 8
    w1 = rng.normal(0, 0.5, size=(c, 1, 3, 3)).astype(np.float32)
    dw = rng.normal(0, 0.5, size=(c, 1, 3, 3)).astype(np.float32)
    if depthwise_spread:
        dw *= np.geomspace(1.0, 1.0 / depthwise_spread, c).astype(np.float32)[:, None, None, None]
    w3 = rng.normal(0, 0.3, size=(4, c, 1, 1)).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (dw, "dw"), (w3, "w3"))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1")]
    src = "r1"
    if middle:
        nodes.append(helper.make_node(middle, [src], ["m"], name=middle.lower()))
        src = "m"
    nodes += [helper.make_node("Conv", [src, "dw"], ["c2"], pads=[1, 1, 1, 1], group=c, name="depthwise"),
              helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
              helper.make_node("Conv", ["r2", "w3"], ["y"], name="conv3")]
    graph = helper.make_graph(nodes, "trap", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 1, H, W])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4, H, W])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


def _nchw_calibration() -> np.ndarray:
    return calibration_images(shape=(1, H, W))


def _saved_model_sin(path: Path, seed: int = 0) -> None:
    """A SavedModel: conv -> SIN -> conv -> mean (TFLite has no integer SIN kernel); ``seed``: its weights."""
    import tensorflow as tf
    rng = np.random.default_rng(seed)

    class Net(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1 = tf.Variable(rng.normal(0, 0.5, (3, 3, 1, 8)).astype(np.float32))
            self.w2 = tf.Variable(rng.normal(0, 0.3, (3, 3, 8, 8)).astype(np.float32))
            self.w3 = tf.Variable(rng.normal(0, 0.3, (3, 3, 8, 4)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([1, H, W, 1], tf.float32, name="image")])
        def __call__(self, x):
            y = tf.nn.relu(tf.nn.conv2d(x, self.w1, 1, "SAME"))
            y = tf.nn.relu(tf.nn.conv2d(y, self.w2, 1, "SAME"))
            y = tf.sin(y)
            y = tf.nn.relu(tf.nn.conv2d(y, self.w3, 1, "SAME"))
            return {"y": y}

    net = Net()
    tf.saved_model.save(net, str(path), signatures={"serving_default": net.__call__})


def _keras_small(path: Path, seed: int = 0) -> None:
    """A Keras CNN: conv -> depthwise conv -> pool -> dense (every op the three NPUs run); ``seed``: its weights."""
    import keras
    keras.utils.set_random_seed(seed)
    inp = keras.Input((H, W, 1), batch_size=1, name="image")
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    x = keras.layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    out = keras.layers.Dense(4)(x)
    path.mkdir()
    keras.Model(inp, out).save(path / "model.keras")


def _quantized(root: Path, name: str, source: Callable[[Path], Path], recipe: Any, **kw: Any) -> Any:
    out = root / "_shared" / f"q-{name}"
    q = quantize(source(root), recipe, calibration_images(), output=out, **kw)
    return q


#: one model per trap: each trap that builds a model gets its own weights (a seed of its own)
MODEL_SEEDS = {"tflite-float-op": 0, "tflite-qdq-inside": 1, "cpu-island": 2, "per-channel-imx8mp": 0,
               "bsp-compiler": 1, "int16-on-8bit": 2, "clipping": 3,
               "output-collapsed": 4, "board-placement-mismatch": 5, "too-few-runs": 6,
               # the small ONNX CNN (seed 0: the clean model) and the lowest-pad CNN
               "manifest-sha-mismatch": 1, "toolchain-drift": 2, "absurd-scale": 0, "xnnpack-refused": 1}


def sin_saved_model(root: Path, trap: str = "tflite-float-op") -> Path:
    seed = MODEL_SEEDS[trap]
    return _shared(root, f"sin_savedmodel_{seed}", lambda p: _saved_model_sin(p, seed))


def keras_small(root: Path, trap: str = "clipping") -> Path:
    seed = MODEL_SEEDS[trap]
    return _shared(root, f"keras_small_{seed}", lambda p: _keras_small(p, seed)) / "model.keras"


def tflite_sin_int8(root: Path, trap: str = "tflite-float-op") -> Any:
    """The SIN model of ``trap`` through the TFLite converter, float fallback allowed (what an 'INT8' export does)."""
    from workbench.quantize.recipe import get_recipe
    return _quantized(root, f"tflite-sin-{trap}", lambda r: sin_saved_model(r, trap),
                      get_recipe("a8w8_pc", allow_float_fallback=True))


# -- the traps -----------------------------------------------------------------------------------------
def trap_tflite_float_op(root: Path) -> Findings:
    return findings_for(tflite_sin_int8(root), target="imx93")


def trap_tflite_qdq_inside(root: Path) -> Findings:
    return findings_for(tflite_sin_int8(root, "tflite-qdq-inside"), target="imx93")


def trap_onnx_qdq_float_op(root: Path) -> Findings:
    from workbench.quantize.recipe import get_recipe
    model = _shared(root, "sin.onnx", lambda p: _onnx_model(p, middle="Sin"))
    q = quantize(model, get_recipe("a8w8_pc", backend="onnx", allow_float_fallback=True), _nchw_calibration(),
                    output=root / "onnx-sin")
    return findings_for(q, target="imx93")


def trap_per_tensor_collapse(root: Path) -> Findings:
    model = _shared(root, "spread.onnx", lambda p: _onnx_model(p, depthwise_spread=1000.0))
    q = quantize(model, "a8w8_pt", _nchw_calibration(), backend="onnx", output=root / "onnx-pt")
    return findings_for(q, target="imx8mp")


def trap_channel_range_spread(root: Path) -> Findings:
    model = _shared(root, "spread.onnx", lambda p: _onnx_model(p, depthwise_spread=1000.0))
    q = quantize(model, "a8w8_pc", _nchw_calibration(), backend="onnx", output=root / "onnx-pc")
    return findings_for(q, target="imx93")


def trap_dynamic_batch(root: Path) -> Findings:
    import workbench as wb
    model = _shared(root, "dynamic.onnx", lambda p: _onnx_model(p, batch="N"))
    return findings_for(wb.inspect_model(model), target="imx95")


def _per_channel_tflite(root: Path, trap: str = "per-channel-imx8mp") -> Any:
    return _quantized(root, f"keras-pc-{trap}", lambda r: keras_small(r, trap), "a8w8_pc")


def trap_per_channel_imx8mp(root: Path) -> Findings:
    import workbench as wb
    q = _per_channel_tflite(root)
    return findings_for(wb.analyze_placement(q.path, "imx8mp"), target="imx8mp")


def trap_int16_on_8bit(root: Path) -> Findings:
    import workbench as wb
    q = _quantized(root, "keras-16x8", lambda r: keras_small(r, "int16-on-8bit"), "a16w8_pc")
    return findings_for(wb.analyze_placement(q.path, "imx8mp"), target="imx8mp")


def trap_cpu_island(root: Path) -> Findings:
    import workbench as wb
    q = tflite_sin_int8(root, "cpu-island")
    return findings_for(wb.analyze_placement(q.path, "imx95"), target="imx95")


def trap_bsp_compiler(root: Path) -> Findings:
    """The trap's Keras CNN quantized a8w8_pc (per-channel weights in its FULLY_CONNECTED too) and placed on imx93
    by the real placement stage: Vela 3.10.0, the BSP's compiler (its pinned tool environment), supports per-axis
    quantization on convolutions only and leaves the FULLY_CONNECTED on the CPU; Vela 5.2 (installed, the newest)
    places it on the NPU.  The finding is read from the comparison the stage records."""
    import workbench as wb
    q = _per_channel_tflite(root, "bsp-compiler")
    return findings_for(wb.analyze_placement(q.path, "imx93"), target="imx93")


# -- calibration -----------------------------------------------------------------------------------------
def small_dataset(*, pool_conditions: dict[str, int], test_conditions: tuple[str, ...] = ("day", "night"),
                  n_test: int = 20) -> Any:
    """A synthetic dataset: a calibration pool with the given counts per condition and a test split."""
    from workbench.data.dataset import Dataset
    rng = np.random.default_rng(0)
    rows = []
    for cond, k in pool_conditions.items():
        rows += [("calibration", cond, f"cal-{cond}-{i}") for i in range(k)]
    for cond in test_conditions:
        rows += [("test", cond, f"test-{cond}-{i}") for i in range(n_test)]
    n = len(rows)
    return Dataset(name="trap-data", x=rng.random((n, H, W, 1)).astype(np.float32), y=np.arange(n) % 2,
                   condition=np.array([r[1] for r in rows]), split=np.array([r[0] for r in rows]),
                   ids=np.array([r[2] for r in rows]), classes=("0", "1"), source="trap zoo")


def _calibration_set(data: Any, ids: list[str]) -> Any:
    from collections import Counter

    from workbench.calibration.curate import CalibrationSet
    cond = dict(zip(data.ids.tolist(), data.condition.tolist()))
    counts = Counter(cond[i] for i in ids)
    return CalibrationSet(sample_ids=tuple(ids), strategy="random", seed=0, n=len(ids), dataset=data.name,
                          dataset_hash=data.hash, pool="calibration", conditions=dict(counts), classes={},
                          pool_conditions=data.counts().get("calibration", {}),
                          target_shares={c: 1 / len(data.conditions) for c in data.conditions})


def trap_condition_missing(root: Path) -> Findings:
    import warnings

    import workbench as wb
    data = small_dataset(pool_conditions={"day": 240})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = wb.curate_calibration_set(data, 200, strategy="random", condition_weights={"day": 0.7, "night": 0.3})
    return findings_for(cal, dataset=data)


def trap_condition_under_represented(root: Path) -> Findings:
    import warnings

    import workbench as wb
    data = small_dataset(pool_conditions={"day": 380, "night": 20})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = wb.curate_calibration_set(data, 200, strategy="random")
    return findings_for(cal, dataset=data)


def trap_calibration_too_small(root: Path) -> Findings:
    import warnings

    import workbench as wb
    data = small_dataset(pool_conditions={"day": 100, "night": 100})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = wb.curate_calibration_set(data, 60, strategy="stratified")
    return findings_for(cal, dataset=data)


def trap_calibration_test_ids(root: Path) -> Findings:
    data = small_dataset(pool_conditions={"day": 200, "night": 200})
    ids = [f"cal-day-{i}" for i in range(100)] + [f"cal-night-{i}" for i in range(95)] + \
          [f"test-night-{i}" for i in range(5)]
    return findings_for(_calibration_set(data, ids), dataset=data)


def trap_calibration_duplicates(root: Path) -> Findings:
    data = small_dataset(pool_conditions={"day": 200, "night": 200})
    ids = [f"cal-day-{i}" for i in range(100)] + [f"cal-night-{i}" for i in range(97)] + ["cal-day-7"] * 3
    return findings_for(_calibration_set(data, ids), dataset=data)


def trap_calibration_hash_mismatch(root: Path) -> Findings:
    from workbench.calibration.findings import file_findings
    data = small_dataset(pool_conditions={"day": 200, "night": 200})
    cal = _calibration_set(data, [f"cal-day-{i}" for i in range(100)] + [f"cal-night-{i}" for i in range(100)])
    path = cal.save(root / "calibration.json")
    record = json.loads(path.read_text())
    record["sample_ids"][0] = "cal-night-150"          # hand-edited after curation
    path.write_text(json.dumps(record))
    return Findings(tuple(file_findings(path)))


def trap_clipping(root: Path) -> Findings:
    """Calibrated on dim images only; the deployment condition 'glare' is 4x brighter."""
    import warnings

    import workbench as wb
    from workbench.data.dataset import Dataset
    rng = np.random.default_rng(1)
    n_cal, n_test = 64, 32
    x = np.concatenate([rng.random((n_cal, H, W, 1)) * 0.2, rng.random((n_test, H, W, 1)) * 0.2,
                        np.clip(rng.random((n_test, H, W, 1)) * 1.0, 0, 1)]).astype(np.float32)
    cond = ["dim"] * (n_cal + n_test) + ["glare"] * n_test
    split = ["calibration"] * n_cal + ["test"] * (2 * n_test)
    data = Dataset(name="trap-glare", x=x, y=np.arange(len(x)) % 4, condition=np.array(cond),
                   split=np.array(split), ids=np.array([f"s{i}" for i in range(len(x))]),
                   classes=("0", "1", "2", "3"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = wb.curate_calibration_set(data, n_cal, strategy="random", condition_weights={"dim": 1.0})
        audit = wb.audit_coverage(keras_small(root), cal, dataset=data, cache=False)
    return findings_for(audit)


# -- timing and board (the timing stage on the loopback board) ---------------------------------------
def _timing(runs_us: list[float], **kw: Any) -> Any:
    from workbench.board.stats import still_falling, summarize_latencies
    from workbench.board.timing import TimingResult
    fields = {"model": "model.tflite", "model_sha256": "0" * 64, "runner": "benchmark_model", "where": "board evk",
                  "on_board": True, "n_warmup": kw.pop("n_warmup", 10), "n_runs": len(runs_us),
                  "latency_us": summarize_latencies(runs_us), "runs_us": tuple(runs_us), "board": "evk", "target": "imx8mp",
                  "still_falling": still_falling(runs_us)}
    fields.update(kw)
    return TimingResult(**fields)


def _steady(n: int, seed: int = 0) -> list[float]:
    return list(2500.0 + np.random.default_rng(seed).normal(0, 20, n))


def _warming_tflite(path: Path, *, slow_until: int | None = None, falling_until: int | None = None) -> None:
    """A float .tflite (1x256 -> 1x256) whose invocations really cost more at first: a counter in a resource
    variable (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE, kept between invokes as a model's state is) sets the
    trip count of a WHILE loop of 256x256 FULLY_CONNECTED + TANH, as a model that fills a cache on its first
    invocations does.  ``slow_until=K``: 100 trips while fewer than K invokes ran, then none (a step);
    ``falling_until=K``: K - (invokes so far) trips, down to none (a slope)."""
    import tensorflow as tf
    rng = np.random.default_rng(11 if slow_until is not None else 12)

    class Net(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.count = tf.Variable(0, dtype=tf.int32)
            self.w = tf.constant(rng.normal(0, 0.05, (256, 256)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([1, 256], tf.float32, name="x")])
        def __call__(self, x):
            if slow_until is not None:
                trips = tf.where(self.count < slow_until, 100, 0)
            else:
                trips = tf.maximum(int(falling_until or 0) - self.count, 0)
            self.count.assign_add(1)
            _, y = tf.while_loop(lambda i, y: i < trips, lambda i, y: (i + 1, tf.tanh(tf.matmul(y, self.w))),
                                 (tf.constant(0), x))
            return {"y": tf.matmul(y, self.w)}

    net = Net()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([net.__call__.get_concrete_function()], net)
    converter.experimental_enable_resource_variables = True
    path.write_bytes(converter.convert())


def _time_on_loopback(root: Path, model: Path, **kw: Any) -> Any:
    """``model`` timed by the real timing stage (python runner) over SSH on the loopback board ``evk8mp``."""
    import tempfile

    import workbench as wb
    from tests.board.loopback import loopback_sshd
    with tempfile.TemporaryDirectory(prefix="board-", dir=root) as tmp, loopback_sshd(Path(tmp) / "sshd") as sshd:
        boards = _loopback_board(sshd, "evk8mp", target="imx8mp", folder=Path(tmp))
        return wb.time_on_board(model, board="evk8mp", boards_file=boards, **kw)


def cold_start_model(root: Path) -> Path:
    """The step model: its first 10 invokes run 100 FC+TANH trips (~0.3 ms here), the next ones none (~5 us)."""
    return _shared(root, "cold_start.tflite", lambda p: _warming_tflite(p, slow_until=10))


def trap_cold_start(root: Path, warmup: int = 5) -> Findings:
    """The step model timed by the real timing stage on the loopback board with 5 warm-up invokes: the runner keeps
    the first invoke apart, but invokes 7 to 10 (timed runs #0-#3) still pay the start-up work; the rule reads the
    stage's own runs.  With ``warmup=10`` the timed runs start after it (the clean variant)."""
    timing = _time_on_loopback(root, cold_start_model(root), runs=200, warmup=warmup)
    return findings_for(timing, target="imx8mp")


def still_falling_model(root: Path) -> Path:
    """The slope model: invoke k runs 300 - k FC+TANH trips (~1 ms down to ~0.3 ms over 200 timed runs)."""
    return _shared(root, "still_falling.tflite", lambda p: _warming_tflite(p, falling_until=300))


def trap_still_falling(root: Path) -> Findings:
    """The slope model timed 200 times after 1 warm-up invoke by the real timing stage on the loopback board: every
    timed run is cheaper than the one before, so the stage's own ``still_falling`` check flags the runs."""
    timing = _time_on_loopback(root, still_falling_model(root), runs=200, warmup=1)
    return findings_for(timing, target="imx8mp")


def trap_too_few_runs(root: Path) -> Findings:
    """The trap's Keras CNN, a8w8_pt, timed 20 times by the real timing stage (python runner) over SSH on the
    loopback board: the p99 the stage states is one of 20 runs."""
    import tempfile

    import workbench as wb
    from tests.board.loopback import loopback_sshd
    q = _quantized(root, "keras-pt-too-few-runs", lambda r: keras_small(r, "too-few-runs"), "a8w8_pt")
    with tempfile.TemporaryDirectory(prefix="board-", dir=root) as tmp, loopback_sshd(Path(tmp) / "sshd") as sshd:
        boards = _loopback_board(sshd, "evk8mp", target="imx8mp", folder=Path(tmp))
        timing = wb.time_on_board(q.path, board="evk8mp", boards_file=boards, runs=20, warmup=5)
    return findings_for(timing, target="imx8mp")


def _loopback_board(sshd: Any, name: str, *, target: str, folder: Path, replay: str | None = None,
                    kernels: str = "default") -> Path:
    """``boards.yaml`` naming the loopback sshd as board ``name`` (this machine over SSH, its Python); with
    ``replay``, its ``benchmark_model`` is the TEST DOUBLE replaying that recorded log of ``tests/board/fixtures``
    and its delegate a file posing as one (the double ignores it)."""
    import sys

    import yaml

    from tests.board.loopback import FIXTURES, upload_fake_benchmark_model
    from workbench.board.ssh import SSHTransport
    entry: dict[str, Any] = {"destination": "board", "target": target, "ssh_config": str(sshd.root / "ssh_config"),
                             "workdir": str(folder / "workdir"), "python": sys.executable, "kernels": kernels}
    if replay:
        double = upload_fake_benchmark_model(SSHTransport("board", ssh_config=entry["ssh_config"]),
                                             str(folder / "bin"), (FIXTURES / replay).read_bytes())
        entry.update(benchmark_model=double.binary, delegate=double.delegate)
    path = folder / "boards.yaml"
    path.write_text(yaml.safe_dump({"boards": {name: entry}}))
    return path


def trap_board_placement_mismatch(root: Path) -> Findings:
    """The trap's Keras CNN, a8w8_pt, placed on imx8mp by the real rules (every op on the NPU), then timed by the
    real timing stage on a loopback "board" over SSH whose ``benchmark_model`` is the TEST DOUBLE replaying A2, a
    recorded i.MX 8M Plus VX-delegate run with op profiling in which one op ran outside the delegate kernel.  The
    stage parses the op profile against the model's own op count; the rule compares that with the placement."""
    import tempfile

    import workbench as wb
    from tests.board.loopback import loopback_sshd
    q = _quantized(root, "keras-pt-board-placement-mismatch", lambda r: keras_small(r, "board-placement-mismatch"),
                   "a8w8_pt")
    placement = wb.analyze_placement(q.path, "imx8mp")
    with tempfile.TemporaryDirectory(prefix="board-", dir=root) as tmp, loopback_sshd(Path(tmp) / "sshd") as sshd:
        boards = _loopback_board(sshd, "evk8mp", target="imx8mp", folder=Path(tmp), replay="A2.log")
        timing = wb.time_on_board(q.path, board="evk8mp", boards_file=boards, runner="benchmark_model", runs=50,
                                  warmup=1, placement=placement)
    return findings_for(timing, target="imx8mp", placement=placement)


def _low_margin_keras(path: Path, seed: int = 40) -> None:
    """A 10-class Keras CNN (conv -> depthwise relu6 -> average pool -> 1x1 conv hard_swish -> mean -> dense, no
    bias): on dim images its features are small, so the top two class scores lie about one INT8 step apart."""
    import keras
    keras.utils.set_random_seed(seed)
    inp = keras.Input((H, W, 1), batch_size=1, name="image")
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    x = keras.layers.DepthwiseConv2D(3, padding="same", activation="relu6")(x)
    x = keras.layers.AveragePooling2D(2)(x)
    x = keras.layers.Conv2D(8, 1, activation="hard_swish")(x)
    dense = keras.layers.Dense(10, use_bias=False)
    model = keras.Model(inp, dense(keras.layers.GlobalAveragePooling2D()(x)))
    dense.set_weights([np.random.default_rng(seed).normal(0, 0.5, (8, 10)).astype(np.float32)])
    path.mkdir()
    model.save(path / "model.keras")


def low_light_dataset(n_cal: int = 80, n_test: int = 200, dim: float = 0.05) -> Any:
    """Images in [0, 1] ("daylight") and in [0, ``dim``] ("low-light"), both in the calibration pool."""
    from workbench.data.dataset import Dataset
    rng = np.random.default_rng(6)
    x = np.concatenate([rng.random((n_cal, H, W, 1)), rng.random((n_cal, H, W, 1)) * dim,
                        rng.random((n_test, H, W, 1)), rng.random((n_test, H, W, 1)) * dim]).astype(np.float32)
    cond = np.array((["daylight"] * n_cal + ["low-light"] * n_cal) + (["daylight"] * n_test + ["low-light"] * n_test))
    split = np.array(["calibration"] * (2 * n_cal) + ["test"] * (2 * n_test))
    return Dataset(name="trap-low-light", x=x, y=np.arange(len(x)) % 10, condition=cond, split=split,
                   ids=np.array([f"s{i}" for i in range(len(x))]), classes=tuple(str(c) for c in range(10)),
                   source="trap zoo: uniform images, dimmed 20x under low-light")


def trap_board_int8_disagreement(root: Path) -> Findings:
    """The low-margin CNN, a8w8_pc, timed with three-way accuracy by the real timing stage over SSH on a loopback
    board whose runtime uses TFLite's reference kernels (``kernels: reference`` in its boards.yaml) while the host
    runs the default ones (XNNPACK): under low-light the top-two margin is ~1 INT8 step and the kernels' rounding
    flips the top-1 class; the stage scores the board's own outputs against the host's."""
    import tempfile

    import workbench as wb
    from tests.board.loopback import loopback_sshd
    data = low_light_dataset()
    model = _shared(root, "low_margin_keras", _low_margin_keras) / "model.keras"
    q = quantize(model, "a8w8_pc", data.select(split="calibration"), dataset=data,
                 output=root / "_shared" / "q-board-int8-disagreement")
    accuracy = {"dataset": data, "int8_model": str(q.path), "fp32_model": str(model), "samples": 200}
    with tempfile.TemporaryDirectory(prefix="board-", dir=root) as tmp, loopback_sshd(Path(tmp) / "sshd") as sshd:
        boards = _loopback_board(sshd, "evk93", target="imx93", folder=Path(tmp), kernels="reference")
        timing = wb.time_on_board(q.path, board="evk93", boards_file=boards, runs=100, warmup=10, accuracy=accuracy)
    return findings_for(timing, target="imx93")


# -- deployment ---------------------------------------------------------------------------------------------
def _onnx_clean(root: Path, trap: str | None = None) -> Path:
    """The small ONNX CNN, nothing wrong with it: the clean model's (seed 0) or ``trap``'s own (its seed)."""
    seed = MODEL_SEEDS[trap] if trap else 0
    return _shared(root, "clean.onnx" if not seed else f"clean_{seed}.onnx", lambda p: _onnx_model(p, seed=seed))


def _clean_onnx_quantized(root: Path, name: str, trap: str | None = None) -> Any:
    return quantize(_onnx_clean(root, trap), "a8w8_pc", _nchw_calibration(), backend="onnx", output=root / name)


def trap_manifest_sha_mismatch(root: Path) -> Findings:
    q = _clean_onnx_quantized(root, "deployed", "manifest-sha-mismatch")
    other = quantize(_onnx_clean(root, "manifest-sha-mismatch"), "a8w8_pt", _nchw_calibration(),
                     backend="onnx", output=root / "other")
    shutil.copyfile(other.path, q.path)   # the file on the device is not the one the manifest describes
    return findings_for(q, target="imx93")


def trap_toolchain_drift(root: Path) -> Findings:
    q = _clean_onnx_quantized(root, "drift", "toolchain-drift")
    manifest = json.loads(Path(q.manifest_path).read_text())
    manifest["toolchain"]["onnxruntime"] = "1.16.3"
    Path(q.manifest_path).write_text(json.dumps(manifest))
    return findings_for(q, target="imx93")


def trap_input_contract(root: Path) -> Findings:
    """A model fed images of the wrong polarity (white ink on black; trained on dark ink on bright
    paper): every pixel is in range, so no contract check refuses it, but FP32 falls to chance."""
    import workbench as wb
    from workbench.data.dataset import Dataset
    ref = wb.reference_model()
    data = wb.load_dataset("digits-conditions").select(split="test", condition=("daylight", "low-light"))
    wrong = Dataset(name="digits-inverted", x=1.0 - data.x, y=data.y, condition=data.condition, split=data.split,
                    ids=data.ids, classes=data.classes, source="the test split, inverted")
    report = wb.compare_accuracy(ref.tflite, [ref.tflite], wrong, names=["int8"], n_bootstrap=100, cache=False)
    return findings_for(report)


def _bgr_model(path: Path) -> None:
    """The reference CNN behind a fixed 1x1 convolution that reads channel 2 of an RGB-shaped input: a model
    "trained on BGR" (channel 2 is red).  Its card says rgb: the wrong card."""
    import keras

    import workbench as wb
    ref = keras.models.load_model(wb.reference_model().keras, compile=False)
    h, w = ref.input_shape[1:3]
    inp = keras.Input((h, w, 3), batch_size=1, name="image")
    pick = keras.layers.Conv2D(1, 1, use_bias=False, trainable=False, name="pick_channel_2")
    out = ref(pick(inp))
    pick.set_weights([np.array([0.0, 0.0, 1.0], np.float32).reshape(1, 1, 3, 1)])
    path.mkdir()
    keras.Model(inp, out).save(path / "bgr.keras")
    (path / "bgr.card.yaml").write_text("color: rgb\nrange: [0, 1]\nresize: stretch\n")


def bgr_dataset() -> Any:
    """RGB digits: grey on daylight (R = G = B, so channel order does not matter there) and a blue-less
    'tinted' condition (the low-light test images in red and green, blue flat): only the channel order
    tells the two cards apart, and only off daylight."""
    import workbench as wb
    from workbench.data.dataset import Dataset
    data = wb.load_dataset("digits-conditions").select(split="test", condition=("daylight", "low-light"))
    grey = data.x if data.x.shape[-1] == 1 else data.x.mean(axis=-1, keepdims=True)
    x = np.repeat(grey, 3, axis=-1).astype(np.float32)
    tinted = data.condition == "low-light"
    x[tinted, ..., 2] = 0.5
    cond = np.where(tinted, "tinted", data.condition)
    return Dataset(name="digits-bgr", x=x, y=data.y, condition=cond, split=data.split, ids=data.ids,
                   classes=data.classes, source="the test split in RGB, blue flat under 'tinted'")


def trap_wrong_card_bgr(root: Path) -> Findings:
    """A model trained on BGR with a card saying RGB: fine on daylight (grey), wrong under 'tinted' where a
    daylight-only guard would see a "quantization drop".  The real accuracy stage, FP32 against FP32."""
    import workbench as wb
    folder = _shared(root, "bgr_model", _bgr_model)
    model = folder / "bgr.keras"
    report = wb.compare_accuracy(str(model), [str(model)], bgr_dataset(), names=["int8"], n_bootstrap=100)
    return findings_for(report, target="imx93")


def trap_unreadable_record(root: Path) -> Findings:
    """A run folder whose timing record was cut short (a full disk, a killed copy): read from its batch --out
    folder, the gap is an error finding, not a silent absence."""
    from workbench.findings import run_findings
    from workbench.runs import RunFolder
    out = root / "unreadable-out"
    shutil.rmtree(out, ignore_errors=True)
    folder = RunFolder(out / "runs" / "r1", target="imx8mp", dataset="trap-data")
    path = folder.save("timing", _timing(_steady(200)))
    path.write_text(path.read_text()[:300])
    return run_findings(out)


def _spread_reference(path: Path, spread: float = 1000.0) -> None:
    """The trained reference CNN with its first depthwise layer's output channels rescaled to span ``spread``
    (batch-norm gamma and beta times s_c) and the next 1x1 convolution's inputs divided by s_c: the same FP32
    function, whose depthwise channels (after folding) and activations differ ``spread``-fold in range."""
    import keras

    import workbench as wb
    model = keras.models.load_model(wb.reference_model().keras, compile=False)
    bn, pw = model.get_layer("dw1_bn"), model.get_layer("pw1")
    channels = bn.get_weights()[0].shape[0]
    s = np.geomspace(1.0, 1.0 / spread, channels).astype(np.float32)
    gamma, beta, mean, var = bn.get_weights()
    bn.set_weights([gamma * s, beta * s, mean, var])
    (kernel,) = pw.get_weights()
    pw.set_weights([kernel / s[None, None, :, None]])
    path.mkdir()
    model.save(path / "spread.keras")


def spread_reference(root: Path) -> Path:
    return _shared(root, "spread_reference", _spread_reference) / "spread.keras"


def trap_activation_spread(root: Path) -> Findings:
    """The 1000x spread CNN quantized a8w8_pc for imx93 from the default calibration set (stratified, 200),
    evaluated on every condition; the recipes that address the cause are tried on the spot."""
    import warnings

    import workbench as wb
    from workbench.evaluate.remedies import try_fixes
    model = spread_reference(root)
    data = wb.load_dataset("digits-conditions")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = wb.curate_calibration_set(data, 200, strategy="stratified")
        q = quantize(model, "a8w8_pc", cal, dataset=data)
        report = wb.compare_accuracy(str(model), {"a8w8_pc": q.path}, data, n_bootstrap=200)
        report = try_fixes(report, source_model=model, calibration=cal, dataset=data, recipe="a8w8_pc")
    return findings_for(report, target="imx93", quantized=q)


def leaky_dataset(n_pool: int = 300, n_exact: int = 60, n_near: int = 17, n_test: int = 200) -> Any:
    """A dataset whose calibration pool holds test images under new names: ``n_exact`` pixel copies and
    ``n_near`` copies re-encoded (+1.5/255: other 8-bit pixels, the same image at the model's input)."""
    from workbench.data.dataset import Dataset
    rng = np.random.default_rng(7)
    test = (rng.integers(0, 64, (n_test, H, W, 1)) / 63.0).astype(np.float32)
    pool = (rng.integers(0, 64, (n_pool, H, W, 1)) / 63.0).astype(np.float32)
    pool[:n_exact] = test[:n_exact]
    pool[n_exact:n_exact + n_near] = np.clip(test[n_exact:n_exact + n_near] + 1.5 / 255, 0, 1)
    x = np.concatenate([pool, test])
    conds = np.array(["day", "night"])[np.arange(len(x)) % 2]
    split = np.array(["calibration"] * n_pool + ["test"] * n_test)
    ids = np.array([f"img-{i:04d}" for i in range(len(x))])      # new names: no id says "test"
    return Dataset(name="leaky", x=x, y=np.arange(len(x)) % 2, condition=conds, split=split, ids=ids,
                   classes=("0", "1"), source="pool with renamed test images")


def trap_renamed_test_images(root: Path) -> Findings:
    """77 of 300 calibration images are test images under new names (60 exact, 17 re-encoded): the real
    curation draws them, the calibration rules find them by pixel hashes."""
    import warnings

    import workbench as wb
    data = leaky_dataset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = wb.curate_calibration_set(data, 300, strategy="stratified")
    return findings_for(cal, target="imx93", dataset=data)


# -- traps of the findings added with the test zoo, the conversion and the bisection ---------------------------
def _lowest_pad_int8(root: Path, trap: str) -> Path:
    """What onnx2tf made of MTCNN's ceil-mode max-pool: a PADV2 with float32's lowest value before a VALID pool,
    quantized by the real converter route (the engine itself refuses to publish it, so the trap keeps the bytes).
    Each trap has its own: weights and calibration images from ``trap``'s seed."""
    seed = MODEL_SEEDS[trap]

    def build(path: Path) -> None:
        import keras

        from tests.quantize.test_runtime_check import _lowest_pad_model
        from workbench.quantize.recipe import get_recipe
        from workbench.quantize.tflite_backend import quantize_tflite
        path.mkdir()
        keras.utils.set_random_seed(seed)
        model = _lowest_pad_model(path, pad_value=float(np.finfo(np.float32).min))
        x = np.random.default_rng(5 + seed).random((16, 24, 24, 3), dtype=np.float32)
        (path / "int8.tflite").write_bytes(quantize_tflite(model, "saved_model", get_recipe("a8w8_pc"), x))
    return _shared(root, f"lowest_pad_int8_{seed}", build) / "int8.tflite"


def trap_absurd_scale(root: Path) -> Findings:
    """The float32-lowest pad value sets an activation scale of ~1.3e36: found in the INT8 file itself."""
    from workbench.quantize.inspect import inspect_model
    return findings_for(inspect_model(_lowest_pad_int8(root, "absurd-scale")), target="imx93")


def trap_xnnpack_refused(root: Path) -> Findings:
    """Its own lowest-pad file loaded as a user's LiteRT would: XNNPACK refuses it, the builtin kernels run it."""
    from workbench.quantize.findings import runtime_findings
    from workbench.quantize.runtime_check import check_tflite
    path = _lowest_pad_int8(root, "xnnpack-refused")
    x = np.random.default_rng(6).random((8, 24, 24, 3), dtype=np.float32)
    return Findings(tuple(runtime_findings(check_tflite(path.read_bytes(), x), path.name, target="imx93")))


def _spiked_float_tflite(path: Path) -> None:
    import contextlib
    import io

    import keras
    import tensorflow as tf
    keras.utils.set_random_seed(7)
    inp = keras.Input((32, 32, 1), batch_size=1, name="image")
    h = keras.layers.Conv2D(4, 1, name="conv")(inp)
    model = keras.Model(inp, keras.layers.Dense(3)(keras.layers.GlobalAveragePooling2D()(h)))
    path.mkdir()
    with contextlib.redirect_stdout(io.StringIO()):
        (path / "float.tflite").write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())


def trap_range_outliers(root: Path) -> Findings:
    """A float .tflite whose calibration samples each carry one hot pixel: minmax ranges far beyond the
    data's 99.9th percentile (AI Edge Quantizer route)."""
    from workbench.quantize.findings import quantized_findings
    model = _shared(root, "spiked_float", _spiked_float_tflite) / "float.tflite"
    x = np.random.default_rng(8).random((60, 32, 32, 1), dtype=np.float32)
    x[:, 5, 7, 0] = 300.0
    q = quantize(model, "a8w8_pc", x, output=root / "_shared" / "q-range-outliers", cache=False)
    return Findings(tuple(quantized_findings(q)))


def trap_tensor_divergence(root: Path) -> Findings:
    """`workbench bisect` with this machine as the "board" running TFLite's reference kernels against the
    host's default kernels (XNNPACK): the first op whose codes differ while its inputs agree."""
    from workbench.board.divergence import BoardRunner, bisect
    from workbench.board.session import TimingOptions, _open_session
    q = _quantized(root, "divergence", lambda r: _shared(r, "divergence_keras", _divergence_keras) / "model.keras",
                   "a8w8_pc")
    session = _open_session(board=None, boards_file=None, host=None, ssh_config=None, known_hosts=None,
                            local=True, options=TimingOptions())
    x = calibration_images(4, seed=9)
    from workbench.models.predict import quantize_input
    from workbench.models.tflite_graph import read_tflite
    info = read_tflite(q.path).input_tensors()[0]
    feeds = {"input_0": quantize_input(x, info.scales[0], info.zero_points[0], np.dtype(info.dtype.lower()))}
    return findings_for(bisect(q.path, feeds, BoardRunner(session, kernels="reference")), target="imx93")


def _divergence_keras(path: Path) -> None:
    import keras
    keras.utils.set_random_seed(10)
    inp = keras.Input((H, W, 1), batch_size=1, name="image")
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    x = keras.layers.DepthwiseConv2D(3, padding="same", activation="relu6")(x)
    x = keras.layers.AveragePooling2D(2)(x)
    x = keras.layers.Conv2D(8, 1, activation="hard_swish")(x)
    out = keras.layers.Dense(4)(keras.layers.GlobalAveragePooling2D()(x))
    path.mkdir()
    keras.Model(inp, out).save(path / "model.keras")


# -- traps of the conversion's structure, output fidelity and the BSP compiler ---------------------------------
def _flatten_onnx(path: Path) -> None:
    """An ONNX Conv -> Relu -> Flatten -> MatMul (NCHW 1x1x8x8): flattening NCHW's order after onnx2tf's NHWC
    conversion needs a TRANSPOSE the source does not have."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(11)
    inits = [numpy_helper.from_array(rng.normal(0, 0.5, (4, 1, 3, 3)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.normal(0, 0.2, (4 * H * W, 5)).astype(np.float32), "fc")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
             helper.make_node("Flatten", ["r1"], ["f"], axis=1, name="flatten"),
             helper.make_node("MatMul", ["f", "fc"], ["y"], name="fc")]
    graph = helper.make_graph(nodes, "flatten", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, H, W])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


def trap_added_ops(root: Path) -> Findings:
    """The NCHW-flatten ONNX model quantized by the TFLite route (onnx2tf, NHWC): the TRANSPOSE the conversion
    added runs on imx93's CPU (the structural diff in the manifest says where it came from)."""
    import workbench as wb
    model = _shared(root, "flatten.onnx", _flatten_onnx)
    q = quantize(model, "a8w8_pc", calibration_images(seed=11), output=root / "_shared" / "q-added-ops")
    return findings_for(wb.analyze_placement(q.path, "imx93"), target="imx93")


def _strided_depthwise_onnx(path: Path) -> None:
    """An ONNX Conv -> Relu -> depthwise Conv (group == 8 channels, depth multiplier 2, strides 2x1 as
    PaddleOCR's): onnx2tf writes a depthwise Conv with unequal strides as a grouped CONV_2D, and the
    workbench's rewrite back to DEPTHWISE_CONV_2D takes depth multiplier 1 only."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(13)
    c = 8
    inits = [numpy_helper.from_array(rng.normal(0, 0.5, (c, 1, 3, 3)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.normal(0, 0.5, (2 * c, 1, 3, 3)).astype(np.float32), "dw")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
             helper.make_node("Conv", ["r1", "dw"], ["y"], pads=[1, 1, 1, 1], group=c, strides=[2, 1],
                              name="depthwise")]
    graph = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, H, W])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2 * c, H // 2, W])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


def trap_depthwise_lost(root: Path) -> Findings:
    """The 2x1-strided depthwise ONNX model (depth multiplier 2) quantized by the TFLite route (onnx2tf): its
    depthwise convolution is no DEPTHWISE_CONV_2D in the INT8 file (the quantize result's structural diff)."""
    model = _shared(root, "strided_depthwise.onnx", _strided_depthwise_onnx)
    return findings_for(quantize(model, "a8w8_pc", calibration_images(seed=13),
                                 output=root / "_shared" / "q-depthwise-lost"), target="imx93")


def trap_output_collapsed(root: Path) -> Findings:
    """Calibrated on dark images only (pixels up to 0.02) and evaluated on a bright condition (up to 1.0): the
    input scale clips every bright pixel, the INT8 output is mostly quantization error there."""
    import workbench as wb
    from workbench.data.dataset import Dataset
    rng = np.random.default_rng(12)
    n_cal, n_test = 64, 40
    x = np.concatenate([rng.random((n_cal, H, W, 1)) * 0.02, rng.random((n_test, H, W, 1)) * 0.02,
                        rng.random((n_test, H, W, 1))]).astype(np.float32)
    data = Dataset(name="trap-dark-calibration", x=x, y=np.arange(len(x)) % 4,
                   condition=np.array(["dark"] * (n_cal + n_test) + ["bright"] * n_test),
                   split=np.array(["calibration"] * n_cal + ["test"] * (2 * n_test)),
                   ids=np.array([f"s{i}" for i in range(len(x))]), classes=("0", "1", "2", "3"))
    model = keras_small(root, "output-collapsed")
    q = quantize(model, "a8w8_pc", data.select(split="calibration"), dataset=data,
                 output=root / "_shared" / "q-output-collapsed")
    report = wb.compare_accuracy(str(model), {"a8w8_pc": q.path}, data, n_bootstrap=100, cache=False)
    return findings_for(report, target="imx93")


def trap_compiler_crash(root: Path) -> Findings:
    """MediaPipe BlazeFace from the test zoo (fetched on first use), quantized a8w8_pc: Vela 3.10.0, the
    compiler of imx93's BSP, asserts inside its graph rewrite (no small model found that does this)."""
    import workbench as wb
    from tests.zoo.fetch import fetch
    zoo = fetch("blazeface")
    data = wb.load_dataset(zoo.data)
    q = quantize(zoo.model, "a8w8_pc", data.select(split="calibration"), dataset=data,
                 output=root / "_shared" / "q-compiler-crash")
    return findings_for(wb.analyze_placement(q.path, "imx93"), target="imx93")


#: trap name -> (the finding code it must raise, the builder)
TRAPS: dict[str, tuple[str, Callable[[Path], Findings]]] = {
    "tflite-float-op": ("quantize.float-op-left", trap_tflite_float_op),
    "tflite-qdq-inside": ("quantize.qdq-inside", trap_tflite_qdq_inside),
    "onnx-qdq-float-op": ("quantize.float-op-left", trap_onnx_qdq_float_op),
    "per-tensor-collapse": ("quantize.per-tensor-collapse", trap_per_tensor_collapse),
    "per-channel-imx8mp": ("placement.per-channel-slow", trap_per_channel_imx8mp),
    "int16-on-8bit": ("placement.int16-activations", trap_int16_on_8bit),
    "cpu-island": ("placement.cpu-island", trap_cpu_island),
    "bsp-compiler": ("placement.bsp-compiler-cpu", trap_bsp_compiler),
    "condition-missing": ("calibration.condition-missing", trap_condition_missing),
    "condition-under-represented": ("calibration.condition-under-represented", trap_condition_under_represented),
    "calibration-too-small": ("calibration.too-small", trap_calibration_too_small),
    "calibration-test-ids": ("calibration.test-ids", trap_calibration_test_ids),
    "calibration-duplicates": ("calibration.duplicates", trap_calibration_duplicates),
    "calibration-hash-mismatch": ("calibration.hash-mismatch", trap_calibration_hash_mismatch),
    "clipping": ("calibration.clipping", trap_clipping),
    "cold-start": ("timing.cold-start-in-steady-state", trap_cold_start),
    "still-falling": ("timing.still-falling", trap_still_falling),
    "too-few-runs": ("timing.too-few-runs", trap_too_few_runs),
    "dynamic-batch": ("model.dynamic-batch", trap_dynamic_batch),
    "input-contract": ("model.input-contract", trap_input_contract),
    "wrong-card-bgr": ("model.input-contract", trap_wrong_card_bgr),
    "unreadable-record": ("run.unreadable-record", trap_unreadable_record),
    "activation-spread": ("accuracy.drop", trap_activation_spread),
    "renamed-test-images": ("calibration.test-content", trap_renamed_test_images),
    "manifest-sha-mismatch": ("deploy.manifest-sha-mismatch", trap_manifest_sha_mismatch),
    "toolchain-drift": ("deploy.toolchain-drift", trap_toolchain_drift),
    "board-placement-mismatch": ("board.placement-mismatch", trap_board_placement_mismatch),
    "board-int8-disagreement": ("board.int8-disagreement", trap_board_int8_disagreement),
    "absurd-scale": ("quantize.absurd-scale", trap_absurd_scale),
    "xnnpack-refused": ("quantize.xnnpack-refused", trap_xnnpack_refused),
    "range-outliers": ("quantize.range-outliers", trap_range_outliers),
    "tensor-divergence": ("board.tensor-divergence", trap_tensor_divergence),
    "added-ops": ("convert.added-ops", trap_added_ops),
    "depthwise-lost": ("convert.depthwise-lost", trap_depthwise_lost),
    "output-collapsed": ("accuracy.output-collapsed", trap_output_collapsed),
    "compiler-crash": ("placement.compiler-crash", trap_compiler_crash),
}


def clean_onnx(root: Path) -> Findings:
    """A clean small ONNX model, per-channel: nothing of severity warning or above."""
    return findings_for(_clean_onnx_quantized(root, "clean"), target="imx93")


def clean_reference(target: str) -> Findings:
    """The built-in reference model with its target's default recipe and the default calibration set
    (stratified, 200): calibration, quantize and placement findings."""
    import warnings

    import workbench as wb
    from workbench.findings import collect
    from workbench.runs import default_recipe
    data = wb.load_dataset("digits-conditions")
    ref = wb.reference_model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = wb.curate_calibration_set(data, 200, strategy="stratified")
        q = quantize(ref.keras, default_recipe(target), cal, dataset=data)
        placement = wb.analyze_placement(q.path, target)
        accuracy = wb.compare_accuracy(ref.tflite, [q.path], data)
    return collect(findings_for(cal, target=target, dataset=data), findings_for(q, target=target),
                   findings_for(placement, target=target), findings_for(accuracy, target=target))


def clean_reference_timing(target: str) -> Findings:
    """The reference model's INT8 file timed on the host CPU (the runner's defaults): timing findings."""
    import warnings

    import workbench as wb
    from workbench.runs import default_recipe
    data = wb.load_dataset("digits-conditions")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = wb.curate_calibration_set(data, 200, strategy="stratified")
        q = quantize(wb.reference_model().keras, default_recipe(target), cal, dataset=data)
        timing = wb.time_on_board(q.path, local=True)
    return findings_for(timing, target=target)
