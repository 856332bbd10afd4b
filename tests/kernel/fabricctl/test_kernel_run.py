"""`fabricctl run` on a kernel lab's topology.yaml, the one controller service over netlink switches: a port that loses
carrier fails its link in the record (as the detector's) and its nexthops leave the routes while traffic passes; its
probes back restore them; a second `run` on the same lab stands by and nothing flaps."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.state.statefile import load_origins
from controller.model.failures import LinkDown
from controller.southbound.kroutes import Nexthop, intf, link_local, pulled_nexthops
from controller.service.status import status_path
from controller.model.failures import DETECTOR
from tests.paths import REPO


def _until(what: str, ok: Callable[[], bool], limit: float = 60.0, what_else: Callable[[], Any] = lambda: "") -> None:
    """Wait for `ok` (a deadline for a hung controller, not a timing claim); `what_else` is said if it does not come."""
    end = time.monotonic() + limit
    while not ok():
        assert time.monotonic() < end, f"not within {limit} s: {what} {what_else()}"
        time.sleep(0.05)


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _run(lab: Any, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path), "run",
                             "--duration", "120", *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _stop(run: subprocess.Popen[str]) -> tuple[str, str]:
    run.send_signal(signal.SIGTERM)
    return run.communicate(timeout=30)


def _first_line(proc: subprocess.Popen[str], limit: float) -> str:
    """The first line the process writes on stderr, waiting at most `limit` seconds for it."""
    import select

    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], limit)
    assert ready, f"nothing on stderr within {limit} s"
    return proc.stderr.readline()


def _status(lab: Any) -> dict[str, Any]:
    try:
        return json.loads(status_path(lab.failure_state_path).read_text())
    except (OSError, ValueError):
        return {}


def _written(events: list[dict[str, Any]]) -> set[str]:
    return {n for e in events if e["kind"] == "deltas_written" for n in e["switches"]}


def test_carrier_lost_fails_the_link_and_its_probes_back_restore_it(lab: Any) -> None:
    topo = lab.model
    leaf0, spine1 = topo.switch("p0-t0-0"), topo.switch("p0-t1-1")
    ns, dev = lab.netns_of(leaf0.name), intf(leaf0.uplinks[spine1.index])
    events = lab.dir / "fabric-events.jsonl"
    events.unlink(missing_ok=True)
    healthy = {s.name: lab.routes(s.name) for s in topo.switches}
    run = _run(lab)
    try:
        _until("every probe direction armed", lambda: any(e["kind"] == "probes_armed" for e in _events(events)))
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "down"], check=True)
        _until("the link recorded down", lambda: load_origins(lab.failure_state_path)
               == {LinkDown("p0-t0-0", "p0-t1-1"): DETECTOR})
        _until("the deltas written", lambda: _written(_events(events)) >= {"p0-t0-0", "p0-t1-1"}, what_else=lambda: _events(events))
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
        out, err = _stop(run)
    assert run.returncode == 0, err
    got = _events(events)
    kinds = [e["kind"] for e in got]
    assert kinds[0] == "started" and kinds[-1] == "stopped"
    started = got[0]
    assert (started["switches"], started["links"]) == (len(topo.switches), 8)
    way = f"{leaf0.name}:{leaf0.uplinks[spine1.index]}->{spine1.name}:{spine1.downlinks[leaf0.index]}"
    back = f"{spine1.name}:{spine1.downlinks[leaf0.index]}->{leaf0.name}:{leaf0.uplinks[spine1.index]}"
    downs = {(e["direction"], e["evidence"]) for e in got if e["kind"] == "link_down"}
    assert {d for d, _ in downs} == {way, back}  # the carrier took both ways down at once
    assert all(why.startswith("carrier lost on ") for _, why in downs), downs
    assert {(e["direction"], e["evidence"]) for e in got if e["kind"] == "link_up"} == {
        (way, "50 consecutive probes arrived"), (back, "50 consecutive probes arrived")}
    carrier = {(e["switch"], e["port"], e["up"]) for e in got if e["kind"] == "carrier"}
    assert {(leaf0.name, leaf0.uplinks[spine1.index], False), (spine1.name, spine1.downlinks[leaf0.index], False)} \
        <= carrier


def test_the_operator_holds_its_failures_and_a_dead_link_restored_by_hand_is_recorded_again(lab: Any) -> None:
    from controller.model.failures import OPERATOR

    topo = lab.model
    leaf, spine = topo.switch("p0-t0-1"), topo.switch("p0-t1-0")
    ns, dev = lab.netns_of(leaf.name), intf(leaf.uplinks[spine.index])
    healthy = {s.name: lab.routes(s.name) for s in topo.switches}
    events = lab.dir / "fabric-events.jsonl"
    events.unlink(missing_ok=True)
    ctl = [sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path)]
    run = _run(lab)
    held, dead = LinkDown("p1-t0-0", "p1-t1-0"), LinkDown("p0-t0-1", "p0-t1-0")

    def recorded_dead() -> int:
        return sum(e["kind"] == "failures_recorded" and "link p0-t0-1 -- p0-t1-0" in e["added"] for e in _events(events))

    try:
        _until("the controller started", lambda: any(e["kind"] == "started" for e in _events(events)))
        out = subprocess.run([*ctl, "fail", "link", "p1-t0-0", "p1-t1-0"], cwd=REPO, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "down"], check=True)
        _until("the dead link recorded", lambda: load_origins(lab.failure_state_path) == {held: OPERATOR, dead: DETECTOR})
        out = subprocess.run([*ctl, "restore", "link", "p0-t0-1", "p0-t1-0"], cwd=REPO, capture_output=True, text=True)
        # handed to the running controller (as on bmv2): its detector still holds the link down and records it again
        assert out.returncode == 1 and out.stderr == (
            f"error: the running controller (pid {run.pid}, election id 1) keeps link p0-t0-1 -- p0-t1-0 failed: its "
            "probes still fail, so its detector recorded it again ('fabricctl status' shows them)\n")
        _until("the dead link recorded again", lambda: recorded_dead() == 2)
        assert load_origins(lab.failure_state_path) == {held: OPERATOR, dead: DETECTOR}
        # the leaf's first uplink is down: its End.DT6/End.DX6 (on sr0, not on a port) still take traffic in
        report = lab.traffic(qps=8, messages=16, rate=0)
        assert report.ok, report.problems()
        assert report.totals()["received"] == report.totals()["sent"] > 0
        assert {r.local.action for r in lab.routes(leaf.name) if r.local} == {"End", "End.DT6", "End.DX6"}
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True)
        _until("the dead link restored", lambda: load_origins(lab.failure_state_path) == {held: OPERATOR})
        after = time.monotonic_ns()  # CLOCK_MONOTONIC is the machine's: the controller's readings compare with it
        _until("the controller read the record again since",
               lambda: _status(lab).get("read_mono_ns", 0) > after and _status(lab).get("updated", 0) > 0)
        assert load_origins(lab.failure_state_path) == {held: OPERATOR}  # the operator's failure is still held
        pulled = pulled_nexthops(healthy["p1-t0-0"], lab.routes("p1-t0-0"))
        assert set(pulled) == {"fd00:1:1::/64", "fcbb:bb00:1001::/48"}  # the held link's nexthops stay pulled
    finally:
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], capture_output=True)
        out_run, err_run = _stop(run)
        subprocess.run([*ctl, "restore", "all"], cwd=REPO, capture_output=True)
    assert run.returncode == 0, out_run + err_run
    assert {s.name: lab.routes(s.name) for s in topo.switches} == healthy


def test_a_second_run_on_the_same_lab_stands_by_and_nothing_flaps(lab: Any) -> None:
    """Two controllers on one kernel fabric: the second says it stands by (one line) and takes no probe from the
    first; no link is recorded failed, no route moves, and it takes over when the first stops."""
    topo = lab.model
    healthy = {s.name: lab.routes(s.name) for s in topo.switches}
    events = lab.dir / "fabric-events.jsonl"
    events.unlink(missing_ok=True)
    first = _run(lab)
    second = None
    try:
        _until("every probe direction armed", lambda: any(e["kind"] == "probes_armed" for e in _events(events)))
        second = _run(lab)
        line = _first_line(second, limit=60)
        assert line.startswith("standby: controller pid ") and line.rstrip().endswith("taking over when it stops"), line
        pid = _status(lab)["pid"]
        assert pid == first.pid
        # the first keeps probing every link: 200 rounds of probes later, nothing failed, nothing lost
        sent = _status(lab)["probes"]["out"]
        _until("200 more rounds of probes", lambda: _status(lab)["probes"]["out"] >= sent + 200 * 16, limit=120)
        view = _status(lab)
        assert view["recorded"] == [] and load_origins(lab.failure_state_path) == {}
        assert all(link["up"] for link in view["links"].values()), view["links"]
        assert {s.name: lab.routes(s.name) for s in topo.switches} == healthy
        _stop(first)
        assert first.returncode == 0
        _until("the standby took over", lambda: _status(lab).get("pid") == second.pid
               and any(e["kind"] == "probes_armed" and e["pid"] == second.pid for e in _events(events)))
        assert load_origins(lab.failure_state_path) == {}
    finally:
        if first.poll() is None:
            _stop(first)
        if second is not None:
            _stop(second)
    assert second.returncode == 0
    assert {s.name: lab.routes(s.name) for s in topo.switches} == healthy
