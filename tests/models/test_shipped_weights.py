"""The built-in models' shipped weight files: small, recorded with their sha256 and recipe, packaged."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from workbench.errors import ModelError, WorkbenchWarning
from workbench.models import training

ROOT = Path(__file__).resolve().parents[2]
CONDITIONS = {"daylight", "low-light", "overexposed", "motion-blur", "sensor-noise"}
SHIPPED = {"reference": "accuracy", "tradeoff": "accuracy", "keypoints": "pck"}


@pytest.mark.parametrize(("name", "metric"), SHIPPED.items())
def test_each_built_in_model_ships_small_recorded_weights(name, metric):
    record = training.shipped_record(name)              # raises when the .npz does not match its sha256
    assert record is not None, f"weights/{name}.npz/.json are not shipped"
    assert (training.SHIPPED_DIR / f"{name}.npz").stat().st_size < 100_000
    assert record["seed"] == 0 and record["epochs"] > 0 and len(record["weights_sha256"]) == 64
    assert {"split", "condition", "augment", "optimizer", "batch_size"} <= set(record["training"])
    assert {"tensorflow", "keras", "numpy"} <= set(record["trained_with"])
    assert set(record[metric]) == CONDITIONS and all(0.0 <= v <= 1.0 for v in record[metric].values())


def test_a_damaged_record_is_refused_and_only_warned_about_for_a_retrain(tmp_path):
    shutil.copy(training.SHIPPED_DIR / "reference.npz", tmp_path)
    (tmp_path / "reference.json").write_text("{not json")
    with pytest.raises(ModelError, match=r"reference.json: unreadable record .*model reference --retrain"):
        training.shipped_record("reference", directory=tmp_path)
    with pytest.warns(WorkbenchWarning, match="not comparing with the shipped accuracy"):
        assert training.shipped_record("reference", directory=tmp_path, strict=False) is None
    assert training.shipped_record("nothing", directory=tmp_path) is None      # no files: nothing shipped


def test_the_plan_uses_the_shipped_weights_only_for_the_shipped_recipe(tmp_path):
    def plan(**changes):
        kw = {"dataset_name": "digits-conditions", "shipped_dataset": "digits-conditions", "seed": 0, "epochs": 20,
              "retrain": False, **changes}
        return training.plan_weights("tradeoff", directory=training.SHIPPED_DIR, **kw)
    shipped = plan()
    assert shipped.use_shipped and shipped.origin == "shipped" and shipped.source == {"weights": shipped.shipped["sha256"]}
    retrain = plan(retrain=True)
    assert not retrain.use_shipped and retrain.origin == "retrained" and retrain.shipped_metric == shipped.shipped_metric
    assert plan(seed=1).origin == "trained" and plan(epochs=3).origin == "trained"
    assert plan(dataset_name="my-data").origin == "trained"
    assert retrain.source != plan(seed=1).source != shipped.source          # distinct cache keys
    assert training.distance({"daylight": 0.5, "new": 0.1}, {"daylight": 0.52}) == "daylight -2.0 pp"


@pytest.mark.slow
def test_a_built_wheel_contains_the_weight_files(tmp_path):
    """What `pip install .` installs: build the wheel from a copy of the sources (the checkout stays clean)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src)
    shutil.copytree(ROOT / "workbench", src / "workbench", ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(tmp_path / "dist")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in SHIPPED:
        assert {f"workbench/models/weights/{name}.npz", f"workbench/models/weights/{name}.json"} <= names
