"""The one fault library's pieces that need no lab: its Schedule, where a port's command runs, the endpoint's rates."""

from __future__ import annotations

import pytest

from endpoint.faults import kbit
from mininet_labs.faults import Schedule, _in, _table
from mininet_labs.labstate import LabError


def test_a_schedule_needs_the_fault_before_its_repair_before_the_end() -> None:
    assert Schedule().problem() is None
    assert Schedule(seconds=4.0, fault_at=3.0, repair_at=2.0).problem() == (
        "need 0 < --fault-at (3.0) < --repair-at (2.0) < --seconds (4.0)")
    assert Schedule(fault_at=0.0).problem() is not None and Schedule(repair_at=9.0).problem() is not None


def test_a_port_in_a_namespace_is_reached_through_it_and_named_apart() -> None:
    assert _in(None, ["tc", "qdisc"]) == ["tc", "qdisc"]
    assert _in("sf-x-p0-t0-0", ["tc", "qdisc"]) == ["ip", "netns", "exec", "sf-x-p0-t0-0", "tc", "qdisc"]
    assert _table("/tmp/l", "gray", "eth3", "sf-x-p0-t0-0") != _table("/tmp/l", "gray", "eth3", "sf-x-p0-t0-1")
    assert _table("/tmp/l", "gray", "p0-t0-0-eth3") == _table("/tmp/l", "gray", "p0-t0-0-eth3", None)


def test_the_endpoint_slow_rate_is_read_as_kbit() -> None:
    assert (kbit("2mbit"), kbit("500kbit"), kbit("1.5Mbit"), kbit("1gbit")) == (2000, 500, 1500, 1_000_000)
    for bad in ("fast", "2mbps", "100bit"):
        with pytest.raises(LabError, match="a rate such as 500kbit or 2mbit"):
            kbit(bad)
