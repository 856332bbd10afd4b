"""A host NIC failing mid-AllReduce on the kernel lab (the fault library's host-nic-down: the NIC down in the
host's namespace, its leaf port without carrier). With SHIFT the QPs of that NIC move to the host's other
NIC and the collective still delivers every byte exactly once at the rank that should have it, with no step
started early; without it the run fails in one line naming the NIC. Links shaped to 1 Mbit/s so the fault
lands while the ranks run (a condition of the test's set-up, never asserted as a time)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from controller.workload import Workload, check_delivery, check_dependencies, place, schedule
from endpoint.collective.rank import Transport
from endpoint.collective.report import job, receipts, records
from endpoint.collective.run import Fault
from endpoint.collective.schemes import scheme
from endpoint.collective.shift import LOCAL

NIC_DOWN = Fault("host-nic-down", ("h0", "0"))


@pytest.fixture(scope="module")
def shaped(lab: Any) -> Iterator[Any]:
    from mininet_labs.shaping import LinkRate, shape, unshape

    shape(lab, LinkRate(1.0))
    try:
        yield lab
    finally:
        unshape(lab)


def _job(lab: Any, failover: str) -> Any:
    # spread: h0 sends to a rank of the other leaf on QP 0x100 (plane 0) and 0x101 (plane 1), and receives so
    sched = schedule(Workload("allreduce", 64 * 1024, iterations=2, warmup=1, qps=2, strategy="split"),
                     place(lab.model, "spread"))
    return sched, job(lab, sched, scheme("eecmp"), Transport(window=4, mtu=1024, nic_failover=failover),
                      fault=NIC_DOWN, fault_at=0.3, timeout=120)


def test_with_shift_the_qps_of_the_failed_nic_move_and_every_byte_arrives_once_in_step_order(shaped: Any) -> None:
    sched, rep = _job(shaped, "shift")
    assert [e["what"] for e in rep.run.events] == ["fault: host-nic-down h0 0", "repair: host-nic-down h0 0"]
    assert rep.problems == []
    recs = records(rep.run)
    assert len(recs) == len(sched.transfers)
    assert check_dependencies(sched, recs) == []
    assert check_delivery(sched, receipts(rep.run, sched)) == []
    moved = rep.nic_moves()
    nxt = sched.placement.hosts[1]  # h0 is rank 0; it sends to rank 1
    assert [(m["rank"], m["dst"], m["qp"], m["from_plane"], m["to_plane"], m["why"])
            for m in moved if m["rank"] == "h0"] == [("h0", nxt, 0x100, 0, 1, LOCAL)]
    assert rep.to_json()["nic_moves"] == moved and rep.to_json()["nic_failover"] == "shift"
    # what h0 had in flight through the dead NIC was sent again, counted as resent by its transfers
    by_id = {t["id"]: t for t in rep.run.timeline()}
    assert all(by_id[w]["retransmitted"] > 0 for m in moved if m["why"] == LOCAL for w in m["wrs"])


def test_without_shift_the_same_failure_fails_the_run_in_one_line(shaped: Any) -> None:
    from mininet_labs.faults import active
    from mininet_labs.lab import LabError

    with pytest.raises(LabError) as e:
        _job(shaped, "none")
    assert "\n" not in str(e.value)
    assert str(e.value).startswith("rank h0 exited 2: error: h0: NIC port of plane 0 down under QP 0x100 to ")
    assert str(e.value).endswith(": its QPs have no other NIC (--nic-failover none)")
    assert active(shaped.dir) == []  # the NIC is back up: the fault was undone on the way out
