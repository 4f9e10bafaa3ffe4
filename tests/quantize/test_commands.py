"""`workbench quantize` on the real reference model: the issue's "done when"."""

import hashlib
import json
from pathlib import Path

import pytest

from workbench import cli


@pytest.fixture(scope="module")
def runs(reference, tmp_path_factory):
    return tmp_path_factory.mktemp("cli")


def _run(capsys, *argv):
    code = cli.main(["quantize", *argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_reference_to_pc_pt_and_onnx_with_cache_hit(reference, runs, capsys):
    results = {}
    for name, model, extra in (("pc", reference.saved_model, ["--recipe", "a8w8_pc"]),
                               ("pt", reference.keras, ["--recipe", "a8w8_pt"]),
                               ("onnx", "reference", ["--backend", "onnx"])):    # its .onnx, made now
        code, obj = _run(capsys, str(model), "--data", "digits-conditions", *extra,
                         "--calibration", "100", "-o", str(runs / name))
        assert code == 0
        for key in ("path", "sha256", "manifest", "recipe", "float_ops", "cache_hit"):
            assert key in obj
        assert obj["float_ops"] == [] and obj["cache_hit"] is False and obj["full_integer"]
        manifest = json.loads(Path(obj["manifest"]).read_text())
        assert manifest["sha256"] == hashlib.sha256(Path(obj["path"]).read_bytes()).hexdigest() == obj["sha256"]
        results[name] = obj
    assert results["pc"]["weight_granularity"] == "per_channel"
    assert results["pt"]["weight_granularity"] == "per_tensor"
    assert results["onnx"]["path"].endswith("model.onnx") and results["onnx"]["recipe"] == "a8w8_pc"
    code, again = _run(capsys, str(reference.saved_model), "--recipe", "a8w8_pc", "--calibration", "100",
                       "-o", str(runs / "pc"))
    assert code == 0 and again["cache_hit"] is True and again["sha256"] == results["pc"]["sha256"]


def test_cli_errors_exit_2(reference, runs, capsys):
    code = cli.main(["quantize", str(reference.saved_model), "--calibrator", "entropy", "-o", str(runs / "x"),
                     "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 2 and "no 'entropy' calibrator" in out["message"]
