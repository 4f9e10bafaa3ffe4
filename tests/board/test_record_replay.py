"""Record a board session, replay it without a board; labels say what a latency is;
placement cross-check by op; three-way accuracy through the loopback board."""

from __future__ import annotations

import json
import shutil
import types
import warnings

import numpy as np
import pytest

from workbench.board.accuracy import AccuracySettings, BoardAccuracy, compare
from workbench.board.parse import read_benchmark_log
from workbench.board.record import MANIFEST, OUTPUT, load_recording
from workbench.board.timing import TimingResult, placement_mismatches, time_on_board
from workbench.errors import BoardError, WorkbenchWarning

from .conftest import FIXTURES, upload_fake_benchmark_model


@pytest.fixture(scope="module")
def recorded(remote, tiny_models, tmp_path_factory):
    folder = tmp_path_factory.mktemp("rec") / "session"
    live = time_on_board(tiny_models["int8"], runs=12, warmup=2, record=folder, **remote)
    return live, folder


def test_record_keeps_raw_output_fingerprint_and_sha(recorded, remote, tiny_models):
    live, folder = recorded
    rec, stdout, acc = load_recording(folder)
    assert rec.model_sha256 == live.model_sha256 and rec.model_name == "tiny_int8.tflite"
    assert rec.runner == "python" and rec.board == "board" and acc is None
    assert json.loads(stdout.strip().splitlines()[-1])["runs_us"] == list(live.runs_us)
    assert rec.fingerprint == live.fingerprint and rec.fingerprint.kernel
    assert "recorded to session/" in live.notes[-1]
    # nothing recorded is overwritten
    with pytest.raises(BoardError, match="already holds a board recording"):
        time_on_board(tiny_models["int8"], runs=2, warmup=0, record=folder, **remote)


def test_replay_rebuilds_the_same_numbers_labelled_replayed(recorded, tiny_models):
    live, folder = recorded
    again = time_on_board(tiny_models["int8"], replay=folder)
    assert again.latency_kind == "replayed"
    assert again.latency_label.startswith(f"replayed from board {live.measured_at[:10]}")
    assert "CPU only (no delegate)" in again.latency_label
    assert again.latency_us == live.latency_us and again.runs_us == live.runs_us
    assert again.measured_at == live.measured_at and again.replayed_from == "session"
    assert again.fingerprint == live.fingerprint
    assert TimingResult.from_dict(json.loads(again.to_json())) == again
    assert "REPLAYED FROM BOARD" in again._repr_html_()


def test_replay_refuses_another_model(recorded, tiny_models):
    _, folder = recorded
    with pytest.raises(BoardError, match="was made with model tiny_int8.tflite"):
        time_on_board(tiny_models["fp32"], replay=folder)


def test_replay_refuses_a_folder_that_is_not_a_recording(tmp_path, tiny_models):
    with pytest.raises(BoardError, match="is not a board recording"):
        time_on_board(tiny_models["int8"], replay=tmp_path)
    (tmp_path / MANIFEST).write_text('{"format": "something else"}')
    with pytest.raises(BoardError, match="not a readable board recording"):
        time_on_board(tiny_models["int8"], replay=tmp_path)


def test_replay_of_a_damaged_output_is_an_error(recorded, tiny_models, tmp_path):
    _, folder = recorded
    copy = tmp_path / "damaged"
    shutil.copytree(folder, copy)
    (copy / OUTPUT).write_text((copy / OUTPUT).read_text()[:40])
    with pytest.raises(BoardError, match="runner_output.txt changed after it was recorded"):
        time_on_board(tiny_models["int8"], replay=copy)
    _reseal(copy)          # damaged and sealed again (by hand): the parser still refuses it
    with pytest.raises(BoardError, match="printed no result"):
        time_on_board(tiny_models["int8"], replay=copy)


def _reseal(folder):
    from workbench._io import sha256_file
    from workbench.board.record import FILES, SUMS
    (folder / SUMS).write_text("".join(f"{sha256_file(folder / n)}  {n}\n" for n in FILES if (folder / n).is_file()))


def test_cli_record_and_replay(remote, tiny_models, tmp_path, capsys):
    from workbench.cli import main
    folder = tmp_path / "cli-rec"
    assert main(["bench", str(tiny_models["int8"]), "--host", "board", "--ssh-config",
                 str(remote["ssh_config"]), "--python", remote["python"], "--workdir",
                 remote["workdir"], "--runs", "5", "--warmup", "1", "--record", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "[board board CPU only (no delegate)]" in out and (folder / MANIFEST).is_file()
    assert main(["bench", str(tiny_models["int8"]), "--replay", str(folder), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["latency_kind"] == "replayed" and data["replayed_from"] == "cli-rec"
    assert main(["bench", str(tiny_models["fp32"]), "--replay", str(folder)]) == 2
    assert "was made with model" in capsys.readouterr().err


def test_cli_refuses_a_negative_timeout(tiny_models, capsys):
    from workbench.cli import main
    with pytest.raises(SystemExit) as info:
        main(["bench", str(tiny_models["int8"]), "--local", "--timeout", "-5"])
    assert info.value.code == 2
    assert "finite number of seconds > 0" in capsys.readouterr().err


# --- benchmark_model sessions: labels, ignored delegate, op-level cross-check -----------------
def test_benchmark_model_record_and_replay(remote, tiny_models, fake_board, tmp_path):
    args = {k: v for k, v in remote.items() if k != "python"}
    folder = tmp_path / "bm"
    live = time_on_board(tiny_models["int8"], runner="benchmark_model",
                         benchmark_model=fake_board.binary, delegate=fake_board.delegate,
                         runs=5, warmup=1, record=folder, **args)
    assert live.latency_label == "board board via libfake_delegate.so"
    assert (folder / OUTPUT).read_text() == (FIXTURES / "A2.log").read_text()
    again = time_on_board(tiny_models["int8"], replay=folder)
    assert again.log == live.log and again.latency_us == live.latency_us
    assert again.latency_label.endswith("(board board via libfake_delegate.so)")


def test_unconsumed_delegate_flag_is_labelled_cpu_only(remote, tiny_models, fake_board):
    # sample B4 (a CPU-only run) behind benchmark_model's warning for an unknown delegate flag
    body = (FIXTURES / "B4.log").read_text().splitlines()
    folder = f"{fake_board.folder}/b4"
    text = "\n".join(body[:2] + ["   INFO: Unconsumed cmdline flags: "
                                 f"--external_delegate_path={folder}/libfake_delegate.so"] + body[2:])
    double = upload_fake_benchmark_model(fake_board.transport, folder, text.encode())
    args = {k: v for k, v in remote.items() if k != "python"}
    with pytest.warns(WorkbenchWarning, match="did not consume --external_delegate_path"):
        r = time_on_board(tiny_models["int8"], runner="benchmark_model", benchmark_model=double.binary,
                          delegate=double.delegate, runs=50, warmup=1, fingerprint=False, **args)
    assert r.latency_kind == "board-cpu"
    assert r.latency_label == "board board CPU only (no delegate)"
    assert r.log.ignored_delegate == double.delegate
    assert any("NOT applied" in n for n in r.notes)


def test_placement_mismatches_from_the_op_profile():
    a2 = read_benchmark_log(str(FIXTURES / "A2.log"))  # TFLite_Detection_PostProcess on the CPU
    op = types.SimpleNamespace
    predicted_all_npu = op(npu_ops=3, cpu_ops=0, ops=(
        op(type="CONV_2D", placement="NPU"), op(type="CONV_2D", placement="NPU"),
        op(type="TFLite_Detection_PostProcess", placement="NPU")))
    with pytest.warns(WorkbenchWarning, match="placed ops otherwise"):
        found = placement_mismatches(a2, predicted_all_npu)
    assert [(m.op, m.predicted, m.measured, m.count) for m in found] == \
        [("TFLite_Detection_PostProcess", "NPU", "CPU", 1)]
    predicted_cpu_conv = op(npu_ops=1, cpu_ops=2, ops=(
        op(type="CONV_2D", placement="CPU"), op(type="CONV_2D", placement="NPU"),
        op(type="TFLite_Detection_PostProcess", placement="CPU")))
    with pytest.warns(WorkbenchWarning):
        found = placement_mismatches(a2, predicted_cpu_conv)
    assert [(m.op, m.predicted, m.measured, m.count) for m in found] == [("CONV_2D", "CPU", "NPU", 1)]
    agreeing = op(npu_ops=1, cpu_ops=1, ops=(
        op(type="CONV_2D", placement="NPU"), op(type="TFLite_Detection_PostProcess", placement="CPU")))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert placement_mismatches(a2, agreeing) == ()
    # without an op profile nothing can be named
    assert placement_mismatches(read_benchmark_log(str(FIXTURES / "C1.log")), predicted_all_npu) == ()


def test_placement_mismatches_reach_the_timing_result(remote, tiny_models, fake_board):
    args = {k: v for k, v in remote.items() if k != "python"}
    op = types.SimpleNamespace
    from workbench.models.tflite_graph import read_tflite
    ops = read_tflite(tiny_models["int8"]).ops
    predicted = op(npu_ops=len(ops), cpu_ops=0, ops=tuple(op(type=o.type, placement="NPU") for o in ops)
                   + (op(type="TFLite_Detection_PostProcess", placement="NPU"),))
    with pytest.warns(WorkbenchWarning):
        r = time_on_board(tiny_models["int8"], runner="benchmark_model",
                          benchmark_model=fake_board.binary, delegate=fake_board.delegate, runs=5,
                          warmup=1, fingerprint=False, placement=predicted, **args)
    assert [m.op for m in r.placement_mismatches] == ["TFLite_Detection_PostProcess"]
    assert "placed otherwise than predicted" in r.summary()
    from workbench.findings import findings_for
    (f,) = findings_for(r, target="imx8mp", placement=predicted).with_code("board.placement-mismatch")
    assert [(o["op"], o["count"], o["predicted"], o["measured"]) for o in f.evidence["ops"]] == \
        [("TFLite_Detection_PostProcess", 1, "NPU", "CPU")]
    assert f.severity == "error" and "1x TFLite_Detection_PostProcess" in f.message
    assert TimingResult.from_dict(json.loads(r.to_json())) == r
    assert "ops the board placed otherwise" in r._repr_html_()


# --- three-way accuracy ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_dataset():
    from workbench.data.dataset import Dataset
    rng = np.random.default_rng(1)
    n = 24
    conds = np.array(["daylight", "low-light"] * (n // 2))
    return Dataset(name="tiny", x=rng.random((n, 16, 16, 3), dtype=np.float32),
                   y=rng.integers(0, 4, n), condition=conds, split=np.array(["test"] * n),
                   ids=np.array([f"s{i}" for i in range(n)]), classes=("a", "b", "c", "d"))


@pytest.mark.slow
def test_three_way_accuracy_through_the_loopback_board(remote, tiny_models, tiny_dataset, tmp_path):
    folder = tmp_path / "acc"
    r = time_on_board(tiny_models["int8"], runs=3, warmup=0, record=folder,
                      accuracy=dict(dataset=tiny_dataset, fp32_model=str(tiny_models["fp32"]),
                                    samples=5), **remote)
    acc = r.accuracy
    assert isinstance(acc, BoardAccuracy)
    assert [(row.condition, row.n) for row in acc.rows] == [("daylight", 5), ("low-light", 5)]
    for row in acc.rows:   # the loopback board runs the host's LiteRT: the same INT8 answers
        assert row.agreement == 1.0 and row.int8_board == row.int8_host and not row.flagged
        assert row.fp32_host is not None
    assert acc.where == "board board CPU only (no delegate)"
    assert "Three-way accuracy" in r._repr_html_() and "INT8 host" in r._repr_html_()
    assert TimingResult.from_dict(json.loads(r.to_json())) == r
    # the replay scores the recorded board outputs again; another sample is refused
    again = time_on_board(tiny_models["int8"], replay=folder,
                          accuracy=dict(dataset=tiny_dataset, fp32_model=str(tiny_models["fp32"]),
                                        samples=5))
    assert again.accuracy.rows == acc.rows
    with pytest.raises(BoardError, match="different accuracy sample"):
        time_on_board(tiny_models["int8"], replay=folder,
                      accuracy=dict(dataset=tiny_dataset, samples=4))


def test_disagreement_beyond_the_threshold_is_flagged():
    labels = np.array([0, 1, 2, 3])
    host = np.eye(4, dtype=np.float32)
    board = np.eye(4, dtype=np.float32)[[0, 1, 2, 0]]    # one of four answers differs
    host_data = {"labels": {"day": labels}, "int8_host": {"day": host}, "fp32_host": {},
                 "dataset": "x"}
    settings = AccuracySettings(dataset="x", min_agreement=0.9)
    with pytest.warns(WorkbenchWarning, match="disagree beyond the threshold"):
        acc = compare(host_data, {"outputs": {"day": board.tolist()}}, where="board b", settings=settings)
    row = acc.rows[0]
    assert (row.agreement, row.int8_host, row.int8_board, row.flagged) == (0.75, 1.0, 0.75, True)
    assert acc.flagged == ("day",) and "DISAGREEMENT below 90%" in acc.summary()
    with pytest.raises(BoardError, match="NaN or infinite"):
        compare(host_data, {"outputs": {"day": [[float("nan")] * 4] * 4}}, where="b", settings=settings)
    with pytest.raises(BoardError, match="`min_agreement` must be a finite number"):
        AccuracySettings(dataset="x", min_agreement=float("nan"))
    with pytest.raises(BoardError, match="`accuracy_samples` must be a positive integer"):
        AccuracySettings(dataset="x", samples=0)


# --- the committed recording: CI without a board gates on a replay ----------------------------
REPLAY = FIXTURES / "replay"


def test_committed_recording_replays_without_a_board():
    r = time_on_board(REPLAY / "tiny_int8.tflite", replay=REPLAY)   # a folder of recordings
    assert r.latency_kind == "replayed" and r.replayed_from == "loopback-python"
    assert r.latency_label == ("replayed from loopback-sshd 2026-12-01 "
                               "(board loopback-sshd CPU only (no delegate))")
    assert r.n_runs == 200 and r.latency_us.p50 > 0 and r.runtime.startswith("ai_edge_litert")
    assert r.on_board and r.fingerprint.os_release


def test_python_runner_output_with_a_non_finite_timing_is_refused():
    from workbench.board.runners import raw_from_python_output
    line = ('{"ok": true, "runtime": "ai_edge_litert 2.3.0", "cold_start_us": 10.0, '
            '"first_inference_us": 5.0, "warmup_us": [1.0], "runs_us": [1.0, NaN]}')
    with pytest.raises(BoardError, match="not a finite number"):
        raw_from_python_output(line, label="recording x")
    with pytest.raises(BoardError, match="lacks or garbles"):
        raw_from_python_output('{"ok": true, "runs_us": [1.0]}', label="recording x")
    ok = raw_from_python_output(line.replace("NaN", "2.0"), label="recording x")
    assert ok.runs_us == (1.0, 2.0) and ok.cold_start_us == 10.0
