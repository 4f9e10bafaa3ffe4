"""Committed notebooks are clean, and opening one in JupyterLab does not mark it modified.

JupyterLab 4 writes the running kernel's ``kernelspec`` and ``language_info`` into the notebook's
metadata when a kernel starts; the shared model skips the write (and the "modified" dot) only when
the stored value is deep-equal to what the kernel reports.  A notebook that stores only
``language_info.name`` is therefore modified by merely opening it.  So the committed metadata is
exactly what the npu-workbench kernel reports, the file is byte-for-byte what Jupyter's own writer
saves (indent 1, sorted keys, trailing newline), and nothing else is stored.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL = json.loads((ROOT / "kernels" / "npu-workbench" / "kernel.json").read_text())


def ids(paths):
    return [p.stem for p in paths]


def kernel_language_info() -> dict:
    """What ipykernel (the npu-workbench kernel) reports in its kernel_info reply."""
    from ipykernel.ipkernel import IPythonKernel
    return dict(IPythonKernel.language_info)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_notebook_metadata_is_clean_and_what_the_kernel_reports(path):
    text = path.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    assert (nb.nbformat, nb.nbformat_minor) == (4, 5), f"{path.name}: nbformat 4.5 (cell ids) expected"
    assert set(nb.metadata) <= {"kernelspec", "language_info"}, \
        f"{path.name}: metadata limited to kernelspec and language_info, got {sorted(nb.metadata)}"
    assert dict(nb.metadata.kernelspec) == {"name": "npu-workbench", "display_name": KERNEL["display_name"],
                                            "language": KERNEL["language"]}
    stored, live = dict(nb.metadata.language_info), kernel_language_info()
    # Every field JupyterLab compares; the patch release of Python may differ between machines.
    assert {k: v for k, v in stored.items() if k != "version"} == {k: v for k, v in live.items() if k != "version"}, \
        f"{path.name}: language_info must be what the kernel reports (JupyterLab marks it modified otherwise)"
    assert stored["version"].split(".")[:2] == live["version"].split(".")[:2] == ["3", "11"]
    for cell in nb.cells:
        assert cell.get("id"), f"{path.name}: every cell has an id"
        assert set(cell.metadata) <= {"tags"}, f"{path.name}: cell metadata {dict(cell.metadata)} (only tags)"
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: clear outputs and counts"
    assert text == nbformat.writes(nb) + "\n", \
        f"{path.name}: not in Jupyter's own layout (indent 1, sorted keys, trailing newline): saving would rewrite it"

