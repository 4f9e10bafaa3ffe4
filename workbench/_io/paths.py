"""The cache folder and shareable paths: records keep the cache token, ``~`` or relative paths, never this
machine's absolute ones (:func:`portable_paths`, :func:`local_paths`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

CACHE_ENV = "NPU_WORKBENCH_CACHE"


def cache_dir(*parts: str) -> Path:
    """The workbench cache folder (``$NPU_WORKBENCH_CACHE`` or ``~/.cache/npu-workbench``).

    ``parts`` name a sub-folder, which is created.
    """
    root = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "npu-workbench")
    path = Path(root, *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


CACHE_TOKEN = "$NPU_WORKBENCH_CACHE"


def _roots() -> list[tuple[str, str]]:
    cache = os.path.realpath(cache_dir())
    return [(cache, CACHE_TOKEN), (os.path.realpath(os.getcwd()), "."),
            (os.path.realpath(os.path.expanduser("~")), "~")]


def _looks_like_relative_path(text: str) -> bool:
    return (0 < len(text) < 1024 and "\n" not in text and not text.startswith(("/", "$", "~"))
            and ("/" in text or text.startswith(".")))


def _exists(path: str | os.PathLike) -> bool:
    """``os.path.exists`` that is False for names the OS refuses (too long, bad bytes)."""
    try:
        return os.path.exists(path)
    except (OSError, ValueError):
        return False


def portable_paths(obj: Any, *, base: str | os.PathLike | None = None) -> Any:
    """``obj`` with local absolute paths made shareable (cache token, relative, ``~``); other strings as they are.

    Without ``base``, paths under the working folder become relative to it.  With ``base`` (the folder
    the record is written to), paths under the working folder or under ``base``'s run root (three levels
    up: ``<out>/runs/<run-id>/<target>``) become relative to ``base`` itself, and relative paths that
    exist from the working folder are rewritten relative to ``base``: the record then reads the same
    from any working folder (:func:`local_paths` with the same ``base``)."""
    roots = _roots()
    anchor = os.path.realpath(base) if base is not None else None
    tops = []
    if anchor is not None:
        tops = [os.path.realpath(os.getcwd()), str(Path(anchor).parents[min(2, len(Path(anchor).parents) - 1)])]

    def one(text: str) -> str:
        if anchor is not None and _looks_like_relative_path(text) and _exists(text):
            text = os.path.abspath(text)
        if not text.startswith("/"):
            return text
        real = os.path.realpath(text)
        cache_root, cache_token = roots[0]
        for candidate in (text, real):
            if candidate == cache_root or candidate.startswith(cache_root + os.sep):
                rest = candidate[len(cache_root):].lstrip(os.sep)
                return f"{cache_token}/{rest}" if rest else cache_token
        if anchor is not None:
            for top in tops:
                if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
                    return os.path.relpath(real, anchor)
        for root, token in roots[1:]:
            if anchor is not None and token == ".":
                continue
            for candidate in (text, real):
                if candidate == root or candidate.startswith(root + os.sep):
                    rest = candidate[len(root):].lstrip(os.sep)
                    return (f"{token}/{rest}" if rest else token) if token != "." else (rest or ".")
        return text
    return _walk(obj, one)


def local_paths(obj: Any, *, base: str | os.PathLike | None = None) -> Any:
    """The inverse of :func:`portable_paths` for the cache token and ``~``.

    With ``base`` (the record's folder), a relative path is resolved against ``base`` when it exists
    there; a record written before paths were relative to their record (relative to the batch's
    ``--out``, up to three levels above ``base``) is resolved against the first ancestor holding it;
    otherwise it stays as written (relative to the working folder)."""
    cache = str(cache_dir())
    anchors = [] if base is None else [Path(base), *list(Path(base).parents)[:3]]

    def one(text: str) -> str:
        if text == CACHE_TOKEN or text.startswith(CACHE_TOKEN + "/"):
            return cache + text[len(CACHE_TOKEN):]
        if text.startswith("~/"):
            return os.path.expanduser(text)
        if anchors and _looks_like_relative_path(text):
            for anchor in anchors:
                candidate = anchor / text
                if _exists(candidate):
                    return os.path.normpath(os.path.abspath(candidate))
        return text
    return _walk(obj, one)


def _walk(obj: Any, fn: Any) -> Any:
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _walk(v, fn) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_walk(v, fn) for v in obj]
    return obj
