"""Keeping what tools print (the TFLite converter, absl) out of the notebook cell."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


def _running_loop() -> Any:
    import asyncio
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


@dataclass
class _Captured:
    text: str = ""


@contextlib.contextmanager
def _captured_output() -> Iterator[_Captured]:
    """Send what tools print (Python and C-level stdout/stderr: the TFLite converter, absl) to a
    buffer instead of the notebook cell; the text is kept for ``Explorer.tool_output``."""
    import sys
    out = _Captured()
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = []
        sinks: tuple[_TextSink, ...] = ()
        try:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            for fd in (1, 2):
                saved.append((fd, os.dup(fd)))
                os.dup2(sink.fileno(), fd)
        except OSError:
            pass
        try:
            sinks = (_TextSink(sink, sys.stdout), _TextSink(sink, sys.stderr))
            with contextlib.redirect_stdout(sinks[0]), contextlib.redirect_stderr(sinks[1]):
                yield out
        finally:
            for text_sink in sinks:
                text_sink.release()
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            out.text = sink.read().decode("utf-8", "replace")


class _TextSink:
    """A text stream writing into a binary file (the Python half of :func:`_captured_output`).

    A logging handler created during the capture (absl's) keeps this object as its stream: after
    the capture it writes to the stream it replaced, and closing it is a no-op."""

    def __init__(self, sink: Any, original: Any) -> None:
        self.sink: Any = sink
        self.original = original

    def release(self) -> None:
        self.sink = None

    def write(self, text: str) -> int:
        if self.sink is None:
            return self.original.write(text)
        self.sink.write(text.encode("utf-8", "replace"))
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            (self.original if self.sink is None else self.sink).flush()

    def close(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True
