"""Collectives on the bmv2 lab under every path-selection scheme: every byte of every transfer arrives
exactly once at the rank that should have it, with the bytes sent, and no rank starts a step before the
transfers it depends on completed at it; also when a spine stops forwarding mid-run and the controller
heals the leaves. Counts and checks, never a time."""

from __future__ import annotations

from typing import Any

import pytest

from controller.workload import Workload, place, schedule
from endpoint.collective.rank import Transport
from endpoint.collective.report import job
from endpoint.collective.run import Fault
from endpoint.collective.schemes import SCHEMES, scheme

SMALL = Transport(window=4, mtu=1024)


def _sched(lab: Any, size: int = 16 * 1024, iterations: int = 1) -> Any:
    return schedule(Workload("allreduce", size, iterations=iterations, warmup=0, qps=2, strategy="split"),
                    place(lab.model, "packed"))


@pytest.mark.parametrize("name", list(SCHEMES))
def test_ring_allreduce_under_each_scheme_delivers_every_byte_once_in_step_order(lab: Any, name: str) -> None:
    sched = _sched(lab)
    rep = job(lab, sched, scheme(name), SMALL, timeout=180)
    assert rep.problems == []
    assert sum(t["data_bytes"] for t in rep.run.timeline()) == sum(t.bytes for t in sched.transfers)
    assert lab.program == SCHEMES[name].program


def test_a_spine_that_stops_forwarding_mid_allreduce_under_leaf_spraying_with_the_controller(lab: Any) -> None:
    sched = _sched(lab, size=64 * 1024, iterations=3)
    rep = job(lab, sched, scheme("leaf-spray"), SMALL, fault=Fault("freeze", ("p0-t1-0",)), fault_at=0.0,
              timeout=240, controller=True)
    assert rep.problems == []
    assert [e["what"] for e in rep.run.events] == ["fault: freeze p0-t1-0", "repair: freeze p0-t1-0"]
