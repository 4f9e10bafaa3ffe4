"""The trap zoo shares one folder per test session: bait models are built once.

``WB_ZOO_ROOT`` names a folder to share across sessions (``benchmarks/mutants.py`` runs the traps once
per mutant and builds the bait once)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def zoo_root(tmp_path_factory):
    shared = os.environ.get("WB_ZOO_ROOT")
    if shared:
        Path(shared).mkdir(parents=True, exist_ok=True)
        return Path(shared)
    return tmp_path_factory.mktemp("trap-zoo")
