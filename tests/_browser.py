"""Headless Chromium for tests that look at HTML as a person would (selenium + apt's chromium).

`make browser` installs chromium and chromium-driver with apt when root; without them the tests
that use :func:`chromium` skip and say why.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")


def _driver_path() -> str | None:
    found = shutil.which("chromedriver")
    return found or ("/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None)


def chromium(profile: Path, *, width: int = 1200, height: int = 900):
    """A headless Chromium WebDriver with a new empty profile in ``profile`` (the caller quits it)."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the dev extra: pip install -e .[dev]")
    if not Path(CHROMIUM).exists() or _driver_path() is None:
        pytest.skip("headless Chromium is not installed (run `make browser` as root: apt-get install -y "
                    "chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--window-size={width},{height}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(_driver_path()), options=options)
    driver.set_page_load_timeout(60)
    return driver
