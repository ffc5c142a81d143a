"""Headless Chromium for the tests, through selenium and Debian's chromedriver.

``chromium_or_skip()`` skips the test with one line when chromium, its
driver or selenium is missing.  The flags keep Chromium off the network and
out of the user's profile: a fresh ``--user-data-dir`` each time.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def _find(*names: str) -> str | None:
    return next((p for p in map(shutil.which, names) if p), None)


@contextlib.contextmanager
def chromium_or_skip() -> Iterator[Any]:
    browser = _find("chromium", "chromium-browser")
    driver_exe = _find("chromedriver")
    if browser is None or driver_exe is None:
        pytest.skip("chromium or chromedriver not installed (Debian: apt-get install chromium chromium-driver)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium not installed (pip install selenium)")
    profile = tempfile.mkdtemp(prefix="fluxsched-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={profile}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_exe), options=opts)
    try:
        driver.set_page_load_timeout(60)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
