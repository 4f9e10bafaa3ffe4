"""Set-up: dependencies in sync, the CLI starts fast, the kernel spec is right."""

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _name(spec: str) -> str:
    return re.split(r"[<>=!~ \[]", spec, maxsplit=1)[0].lower()


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = set(project["dependencies"]) | set(project["optional-dependencies"]["dev"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = {p for p in pip if not p.startswith("-e")}
    assert listed == wanted, f"only in pyproject: {wanted - listed}; only in environment.yml: {listed - wanted}"


def test_required_dependencies_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {_name(d) for d in project["dependencies"]}
    for needed in ("tensorflow-cpu", "ai-edge-litert", "onnx", "onnxruntime", "tf2onnx", "ethos-u-vela",
                   "papermill", "nbconvert", "jupyterlab", "ipywidgets", "matplotlib", "seaborn",
                   "scikit-learn", "pillow", "pyyaml", "tqdm"):
        assert needed in names


def test_help_does_not_import_heavy_libraries():
    code = ("import sys, contextlib, io\n"
            "from workbench.cli import build_parser\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try: build_parser().parse_args(['--help'])\n"
            "    except SystemExit: pass\n"
            "heavy = [m for m in ('tensorflow', 'onnxruntime', 'ethosu', 'matplotlib', 'paramiko', 'keras', 'papermill') if m in sys.modules]\n"
            "print(heavy)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_console_script_and_module_entry_points():
    out = subprocess.run([sys.executable, "-m", "workbench", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "usage: workbench" in out.stdout
    exe = Path(sys.executable).with_name("workbench")
    assert exe.exists(), "the `workbench` console script is not installed (pip install -e .)"


def test_kernel_spec():
    spec = json.loads((ROOT / "kernels" / "npu-workbench" / "kernel.json").read_text())
    assert spec["language"] == "python" and "ipykernel_launcher" in spec["argv"]
    from jupyter_client.kernelspec import KernelSpecManager
    assert "npu-workbench" in KernelSpecManager().find_kernel_specs(), "run `make setup` to register the kernel"


def test_every_public_name_resolves():
    """`import workbench as wb; wb.<name>` works for every name the package exports."""
    import workbench
    missing = []
    for name in workbench.__all__:
        try:
            getattr(workbench, name)
        except (AttributeError, ImportError) as exc:
            missing.append(f"{name}: {exc}")
    assert not missing, missing


def test_one_version_source_with_its_changelog_section():
    """`workbench.__version__` is the only version written down; pyproject reads it; CHANGELOG has its section."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in config["project"] and "version" in config["project"]["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "workbench.__version__"}
    from setuptools.config.pyprojecttoml import read_configuration

    import workbench
    assert read_configuration(ROOT / "pyproject.toml", expand=True)["project"]["version"] == workbench.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", workbench.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(workbench.__version__)}( - .+)?$", changelog, re.M), \
        f"CHANGELOG.md has no '## {workbench.__version__} - YYYY-MM-DD' section"
