"""The live view in headless Chromium: a link recorded failed turns red, cleared turns back; events appear."""

from __future__ import annotations

from tests.paths import UNIT_DATA

import json
import shutil
from pathlib import Path

from controller.state.statefile import save_state
from controller.model.failures import LinkDown
from controller.service.web.server import WebServer
from controller.service.web.view import Sources
from controller.model.topology import load
from tests.browser import chromium, link_look, wait_for

DATA = UNIT_DATA
RED, GREEN = "rgb(211, 47, 47)", "rgb(46, 125, 50)"
LINK = "p0-t0-0 -- p0-t1-1"


def test_a_recorded_failure_turns_its_link_red_and_back(tmp_path: Path):
    shutil.copy(DATA / "two_plane_lab.yaml", tmp_path / "lab.yaml")
    lab = Sources(load(tmp_path / "lab.yaml"), "srv6_spray", tmp_path / ".fabric-state.json",
                  tmp_path / "fabric-events.jsonl")
    server = WebServer(lab, "127.0.0.1", 0)
    server.start()
    try:
        with chromium() as driver:
            driver.get(server.url)
            look = wait_for(lambda: (x := link_look(driver, LINK)) and x["state"] and x, 60, "the page drew no state")
            assert (look["state"], look["stroke"]) == ("up", GREEN)
            assert driver.execute_script("return document.getElementById('conn').textContent") == "live"

            save_state(lab.state, [LinkDown("p0-t0-0", "p0-t1-1")], {LinkDown("p0-t0-0", "p0-t1-1"): "detector"})
            look = wait_for(lambda: (x := link_look(driver, LINK)) and x["state"] == "failed" and x, 60,
                            "the link did not turn failed")
            assert look == {"cls": "link state-failed by-detector", "state": "failed", "by": "detector", "stroke": RED}
            assert driver.execute_script(f"return document.querySelector('[data-who=\"{LINK}\"]').textContent") == "detector"
            assert link_look(driver, "p0-t0-1 -- p0-t1-1")["stroke"] == GREEN  # the others stay

            with open(lab.events, "a") as f:
                f.write(json.dumps({"t": 1.5, "kind": "link_down", "link": ["p0-t0-0", "p0-t1-1"]}) + "\n")
            row = wait_for(lambda: driver.execute_script(
                "const r = document.querySelector('#events tbody tr'); return r && r.textContent"), 60, "no event row")
            assert "link_down" in row and 'link=["p0-t0-0","p0-t1-1"]' in row

            save_state(lab.state, [])
            look = wait_for(lambda: (x := link_look(driver, LINK)) and x["state"] == "up" and x, 60,
                            "the link did not turn back")
            assert (look["cls"], look["stroke"]) == ("link state-up", GREEN)
    finally:
        server.close()
