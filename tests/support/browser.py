"""Headless Chromium (Debian's `chromium` + `chromium-driver`) driven by Selenium, with a
fresh profile and no background traffic; `chromium_missing()` says why a test must skip."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,1100",
)


def chromium_binary() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)


def chromium_missing() -> str | None:
    if chromium_binary() is None or shutil.which("chromedriver") is None:
        return "needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver; `make browser`)"
    return None


@contextmanager
def chromium() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="kohaku-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium_binary() or "chromium"
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
