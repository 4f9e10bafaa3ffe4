"""The trap zoo shares one folder per test session: bait models are built once."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def zoo_root(tmp_path_factory):
    return tmp_path_factory.mktemp("trap-zoo")
