"""`fabricctl run` with an operator beside it, on the default lab: failures recorded by the operator
stay until `fabricctl restore` whatever the probes say, the detector's own are restored; one-shot
`fabricctl fail/restore` go through the running controller and return once it applied them (the
switches' tables read back at once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from controller.state import statefile
from controller.model.failures import LinkDown
from controller.service.status import read_status
from controller.model.failures import DETECTOR, OPERATOR
from tests.mininet.controller.service.test_service import (  # noqa: F401  (controller: the fixture starting `fabricctl run`)
    LEAF, ROOT, SPINE, controller, link_event, recorded_event, tables_equal_plan, wait_until)

OTHER = LinkDown("p1-t0-0", "p1-t1-0")  # a link of the other plane
M = 20  # --restore-after of the tests' controllers


def origins(lab: Any) -> dict:
    return statefile.load_origins(lab.failure_state_path)


def fabricctl(lab: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """A one-shot fabricctl on the lab (election id 1, below the controller's)."""
    return subprocess.run([sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def probes_back(lab: Any, link: LinkDown) -> int:
    """Probes of `link` that came back, both directions, as the running controller's status file says."""
    view = read_status(lab.failure_state_path) or {}
    entry = view.get("links", {}).get(f"{link.t0} -- {link.t1}", {})
    return sum(d["sent"] - d["lost"] for d in entry.get("directions", {}).values())


def test_operator_failure_made_before_run_survives_healthy_probes_a_detected_one_is_restored(lab, controller):
    r = fabricctl(lab, "fail", "link", LEAF, SPINE)  # no controller runs: the one-shot writes the switches
    assert r.returncode == 0, r.stderr
    statefile.save_state(lab.failure_state_path, [LinkDown(LEAF, SPINE), OTHER], {OTHER: DETECTOR})
    lab.install(push="never")  # as a controller that detected OTHER and then died left them
    c = controller()
    c.primary_everywhere()
    n = len(c.all_events())
    c.wait(recorded_event(False, OTHER.t0, OTHER.t1), "the detected failure restored once its probes came back")
    # the operator's link is healthy and probed like any other; after 3 M of its probes back it is still failed
    wait_until(lambda: probes_back(lab, LinkDown(LEAF, SPINE)) >= 3 * M, f"{3 * M} probes back on {LEAF} -- {SPINE}")
    assert origins(lab) == {LinkDown(LEAF, SPINE): OPERATOR}
    wait_until(lambda: tables_equal_plan(lab) == {}, "the tables of the operator's failure")
    assert not any(recorded_event(False)(e) for e in c.all_events()[n:])  # never removed, not even for a moment
    # cut and mended under it: the detector sees it down and up again, the record stays the operator's
    lab.cut_link(LEAF, SPINE)
    try:
        c.wait(link_event("link_down"), "link_down on the operator's link", after=n)
    finally:
        lab.mend_link(LEAF, SPINE)
    held = c.wait(lambda e: e["kind"] == "restore_held" and e["link"] == [LEAF, SPINE], "restore_held", after=n)
    assert held["by"] == "operator"
    assert origins(lab) == {LinkDown(LEAF, SPINE): OPERATOR}
    assert tables_equal_plan(lab) == {}
    r = fabricctl(lab, "status", "--offline")
    assert f"  failed: link {LEAF} -- {SPINE} (operator)" in r.stdout.splitlines()


def test_one_shot_fail_and_restore_go_through_the_running_controller(lab, controller):
    c = controller()
    c.primary_everywhere()
    wait_until(lambda: read_status(lab.failure_state_path) is not None, "the controller's status file")
    r = fabricctl(lab, "fail", "link", LEAF, SPINE)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"recorded: fail link {LEAF} -- {SPINE}; 1 failure in {lab.failure_state_path}"
    assert lines[-1].startswith(f"applied by the running controller (pid {c.proc.pid}, election id 10) in ")
    assert r.stderr == ""
    assert tables_equal_plan(lab) == {}  # read back from the switches the moment the command returned
    assert origins(lab) == {LinkDown(LEAF, SPINE): OPERATOR}
    written = [e for e in c.all_events() if e["kind"] == "deltas_written"]
    assert written and written[-1]["failures"] == 1

    r = fabricctl(lab, "restore", "link", LEAF, SPINE, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["applied"], doc["via_controller"]["pid"], doc["via_controller"]["ok"]) == (True, c.proc.pid, True)
    assert tables_equal_plan(lab) == {}
    assert origins(lab) == {}


def test_the_labs_own_fail_and_restore_go_through_the_running_controller(lab, controller):
    """Lab.fail/restore (what the scenarios call) take the command's path: recorded, applied by the
    primary controller, waited for; the lab's sessions (election id 1) never write past it."""
    c = controller()
    c.primary_everywhere()
    wait_until(lambda: read_status(lab.failure_state_path) is not None, "the controller's status file")
    link = LinkDown(LEAF, SPINE)
    r = lab.fail(link)
    assert (r.failures, r.via, r.outcomes) == ([link], f"pid {c.proc.pid}, election id 10", {})
    assert tables_equal_plan(lab) == {}  # read back from the switches the moment it returned
    assert origins(lab) == {link: OPERATOR}
    r = lab.restore(link)
    assert (r.failures, r.via, r.outcomes) == ([], f"pid {c.proc.pid}, election id 10", {})
    assert tables_equal_plan(lab) == {} and origins(lab) == {}
    written = [e["failures"] for e in c.all_events() if e["kind"] == "deltas_written"]
    assert written[-2:] == [1, 0]


def test_restoring_a_link_whose_probes_still_fail_is_refused_by_the_controller(lab, controller):
    c = controller()
    c.primary_everywhere()
    lab.cut_link(LEAF, SPINE)
    try:
        c.wait(recorded_event(True), "the cut recorded")
        r = fabricctl(lab, "--timeout", "20", "restore", "link", LEAF, SPINE)
        assert r.returncode == 1
        # the controller's verdict, read from its view (a command that ran out of --timeout says that instead)
        assert r.stderr == (f"error: the running controller (pid {c.proc.pid}, election id 10) keeps link {LEAF} -- "
                            f"{SPINE} failed: its probes still fail, so its detector recorded it again ('fabricctl "
                            "status' shows them)\n")
        assert origins(lab) == {LinkDown(LEAF, SPINE): DETECTOR}
        assert tables_equal_plan(lab) == {}
    finally:
        lab.mend_link(LEAF, SPINE)
    wait_until(lambda: origins(lab) == {} and tables_equal_plan(lab) == {}, "restored by the detector once mended")


def test_one_shot_with_a_higher_election_id_writes_itself_with_a_warning(lab, controller):
    c = controller()
    c.primary_everywhere()
    wait_until(lambda: read_status(lab.failure_state_path) is not None, "the controller's status file")
    r = fabricctl(lab, "--election-id", "50", "fail", "link", LEAF, SPINE)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[0] == (f"warning: election id 50 is above the running controller's (pid "
                                        f"{c.proc.pid}, election id 10): this command writes the switches itself, "
                                        "deposing it there until it ends")
    assert tables_equal_plan(lab) == {}
    assert any(e["kind"] == "mastership" and e.get("deposed") for e in c.all_events())  # while the command ran
    wait_until(lambda: (read_status(lab.failure_state_path) or {}).get("primary") is True,
               "the controller primary again on every switch once the command ended")
    r = fabricctl(lab, "restore", "all")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: tables_equal_plan(lab) == {}, "the healthy plan")
    assert Path(lab.failure_state_path).exists() and origins(lab) == {}
