"""Headless Chromium through chromedriver (selenium) for the live view's tests; skips name what is missing."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
from tests.require import need

T = TypeVar("T")
CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                 "--window-size=1500,1000")


def missing() -> str | None:
    """Why no browser test can run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium not installed (pip install -e '.[test]')"
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        return "chromium not found (Debian: apt-get install chromium chromium-driver)"
    if not shutil.which("chromedriver"):
        return "chromedriver not found (Debian: apt-get install chromium-driver)"
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium driven by chromedriver, with its own throw-away profile; skip if absent."""
    why = missing()
    need("chromium", why is None, why or "")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="srv6-fabric-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or ""
    for a in CHROMIUM_ARGS:
        opts.add_argument(a)
    opts.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=shutil.which("chromedriver")))
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(what: Callable[[], T | None], timeout: float, message: str, every: float = 0.05) -> T:
    """Poll `what` until it returns something truthy (bounded); AssertionError with `message` otherwise."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = what()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"{message} (last seen: {last!r})")


def link_look(driver: Any, key: str) -> dict[str, str]:
    """A link's class, data-state, data-by and computed stroke colour as the browser has them."""
    return driver.execute_script(
        "const e = document.querySelector(`[data-link=\"${arguments[0]}\"]`);"
        "if (!e) return null;"
        "return {cls: e.getAttribute('class'), state: e.dataset.state || '', by: e.dataset.by || '',"
        " stroke: getComputedStyle(e).stroke};", key)
