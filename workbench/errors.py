"""Errors and warnings raised by the workbench.

Every error says what was expected, what was received, where (file, op index,
tensor, target or host) and what to do next.  Library code never prints; soft
problems are ``warnings.warn(..., WorkbenchWarning)``.
"""

from __future__ import annotations

from pathlib import Path


class WorkbenchError(Exception):
    """Base class of every error the workbench raises on purpose."""


class DataError(WorkbenchError, ValueError):
    """A dataset, image, manifest or split could not be used."""


class ModelError(WorkbenchError, ValueError):
    """A model file is missing, corrupt, of an unsupported format or shape."""


class QuantizationError(WorkbenchError):
    """A quantization recipe could not be applied, or its result breaks the recipe."""


class CalibrationError(WorkbenchError, ValueError):
    """A calibration set cannot be curated as asked."""


class EvaluationError(WorkbenchError, ValueError):
    """A model and a dataset do not fit together for evaluation."""


class GateError(EvaluationError):
    """A quality gate (a ``--gate`` YAML file or a ``Gate``) is malformed or cannot be applied."""


class TargetError(WorkbenchError, ValueError):
    """An unknown target, or a model a target cannot take."""


class PlacementError(WorkbenchError):
    """Op placement could not be analysed (bad model file, compiler failure)."""


class BoardError(WorkbenchError):
    """A board inventory, SSH connection, deployment or remote run failed."""


class HostKeyError(BoardError):
    """The host key of a board is unknown or has changed."""


class BenchmarkParseError(WorkbenchError, ValueError):
    """``benchmark_model`` output reports a failure or cannot be read."""


class OutputPathError(WorkbenchError, ValueError):
    """An output path is a folder, device, FIFO, socket or link, or cannot be written (disk full)."""


class BatchError(WorkbenchError):
    """A papermill batch could not be set up or run."""


class ToolError(WorkbenchError):
    """A pinned tool environment (onnx2tf, an older Vela) could not be created or its tool failed."""


class WorkbenchWarning(UserWarning):
    """A soft problem the user should see (small calibration set, per-channel on imx8mp...)."""


# -- the one message form for a missing file ---------------------------------------------------
def missing_file(what: str, path: object, fix: str, error: type[WorkbenchError] = WorkbenchError) -> WorkbenchError:
    """The error for a missing file or folder, in the one form (what, where, what to do)::

        gate file 'ci/gate.yaml' does not exist. Next: copy gate.yaml from the project root and edit it.

    For ``except FileNotFoundError`` branches: ``raise missing_file(...) from None``.
    """
    return error(f"{what} {str(path)!r} does not exist. Next: {fix.rstrip('.')}.")


def require_file(path: object, what: str, fix: str, error: type[WorkbenchError] = WorkbenchError, *,
                 kind: str = "file") -> Path:
    """``Path(path)`` if it exists (``kind``: ``"file"``, ``"dir"`` or ``"any"``), else :func:`missing_file`."""
    p = Path(str(path))
    found = {"file": p.is_file, "dir": p.is_dir, "any": p.exists}[kind]()
    if not found:
        raise missing_file(what, path, fix, error)
    return p
