"""The built-in models are entries of one registry: a new one is one ``register_builtin`` call, and every
client that takes ``"reference"`` instead of a path (CLI, run folders, the spec, the batch, the sweep) takes it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from workbench import cli
from workbench.errors import ModelError
from workbench.models import builtin

PACKAGE = Path(__file__).resolve().parents[2] / "workbench"
#: a branch on a built-in model's name, or an import of one model's builder, outside the registry
BRANCH = re.compile(r"""(model|fp32|name|value|model_name)\s*[!=]=\s*(["'](reference|tradeoff|keypoints)["']|REFERENCE)"""
                    r"""|import (reference_model|tradeoff_model|keypoint_model)\b""")
OWN = {"models/builtin.py", "models/reference.py", "models/tradeoff.py", "models/keypoints.py", "__init__.py"}


def tiny(input_shape, n_outputs, *, batch_size=None):
    """A dummy built-in architecture: flatten and one dense layer."""
    import keras
    inputs = keras.Input(shape=input_shape, batch_size=batch_size, name="image")
    x = keras.layers.Flatten()(inputs)
    return keras.Model(inputs, keras.layers.Dense(n_outputs)(x), name="tiny")


def same(x, rng):
    return x


@pytest.fixture
def dummy(tmp_path, monkeypatch):
    """A fourth built-in model, registered for this test only (no shipped weights: it trains one epoch)."""
    entry = builtin.BuiltinModel("dummy", tiny, same, epochs=1, exports=("keras", "saved_model", "tflite"),
                                 weights=tmp_path / "weights", description="a dummy built-in model")
    monkeypatch.setitem(builtin.BUILTIN_MODELS, "dummy", entry)
    monkeypatch.setenv("NPU_WORKBENCH_CACHE", str(tmp_path / "cache"))
    return entry


def test_no_client_branches_on_a_built_in_model_name():
    """Clients ask the registry (is_builtin / builtin_model / builtin_path), never compare a name."""
    found = [f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py")) if path.relative_to(PACKAGE).as_posix() not in OWN
             for n, line in enumerate(path.read_text().splitlines(), 1) if BRANCH.search(line)]
    assert not found, "branch on a built-in model name outside models/builtin.py:\n" + "\n".join(found)


def test_the_registry_holds_the_three_models_in_one_shape():
    assert builtin.builtin_names()[:3] == ("reference", "tradeoff", "keypoints")
    for name in ("reference", "tradeoff", "keypoints"):
        entry = builtin.builtin_entry(name)
        assert entry.function("architecture").__module__.startswith("workbench.models.")
        assert callable(entry.function("augment")) and entry.result.LABEL
    assert builtin.builtin_entry("keypoints").card["task"] == "keypoints"
    with pytest.raises(ModelError, match="'nope' is not a built-in model; the built-in ones are 'reference'"):
        builtin.builtin_model("nope")
    with pytest.raises(ModelError, match="task must be one of"):
        builtin.BuiltinModel("bad", tiny, same, task="detection")
    with pytest.raises(ModelError, match="trained on 'digits-keypoints' only"):
        builtin.load_data(builtin.builtin_entry("keypoints"), "digits-conditions")


def test_a_registered_model_is_a_cli_command_and_a_model_name_everywhere(dummy):
    """Without building anything: the CLI lists it, and the clients call it a built-in model."""
    from workbench.batch.pipeline import _relative
    parser = cli.build_parser()
    args = parser.parse_args(["model", "dummy", "--data", "digits-conditions", "--retrain"])
    assert args.builtin == "dummy" and args.retrain
    assert builtin.is_builtin("dummy") and _relative("dummy", Path.cwd()) == "dummy"
    with pytest.raises(ModelError, match="has no onnx export"):
        builtin.builtin_path("dummy", export="onnx")


@pytest.mark.slow
def test_a_dummy_built_in_model_is_built_cached_and_taken_by_every_client(dummy, tmp_path, capsys):
    """Trained (one epoch), exported, scored and cached by the one path; then the CLI, a run folder, the
    spec and the sweep take it by name."""
    first = builtin.builtin_model("dummy")
    assert isinstance(first, builtin.ClassifierModel) and first.name == "dummy" and not first.cache_hit
    assert first.origin == "trained" and set(first.accuracy) >= {"daylight", "low-light"}
    assert first.accuracy["daylight"] > 0.2                      # one epoch of a linear model beats chance
    assert first.onnx is None                                    # not one of its exports
    again = builtin.builtin_model("dummy")
    assert again.cache_hit and again.keras == first.keras and again.accuracy == first.accuracy

    assert cli.main(["model", "dummy", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["name"] == "dummy" and printed["cache_hit"] and printed["keras"] == first.keras

    from workbench.pipeline import RunSpec
    from workbench.runs import RunFolder
    from workbench.sweep.run import resolve_model
    spec = RunSpec("dummy", "digits-conditions", target="imx8mp")
    assert spec.source_model == first.keras and spec.fp32_model == first.tflite
    folder = RunFolder(tmp_path / "run", target="imx93", model="dummy")
    assert folder.source_model == first.keras and folder.fp32_baseline == first.tflite
    assert resolve_model("dummy", "digits-conditions") == first.keras
    from workbench.models.predict import load_predictor
    out = load_predictor(first.tflite).predict(np.zeros((2, 32, 32, 1), np.float32))
    assert np.asarray(out).shape == (2, 10)
