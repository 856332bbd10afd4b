"""A slow link (`fabricctl lab fault slow`: a tbf qdisc on a leaf uplink) against `fabricctl run`: one that only
delays is not a failure (nothing recorded, every packet delivered); one so slow that it drops the probes is
recorded as that link (LinkDown), traffic passing meanwhile, restored once undone: to the detector a probe the shaper
holds past its timeout is as lost as one it drops, so which of the two a run sees first depends on the machine's load. Judged from the tbf's own counts, the
failure record, the tables read back and the traffic's counts."""

from __future__ import annotations

import re
import subprocess
from typing import Any

from controller.model.failures import LinkDown
from mininet_labs.topo import link_ends
from tests.mininet.controller.service.test_service import (LEAF, SPINE, controller, recorded, settled,  # noqa: F401
                                                          wait_until)
from tests.mininet.mininet_labs.test_faults import fabricctl

PAIRS = [("h0", "h2"), ("h1", "h3"), ("h2", "h0"), ("h3", "h1")]
DOWNS = ("link_down", "port_down", "switch_down")


def tbf_counts(intf: str) -> dict[str, int]:
    """The tbf qdisc's packets sent, dropped and overlimits (packets that had to wait for tokens)."""
    out = subprocess.run(["tc", "-s", "qdisc", "show", "dev", intf], capture_output=True, text=True).stdout
    m = re.search(r"qdisc tbf .*?Sent \d+ bytes (\d+) pkt \(dropped (\d+), overlimits (\d+)", out, re.S)
    assert m, out
    return {"sent": int(m[1]), "dropped": int(m[2]), "overlimits": int(m[3])}


def slowed(lab: Any, c: Any, kbit: int, latency_ms: int) -> tuple[str, int, tuple[str, ...]]:
    """`fabricctl run` primary everywhere, then LEAF's uplink to SPINE slowed: its interface, the index of
    the first event after, and the fault's arguments (for --undo)."""
    c.primary_everywhere()
    n = len(c.all_events())
    args = ("slow", LEAF, SPINE, str(kbit), "--latency-ms", str(latency_ms))
    assert fabricctl(lab, "fault", *args).returncode == 0
    return link_ends(lab.model, LEAF, SPINE, lab.tag)[0].intf, n, args


def test_a_slow_link_that_only_delays_is_not_recorded(lab: Any, controller):  # noqa: F811
    c = controller(10, "events")
    # 256 kbit/s with a queue of 1 s: a burst of the test's 1 KB packets waits (overlimits) and none is dropped
    intf, n, args = slowed(lab, c, 256, 1000)
    try:
        report = lab.traffic(PAIRS, qps=4, messages=8, timeout=90)
        counts = tbf_counts(intf)
    finally:
        assert fabricctl(lab, "fault", *args, "--undo").returncode == 0
    assert counts["sent"] > 0 and counts["overlimits"] > 0, counts  # the link was slow for this traffic
    assert counts["dropped"] == 0, counts
    assert report.problems() == [], report.problems()
    assert report.totals()["received"] == report.totals()["sent"] > 0
    assert recorded(lab) == frozenset()
    assert [e for e in c.all_events()[n:] if e["kind"] in DOWNS] == []


def test_a_slow_link_that_drops_is_recorded_as_that_link_then_restored(lab: Any, controller):  # noqa: F811
    c = controller(10, "events-drop", "--restore-after", "10")
    # 8 kbit/s with a queue of 50 ms: less than the probes alone need, so the tbf holds them past their timeout or drops
    # them (a clean-clone CI run saw the link recorded with 0 dropped yet: all 14 held back)
    intf, n, args = slowed(lab, c, 8, 50)
    try:
        wait_until(settled(lab, frozenset({LinkDown(LEAF, SPINE)})), "the slow link recorded and pulled")
        counts = tbf_counts(intf)
        report = lab.traffic(PAIRS, qps=4, messages=4, timeout=90)
        assert report.problems() == [], report.problems()
        assert report.totals()["received"] == report.totals()["sent"] > 0
    finally:
        fabricctl(lab, "fault", *args, "--undo")
    assert counts["overlimits"] > 0, counts  # the shaper held probes back: what took the link down
    downs = [e for e in c.all_events()[n:] if e["kind"] in DOWNS]
    assert downs and all(e.get("link") == [LEAF, SPINE] for e in downs), downs
    wait_until(settled(lab, frozenset()), "restored after undoing the slow link")
