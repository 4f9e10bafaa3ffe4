"""quantize stage.

``wb.quantize(...)`` is the stage's verb, and ``workbench.quantize`` is also this sub-package:
importing any ``workbench.quantize.*`` module makes Python bind the *package* to the name
``quantize`` on ``workbench``, replacing the lazily exported function.  So that ``wb.quantize(...)``
works whatever was imported before, the package itself is callable and forwards to
:func:`workbench.quantize.engine.quantize`.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _QuantizePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from .engine import quantize
        return quantize(*args, **kwargs)


sys.modules[__name__].__class__ = _QuantizePackage
