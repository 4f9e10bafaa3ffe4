#!/bin/sh
# TEST DOUBLE for TFLite's benchmark_model (the real binary cannot exist on this x86 machine).
# It replays real recorded output: `replay.log` next to this script is a verbatim copy of a sample
# from ../shared/reference/benchmark_model-formats.md (see tests/board/fixtures/README.md).
# It records its arguments (NUL-separated) in `last_argv` next to itself, so tests can check the
# command line the workbench built and that each argument arrived intact.
# With a --graph that is not a file it prints benchmark_model's failure lines (strings taken from
# benchmark_tflite_model.cc as quoted in npu-facts.md section 4.2) and exits 1, as the tool does.
here=$(dirname "$0")
: > "$here/last_argv"
graph=""
for arg in "$@"; do
    printf '%s\0' "$arg" >> "$here/last_argv"
    case "$arg" in
        --graph=*) graph=${arg#--graph=} ;;
    esac
done
if [ -z "$graph" ]; then
    echo "ERROR: Please specify the name of your TF Lite input file with --graph"
    exit 1
fi
if [ ! -f "$graph" ]; then
    echo "ERROR: Could not open '$graph'."
    echo "ERROR: Failed to mmap model $graph"
    exit 1
fi
cat "$here/replay.log"
