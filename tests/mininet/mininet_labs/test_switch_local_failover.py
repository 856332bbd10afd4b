"""Switch-local failover on the default lab with no controller running (nothing but the tables `lab up`
installed, the topology's `watch_ports: true`): a leaf uplink loses carrier, bmv2's port monitor sees it, PI's watch-port enforcement leaves
that spray member out, and every packet from the leaf's hosts is delivered over the other uplink; once
the carrier is back the member is used again. Shown by the traffic and the leaf's own path counters."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

from controller.plan.delta import pi_read_watch_ports
from controller.plan.entries import ActionProfileGroup
from controller.plan.p4names import SPRAY_SELECTOR
from controller.programs.toolchain import find_binary
from controller.programs.bmv2build import pcap_nonblocking
from mininet_labs.topo import link_ends
from tests.mininet.conftest import free_port_base, lab_missing

LEAF, SPINE = "p0-t0-0", "p0-t1-0"  # the uplink that loses carrier: spray path (= spine) 0 of the leaf
PATH_PACKETS = "IngressPipe.headend.path_packets"
# the leaf's hosts to the other leaf's, plane 0: every one of these flows is sprayed over the leaf's uplinks
PAIRS = [("h0", "h2"), ("h1", "h3"), ("h0", "h3"), ("h1", "h2")]
WITHIN = 60.0  # the longest any wait here may take (two cores shared with other labs); not asserted on


@pytest.fixture(scope="module")
def lab(lab_dir: Path) -> Iterator[object]:
    """The default lab with watch ports on (they are off by default: docs/faults.md), started as `lab up` does."""
    why = lab_missing()
    if why:
        pytest.skip(why)
    from controller.model.topology import from_dict, to_dict
    from mininet_labs.headless import start_headless
    from mininet_labs.lab import cleanup
    from mininet_labs.labstate import default_topology

    model = from_dict({**to_dict(default_topology(grpc_base_port=free_port_base(8))), "watch_ports": True})
    try:
        yield start_headless(model, lab_dir, tag=f"w{os.getpid() % 100}", election_id=1, timeout=10.0)
    finally:
        cleanup(lab_dir)


def carrier(intf: str) -> str | None:
    try:
        return open(f"/sys/class/net/{intf}/carrier").read().strip()
    except OSError:
        return None


def paths(lab: Any) -> list[int]:
    """The leaf's spray path counters, by spine: what the switch itself says it sent on each uplink."""
    with lab.reader() as r:
        return [c.packets for c in r.switches[LEAF].read_counter(PATH_PACKETS)][:2]


def run(lab: Any) -> tuple[Any, list[int]]:
    """Traffic of PAIRS in plane 0; the report and how much each path counter grew meanwhile."""
    before = paths(lab)
    report = lab.traffic(PAIRS, qps=4, messages=8, planes=[0], timeout=90)
    return report, [a - b for a, b in zip(paths(lab), before)]


def until(what: str, attempt: Callable[[], tuple[Any, list[int]]], ok: Callable[[Any, list[int]], bool]) -> None:
    """Repeat `attempt` (a traffic run) until its outcome is `ok`: what the switch noticed shows in the traffic."""
    end = time.monotonic() + WITHIN
    while True:
        report, grown = attempt()
        if ok(report, grown):
            return
        assert time.monotonic() < end, f"{what}: not seen in {WITHIN} s (last: {report.problems()}, paths {grown})"


def sent(report: Any) -> int:
    return sum(p.sent for p in report.pairs())



def set_link(lab: Any, end: Any, how: str) -> None:
    """`ip link set` on one switch end of a link ("down": the far end loses carrier), through the lab's backend."""
    from mininet_labs.nodes import Port

    lab.nodes.set_link([Port(end.switch, end.intf)], how)

def test_a_leaf_leaves_out_the_uplink_that_lost_carrier_by_itself_and_uses_it_again(lab: Any):
    binary = find_binary("simple_switch_grpc")
    if pcap_nonblocking(binary) is False:
        pytest.skip(f"{binary} is built without patches/bmv2-bmi-nonblocking.patch: a lost carrier stalls "
                    "the whole switch (docs/toolchain.md)")
    leaf = lab.model.switch(LEAF)
    leaf_end, spine_end = link_ends(lab.model, LEAF, SPINE, lab.tag)
    assert leaf_end.port == leaf.uplinks[0]
    with lab.reader() as r:
        (group,) = [g for g in r.switches[LEAF].read_groups(SPRAY_SELECTOR) if isinstance(g, ActionProfileGroup)]
    planned = ((1, leaf.uplinks[0]), (2, leaf.uplinks[1]))
    assert group.members == (1, 2)
    assert group.watch_ports in {planned, *pi_read_watch_ports(ActionProfileGroup(
        group.profile, group.group_id, group.members, group.max_size, planned))}

    report, grown = run(lab)
    assert report.problems() == [] and sum(grown) == sent(report) and min(grown) > 0  # both uplinks in use

    set_link(lab, leaf_end, "down")
    try:
        assert (carrier(leaf_end.intf), carrier(spine_end.intf)) == (None, "0")
        # no controller: nobody writes. Once bmv2 has polled the port (every 200 ms), every packet of every
        # pair is delivered, all of it sprayed on the other uplink
        until("the dead uplink left out", lambda: run(lab), lambda rep, g: rep.problems() == [] and g[0] == 0)
        report, grown = run(lab)
        assert report.problems() == []
        assert grown == [0, sent(report)]
        with lab.reader() as r:  # the member is deactivated by the switch, not removed: the group as it was
            assert r.switches[LEAF].read_groups(SPRAY_SELECTOR) == [group]
    finally:
        set_link(lab, leaf_end, "up")
    end = time.monotonic() + WITHIN
    while carrier(leaf_end.intf) != "1":
        assert time.monotonic() < end, "carrier not back on the uplink"
        time.sleep(0.05)
    # carrier back: the member is active again and the spray uses both uplinks, nothing lost
    until("the uplink used again", lambda: run(lab), lambda rep, g: rep.problems() == [] and min(g) > 0)
    report, grown = run(lab)
    assert report.problems() == [] and sum(grown) == sent(report) and min(grown) > 0


def test_a_leaf_that_lost_every_uplink_keeps_forwarding_between_its_hosts_and_comes_back_with_one(lab: Any):
    """Every member of the leaf's spray group watches a port that is down: a stock bmv2 divides by zero (SIGFPE)
    at the next packet towards another leaf; with patches/bmv2-group-all-members-down.patch it chooses among
    all members (the packet dies on a dead port) and keeps serving its own hosts."""
    from controller.programs.bmv2build import traits
    from mininet_labs.bmv2proc import alive, build_of

    argv = lab.state.switches[LEAF]["argv"]
    build = traits(str(build_of(argv)["binary"]))
    if not build.watch_ports_safe or pcap_nonblocking(build.binary) is False:
        pytest.skip(f"{build.binary} lacks patches/bmv2-group-all-members-down.patch or the non-blocking pcap fix: "
                    "a leaf without uplinks would die (docs/toolchain.md)")
    leaf = lab.model.switch(LEAF)
    spines = [s.name for s in lab.model.t1s(0)]
    ends = [link_ends(lab.model, LEAF, spine, lab.tag) for spine in spines]
    assert [leaf_end.port for leaf_end, _ in ends] == list(leaf.uplinks)
    pid = lab.state.switches[LEAF]["pid"]
    local = [("h0", "h1"), ("h1", "h0")]
    for leaf_end, _ in ends:
        set_link(lab, leaf_end, "down")
    try:
        assert [carrier(spine_end.intf) for _, spine_end in ends] == ["0"] * len(ends)
        # towards the other leaf: nowhere to go. The first run takes seconds, many port polls: during the second
        # every member of the group is inactive, and the switch still chooses one (its packet dies there)
        for _ in range(2):
            report, grown = run(lab)
            assert alive(pid) and sent(report) > 0 and sum(p.received for p in report.pairs()) == 0
        assert sum(grown) == sent(report)
        report = lab.traffic(local, qps=2, messages=4, planes=[0], timeout=60)
        assert alive(pid)  # the packets towards the other leaf met a group with no active member
        assert report.problems() == [] and sent(report) > 0  # and its own hosts still reach each other
    finally:
        set_link(lab, ends[1][0], "up")  # one uplink back
    end = time.monotonic() + WITHIN
    while carrier(ends[1][0].intf) != "1":
        assert time.monotonic() < end, "carrier not back on the uplink"
        time.sleep(0.05)
    try:
        # every packet to the other leaf delivered again, all of it on the uplink that came back
        until("the uplink that came back used", lambda: run(lab),
              lambda rep, g: rep.problems() == [] and g[0] == 0 and g[1] == sent(rep))
        assert alive(pid)
    finally:
        set_link(lab, ends[0][0], "up")
