"""`fabricctl run` on a kernel lab's topology.yaml: a port that loses carrier fails its link in the record (as the
detector's) and its nexthops leave the routes while traffic passes; carrier back restores them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.failover import LinkDown, load_origins
from controller.southbound.kroutes import Nexthop, intf, link_local, pulled_nexthops
from controller.state.statefile import DETECTOR
from tests.paths import REPO


def _until(what: str, ok: Callable[[], bool], limit: float = 20.0) -> None:
    """Wait for `ok` (a deadline for a hung controller, not a timing claim)."""
    end = time.monotonic() + limit
    while not ok():
        assert time.monotonic() < end, f"not within {limit} s: {what}"
        time.sleep(0.05)


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def test_carrier_lost_fails_the_link_and_carrier_back_restores_it(lab: Any) -> None:
    topo = lab.model
    leaf0, spine1 = topo.switch("p0-t0-0"), topo.switch("p0-t1-1")
    ns, dev = lab.netns_of(leaf0.name), intf(leaf0.uplinks[spine1.index])
    events = lab.dir / "fabric-events.jsonl"
    events.unlink(missing_ok=True)
    healthy = {s.name: lab.routes(s.name) for s in topo.switches}
    run = subprocess.Popen([sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path), "run",
                            "--duration", "120"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _until("the controller started", lambda: any(e["kind"] == "started" for e in _events(events)))
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "down"], check=True)
        _until("the link recorded down", lambda: load_origins(lab.failure_state_path)
               == {LinkDown("p0-t0-0", "p0-t1-1"): DETECTOR})
        _until("the reconcile applied", lambda: any(e["kind"] == "applied" for e in _events(events)))
        pulled = pulled_nexthops(healthy[leaf0.name], lab.routes(leaf0.name))
        assert pulled == {"fd00:0:1::/64": (Nexthop(dev, link_local(spine1.mac), "fcbb:bb00:2:401:fff::"),),
                          "fcbb:bb00:2::/48": (Nexthop(dev, link_local(spine1.mac)),)}
        assert all(lab.routes(s.name) == healthy[s.name] for s in topo.switches if s.plane == 1)
        report = lab.traffic(qps=8, messages=16, rate=0)
        assert report.ok, report.problems()
        assert report.totals()["received"] == report.totals()["sent"] > 0
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True)
        _until("the link restored", lambda: load_origins(lab.failure_state_path) == {})
        _until("the routes back", lambda: {s.name: lab.routes(s.name) for s in topo.switches} == healthy)
    finally:
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], capture_output=True)
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=30)
    assert run.returncode == 0, err
    assert out.splitlines()[0] == "down: link p0-t0-0 -- p0-t1-1 (carrier lost)"
    assert out.splitlines()[1].startswith("applied in ") and "3 switches reconciled (p0-t1-1, p0-t0-0, p0-t0-1)" in out
    # carrier back, the link's probes restore it (M in a row, both ways: test_kernel_probe.py has the drops)
    assert "up: link p0-t0-0 -- p0-t1-1 (50 consecutive probes arrived)" in out.splitlines()
    kinds = [e["kind"] for e in _events(events)]
    assert kinds[0] == "started" and kinds[-1] == "stopped"
    assert kinds.count("link_down") == 1 and kinds.count("link_up") == 1
    assert {(e["switch"], e["port"], e["up"]) for e in _events(events) if e["kind"] == "carrier"} == {
        (leaf0.name, leaf0.uplinks[spine1.index], False), (spine1.name, spine1.downlinks[leaf0.index], False),
        (leaf0.name, leaf0.uplinks[spine1.index], True), (spine1.name, spine1.downlinks[leaf0.index], True)}


def test_the_operator_holds_its_failures_and_a_dead_link_restored_by_hand_is_recorded_again(lab: Any) -> None:
    from controller.service.carrierheal import RECHECK_S
    from controller.state.statefile import OPERATOR

    topo = lab.model
    leaf, spine = topo.switch("p0-t0-1"), topo.switch("p0-t1-0")
    ns, dev = lab.netns_of(leaf.name), intf(leaf.uplinks[spine.index])
    healthy = {s.name: lab.routes(s.name) for s in topo.switches}
    events = lab.dir / "fabric-events.jsonl"
    events.unlink(missing_ok=True)
    ctl = [sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path)]
    run = subprocess.Popen([*ctl, "run", "--duration", "120"], cwd=REPO, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    held, dead = LinkDown("p1-t0-0", "p1-t1-0"), LinkDown("p0-t0-1", "p0-t1-0")
    try:
        _until("the controller started", lambda: any(e["kind"] == "started" for e in _events(events)))
        out = subprocess.run([*ctl, "fail", "link", "p1-t0-0", "p1-t1-0"], cwd=REPO, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "down"], check=True)
        _until("the dead link recorded", lambda: load_origins(lab.failure_state_path) == {held: OPERATOR, dead: DETECTOR})
        out = subprocess.run([*ctl, "restore", "link", "p0-t0-1", "p0-t1-0"], cwd=REPO, capture_output=True, text=True)
        # recorded, but the leaf's kernel refuses a nexthop out of a port that is down: that switch's error
        assert out.returncode == 1 and out.stderr == "error: p0-t0-1: the kernel refused: (100, 'Network is down')\n"
        assert "recorded: restore link p0-t0-1 -- p0-t1-0; 1 failure in" in out.stdout
        _until("the dead link recorded again", lambda: sum(e["kind"] == "link_down" for e in _events(events)) == 2)
        assert load_origins(lab.failure_state_path) == {held: OPERATOR, dead: DETECTOR}
        # the leaf's first uplink is down: its End.DT6/End.DX6 (on sr0, not on a port) still take traffic in
        report = lab.traffic(qps=8, messages=16, rate=0)
        assert report.ok, report.problems()
        assert report.totals()["received"] == report.totals()["sent"] > 0
        assert {r.local.action for r in lab.routes(leaf.name) if r.local} == {"End", "End.DT6", "End.DX6"}
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True)
        _until("the dead link restored", lambda: load_origins(lab.failure_state_path) == {held: OPERATOR})
        # two rechecks of the record (every RECHECK_S without a carrier change) leave the operator's failure held:
        # each is seen at work, removing a detector's failure of a healthy link written behind its back
        from controller.failover import failure_to_json, save_state
        from controller.state.statelock import state_lock

        marker = LinkDown("p1-t0-1", "p1-t1-1")
        for n in (1, 2):
            with state_lock(lab.failure_state_path, 10.0):
                save_state(lab.failure_state_path, {held, marker}, {held: OPERATOR, marker: DETECTOR})
            _until(f"recheck {n} finds the stale failure", lambda n=n: sum(
                e["kind"] == "link_up" and e.get("failure") == failure_to_json(marker) for e in _events(events)) == n,
                limit=20 * RECHECK_S)
        assert load_origins(lab.failure_state_path) == {held: OPERATOR}
        pulled = pulled_nexthops(healthy["p1-t0-0"], lab.routes("p1-t0-0"))
        assert set(pulled) == {"fd00:1:1::/64", "fcbb:bb00:1001::/48"}  # the held link's nexthops stay pulled
    finally:
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], capture_output=True)
        run.send_signal(signal.SIGTERM)
        out_run, err_run = run.communicate(timeout=30)
        subprocess.run([*ctl, "restore", "all"], cwd=REPO, capture_output=True)
    assert run.returncode == 0, out_run + err_run
    assert {s.name: lab.routes(s.name) for s in topo.switches} == healthy
