"""Real failures nobody announces, survived by `fabricctl run` on the default lab: a hung
switch (its simple_switch_grpc stopped with SIGSTOP) and a lost carrier (a veth set down)."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

from controller.model.failures import LinkDown, SwitchDown
from controller.service.status import status_path
from tests.mininet.controller.service.test_service import (LEAF, SPINE, controller, recorded, settled, tables_equal_plan,  # noqa: F401
                                        wait_until)


def switch_event(kind: str, name: str):
    return lambda e: e["kind"] == kind and e.get("switch") == name



def set_link(lab: Any, end: Any, how: str) -> None:
    """`ip link set` on one switch end of a link ("down": the far end loses carrier), through the lab's backend."""
    from mininet_labs.nodes import Port

    lab.nodes.set_link([Port(end.switch, end.intf)], how)

def test_a_hung_spine_is_recorded_failed_traffic_passes_and_it_comes_back(lab: Any, controller):  # noqa: F811
    c = controller()
    c.primary_everywhere()
    assert tables_equal_plan(lab) == {}
    pid = lab.status()["switches"][SPINE]["pid"]
    n = len(c.all_events())
    os.kill(pid, signal.SIGSTOP)  # a wedged switch: its TCP stays open, nothing it runs answers
    try:
        down = c.wait(switch_event("switch_down", SPINE), "switch_down of the stopped spine", after=n)
        assert "no answer" in down["evidence"]
        wait_until(lambda: recorded(lab) == {SwitchDown(SPINE)}, "the spine recorded failed")
        # read back: the state file says the detector recorded it, and so does the controller's status
        doc = json.loads(lab.failure_state_path.read_text())
        assert {"switch": SPINE, "by": "detector"} in doc["failures"]
        wait_until(lambda: {"switch": SPINE, "by": "detector"} in
                   json.loads(status_path(lab.failure_state_path).read_text())["recorded"], "status shows it")
        wait_until(settled(lab, frozenset({SwitchDown(SPINE)})), "every other switch at the plan without it")
        report = lab.traffic(qps=4, messages=4, timeout=90)
        assert report.problems() == []  # every pair, both planes: the other spine carries plane 0
        others = [e for e in c.all_events()[n:] if e["kind"] in ("link_down", "port_down", "switch_down")
                  and e is not down and e != down]
        assert others == []  # the spine, not its links, nor anything else
    finally:
        os.kill(pid, signal.SIGCONT)
    n = len(c.all_events())
    up = c.wait(switch_event("switch_up", SPINE), "switch_up once it runs again", after=n)
    assert "answers again" in up["evidence"]
    wait_until(settled(lab, frozenset()), "the healthy plan on every switch, the spine too")
    assert lab.traffic(qps=4, messages=4, timeout=90).problems() == []


def test_a_lost_carrier_leaves_the_leafs_other_ports_forwarding(lab: Any):
    """Carrier loss (`ip link set <uplink> down`) on one leaf uplink, with no controller: the failure
    recorded by hand so the plan avoids it; the leaf's two host ports and its other uplink forward in
    both directions meanwhile, and the port forwards again once its carrier is back."""
    from controller.programs.bmv2build import pcap_nonblocking
    from controller.programs.toolchain import find_binary
    from mininet_labs.topo import link_ends
    import pytest

    binary = find_binary("simple_switch_grpc")
    if pcap_nonblocking(binary) is False:
        pytest.skip(f"{binary} is built without patches/bmv2-bmi-nonblocking.patch: a lost carrier stalls "
                    "the whole switch (docs/toolchain.md)")
    leaf_end, spine_end = link_ends(lab.model, LEAF, SPINE, lab.tag)
    pairs = [("h0", "h1"), ("h1", "h0"), ("h0", "h2"), ("h2", "h0"), ("h1", "h3"), ("h3", "h1")]
    lab.fail(LinkDown(LEAF, SPINE))
    set_link(lab, leaf_end, "down")
    try:
        assert (lab_carrier(spine_end.intf), lab_carrier(leaf_end.intf)) == ("0", None)  # the far end lost carrier
        report = lab.traffic(pairs, qps=4, messages=8, planes=[0], timeout=90)
        assert report.problems() == []
    finally:
        set_link(lab, leaf_end, "up")
        lab.restore(LinkDown(LEAF, SPINE))
    wait_until(lambda: lab_carrier(leaf_end.intf) == "1", "carrier back on the uplink")
    port = leaf_end.port
    with lab.reader() as r:
        conn = r.switches[LEAF]
        before = conn.read_counter("FabricEgress.port_tx", port)[0].packets
        report = lab.traffic([("h0", "h2"), ("h2", "h0")], qps=4, messages=8, planes=[0], timeout=90)
        after = conn.read_counter("FabricEgress.port_tx", port)[0].packets
    assert report.problems() == []
    assert after > before  # the spray uses the uplink again, and what it sent arrived


def lab_carrier(intf: str) -> str | None:
    """/sys's carrier of an interface: '1', '0', or None when it is down (the file cannot be read)."""
    try:
        return open(f"/sys/class/net/{intf}/carrier").read().strip()
    except OSError:
        return None


def test_a_lost_carrier_reaches_the_tables_by_port_status_and_the_probes_restore_it(lab: Any, controller, tmp_path):  # noqa: F811
    """Port status as the fast signal: the lab's kernel link events (mininet_labs/carrier.py) tell
    `fabricctl run --carrier-events` that the uplink lost carrier; the link is failed by that, not by
    K lost probes (its evidence says so), exactly that link is recorded, traffic passes; once the
    carrier is back the probes restore it."""
    import subprocess
    import sys

    from mininet_labs.topo import link_ends
    from tests.mininet.controller.service.test_service import ROOT

    sock = tmp_path / "carrier.sock"
    c = controller(10, "events", "--carrier-events", str(sock))
    c.primary_everywhere()
    # the lab's port status as a user runs it: fabricctl lab carrier-watch, until SIGTERM
    watcher = subprocess.Popen([sys.executable, "-m", "fabricctl", "lab", "carrier-watch", "--to", str(sock),
                                "--dir", str(lab.dir)], cwd=ROOT, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    first = watcher.stderr.readline()  # once it says so, its netlink socket is bound: no change is missed
    ports = sum(len(lab.switch_intfs(s.name)) for s in lab.model.switches)
    assert first.startswith(f"watching the carrier of {ports} switch ports"), first
    leaf_end, spine_end = link_ends(lab.model, LEAF, SPINE, lab.tag)
    n = len(c.all_events())
    try:
        set_link(lab, leaf_end, "down")
        carrier = c.wait(lambda e: e["kind"] == "carrier" and e["up"] is False, "the carrier event", after=n)
        assert (carrier["switch"], carrier["port"]) in {(LEAF, leaf_end.port), (SPINE, spine_end.port)}
        down = c.wait(lambda e: e["kind"] == "link_down" and e["link"] == [LEAF, SPINE], "link_down", after=n)
        assert "carrier lost on" in down["evidence"] and "port status" in down["evidence"]
        wait_until(settled(lab, frozenset({LinkDown(LEAF, SPINE)})), "the link recorded and pulled")
        others = [e for e in c.all_events()[n:] if e["kind"] in ("link_down", "port_down", "switch_down")
                  and e.get("link") != [LEAF, SPINE]]
        assert others == []
        report = lab.traffic([("h0", "h2"), ("h2", "h0"), ("h0", "h1")], qps=4, messages=4, planes=[0], timeout=90)
        assert report.problems() == []
    finally:
        set_link(lab, leaf_end, "up")
        watcher.terminate()
        said = watcher.communicate(timeout=30)[1]
    assert f"{LEAF}:{leaf_end.port} carrier lost" in said and f"{LEAF}:{leaf_end.port} carrier up" in said, said
    n = len(c.all_events())
    up = c.wait(lambda e: e["kind"] == "link_up" and e["link"] == [LEAF, SPINE], "link_up by the probes", after=n)
    assert up["evidence"].endswith("consecutive probes arrived")
    wait_until(settled(lab, frozenset()), "the link restored")
