"""`fabricctl run` on a kernel lab probes its links: a one-way drop that keeps carrier (an nftables netdev egress drop on
one end of a link, either end) fails exactly that link in the record, its nexthops leave the routes while every host
pair's traffic passes, and the drop removed restores it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

from controller.state.statefile import load_origins
from controller.model.failures import LinkDown
from controller.southbound.kroutes import Nexthop, intf, link_local, pulled_nexthops
from controller.model.failures import DETECTOR
from tests.kernel.fabricctl.test_kernel_run import _events, _until, _written
from tests.paths import REPO

TABLE = "sf_test_probe_drop"


def _drop_egress(ns: str, dev: str) -> None:
    """Every frame leaving `dev` dropped (nftables netdev egress): the port keeps its carrier, one way is dead."""
    rules = (f"table netdev {TABLE} {{\n chain egress {{\n  type filter hook egress device \"{dev}\" priority 0; "
             "policy accept;\n  counter drop\n }\n}\n")
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True, check=True)


def _dropped(ns: str) -> int:
    out = subprocess.run(["ip", "netns", "exec", ns, "nft", "-j", "list", "table", "netdev", TABLE],
                         capture_output=True, text=True, check=True).stdout
    return sum(x["counter"]["packets"] for o in json.loads(out)["nftables"] if "rule" in o
               for x in o["rule"]["expr"] if "counter" in x)


def _undrop(ns: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, "nft", "delete", "table", "netdev", TABLE], capture_output=True)


def _one_way_drop(lab: Any, at_spine: bool, options: list[str]) -> tuple[str, list[dict[str, Any]]]:
    """Run the controller, drop one way of p0-t0-0 -- p0-t1-1 (at the leaf's uplink or the spine's downlink), check
    the record, the routes and the traffic, remove the drop and check the restore; the controller's stdout, events."""
    topo = lab.model
    leaf, spine = topo.switch("p0-t0-0"), topo.switch("p0-t1-1")
    link = LinkDown(leaf.name, spine.name)
    leaf_dev = intf(leaf.uplinks[spine.index])
    ns, dev = ((lab.netns_of(spine.name), intf(spine.downlinks[leaf.index])) if at_spine
               else (lab.netns_of(leaf.name), leaf_dev))
    events = lab.dir / "fabric-events.jsonl"
    events.unlink(missing_ok=True)
    healthy = {s.name: lab.routes(s.name) for s in topo.switches}
    ctl = [sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path)]
    run = subprocess.Popen([*ctl, "run", "--duration", "120", *options], cwd=REPO, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        _until("every probe direction armed (a probe arrived)",
               lambda: any(e["kind"] == "probes_armed" for e in _events(events)))
        assert load_origins(lab.failure_state_path) == {}
        _drop_egress(ns, dev)
        _until("the link recorded down", lambda: load_origins(lab.failure_state_path) == {link: DETECTOR})
        _until("the deltas written", lambda: _written(_events(events)) >= {leaf.name, spine.name})
        assert _dropped(ns) > 0
        pulled = pulled_nexthops(healthy[leaf.name], lab.routes(leaf.name))
        assert pulled == {"fd00:0:1::/64": (Nexthop(leaf_dev, link_local(spine.mac), "fcbb:bb00:2:401:fff::"),),
                          "fcbb:bb00:2::/48": (Nexthop(leaf_dev, link_local(spine.mac)),)}
        assert all(lab.routes(s.name) == healthy[s.name] for s in topo.switches if s.plane == 1)
        status = subprocess.run([*ctl, "status"], cwd=REPO, capture_output=True, text=True)
        assert "  failed: link p0-t0-0 -- p0-t1-1 (detected)" in status.stdout.splitlines(), status.stdout
        report = lab.traffic(qps=8, messages=16, rate=0)  # every host pair, both planes, around the dead way
        assert report.ok, report.problems()
        assert report.totals()["received"] == report.totals()["sent"] > 0
        assert load_origins(lab.failure_state_path) == {link: DETECTOR}  # nothing else failed meanwhile
        _undrop(ns)
        _until("the link restored", lambda: load_origins(lab.failure_state_path) == {})
        _until("the routes back", lambda: {s.name: lab.routes(s.name) for s in topo.switches} == healthy)
    finally:
        _undrop(ns)
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=30)
    assert run.returncode == 0, err
    return out, _events(events)


def _downs_and_ups(events: list[dict[str, Any]]) -> list[tuple[str, list[str], str, str]]:
    return [(e["kind"], e["link"], e["direction"], e["evidence"]) for e in events if e["kind"] in ("link_down", "link_up")]


def test_a_one_way_drop_at_the_leaf_fails_exactly_that_link_and_its_removal_restores_it(lab: Any) -> None:
    out, events = _one_way_drop(lab, at_spine=False, options=[])
    way = "p0-t0-0:4->p0-t1-1:1"
    assert _downs_and_ups(events) == [("link_down", ["p0-t0-0", "p0-t1-1"], way, "3 consecutive probes lost"),
                                      ("link_up", ["p0-t0-0", "p0-t1-1"], way, "50 consecutive probes arrived")]
    started = next(e for e in events if e["kind"] == "started")
    assert (started["links"], started["period_ms"], started["thresholds"]["fail_after"]) == (8, 50.0, 3)
    recorded = [e for e in events if e["kind"] == "failures_recorded"]
    assert [(e["added"], e["removed"]) for e in recorded] == [(["link p0-t0-0 -- p0-t1-1"], []),
                                                               ([], ["link p0-t0-0 -- p0-t1-1"])]
    assert not any(e["kind"] == "carrier" for e in events)  # carrier never changed: the probes saw it


def test_a_one_way_drop_at_the_spine_fails_that_link_with_the_options_given(lab: Any) -> None:
    out, events = _one_way_drop(lab, at_spine=True, options=["--period", "20", "--probe-timeout", "60",
                                                             "--fail-after", "4", "--restore-after", "25"])
    way = "p0-t1-1:1->p0-t0-0:4"
    assert _downs_and_ups(events) == [("link_down", ["p0-t0-0", "p0-t1-1"], way, "4 consecutive probes lost"),
                                      ("link_up", ["p0-t0-0", "p0-t1-1"], way, "25 consecutive probes arrived")]
    started = next(e for e in events if e["kind"] == "started")
    assert (started["period_ms"], started["probe_timeout_ms"], started["thresholds"]["fail_after"],
            started["thresholds"]["restore_after"]) == (20.0, 60.0, 4, 25)


def test_a_spine_whose_every_link_drops_has_each_link_recorded_and_restored(lab: Any) -> None:
    """The spine's netlink still answers (its liveness call): the probes fail its links, each recorded."""
    topo = lab.model
    spine = topo.switch("p1-t1-0")
    ns = lab.netns_of(spine.name)
    events = lab.dir / "fabric-events.jsonl"
    events.unlink(missing_ok=True)
    healthy = {s.name: lab.routes(s.name) for s in topo.switches}
    rules = "".join(f"table netdev {TABLE}_{intf(p)} {{\n chain egress {{\n  type filter hook egress device "
                    f"\"{intf(p)}\" priority 0; policy accept;\n  drop\n }}\n}}\n" for p in spine.downlinks)
    run = subprocess.Popen([sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path), "run",
                            "--duration", "120", "--restore-after", "20"], cwd=REPO, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        _until("every probe direction armed", lambda: any(e["kind"] == "probes_armed" for e in _events(events)))
        subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True, check=True)  # one commit
        links = {LinkDown(leaf.name, spine.name): DETECTOR for leaf in topo.t0s(1)}
        _until("the spine's links recorded down", lambda: load_origins(lab.failure_state_path) == links)
        _until("the deltas written", lambda: _written(_events(events)) >= {leaf.name for leaf in topo.t0s(1)})
        for leaf in topo.t0s(1):  # every nexthop through the spine pulled, nothing else
            pulled = pulled_nexthops(healthy[leaf.name], lab.routes(leaf.name))
            dev = intf(leaf.uplinks[spine.index])
            assert pulled and all(nh.dev == dev and nh.gateway == link_local(spine.mac) for nhs in pulled.values()
                                  for nh in nhs), pulled
        assert all(lab.routes(s.name) == healthy[s.name] for s in topo.switches if s.plane == 0)
        report = lab.traffic(qps=8, messages=16, rate=0)
        assert report.ok, report.problems()
        assert report.totals()["received"] == report.totals()["sent"] > 0
        for p in spine.downlinks:
            subprocess.run(["ip", "netns", "exec", ns, "nft", "delete", "table", "netdev", f"{TABLE}_{intf(p)}"],
                           check=True)
        _until("the spine restored", lambda: load_origins(lab.failure_state_path) == {})
        _until("the routes back", lambda: {s.name: lab.routes(s.name) for s in topo.switches} == healthy)
    finally:
        for p in spine.downlinks:
            subprocess.run(["ip", "netns", "exec", ns, "nft", "delete", "table", "netdev", f"{TABLE}_{intf(p)}"],
                           capture_output=True)
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=30)
    assert run.returncode == 0, err
    got = _events(events)
    assert {tuple(e["link"]) for e in got if e["kind"] == "link_down"} == {(leaf.name, spine.name) for leaf in topo.t0s(1)}
    assert not any(e["kind"] in ("switch_down", "probe_stall") for e in got)


def test_a_plane_gone_dark_with_carrier_up_fails_its_links_not_taken_for_a_stall(lab: Any) -> None:
    """Both spines of plane 0 drop every frame in and out of their ports (nftables netdev ingress and egress; carrier
    kept): half the probe directions lose at once, but the controller's loop keeps time and plane 1's probes come
    back, so every link of plane 0 is recorded failed, none of plane 1, and no round is judged a stall."""
    topo = lab.model
    events = lab.dir / "fabric-events.jsonl"
    events.unlink(missing_ok=True)
    spines = topo.t1s(0)
    healthy = {s.name: lab.routes(s.name) for s in topo.switches}

    def rules(port: int) -> str:
        dev = intf(port)
        return "".join(f"table netdev {TABLE}_{hook}_{dev} {{\n chain c {{\n  type filter hook {hook} device \"{dev}\" "
                       f"priority 0; policy accept;\n  drop\n }}\n}}\n" for hook in ("ingress", "egress"))

    def undo(sw: Any) -> None:
        for p in sw.downlinks:
            for hook in ("ingress", "egress"):
                subprocess.run(["ip", "netns", "exec", lab.netns_of(sw.name), "nft", "delete", "table", "netdev",
                                f"{TABLE}_{hook}_{intf(p)}"], capture_output=True)

    run = subprocess.Popen([sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path), "run",
                            "--duration", "120", "--restore-after", "20"], cwd=REPO, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    plane0 = {LinkDown(leaf.name, spine.name): DETECTOR for leaf in topo.t0s(0) for spine in spines}
    try:
        _until("every probe direction armed", lambda: any(e["kind"] == "probes_armed" for e in _events(events)))
        for spine in spines:
            subprocess.run(["ip", "netns", "exec", lab.netns_of(spine.name), "nft", "-f", "-"],
                           input="".join(rules(p) for p in spine.downlinks), text=True, check=True)
        _until("plane 0's links recorded down", lambda: load_origins(lab.failure_state_path) == plane0)
        assert all(lab.routes(s.name) == healthy[s.name] for s in topo.switches if s.plane == 1)
        for spine in spines:
            undo(spine)
        _until("plane 0 restored", lambda: load_origins(lab.failure_state_path) == {}, limit=40)
        _until("the routes back", lambda: {s.name: lab.routes(s.name) for s in topo.switches} == healthy)
    finally:
        for spine in spines:
            undo(spine)
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=30)
    assert run.returncode == 0, err
    got = _events(events)
    assert not any(e["kind"] == "probe_stall" for e in got)
    assert {tuple(e["link"]) for e in got if e["kind"] == "link_down"} == {(f.t0, f.t1) for f in plane0}
