"""`fabricctl web` beside `fabricctl run` on the default lab, in headless Chromium: `fabricctl fail link`
turns the link red on the page, `fabricctl restore` turns it back; the controller's events stream in."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.service.status import read_status
from tests.browser import chromium, link_look, wait_for
from tests.mininet.controller.service.test_service import (  # noqa: F401  (controller: the fixture starting `fabricctl run`)
    LEAF, ROOT, SPINE, TIMEOUT, controller, wait_until)
from tests.mininet.controller.service.test_ops import fabricctl

RED, GREEN = "rgb(211, 47, 47)", "rgb(46, 125, 50)"
KEY = f"{LEAF} -- {SPINE}"


@pytest.fixture
def web(lab: Any, tmp_path: Path) -> Iterator[str]:
    """`fabricctl web` on a free loopback port; its URL as it printed it."""
    log = open(tmp_path / "web.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path), "web",
                             "--listen", "127.0.0.1:0"], cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        m = re.match(r"fabric view: (http://127\.0\.0\.1:\d+/) \(loopback only", line)
        assert m, f"fabricctl web printed {line!r}; stderr: {Path(log.name).read_text()}"
        yield m.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_fail_and_restore_show_on_the_page(lab: Any, controller: Any, web: str):
    c = controller(10, "events", "--counters-every", "1")
    c.primary_everywhere()
    wait_until(lambda: read_status(lab.failure_state_path) is not None, "the controller's status file")
    with chromium() as driver:
        driver.get(web)
        wait_for(lambda: (x := link_look(driver, KEY)) and x["state"] == "up", TIMEOUT, "the page drew the link up")
        wait_for(lambda: "primary on 8/8" in driver.find_element("id", "controller").text, TIMEOUT,
                 "the page shows the controller primary everywhere")

        r = fabricctl(lab, "fail", "link", LEAF, SPINE)
        assert r.returncode == 0, r.stderr
        done = time.monotonic()
        look = wait_for(lambda: (x := link_look(driver, KEY)) and x["state"] == "failed" and x, TIMEOUT,
                        "the failed link turned red")
        red_after = time.monotonic() - done
        assert look == {"cls": "link state-failed by-operator", "state": "failed", "by": "operator", "stroke": RED}
        assert link_look(driver, f"{LEAF} -- p0-t1-0")["stroke"] == GREEN
        rows = wait_for(lambda: [r for r in driver.execute_script(
            "return [...document.querySelectorAll('#events tbody tr')].map(r => r.textContent)")
            if "deltas_written" in r and "failures=1" in r], TIMEOUT, "the controller's deltas_written event on the page")
        assert LEAF in rows[0]  # the leaf whose tables changed
        path = os.environ.get("SRV6_FABRIC_WEB_SCREENSHOT")
        if path:  # docs/web-view.png comes from here
            wait_for(lambda: driver.execute_script(
                "return document.querySelectorAll('#paths tbody tr').length"), TIMEOUT, "the path counter rows")
            driver.save_screenshot(path)

        r = fabricctl(lab, "restore", "link", LEAF, SPINE)
        assert r.returncode == 0, r.stderr
        done = time.monotonic()
        look = wait_for(lambda: (x := link_look(driver, KEY)) and x["state"] == "up" and x, TIMEOUT,
                        "the restored link turned back")
        green_after = time.monotonic() - done
        assert (look["cls"], look["stroke"]) == ("link state-up", GREEN)
    print(f"page red {red_after * 1000:.0f} ms after 'fabricctl fail' returned, green {green_after * 1000:.0f} ms "
          "after 'fabricctl restore' returned")
