"""A fault that takes a port down on the kernel lab is undone to the routing state it found: every route of every
table and every permanent neighbour in each namespace the fault touches is back as it was (the kernel deletes those
through a port set down and does not make them again when it comes up), and traffic crosses the link again, with no
controller running. A flapper puts them back each time the port is up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.paths import REPO

LEAF, SPINE = "p0-t0-0", "p0-t1-1"
TABLES = (["ip", "-6", "route", "show", "table", "all"], ["ip", "-4", "route", "show", "table", "all"],
          ["ip", "neigh", "show", "nud", "permanent"])


def fabricctl(lab: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabricctl", "lab", "fault", *args, "--dir", str(lab.dir)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})


def held(netns: str) -> list[str]:
    """Every route of every table (IPv6 and IPv4) and every permanent neighbour of a namespace, one entry per route
    (a multipath route with its nexthop lines), sorted: the kernel lists routes of one prefix and metric on
    different devices (its own link-local and multicast routes) in the order it made them, which a port going
    down and up changes."""
    entries: list[str] = []
    for argv in TABLES:
        out = subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line[:1].isspace() and entries:
                entries[-1] += "\n" + line
            else:
                entries.append(" ".join(argv[:2]) + ": " + line)
    return sorted(entries)


def ours(entries: list[str]) -> list[str]:
    """The routes that are not the kernel's own, and the neighbours, without the flags of a nexthop whose port is
    down or not yet up again (the kernel revives a multipath member once the port's carrier is seen, up to a second
    later): what a flapper puts back within a period."""
    return sorted(" ".join(re.sub(r"\b(dead|linkdown)\b", "", e).split()) for e in entries if "proto kernel" not in e)


def wait_for(cond: Callable[[], bool], what: str, seconds: float = 60) -> None:
    end = time.monotonic() + seconds  # a bound only: a loaded machine
    while not cond():
        assert time.monotonic() < end, what
        time.sleep(0.05)


def settled(netns: str) -> bool:
    """No address of the namespace is still tentative: the kernel adds an address's local and anycast routes once
    its duplicate address detection is over (a lab just up, a port just up again)."""
    return not subprocess.run(["ip", "netns", "exec", netns, "ip", "-6", "-o", "addr", "show", "tentative"],
                              capture_output=True, text=True, check=True).stdout.strip()


def is_up(netns: str, intf: str) -> bool:
    out = subprocess.run(["ip", "netns", "exec", netns, "ip", "-o", "link", "show", intf], capture_output=True,
                         text=True, check=True).stdout
    return ",UP" in out or "<UP" in out


def link_packets(lab: Any) -> int:
    """Frames the spine's end of the link LEAF -- SPINE sent and received."""
    end = next(p for p in lab.nodes.link_ports(lab.model, lab.state, LEAF, SPINE) if p.switch == SPINE)
    c = lab.counters(SPINE)[end.intf]
    return int(c["tx_packets"] + c["rx_packets"])


def touched(lab: Any, kind: str, target: tuple[str, ...]) -> list[str]:
    """The namespaces at both ends of what the fault takes down."""
    if kind == "host-nic-down":
        host = lab.host(target[0])
        return [host.netns, lab.model.switch(host.nic(int(target[1])).leaf).netns]
    return [lab.model.switch(target[0]).netns, lab.model.switch(target[1]).netns]


def as_found(spaces: list[str]) -> dict[str, list[str]]:
    """What each namespace holds, once its addresses are past duplicate address detection."""
    for ns in spaces:
        wait_for(lambda: settled(ns), f"the addresses of {ns} past duplicate address detection")
    return {ns: held(ns) for ns in spaces}


def assert_as_before(before: dict[str, list[str]]) -> None:
    for ns in before:  # the kernel's own link-local routes come back with the port's address, a moment later
        end = time.monotonic() + 30  # a bound only: a loaded machine
        while not (settled(ns) and held(ns) == before[ns]) and time.monotonic() < end:
            time.sleep(0.05)
        now = held(ns)
        assert (ns, sorted(set(before[ns]) - set(now)), sorted(set(now) - set(before[ns]))) == (ns, [], [])
        assert now == before[ns], ns


@pytest.mark.parametrize("kind, target, extra", [
    ("carrier-down", (LEAF, SPINE), ()),
    ("carrier-down", (SPINE, LEAF), ()),
    ("flap", (LEAF, SPINE), ("--period-ms", "300")),
    ("host-nic-down", ("h0", "0"), ()),
], ids=["carrier-down-leaf-end", "carrier-down-spine-end", "flap", "host-nic-down"])
def test_undoing_a_port_down_fault_leaves_the_routes_as_they_were(lab: Any, kind: str, target: tuple[str, ...],
                                                                   extra: tuple[str, ...]) -> None:
    from mininet_labs.faults import active

    spaces = touched(lab, kind, target)
    before = as_found(spaces)
    down_ns = spaces[0]  # where the port is set down: the kernel drops its routes there
    out = fabricctl(lab, kind, *target, *extra)
    assert out.returncode == 0 and out.stdout.startswith("injected: "), out
    try:
        (fault,) = [f for f in active(lab.dir) if f.kind == kind]
        port = str(fault.undo["intf"])
        assert fault.undo["kept"]["routes"] and fault.undo["kept"]["neighbours"]  # what it found through the port
        if kind == "flap":
            wait_for(lambda: not is_up(down_ns, port), "the flapper set the port down")
            # and the flapper itself puts everything back once the port is up again, while it goes on flapping
            wait_for(lambda: is_up(down_ns, port) and ours(held(down_ns)) == ours(before[down_ns]),
                     "the flapper put back the routes with the port up")
        else:
            assert not is_up(down_ns, port)
            gone = set(before[down_ns]) - set(held(down_ns))
            assert gone, "the kernel dropped nothing with the port"  # what the undo has to put back
    finally:
        out = fabricctl(lab, kind, *target, "--undo")
    assert out.returncode == 0 and out.stdout.startswith("undone: "), out
    assert active(lab.dir) == []
    assert_as_before(before)
    if kind != "host-nic-down":
        crossed = link_packets(lab)
        report = lab.traffic(qps=16, messages=4, rate=0)
        assert report.ok, report.problems()
        assert report.totals()["received"] == report.totals()["sent"] > 0
        assert link_packets(lab) > crossed  # the flows hashed onto the link crossed it


def test_the_labs_link_down_and_up_leave_the_routes_of_both_ends_as_they_were(lab: Any) -> None:
    """Lab.link_down sets both ends of a T0-T1 link down through the fault library (each end's routes kept), and
    Lab.link_up puts back what the kernel dropped at both ends; then traffic crosses the link again."""
    from mininet_labs.faults import active

    spaces = touched(lab, "carrier-down", (LEAF, SPINE))
    before = as_found(spaces)
    ends = lab.link_down(LEAF, SPINE)
    try:
        assert [is_up(ns, intf) for ns, intf in zip(spaces, ends)] == [False, False]
        assert sorted(f.target for f in active(lab.dir)) == [[LEAF, SPINE], [SPINE, LEAF]]
        assert all(set(before[ns]) - set(held(ns)) for ns in spaces), "the kernel dropped nothing at one end"
    finally:
        assert lab.link_up(LEAF, SPINE) == ends
    assert active(lab.dir) == []
    assert_as_before(before)
    crossed = link_packets(lab)
    report = lab.traffic(qps=16, messages=4, rate=0)
    assert report.ok, report.problems()
    assert link_packets(lab) > crossed


def test_the_labs_nic_down_and_up_leave_the_hosts_routes_as_they_were(lab: Any) -> None:
    """Lab.nic_down / nic_up (the cross-plane scenario's NIC failure) keep and put back the host's routes; a NIC
    that nic_down did not take down is only set up."""
    from mininet_labs.faults import active

    spaces = touched(lab, "host-nic-down", ("h0", "0"))
    before = as_found(spaces)
    intf = lab.nic_down("h0", 0)
    try:
        assert not is_up(spaces[0], intf)
        assert [(f.kind, f.target) for f in active(lab.dir)] == [("host-nic-down", ["h0", "0"])]
        assert set(before[spaces[0]]) - set(held(spaces[0])), "the kernel dropped nothing with the NIC"
    finally:
        assert lab.nic_up("h0", 0) == intf
    assert active(lab.dir) == []
    assert_as_before(before)
    assert lab.nic_up("h0", 0) == intf  # nothing to put back: only set up, as before
    assert is_up(spaces[0], intf)
