"""time_on_board end to end: python runner over real ssh, local runner, benchmark_model double."""

from __future__ import annotations

import json
import types
import warnings

import numpy as np
import pytest

from workbench.board.parse import read_benchmark_log
from workbench.board.runners import find_benchmark_model, run_benchmark_model
from workbench.board.timing import HOST_CPU, TimingOptions, TimingResult, coverage_from_log, cross_check, time_on_board
from workbench.errors import BoardError, ModelError, WorkbenchWarning

from .conftest import FIXTURES, HOSTILE_NAME


@pytest.fixture(scope="module")
def ssh_result(remote, tiny_models):
    return time_on_board(tiny_models["hostile"], runs=20, warmup=3, **remote)


def test_python_runner_over_ssh_measures_real_invocations(ssh_result, tiny_models):
    r = ssh_result
    assert r.runner == "python" and r.on_board
    assert r.measured_on == r.latency_label == "board board CPU only (no delegate)"
    assert r.latency_kind == "board-cpu"
    assert r.where == "board over SSH, CPU only (no delegate)"
    assert r.n_runs == 20 and len(r.runs_us) == 20 and len(r.warmup_us) == 3
    assert r.cold_start_us > 0 and r.first_inference_us > 0
    runs = np.array(r.runs_us)
    assert r.latency_us.p50 == pytest.approx(np.percentile(runs, 50))
    assert r.latency_us.p99 == pytest.approx(np.percentile(runs, 99))
    assert r.latency is r.latency_us
    assert r.model.endswith(HOSTILE_NAME)
    assert r.runtime.startswith("ai_edge_litert")
    assert r.fingerprint.kernel
    assert r.coverage is None  # the python runner cannot see node counts


def test_result_round_trips_renders_and_plots(ssh_result):
    again = TimingResult.from_dict(json.loads(ssh_result.to_json()))
    assert again == ssh_result
    html = ssh_result._repr_html_()
    assert "BOARD BOARD CPU ONLY (NO DELEGATE)" in html and "data:image/png;base64" in html
    assert "my model;rm -rf ~.tflite" in html
    import matplotlib
    matplotlib.use("Agg")
    ax = ssh_result.plot()
    assert ax.get_ylabel() == "latency (ms)"
    assert any("warm-up" in t.get_text() for t in ax.get_legend().get_texts())


def test_local_runner_is_labelled_host_cpu(tiny_models):
    r = time_on_board(tiny_models["fp32"], local=True, runs=10, warmup=2)
    assert r.where == HOST_CPU and r.runner == "local" and not r.on_board
    assert r.measured_on == HOST_CPU and r.latency_kind == "host-cpu"
    assert "host CPU (not an NPU)" in r.summary() and "HOST CPU" in r._repr_html_()
    assert len(r.runs_us) == 10 and r.first_inference_us > 0


def test_board_from_inventory_and_cli_json(sshd, ssh_config, python_on_board, remote_workdir,
                                          tiny_models, tmp_path, capsys):
    inventory = tmp_path / "boards.yaml"
    inventory.write_text(
        "boards:\n  loop:\n"
        f"    destination: {sshd.destination}\n    target: imx8mp\n"
        f"    python: {python_on_board}\n    workdir: {remote_workdir}\n"
        f"    ssh_config: {ssh_config}\n")
    from workbench.cli import main
    code = main(["bench", str(tiny_models["int8"]), "--board", "loop", "--boards-file",
                 str(inventory), "--runs", "8", "--warmup", "1", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["runner"] == "python" and data["n_runs"] == 8
    assert data["where"] == "board loop (imx8mp), CPU only (no delegate)"
    assert set(data["latency_us"]) >= {"mean", "p50", "p90", "p99", "min", "max"}
    assert data["cold_start_us"] > 0 and data["first_inference_us"] > 0
    assert data["target"] == "imx8mp"
    assert data["latency_label"] == "board loop CPU only (no delegate)"


def test_cli_bench_host_and_local(sshd, ssh_config, python_on_board, remote_workdir, tiny_models,
                                  capsys):
    from workbench.cli import main
    assert main(["bench", str(tiny_models["int8"]), "--host", "board", "--ssh-config",
                 str(ssh_config), "--python", python_on_board, "--workdir", remote_workdir,
                 "--runs", "5", "--warmup", "1"]) == 0
    assert "python runner on board over SSH" in capsys.readouterr().out
    assert main(["bench", str(tiny_models["int8"]), "--local", "--runs", "5", "--warmup", "1",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["where"] == HOST_CPU


def test_missing_delegate_on_board(remote, tiny_models):
    with pytest.raises(BoardError, match="delegate library '/usr/lib/libvx_delegate_missing.so' is "
                                         "not an existing file"):
        time_on_board(tiny_models["int8"], delegate="/usr/lib/libvx_delegate_missing.so",
                      runs=2, warmup=0, **remote)


def test_unloadable_delegate_is_reported_by_the_runner(remote, tiny_models, fake_board):
    with pytest.raises(BoardError, match="failed at stage 'delegate': could not load delegate"):
        time_on_board(tiny_models["int8"], delegate=fake_board.delegate, runs=2, warmup=0, **remote)


def test_missing_remote_python_is_explained(remote, tiny_models):
    args = dict(remote, python="/nonexistent/python3")
    with pytest.raises(BoardError, match="may not exist there"):
        time_on_board(tiny_models["int8"], runs=2, warmup=0, **args)


def test_benchmark_model_runner_with_test_double(remote, tiny_models, fake_board):
    args = {k: v for k, v in remote.items() if k != "python"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", WorkbenchWarning)
        r = time_on_board(tiny_models["hostile"], runner="benchmark_model",
                          benchmark_model=fake_board.binary, delegate=fake_board.delegate,
                          runs=5, warmup=1, **args)
    stated = read_benchmark_log(str(FIXTURES / "A2.log"))
    assert r.runner == "benchmark_model" and r.log == stated
    assert r.latency_label == "board board via libfake_delegate.so" and r.latency_kind == "board"
    # the numbers the replayed log states, nothing invented
    assert r.latency_us.mean == stated.inference.avg and r.latency_us.n == stated.inference.count
    assert (r.latency_us.min, r.latency_us.max) == (stated.inference.min, stated.inference.max)
    assert r.latency_us.p90 is None and r.latency_us.p99 is None and r.runs_us == ()
    assert (r.cold_start_us, r.first_inference_us) == (stated.init_us, stated.first_inference_us)
    # coverage from the op profile against the model's own op count
    from workbench.models.tflite_graph import read_tflite
    total = len(read_tflite(tiny_models["int8"]).ops)
    assert r.coverage.source == "op profile"
    assert r.coverage.cpu_op_types == ("TFLite_Detection_PostProcess",)
    assert (r.coverage.npu_ops, r.coverage.total_ops) == (total - 1, total)
    # the command line the double received, argument by argument
    argv = fake_board.transport.run(["cat", f"{fake_board.folder}/last_argv"]).stdout.split("\0")[:-1]
    graph = [a for a in argv if a.startswith("--graph=")]
    assert len(graph) == 1 and graph[0].endswith("/" + HOSTILE_NAME)
    assert {"--num_runs=5", "--warmup_runs=1", "--use_xnnpack=false", "--enable_op_profiling=true",
            f"--external_delegate_path={fake_board.delegate}"} <= set(argv)
    # the placement hook: a prediction that puts 2 ops on the CPU disagrees with the board (1)
    with pytest.warns(WorkbenchWarning, match="disagrees with the board"):
        checked = time_on_board(tiny_models["hostile"], runner="benchmark_model",
                                benchmark_model=fake_board.binary, delegate=fake_board.delegate,
                                runs=5, warmup=1, fingerprint=False,
                                placement=types.SimpleNamespace(npu_ops=total - 2, cpu_ops=2),
                                **args)
    assert "placement prediction disagrees" in checked.notes[-1]
    assert checked.fingerprint is None
    plot_ax = r.plot()
    assert "aggregates" in plot_ax.texts[0].get_text()
    assert TimingResult.from_dict(r.to_dict()) == r


def test_benchmark_model_failure_surfaces_as_board_error(fake_board):
    with pytest.raises(BoardError, match="could not be opened"):
        run_benchmark_model(fake_board.transport, binary=fake_board.binary,
                            model_path="/nonexistent/model.tflite", runs=1, warmup=1)


def test_benchmark_model_autodetect_reports_where_it_looked(fake_board):
    with pytest.raises(BoardError, match=r"no benchmark_model found under /usr/bin/tensorflow-lite-\*"):
        find_benchmark_model(fake_board.transport)


@pytest.mark.parametrize("kwargs, phrase", [
    (dict(local=True, host="board"), "exactly one of `board`"),
    (dict(local=True, command_timeout=-5), "`command_timeout` must be a finite number of seconds > 0"),
    (dict(local=True, connect_timeout=float("nan")), "`connect_timeout` must be a finite number"),
    (dict(local=True, options=TimingOptions(), runs=3), "not both"),
    (dict(local=True, record="somewhere"), "`record` keeps a board session"),
    (dict(), "exactly one of `board`"),
    (dict(local=True, runner="tflite"), "`runner` must be one of 'python', 'benchmark_model'"),
    (dict(local=True, runs=0), "`runs` must be a positive integer"),
    (dict(local=True, warmup=-1), "`warmup` must be an integer >= 0"),
    (dict(local=True, runner="benchmark_model"), "needs a board"),
    (dict(local=True, delegate="/nonexistent/lib.so"), "does not exist on this machine"),
    (dict(local=True, kernels="fast"), "`kernels` must be one of 'default', 'optimized', 'reference'"),
])
def test_validation(tiny_models, kwargs, phrase):
    with pytest.raises(BoardError, match=phrase.replace("(", r"\(").replace("*", r"\*")):
        time_on_board(tiny_models["int8"], **kwargs)


def test_the_python_runner_is_told_the_kernels_and_the_label_says_so(tiny_models):
    from workbench.board.runners import python_argv
    argv = python_argv(python="python3", runner_path="r.py", model_path="m.tflite", runs=1, warmup=0,
                       inputs_path="in.npz", kernels="reference")
    assert argv[-2:] == ["--kernels", "reference"]
    assert "--kernels" not in python_argv(python="python3", runner_path="r.py", model_path="m.tflite", runs=1,
                                          warmup=0)
    r = time_on_board(tiny_models["int8"], local=True, runs=3, warmup=0, kernels="reference")
    assert r.where == f"{HOST_CPU}, reference kernels" and len(r.runs_us) == 3


def test_missing_model_file(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        time_on_board(tmp_path / "none.tflite", local=True)


def test_cross_check_with_placement_prediction():
    c1 = read_benchmark_log(str(FIXTURES / "C1.log"))  # EthosuDelegate: 1 of 1 nodes
    agree = cross_check(c1, types.SimpleNamespace(npu_ops=1, cpu_ops=0))
    assert agree.agree is True and agree.measured_share == 1.0
    with pytest.warns(WorkbenchWarning, match="disagrees with the board"):
        bad = cross_check(c1, types.SimpleNamespace(npu_ops=3, cpu_ops=2))
    assert bad.agree is False and bad.predicted_share == 0.6
    a1 = read_benchmark_log(str(FIXTURES / "A1.log"))  # VX: no node counts, no op total
    unknown = cross_check(a1, types.SimpleNamespace(npu_ops=30, cpu_ops=0))
    assert unknown.agree is None and "states no op counts" in unknown.detail
    with pytest.raises(BoardError, match="`placement` must have integer `npu_ops`"):
        cross_check(c1, object())


def test_coverage_from_a2_profile_counts_cpu_rows():
    a2 = read_benchmark_log(str(FIXTURES / "A2.log"))
    cov = coverage_from_log(a2, total_ops=64)
    assert (cov.coverage, cov.npu_ops, cov.total_ops, cov.kernels) == ("partial", 63, 64, 1)
    assert coverage_from_log(a2).npu_share is None  # without the model's op count: not stated
