"""Bad inputs across the commands: each gives a message naming the file or option, exit code 2,
no traceback, and leaves every file as it was."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from .conftest import run_cli, snapshot


@pytest.fixture(scope="session")
def bad(tmp_path_factory) -> Path:
    """A folder of broken datasets, gate files and models, built once."""
    from PIL import Image
    root = tmp_path_factory.mktemp("bad")
    (root / "imgs").mkdir()
    for name in ("a", "b"):
        Image.fromarray(np.zeros((8, 8), np.uint8)).save(root / "imgs" / f"{name}.png")
    header = "path,label,condition,split\n"
    (root / "missing_field.csv").write_text(header + "imgs/a.png,0,daylight,test\nimgs/b.png,1\n")
    (root / "extra_field.csv").write_text(header + "imgs/a.png,0,daylight,test,surprise\n")
    (root / "latin1.csv").write_bytes((header + "imgs/a.png,café,daylight,test\n").encode("latin-1"))
    (root / "empty.csv").write_text("")
    (root / "header_only.csv").write_text(header)
    (root / "missing_image.csv").write_text(header + "imgs/nope.png,0,daylight,test\n")
    (root / "bad_split.csv").write_text(header + "imgs/a.png,0,daylight,holdout\n")
    (root / "zero.png").write_bytes(b"")
    (root / "zero_image.csv").write_text(header + "zero.png,0,daylight,test\n")
    (root / "empty.npz").write_bytes(b"")
    (root / "emptydir").mkdir()
    x = np.zeros((4, 8, 8, 1), np.float32)
    cond, split = np.array(["daylight"] * 4), np.array(["test"] * 4)
    arrays = {
        "str_x": dict(x=np.array([["a"] * 4] * 4), y=np.arange(4)),
        "obj_x": dict(x=np.array([object()] * 4, dtype=object), y=np.arange(4)),
        "str_y": dict(x=x, y=np.array(list("abcd"))),
        "float_y": dict(x=x, y=np.array([0.5, 1.7, 2.0, 3.0]), classes=np.array(list("abcd"))),
        "nan_y": dict(x=x, y=np.array([0.0, np.nan, 2.0, 3.0])),
        "neg_y": dict(x=x, y=np.array([0, -1, 2, 3])),
        "short_y": dict(x=x, y=np.arange(3)),
        "no_samples": dict(x=x[:0], y=np.arange(0)),
        "nan_x": dict(x=np.full_like(x, np.nan), y=np.arange(4)),
        "uint16_x": dict(x=np.full(x.shape, 4000, np.uint16), y=np.arange(4)),
        "no_split": dict(x=x, y=np.arange(4), condition=cond),
    }
    for name, a in arrays.items():
        a = {"condition": cond, "split": split, **a} if name != "no_split" else a
        np.savez(root / f"{name}.npz", **a)
    np.savez(root / "obj_cond.npz", x=x, y=np.arange(4), condition=np.array([1, None, 2, 3], dtype=object),
             split=split)
    (root / "trunc.npz").write_bytes((root / "str_y.npz").read_bytes()[:100])
    gates = {"gate_nan": "accuracy:\n  max_drop_pp: .nan\n", "gate_inf": "accuracy:\n  min_agreement: .inf\n",
             "gate_cond_nan": "accuracy:\n  per_condition:\n    low-light: .nan\n",
             "gate_latency_nan": "latency:\n  max_ms: .nan\n", "gate_list": "- 1\n- 2\n",
             "gate_neg": "accuracy:\n  max_drop_pp: -1\n", "gate_yaml_error": "accuracy: [\n"}
    for name, text in gates.items():
        (root / f"{name}.yaml").write_text(text)
    (root / "empty.tflite").write_bytes(b"")
    (root / "garbage.tflite").write_bytes(os.urandom(256))
    (root / "garbage.onnx").write_bytes(os.urandom(256))
    (root / "cal_not_json.json").write_text("{not json")
    (root / "cal_other.json").write_text('{"format": "something else"}')
    return root


CASES = [
    # (id, argv, phrase)  -- every case: exit code 2, phrase on stderr, no traceback
    ("csv-missing-field", ["data", "info", "--dataset", "missing_field.csv"], "missing condition, split"),
    ("csv-extra-field", ["data", "info", "--dataset", "extra_field.csv"], "the row has"),
    ("csv-latin1", ["data", "info", "--dataset", "latin1.csv"], "not UTF-8"),
    ("csv-empty", ["data", "info", "--dataset", "empty.csv"], "found no header"),
    ("csv-header-only", ["data", "info", "--dataset", "header_only.csv"], "no images found"),
    ("csv-missing-image", ["data", "info", "--dataset", "missing_image.csv"], "not found"),
    ("csv-bad-split", ["data", "info", "--dataset", "bad_split.csv"], "unknown split"),
    ("csv-zero-size-image", ["data", "export", "--dataset", "zero_image.csv", "--split", "test", "-o", "o.npz"],
     "zero.png"),
    ("npz-empty-file", ["data", "info", "--dataset", "empty.npz"], "not a readable .npz"),
    ("npz-truncated", ["data", "info", "--dataset", "trunc.npz"], "not a readable .npz"),
    ("npz-string-pixels", ["data", "info", "--dataset", "str_x.npz"], "x holds <U1 values"),
    ("npz-object-pixels", ["data", "info", "--dataset", "obj_x.npz"], "holds Python objects"),
    ("npz-object-conditions", ["data", "info", "--dataset", "obj_cond.npz"], "array `condition` holds Python objects"),
    ("npz-string-labels", ["data", "info", "--dataset", "str_y.npz"], "y holds <U1 values"),
    ("npz-fractional-labels", ["data", "info", "--dataset", "float_y.npz"], "not a whole number"),
    ("npz-nan-labels", ["data", "info", "--dataset", "nan_y.npz"], "NaN or infinite label"),
    ("npz-negative-label", ["data", "info", "--dataset", "neg_y.npz"], "unknown label -1"),
    ("npz-label-count", ["data", "info", "--dataset", "short_y.npz"], "one label per sample"),
    ("npz-no-samples", ["data", "info", "--dataset", "no_samples.npz"], "x has no samples"),
    ("npz-nan-pixels", ["data", "info", "--dataset", "nan_x.npz"], "NaN"),
    ("npz-uint16-pixels", ["data", "info", "--dataset", "uint16_x.npz"], "uint16"),
    ("npz-missing-array", ["data", "info", "--dataset", "no_split.npz"], "missing array(s) split"),
    ("dataset-empty-folder", ["data", "info", "--dataset", "emptydir"], "empty folder"),
    ("dataset-missing", ["data", "info", "--dataset", "nowhere"], "no such dataset"),
    ("evaluate-max-drop-nan", ["evaluate", "a.tflite", "b.tflite", "--max-drop", "nan"],
     "argument --max-drop: must be a finite number"),
    ("evaluate-min-agreement-inf", ["evaluate", "a.tflite", "b.tflite", "--min-agreement", "inf"],
     "argument --min-agreement: must be a finite number"),
    ("evaluate-max-drop-text", ["evaluate", "a.tflite", "b.tflite", "--max-drop", "lots"], "must be a number"),
    ("quantize-percentile-nan", ["quantize", "m.keras", "--percentile", "nan", "-o", "out"],
     "argument --percentile: must be a finite number"),
    ("audit-clip-threshold-nan", ["audit", "--calibration", "c.json", "--model", "m", "--clip-threshold", "nan"],
     "argument --clip-threshold: must be a finite number"),
    ("experiment-margin-nan", ["calibrate-experiment", "--model", "m", "-n", "3", "--margin", "nan"],
     "argument --margin: must be a finite number"),
    ("gate-nan", ["evaluate", "a.tflite", "b.tflite", "--gate", "gate_nan.yaml"],
     "`accuracy.max_drop_pp` must be a finite number"),
    ("gate-inf", ["evaluate", "a.tflite", "b.tflite", "--gate", "gate_inf.yaml"],
     "`accuracy.min_agreement` must be a finite number"),
    ("gate-condition-nan", ["evaluate", "a.tflite", "b.tflite", "--gate", "gate_cond_nan.yaml"],
     "per_condition.low-light"),
    ("gate-latency-nan", ["batch", "--gate", "gate_latency_nan.yaml", "--out", "reports"],
     "`latency.max_ms` must be a finite number"),
    ("gate-not-a-mapping", ["evaluate", "a.tflite", "b.tflite", "--gate", "gate_list.yaml"], "gate_list.yaml"),
    ("gate-negative", ["evaluate", "a.tflite", "b.tflite", "--gate", "gate_neg.yaml"], "must be in [0.0, 100.0]"),
    ("gate-bad-yaml", ["evaluate", "a.tflite", "b.tflite", "--gate", "gate_yaml_error.yaml"], "gate_yaml_error.yaml"),
    ("gate-missing", ["evaluate", "a.tflite", "b.tflite", "--gate", "nope.yaml"], "nope.yaml"),
    ("calibrate-n-zero", ["calibrate", "--strategy", "random", "-n", "0"], "`n` must be a positive integer"),
    ("calibrate-n-negative", ["calibrate", "--strategy", "random", "-n", "-3"], "`n` must be a positive integer"),
    ("calibrate-n-huge", ["calibrate", "--strategy", "random", "-n", "1000000000"], "cannot choose n=1000000000"),
    ("calibrate-bad-weights", ["calibrate", "--strategy", "stratified", "-n", "10", "--weights", "daylight=nan"],
     "condition_weights"),
    ("calibration-file-not-json", ["audit", "--calibration", "cal_not_json.json", "--model", "m.keras"],
     "invalid JSON"),
    ("calibration-file-other", ["audit", "--calibration", "cal_other.json", "--model", "m.keras"],
     "not a calibration set file"),
    ("calibration-file-missing", ["audit", "--calibration", "nope.json", "--model", "m.keras"],
     "calibration set file 'nope.json' does not exist"),
    ("bench-timeout-negative", ["bench", "empty.tflite", "--local", "--timeout", "-5"], "--timeout"),
    ("bench-timeout-nan", ["bench", "empty.tflite", "--local", "--timeout", "nan"], "--timeout"),
    ("bench-hostile-host", ["bench", "empty.tflite", "--host", "$(touch pwned)"], "is not an SSH destination"),
    ("bench-option-host", ["bench", "empty.tflite", "--host", "-oProxyCommand=touch pwned"],
     "is not an SSH destination"),
    ("placement-empty-model", ["placement", "empty.tflite", "--target", "imx93"], "empty.tflite"),
    ("placement-garbage-model", ["placement", "garbage.tflite", "--target", "imx93"], "garbage.tflite"),
    ("placement-unknown-target", ["placement", "garbage.tflite", "--target", "imx8m"], "imx8m"),
    ("quantize-missing-model", ["quantize", "nope.keras", "-o", "out"], "nope.keras"),
    ("quantize-garbage-onnx", ["quantize", "garbage.onnx", "--backend", "onnx", "-o", "out"], "garbage.onnx"),
    ("quantize-onto-its-source", ["quantize", "garbage.onnx", "--backend", "onnx", "-o", "garbage.onnx"],
     "is the source model"),
    ("quantize-output-wrong-suffix", ["quantize", "garbage.onnx", "--backend", "onnx", "-o", "x.tflite"],
     "cannot be written to a .tflite path"),
    ("batch-jobs-zero", ["batch", "--jobs", "0", "--out", "reports"], "`jobs` must be a positive integer"),
    ("batch-unknown-target", ["batch", "--targets", "imx8m", "--out", "reports"], "imx8m"),
    ("batch-param-unknown", ["batch", "-p", "no_such_param=1", "--out", "reports"], "no_such_param"),
    ("batch-param-tuple", ["batch", "-p", "calibration_size=(1, 2)", "--out", "reports"], "calibration_size"),
    ("batch-param-set", ["batch", "-p", "recipe={'a'}", "--out", "reports"], "recipe"),
    ("batch-param-bytes", ["batch", "-p", "recipe=b'x'", "--out", "reports"], "recipe"),
    ("batch-param-inf", ["batch", "-p", "seed=1e999", "--out", "reports"], "seed"),
    ("batch-param-nested-tuple", ["batch", "-p", "recipe=[1, (2, 3)]", "--out", "reports"], "recipe"),
    ("batch-param-syntax", ["batch", "-p", "recipe", "--out", "reports"], "NAME=VALUE"),
    ("batch-out-is-a-file", ["batch", "--out", "bad_split.csv"], "bad_split.csv"),
    ("batch-bad-run-id", ["batch", "--run-id", "../escape", "--out", "reports"], "`run_id`"),
]


@pytest.mark.parametrize("argv,phrase", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_a_message_with_exit_code_2(bad, argv, phrase):
    before = snapshot(bad)
    result = run_cli(*argv, cwd=bad)
    assert result.code == 2, result
    assert phrase in result.err, result.err
    assert "Traceback" not in result.err + result.out
    assert snapshot(bad) == before                   # nothing was changed, lost or added
    assert not (bad / "pwned").exists() and not (bad / "reports").exists()
