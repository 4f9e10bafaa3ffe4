"""The tools and the exact locks of their environments (:data:`TOOLS`, :class:`ToolSpec`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from .._io import sha256_bytes
from ..errors import ToolError


@dataclass(frozen=True)
class ToolSpec:
    """A tool and the exact lock of its environment.

    ``requirements`` pins every package (``name==version``); ``report`` names the packages whose
    versions go into manifests; ``check`` is a command run after install that must succeed.
    """

    name: str
    summary: str
    requirements: tuple[str, ...]
    report: tuple[str, ...]
    check: tuple[str, ...]

    def __post_init__(self) -> None:
        loose = [r for r in self.requirements if "==" not in r]
        if loose:
            raise ValueError(f"tool {self.name!r}: every requirement must be pinned with ==; got {loose}")

    @property
    def lock_text(self) -> str:
        return "".join(f"{r}\n" for r in sorted(self.requirements, key=str.lower))

    @property
    def lock_sha256(self) -> str:
        """sha256 of the lock and the Python it is installed for (major.minor)."""
        python = f"python{sys.version_info.major}.{sys.version_info.minor}\n"
        return sha256_bytes((python + self.lock_text).encode())


# `pip freeze` of `pip install onnx2tf==1.29.24` on Python 3.11 (2026-12-01).
_ONNX2TF_LOCK = (
    "absl-py==2.5.1", "ai-edge-litert==2.1.0", "astunparse==1.6.3", "backports.strenum==1.2.8",
    "certifi==2026.10.19.post1", "charset-normalizer==3.5.3", "coloredlogs==15.0.1",
    "flatbuffers==25.12.19", "gast==0.7.0", "google-pasta==0.2.0", "grpcio==1.85.3", "h5py==3.11.0",
    "humanfriendly==10.0", "idna==3.20", "json2onnx==2.0.3", "keras==3.15.1", "libclang==18.1.1",
    "Markdown==3.11.3", "markdown-it-py==4.3.0", "MarkupSafe==3.0.4", "mdurl==0.1.2",
    "ml_dtypes==0.5.1", "mpmath==1.3.0", "namex==0.1.0", "numpy==1.26.4", "onnx==1.19.1",
    "onnx2json==2.0.4", "onnx2tf==1.29.24", "onnx_graphsurgeon==0.5.8", "onnxoptimizer==0.4.2",
    "onnxruntime==1.23.0", "onnxsim==0.4.36", "opencv-python==4.11.0.86", "opt_einsum==3.4.0",
    "optree==0.20.0", "packaging==26.4", "protobuf==4.25.5", "psutil==5.9.5", "Pygments==2.21.0",
    "requests==2.32.5", "rich==15.0.0", "sam4onnx==2.0.0", "sbi4onnx==1.0.7", "scc4onnx==1.0.7",
    "scs4onnx==1.0.18", "sde4onnx==1.0.0", "sed4onnx==1.0.5", "simple_onnx_processing_tools==1.1.32",
    "sio4onnx==1.0.3", "sit4onnx==1.0.10", "six==1.17.0", "sna4onnx==1.0.6", "snc4onnx==1.0.14",
    "snd4onnx==1.1.7", "sne4onnx==2.0.1", "sng4onnx==2.0.1", "soa4onnx==1.0.5", "soc4onnx==1.0.2",
    "sod4onnx==1.0.0", "sog4onnx==1.0.17", "sor4onnx==1.0.7", "spo4onnx==1.0.5", "ssc4onnx==1.0.8",
    "ssi4onnx==1.0.4", "svs4onnx==1.0.0", "sympy==1.14.0", "tensorboard==2.19.0",
    "tensorboard-data-server==0.7.2", "tensorflow==2.19.0", "tensorflow-io-gcs-filesystem==0.37.1",
    "termcolor==3.3.0", "tf_keras==2.19.0", "tqdm==4.70.1", "typing_extensions==4.16.0",
    "urllib3==2.8.0", "Werkzeug==3.1.9", "wrapt==2.5.2",
)

TOOLS: dict[str, ToolSpec] = {
    "onnx2tf": ToolSpec(
        name="onnx2tf",
        summary="ONNX -> TensorFlow SavedModel / TFLite converter (PINTO0309), with its own TensorFlow 2.19",
        requirements=_ONNX2TF_LOCK,
        report=("onnx2tf", "tensorflow", "onnx", "onnxruntime", "onnxsim", "numpy"),
        check=("python", "-c", "import onnx2tf, tensorflow"),
    ),
    "vela-3.10.0": ToolSpec(
        name="vela-3.10.0",
        summary="Arm Vela 3.10.0, the Ethos-U compiler NXP BSP lf-6.6.3_1.0.0 ships for the i.MX 93",
        # numpy 1.26: with numpy 2.x Vela 3.10.0's scheduler overflows an int32 on every model
        # ("Python integer 4294967296 out of bounds for int32", measured on the reference a8w8_pc model).
        requirements=("ethos-u-vela==3.10.0", "flatbuffers==23.5.26", "lxml==6.1.3", "numpy==1.26.4"),
        report=("ethos-u-vela", "numpy"),
        check=("vela", "--version"),
    ),
    # torch 2.13 CPU for exporting PyTorch models to ONNX (the test zoo: MTCNN's ONet, a heatmap net);
    # `pip freeze` after `pip install torch==2.13.0 numpy==1.26.4 onnx==1.19.1` on Python 3.11
    # (2026-12-01). torchvision is left out: its index build does not load against the CPU torch.
    "torch-2.13": ToolSpec(
        name="torch-2.13",
        summary="PyTorch 2.13 (CPU) and onnx 1.19.1, for torch.onnx.export of the test zoo's PyTorch models",
        requirements=("filelock==4.3.1", "fsspec==2026.9.0", "Jinja2==3.1.6", "MarkupSafe==3.0.4",
                      "ml_dtypes==0.5.4", "mpmath==1.3.0", "networkx==3.6.1", "numpy==1.26.4", "onnx==1.19.1",
                      "protobuf==7.36.2", "sympy==1.14.0", "torch==2.13.0", "typing_extensions==4.16.0"),
        report=("torch", "onnx", "numpy"),
        check=("python", "-c", "import torch, onnx"),
    ),
    # BSP lf-6.1.55_2.2.0 ships Vela 3.9.1.dev7 (an NXP build); 3.9.0 is the nearest on the package
    # index (`pip freeze` after `pip install ethos-u-vela==3.9.0 numpy==1.26.4`, Python 3.11).
    "vela-3.9.0": ToolSpec(
        name="vela-3.9.0",
        summary="Arm Vela 3.9.0, nearest release to the Vela 3.9.1.dev7 NXP BSP lf-6.1.55_2.2.0 ships",
        requirements=("ethos-u-vela==3.9.0", "flatbuffers==2.0.7", "lxml==6.1.3", "numpy==1.26.4"),
        report=("ethos-u-vela", "numpy"),
        check=("vela", "--version"),
    ),
}


def spec(name: str) -> ToolSpec:
    try:
        return TOOLS[name]
    except KeyError:
        listed = ", ".join(repr(n) for n in TOOLS)
        raise ToolError(f"`tool` must be one of {listed}. Got {name!r} instead.") from None
