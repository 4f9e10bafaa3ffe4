"""Where a pipeline keeps its stage results: the :class:`Store` protocol and its three implementations.

- :class:`RunFolderStore`: a run folder's JSON records (``runs/<id>/<target>/<stage>.json``, one per
  stage: what the stage notebooks and the batch share);
- :class:`MemoStore`: an in-memory memo keyed by what each result was computed from (the explorer);
- :class:`CellStore`: sealed JSON records in the workbench cache keyed by content (the sweep's cells, which
  Dask workers share through ``$NPU_WORKBENCH_CACHE``).

A store only keeps and returns results; whether a result it returns still fits the request is the
pipeline's rule (:mod:`workbench.chain`'s ``*_fits``), checked on every load.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import WorkbenchWarning
from ..vocab import STAGE_TYPES

__all__ = ["CellStore", "MemoStore", "RunFolderStore", "Store", "result_type"]



def result_type(stage: str) -> Any:
    """The result class ``stage`` saves."""
    module, _, name = STAGE_TYPES[stage].partition(":")
    return getattr(importlib.import_module(module), name)


@runtime_checkable
class Store(Protocol):
    """Keeps stage results.  ``key`` is the content key of what the result is computed from (a store
    keyed by content files it under it; a run folder, one record per stage, ignores it)."""

    def get(self, stage: str, key: str) -> Any | None:
        """The result saved for ``stage`` (and ``key``), or None."""

    def put(self, stage: str, key: str, result: Any, params: dict[str, Any]) -> None:
        """Keep ``result`` of ``stage`` (computed from ``params``)."""

    def output(self, stage: str) -> str | os.PathLike | None:
        """Where ``stage`` writes its files (the INT8 model), or None: the workbench cache."""

    def rejected(self, stage: str) -> None:
        """A saved result did not fit the request and is computed again (a store may say so)."""


class RunFolderStore:
    """A run folder's JSON stage records (:class:`~workbench.runs.RunFolder`)."""

    def __init__(self, folder: Any) -> None:
        self.folder = folder

    def get(self, stage: str, key: str) -> Any | None:
        from ..errors import BatchError
        try:
            return self.folder.load(stage)
        except BatchError as exc:            # a damaged record is never trusted: computed again, rewritten whole
            warnings.warn(f"{exc} Computing the {stage} stage again.", WorkbenchWarning, stacklevel=4)
            return None

    def put(self, stage: str, key: str, result: Any, params: dict[str, Any]) -> None:
        self.folder.save(stage, result, params=params)

    def output(self, stage: str) -> Path | None:
        return self.folder.path / "model" if stage == "quantize" else None

    def rejected(self, stage: str) -> None:
        warnings.warn(f"{self.folder.file(stage)} was computed with other parameters; computing the {stage} stage "
                      "again with the ones given.", WorkbenchWarning, stacklevel=4)

    def __repr__(self) -> str:
        return f"RunFolderStore({self.folder!r})"


class MemoStore:
    """An in-memory memo: ``{(stage, key): result}`` (the explorer: a setting seen before is a look-up).

    ``stages``: the stages kept (default all); the explorer leaves ``quantize`` to the quantize cache, which
    is content-addressed too and says when it was a hit."""

    def __init__(self, stages: Iterable[str] | None = None) -> None:
        self.memo: dict[tuple[str, str], Any] = {}
        self.stages = None if stages is None else frozenset(stages)

    def get(self, stage: str, key: str) -> Any | None:
        return self.memo.get((stage, key))

    def put(self, stage: str, key: str, result: Any, params: dict[str, Any]) -> None:
        if self.stages is None or stage in self.stages:
            self.memo[(stage, key)] = result

    def output(self, stage: str) -> None:
        return None

    def rejected(self, stage: str) -> None:
        return None

    def __len__(self) -> int:
        return len(self.memo)

    def __repr__(self) -> str:
        return f"MemoStore({len(self.memo)} result(s))"


class CellStore:
    """Sealed JSON records under ``$NPU_WORKBENCH_CACHE/<folder>/<stage>-<key>.json`` (the sweep's cell
    cache: workers on other machines share it through the cache folder).  A damaged record warns and
    counts as missing (:func:`~workbench._io.read_sealed_json`)."""

    def __init__(self, folder: str = "sweep-stages") -> None:
        self.folder = folder

    def _path(self, stage: str, key: str) -> Path:
        from .._io import cache_dir
        return cache_dir(self.folder) / f"{stage}-{key}.json"

    def get(self, stage: str, key: str) -> Any | None:
        from .._io import read_sealed_json
        data = read_sealed_json(self._path(stage, key))
        if data is None:
            return None
        try:
            return result_type(stage).from_dict(data)
        except (KeyError, TypeError, ValueError):
            return None                  # written by another version of the result type: computed again

    def put(self, stage: str, key: str, result: Any, params: dict[str, Any]) -> None:
        from .._io import write_sealed_json
        write_sealed_json(self._path(stage, key), result.to_dict())

    def output(self, stage: str) -> None:
        return None

    def rejected(self, stage: str) -> None:
        return None

    def __repr__(self) -> str:
        return f"CellStore({self.folder!r})"
