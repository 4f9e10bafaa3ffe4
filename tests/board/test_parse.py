"""parse_benchmark_output on every recorded sample: each parses to the numbers it states."""

from __future__ import annotations

import json

import pytest

from workbench.board.parse import BenchmarkLog, parse_benchmark_output, read_benchmark_log
from workbench.errors import BenchmarkParseError

from .conftest import FIXTURES


def _log(name: str) -> BenchmarkLog:
    return read_benchmark_log(str(FIXTURES / f"{name}.log"))


def test_a1_fully_delegated_vx_log():
    log = _log("A1")
    # "Inference timings in us: Init: 12434, First inference: 4625131, Warmup (avg): 4.62513e+06,
    #  Inference (avg): 2525.59"
    assert log.init_us == 12434
    assert log.first_inference_us == 4625131
    assert log.warmup_avg_us == 4.62513e+06
    assert log.inference_avg_us == 2525.59
    # "count=1 curr=4625131" -> only count and curr are stated
    assert log.warmup.count == 1 and log.warmup.curr == 4625131
    assert log.warmup.min is None and log.warmup.avg is None and log.warmup.std is None
    # "count=379 first=2542 curr=2543 min=2471 max=2586 avg=2525.59 std=13"
    inf = log.inference
    assert (inf.count, inf.first, inf.curr, inf.min, inf.max, inf.avg, inf.std) == \
        (379, 2542, 2543, 2471, 2586, 2525.59, 13)
    assert inf.p5 is None and inf.median is None
    assert log.initialized_session_ms == 12.434
    assert log.model_size_mb == 4.27635
    assert (log.memory_kind, log.memory_init_mb, log.memory_overall_mb) == ("peak", 7.26953, 34.3164)
    assert log.peak_memory_mb is None
    assert log.external_delegate_path == "/usr/lib/libvx_delegate.so"
    assert [(d.name, d.coverage, d.kernels) for d in log.delegates] == [("EXTERNAL", "complete", 1)]
    # regular-runs summary only, not the initialization section
    assert [(o.node_type, o.count, o.avg_ms) for o in log.op_summary] == [("Vx Delegate", 1, 2.503)]
    assert [o.node_type for o in log.init_op_summary] == ["ModifyGraphWithDelegate",
                                                           "AllocateTensors"]
    assert [(r.node_type, r.start_ms, r.first_ms, r.avg_ms, r.times_called) for r in log.op_profile] \
        == [("Vx Delegate", 0.010, 2.509, 2.504, 1)]
    assert log.op_profile[0].name == "[MobilenetV1/Predictions/Reshape_1]:31"
    assert log.nodes_executed == 1
    assert log.cpu_op_rows == ()
    assert log.npu_share is None  # the VX delegate states no node counts


def test_a2_partial_delegation():
    log = _log("A2")
    assert (log.init_us, log.first_inference_us, log.inference_avg_us) == (18085, 8416260, 154534)
    assert log.inference.max == 1752106 and log.inference.std == 254746
    assert [(d.name, d.coverage, d.kernels) for d in log.delegates] == [("EXTERNAL", "partial", 1)]
    assert [(o.node_type, o.count, o.avg_ms) for o in log.op_summary] == [
        ("Vx Delegate", 1, 152.983), ("TFLite_Detection_PostProcess", 1, 1.504)]
    assert [r.node_type for r in log.cpu_op_rows] == ["TFLite_Detection_PostProcess"]
    assert log.op_profile[0].name == "[Squeeze, convert_scores]:64"


def test_b4_info_prefix_percentiles_and_memory_delta():
    log = _log("B4")
    assert (log.init_us, log.first_inference_us) == (5579, 1357602)
    assert log.warmup_avg_us == 1.3576e+06 and log.inference_avg_us == 1.24027e+06
    inf = log.inference
    assert (inf.count, inf.min, inf.max, inf.avg, inf.std) == (50, 1238588, 1252566, 1.24027e+06, 2565)
    assert (inf.p5, inf.median, inf.p95) == (1238753, 1239807, 1247415)
    assert (log.warmup.count, log.warmup.median) == (1, 1357602)
    assert (log.memory_kind, log.memory_init_mb, log.memory_overall_mb) == ("delta", 6.36328, 109.832)
    assert log.graph == "/usr/share/oob-demo-assets/models/ssd_mobilenet_v2_coco.tflite"
    # never guesses: nothing about delegates or op profiling is stated
    assert log.delegates == () and log.op_summary == () and log.op_profile == ()
    assert log.external_delegate_path is None and log.nodes_executed is None


def test_c1_ethosu_node_counts_with_interleaved_dmesg():
    log = _log("C1")
    [d] = log.delegates
    assert (d.name, d.coverage, d.nodes_delegated, d.nodes_total, d.kernels) == \
        ("EthosuDelegate", "complete", 1, 1, 1)
    assert log.npu_share == 1.0
    assert log.inference_avg_us is None and log.init_us is None and log.inference is None


def test_logcat_prefixed_lines_parse_the_same():
    text = (FIXTURES / "A1.log").read_text()
    prefixed = "\n".join(f"03-14 10:11:12.345  1234  1250 I tflite  : {line}"
                         for line in text.splitlines())
    assert parse_benchmark_output(prefixed).to_dict() == _log("A1").to_dict()


def test_delegate_line_variants_and_replacing_line():
    # line forms from benchmark_tflite_model.cc / simple_delegate.cc / TFLite core, as quoted in
    # npu-facts.md sections 3.1 and 4.2
    text = "\n".join([
        "INFO: Though EXTERNAL delegate is explicitly applied, the model graph will not be "
        "executed by the delegate.",
        "NeutronDelegate delegate: 66 nodes delegated out of 69 nodes with 2 partitions.",
        "VERBOSE: Replacing 5 out of 7 node(s) with delegate (TfLiteXNNPackDelegate) node, "
        "yielding 2 partitions for the whole graph.",
        "count=5 curr=100 (all same)",
    ])
    log = parse_benchmark_output(text)
    got = [(d.name, d.coverage, d.kernels, d.nodes_delegated, d.nodes_total) for d in log.delegates]
    assert got == [("EXTERNAL", "none", 0, None, None),
                   ("NeutronDelegate", "partial", 2, 66, 69),
                   ("TfLiteXNNPackDelegate", "partial", 2, 5, 7)]
    assert log.npu_share == 66 / 69
    xnnpack_only = parse_benchmark_output(
        "Replacing 7 out of 7 node(s) with delegate (TfLiteXNNPackDelegate) node, yielding "
        "1 partitions.")
    assert xnnpack_only.npu_share is None  # a CPU delegate says nothing about the NPU
    assert log.warmup.all_same and log.warmup.count == 5 and log.warmup.curr == 100


def test_very_old_average_timings_line():
    # the TF 1.x form named in benchmark_model-formats.md's line-format facts
    log = parse_benchmark_output("Average inference timings in us: Warmup: 1.5e+06, Init: 2100, "
                                 "Inference: 8417")
    assert (log.warmup_avg_us, log.init_us, log.inference_avg_us) == (1.5e6, 2100, 8417)
    assert log.first_inference_us is None


# failure strings of benchmark_model / external_delegate.cc, quoted in npu-facts.md section 4.2
@pytest.mark.parametrize("line, phrase", [
    ("ERROR: Could not open '/tmp/m.tflite'.", "could not be opened"),
    ("Failed to mmap model /tmp/m.tflite", "model file could not be read"),
    ("INFO: Unable to load external delegate from : /usr/lib/libvx_delegate.so",
     "external delegate library could not be loaded"),
    ("ERROR: Failed to apply EXTERNAL delegate.", "delegate could not be applied"),
    ("Please specify the name of your TF Lite input file with --graph", "no model was given"),
    ("ERROR: Disallowed CPU fallback detected.", "fell back to the CPU"),
    ("ERROR: Benchmarking failed.", "benchmarking failed"),
])
def test_failures_raise_with_the_line(line, phrase):
    text = "INFO: STARTING!\nINFO: Graph: [/tmp/m.tflite]\n" + line + "\n"
    with pytest.raises(BenchmarkParseError, match=phrase) as info:
        parse_benchmark_output(text, source="log.txt")
    assert "line 3" in str(info.value) and "log.txt" in str(info.value)


def test_text_without_benchmark_output_is_an_error():
    with pytest.raises(BenchmarkParseError, match="holds no benchmark_model output"):
        parse_benchmark_output("hello\nworld\n")
    with pytest.raises(BenchmarkParseError, match="must be a str"):
        parse_benchmark_output(b"bytes")  # type: ignore[arg-type]


def test_missing_log_file_is_named(tmp_path):
    with pytest.raises(BenchmarkParseError, match="does not exist"):
        read_benchmark_log(str(tmp_path / "nope.log"))


def test_round_trip_and_html():
    for name in ("A1", "A2", "B4", "C1"):
        log = _log(name)
        again = BenchmarkLog.from_dict(json.loads(log.to_json()))
        assert again == log
        html = log._repr_html_()
        assert "BenchmarkLog" in html and "<script" not in html


def test_cli_parse_benchmark_json(capsys):
    from workbench.cli import main
    assert main(["parse-benchmark", str(FIXTURES / "A2.log"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("init_us", "first_inference_us", "warmup_avg_us", "inference_avg_us"):
        assert key in data
    assert {k: data["inference"][k] for k in ("count", "min", "max", "avg", "std")} == \
        {"count": 50, "min": 82076, "max": 1752106, "avg": 154534, "std": 254746}
    assert [(d["name"], d["coverage"], d["kernels"]) for d in data["delegates"]] == \
        [("EXTERNAL", "partial", 1)]
    assert [(o["node_type"], o["count"], o["avg_ms"]) for o in data["op_summary"]] == \
        [("Vx Delegate", 1, 152.983), ("TFLite_Detection_PostProcess", 1, 1.504)]


def test_cli_parse_benchmark_failure_exits_2(tmp_path, capsys):
    from workbench.cli import main
    bad = tmp_path / "bad.log"
    bad.write_text("INFO: Unable to load external delegate from : /usr/lib/libx.so\n")
    assert main(["parse-benchmark", str(bad)]) == 2
    assert "could not be loaded" in capsys.readouterr().err


def test_cli_module_imports_nothing_heavy_and_public_names_resolve():
    import subprocess
    import sys
    code = ("import sys, workbench.board.commands, workbench.board.parse; "
            "heavy = [m for m in ('numpy', 'tensorflow', 'yaml', 'matplotlib', 'paramiko') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    import workbench as wb
    assert wb.TimingResult.__module__ == "workbench.board.timing"
    assert callable(wb.load_boards) and callable(wb.time_on_board)
    assert wb.BenchmarkLog is BenchmarkLog and wb.parse_benchmark_output is parse_benchmark_output


# --- leniency where the board is right (issue 12 deliverable 8) ------------------------------
# benchmark_model.cc logs `Unconsumed cmdline flags: <flags>` as a WARNING and goes on
# (npu-facts.md section 4.2); real i.MX logs show it followed by a normal delegated run.
def _with_line_after_start(name: str, line: str) -> str:
    lines = (FIXTURES / f"{name}.log").read_text().splitlines()
    return "\n".join(lines[:1] + [line] + lines[1:]) + "\n"


def test_unconsumed_flags_are_a_warning_and_the_run_is_parsed():
    text = _with_line_after_start("A1", "WARNING: Unconsumed cmdline flags: --num_runs_x=5 --verbose2")
    log = parse_benchmark_output(text, source="imx8mp.log")
    reference = _log("A1")
    assert log.unconsumed_flags == ("--num_runs_x=5", "--verbose2")
    assert log.ignored_delegate is None   # the delegate line follows: it was applied
    assert any("did not know these flags" in w for w in log.log_warnings)
    assert (log.inference, log.delegates, log.op_profile) == \
        (reference.inference, reference.delegates, reference.op_profile)
    assert not any("Unconsumed" in m for m in log.messages)
    assert "unconsumed flags --num_runs_x=5" in log.summary()


def test_unconsumed_delegate_path_without_delegate_line_means_cpu_only():
    # a build without the external delegate provider: the flag is unknown, no delegate line
    # follows, the run is a CPU run (lines from sample B4, a CPU-only run)
    body = (FIXTURES / "B4.log").read_text().splitlines()[1:]
    text = "\n".join(["INFO: STARTING!", "WARNING: Unconsumed cmdline flags: "
                      "--external_delegate_path=/usr/lib/libvx_delegate.so"] + body)
    log = parse_benchmark_output(text)
    assert log.ignored_delegate == "/usr/lib/libvx_delegate.so"
    assert log.delegates == ()
    assert any("NOT applied" in w for w in log.log_warnings)
    assert log.inference.avg == 1.24027e+06
    assert "NOT applied (CPU only)" in log.summary()
    again = BenchmarkLog.from_dict(json.loads(log.to_json()))
    assert again == log


def test_tail_of_a_log_parses_what_it_states():
    # the last lines of sample A1, as cut from a long console capture: the regular runs'
    # `count=` line before the summary, no "Running benchmark" marker, no start
    lines = (FIXTURES / "A1.log").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("count=379"))
    log = parse_benchmark_output("\n".join(lines[start:]))
    assert log.starts_mid_run
    assert log.inference.count == 379 and log.inference.avg == 2525.59 and log.inference.std == 13
    assert log.warmup is None
    assert log.inference_avg_us == 2525.59 and log.first_inference_us == 4625131
    assert any("starts mid-run" in w for w in log.log_warnings)
    # a tail that still holds the warm-up line but lost its marker: the summary decides
    start = next(i for i, ln in enumerate(lines) if ln.startswith("W [HandleLayoutInfer"))
    log = parse_benchmark_output("\n".join(lines[start:]))
    assert log.warmup.count == 1 and log.warmup.curr == 4625131 and log.inference.count == 379
    # only the stat line, no summary: taken as the regular runs, and said so
    log = parse_benchmark_output(lines[lines.index(next(ln for ln in lines if ln.startswith(
        "count=379")))])
    assert log.inference.count == 379
    assert any("taken as the regular runs" in w for w in log.log_warnings)
    assert not _log("A1").starts_mid_run


@pytest.mark.parametrize("bad", ["nan", "-nan", "inf", "NaN"])
def test_non_finite_figure_is_an_error(bad):
    text = ("INFO: STARTING!\nINFO: count=50 first=1 curr=1 min=1 max=1 avg=1 std=0\n"
            f"INFO: Inference timings in us: Init: 10, First inference: 20, Warmup (avg): 20, "
            f"Inference (avg): {bad}\n")
    with pytest.raises(BenchmarkParseError, match="not a finite number") as info:
        parse_benchmark_output(text, source="nan.log")
    assert "line 3" in str(info.value) and "nan.log" in str(info.value)
    with pytest.raises(BenchmarkParseError, match="not a finite number"):
        parse_benchmark_output(f"count=50 first=1 curr=1 min=1 max=1 avg={bad} std=0")


def test_failure_line_anywhere_makes_the_log_a_failure():
    # a complete delegated run (sample A1) followed by benchmark_main.cc's failure line
    text = (FIXTURES / "A1.log").read_text() + "ERROR: Benchmarking failed.\n"
    with pytest.raises(BenchmarkParseError, match="benchmarking failed") as info:
        parse_benchmark_output(text, source="a1+fail.log")
    assert "no figure of this log is a measurement" in str(info.value)
