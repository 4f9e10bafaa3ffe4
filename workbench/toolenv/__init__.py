"""Pinned tool environments: tools whose dependencies cannot live beside the workbench's own.

``onnx2tf`` pins TensorFlow 2.19, numpy 1.26 and protobuf 4 (the workbench runs TensorFlow 2.21);
the Vela that an NXP BSP ships (3.10.0 for lf-6.6.3_1.0.0) is older than the one installed here.
Each such tool gets its own virtual environment, created on first need from an exact lock (every
package ``==`` pinned, the list below) under the cache folder::

    <cache>/tools/<name>-<lock sha256[:12]>/     ($NPU_WORKBENCH_TOOLS instead of <cache>/tools)
        bin/ lib/ ...        the venv
        lock.txt             the requirements it was installed from
        toolenv.json         name, lock sha256, versions of the packages that matter
        content.json         the sha256 and size of every file of the environment, recorded at install
        .complete            written last: an environment without it is never used

An environment is trusted on its content, not its folder name: at install the sha256 of every file is
recorded in ``content.json`` (with one digest over all of them); each use checks that the same files with
the same sizes are there (a second, not a minute of hashing 2.6 GB), and :func:`verify` (``workbench tools
verify NAME``) hashes every file again.  A changed environment is refused, naming a changed file.

A new lock gives a new folder, so an environment is never half-upgraded; an interrupted
install (no ``.complete``) is removed and redone on the next call.  Two processes asking for the
same tool at once wait on one file lock, and one of them installs.

    >>> from workbench import toolenv
    >>> env = toolenv.ensure("vela-3.10.0")            # doctest: +SKIP
    >>> env.run(["vela", "--version"]).stdout          # doctest: +SKIP
    '3.10.0\\n'
"""

from __future__ import annotations

from .content import CONTENT, content_record
from .env import INSTALL_TIMEOUT_S, TOOLS_ENV, ToolEnv, ensure, find, tools_dir, verify
from .locks import TOOLS, ToolSpec, spec
from .processes import RUN_MARKER, remove_stale_work_folders, run_in_group

__all__ = ["CONTENT", "INSTALL_TIMEOUT_S", "RUN_MARKER", "TOOLS", "TOOLS_ENV", "ToolEnv", "ToolSpec", "content_record",
           "ensure", "find", "remove_stale_work_folders", "run_in_group", "spec", "tools_dir", "verify"]
