"""Warm kernels for the batch: a kernel that executed a notebook runs the next one, reset in between.

Starting a kernel and importing TensorFlow, Keras and the workbench again costs seconds per notebook,
most of a stage notebook's own work on a small model.  A kernel that executed a notebook without
trouble (a cell that raised is fine; a timeout or a dead kernel is not) runs the next one after its
user namespace, IPython history and execution count, warnings registry and filters, environment,
working folder, ``sys.path``, matplotlib figures and rc, and Keras' global state are reset to the
snapshot taken when it started.  Imported modules stay: that is the saving.  Every report is still a
notebook papermill executed cell by cell.  ``NPU_WORKBENCH_FRESH_KERNELS=1`` starts a new kernel for
every notebook instead (to rule the reuse out when something looks odd).
"""

from __future__ import annotations

import atexit
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

#: set to 1 for a new kernel per notebook (no warm kernels)
FRESH_KERNELS_ENV = "NPU_WORKBENCH_FRESH_KERNELS"
# what nbclient passes to a kernel it starts: IPython history in memory (no sqlite file shared by kernels)
_KERNEL_ARGS = ["--HistoryManager.hist_file=:memory:"]
_log = logging.getLogger(__name__)

# Run in a new kernel before its first notebook: what "new" means for the reset below.  matplotlib's
# pyplot is imported here (every stage notebook plots) so that its inline backend has set its rc.
_SNAPSHOT = """
def _wb_snapshot():
    import os, sys, types, warnings
    import matplotlib, matplotlib.pyplot
    state = types.ModuleType("_wb_kernel_state")
    state.filters, state.environ, state.cwd = list(warnings.filters), dict(os.environ), os.getcwd()
    state.path, state.rc = list(sys.path), dict(matplotlib.rcParams.copy())
    sys.modules[state.__name__] = state
_wb_snapshot()
del _wb_snapshot
"""
# Run in a warm kernel before each further notebook: back to the snapshot.
_RESET = """
def _wb_reset():
    import os, sys, warnings
    state = sys.modules["_wb_kernel_state"]
    get_ipython().reset(new_session=True)        # user namespace, In/Out, history; execution count 1
    warnings.filters[:] = state.filters
    warnings._filters_mutated()                  # "once"/"default" warnings show again
    os.environ.clear()
    os.environ.update(state.environ)
    os.chdir(state.cwd)
    sys.path[:] = state.path
    import matplotlib, matplotlib.pyplot as plt
    plt.close("all")
    # the snapshot was taken before pyplot loaded its backend: the inline backend turned interactive mode
    # on when the first figure was drawn, and a figure is shown at the end of a cell only in that mode
    # (and a notebook may have switched to Agg, e.g. `matplotlib.use("Agg")`): back to the kernel's own
    # backend, interactive as the inline backend sets itself
    inline = "matplotlib_inline" in str(state.rc.get("backend", ""))
    dict.update(matplotlib.rcParams, state.rc)
    if inline:
        plt.switch_backend(state.rc["backend"])
        matplotlib.interactive(True)
    if "keras" in sys.modules:                   # layer-name counters and global Keras state (no gc: 0.2 s)
        sys.modules["keras"].backend.clear_session(free_memory=False)
_wb_reset()
"""


class _Slot:
    """One kernel and the one thread that drives it (a kernel manager stays on its event loop)."""

    def __init__(self) -> None:
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wb-kernel")
        self.km: Any = None             # jupyter_client AsyncKernelManager, None until started
        self.used = 0                   # notebooks executed on the current kernel


class KernelPool:
    """Warm kernels for notebook executions: one per concurrent execution, reused after a reset.

    ``run(fn)`` calls ``fn(km)`` on a free slot's thread with a kernel ready for a new notebook
    (started, or reset to its snapshot), and keeps the kernel when ``fn`` returns True; otherwise (a
    failed or interrupted notebook, a reset that failed) the kernel is shut down and the next
    notebook gets a new one.  ``fresh=True``: a new kernel every time.
    """

    def __init__(self, kernel_name: str, cwd: Path, *, fresh: bool = False, startup_timeout: float = 120) -> None:
        self.kernel_name, self.cwd, self.fresh, self.startup_timeout = kernel_name, cwd, fresh, startup_timeout
        self._free: list[_Slot] = []
        self._all: list[_Slot] = []
        self._lock = threading.Lock()
        self.started = 0                # kernels started (for tests and the batch log)
        atexit.register(self.close)

    def run(self, fn: Any) -> Any:
        with self._lock:
            slot = self._free.pop() if self._free else None
            if slot is None:
                slot = _Slot()
                self._all.append(slot)
        try:
            return slot.thread.submit(self._run_on_slot, slot, fn).result()
        finally:
            with self._lock:
                self._free.append(slot)

    def _run_on_slot(self, slot: _Slot, fn: Any) -> Any:
        from jupyter_core.utils import run_sync
        keep = False
        try:
            if slot.km is not None and (self.fresh or not run_sync(self._prepare)(slot.km, _RESET)):
                self._shutdown(slot)
            if slot.km is None:
                slot.km = self._start()
            keep, result = fn(slot.km)
            slot.used += 1
            return result
        finally:
            if not keep or self.fresh:
                self._shutdown(slot)

    def _start(self) -> Any:
        from jupyter_client.manager import AsyncKernelManager
        from jupyter_core.utils import run_sync
        km = AsyncKernelManager(kernel_name=self.kernel_name)
        run_sync(km.start_kernel)(extra_arguments=list(_KERNEL_ARGS), cwd=str(self.cwd))
        self.started += 1
        if not self.fresh and not run_sync(self._prepare)(km, _SNAPSHOT):
            run_sync(km.shutdown_kernel)(now=True)
            km = AsyncKernelManager(kernel_name=self.kernel_name)
            run_sync(km.start_kernel)(extra_arguments=list(_KERNEL_ARGS), cwd=str(self.cwd))
            self.started += 1
            self.fresh = True           # the snapshot failed: no reuse (every notebook gets a new kernel)
        return km

    async def _prepare(self, km: Any, code: str) -> bool:
        """Run ``code`` in the kernel (no history, output discarded); True when it ran without error."""
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=self.startup_timeout)
            reply = await kc.execute_interactive(code, store_history=False, allow_stdin=False,
                                                 timeout=self.startup_timeout, output_hook=lambda msg: None)
            ok = reply["content"]["status"] == "ok"
            if not ok:
                _log.warning("kernel reset failed (%s: %s); a new kernel runs the next notebook",
                             reply["content"].get("ename"), reply["content"].get("evalue"))
            return ok
        except Exception as exc:        # a kernel that does not answer: start a new one
            _log.warning("kernel reset failed (%s: %s); a new kernel runs the next notebook",
                         type(exc).__name__, exc)
            return False
        finally:
            kc.stop_channels()

    def _shutdown(self, slot: _Slot) -> None:
        if slot.km is None:
            return
        from jupyter_core.utils import run_sync
        try:
            run_sync(slot.km.shutdown_kernel)(now=False)
        except Exception:               # already gone: make sure of it
            try:
                run_sync(slot.km.shutdown_kernel)(now=True)
            except Exception:
                pass
        slot.km, slot.used = None, 0

    def close(self) -> None:
        """Shut every kernel down (idempotent; also at interpreter exit)."""
        with self._lock:
            slots, self._all, self._free = self._all, [], []
        for slot in slots:
            slot.thread.submit(self._shutdown, slot).result()
            slot.thread.shutdown(wait=True)
        atexit.unregister(self.close)


def warm_kernel_engine() -> str:
    """Register (once) and name the papermill engine that runs a notebook on a given kernel manager."""
    from papermill.clientwrap import PapermillNotebookClient
    from papermill.engines import NBClientEngine, papermill_engines
    from papermill.utils import merge_kwargs, remove_args
    name = "workbench-warm-kernel"
    if name in papermill_engines._engines:
        return name

    class WarmKernelEngine(NBClientEngine):
        """papermill's nbclient engine on the kernel manager passed as ``km`` (not shut down after)."""

        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, log_output=False, stdout_file=None,
                                     stderr_file=None, start_timeout=60, execution_timeout=None, **kwargs):
            kwargs = remove_args(["input_path", "timeout", "startup_timeout"], **kwargs)
            client = PapermillNotebookClient(nb_man, **merge_kwargs(
                kwargs, timeout=execution_timeout, startup_timeout=start_timeout, kernel_name=kernel_name,
                log=_log, log_output=log_output, stdout_file=stdout_file, stderr_file=stderr_file))
            try:
                return client.execute()
            finally:
                if client.kc is not None:
                    client.kc.stop_channels()

    papermill_engines.register(name, WarmKernelEngine)
    return name
