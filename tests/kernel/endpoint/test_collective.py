"""Collectives on the kernel lab: ranks in the hosts' namespaces carry every transfer over the endpoint
transport as RoCEv2 through Linux SRv6 routers. Asserted: every byte of every transfer arrived exactly
once at the rank that should have it with the bytes sent, and no rank started a step before the
transfers it depends on completed at it (the runner's checks and the workload's). Never a time."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import Any

import pytest

from controller.workload import Workload, place, schedule
from endpoint.collective.rank import Transport
from endpoint.collective.report import job
from endpoint.collective.run import Fault
from endpoint.collective.schemes import scheme

SMALL = Transport(window=4, mtu=1024)


def _job(lab: Any, collective: str, name: str, **kw: Any) -> Any:
    sched = schedule(Workload(collective, kw.pop("size", 32 * 1024), iterations=2, warmup=1, qps=2,  # type: ignore[arg-type]
                              strategy=kw.pop("strategy", "split")), place(lab.model, kw.pop("placement", "spread")))
    rep = job(lab, sched, scheme(name), SMALL, timeout=120, **kw)
    return sched, rep


@pytest.fixture(scope="module")
def hsr_lab(kernel_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A kernel lab whose topology sets host_source_routing: its leaves' SR boundary admits the carriers
    endpoint-mode hosts write (the boundary is set at lab up)."""
    from mininet_labs.backends import nodes_for
    from mininet_labs.lab import Lab
    from mininet_labs.labstate import default_topology

    running = Lab(dataclasses.replace(default_topology(), host_source_routing=True),
              tmp_path_factory.mktemp("kernel-hsr-lab"), nodes_for("kernel", name=f"h{os.getpid()}")).up()
    try:
        yield running
    finally:
        assert running.down().clean


@pytest.mark.parametrize("name", ["ecmp", "eecmp", "host-spray", "ethereal"])
def test_ring_allreduce_delivers_every_byte_once_in_step_order(request: pytest.FixtureRequest, name: str) -> None:
    lab = request.getfixturevalue("hsr_lab" if scheme(name).evs == "host" else "lab")
    sched, rep = _job(lab, "allreduce", name)
    assert rep.problems == []
    assert rep.metrics is not None and len(rep.metrics.iterations) == 3
    tl = rep.run.timeline()
    assert len(tl) == len(sched.transfers) == 3 * 6 * 4 * 2  # iterations x steps x ranks x QPs (split)
    assert sum(t["data_bytes"] for t in tl) == sum(t.bytes for t in sched.transfers)
    # spread: every hop of the ring crosses the fabric
    assert sum(rep.link_loads.values()) > 0


def test_alltoall_and_halving_doubling_round_robin(lab: Any) -> None:
    for collective in ("alltoall", "allreduce_hd"):  # eecmp: the QP's own UDP source port on the kernel
        sched, rep = _job(lab, collective, "eecmp", strategy="round_robin")
        assert rep.problems == [], collective
        assert {t["dst"] for t in rep.run.timeline()} == set(sched.placement.hosts)


def test_host_spraying_resends_around_a_dead_link_and_still_delivers_exactly_once(hsr_lab: Any) -> None:
    lab = hsr_lab
    # the link is dead from the start: half of h0's plane-0 packets to h2 go to it and are lost
    sched, rep = _job(lab, "allreduce", "host-spray", fault=Fault("blackhole", ("p0-t0-0", "p0-t1-0")),
                      fault_at=0.0)
    assert rep.problems == []
    assert rep.run.events[0]["what"] == "fault: blackhole p0-t0-0 p0-t1-0"
    assert rep.run.events[-1]["what"] == "repair: blackhole p0-t0-0 p0-t1-0"
    assert sum(t["retransmitted"] for t in rep.run.timeline()) > 0


def test_endpoint_mode_on_a_kernel_lab_without_it_is_refused_in_one_line(lab: Any) -> None:
    from mininet_labs.lab import LabError

    with pytest.raises(LabError, match="needs a lab whose topology sets host_source_routing: true"):
        _job(lab, "allreduce", "host-spray")
