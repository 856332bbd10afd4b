"""Host loop probes on the bmv2 lab, no controller running: a T1 that stops forwarding (its egress to every
leaf blackholed, carrier up) is localized by the loop agent of every host, the far leaf's included, as its
own leaf's links to that T1, and the EVs through it are denied at every host; clean again, nothing is. With one host's agent only, the merged denylist pushed maps the
EV out at a sender on the other leaf, and `fabricctl status` shows who saw the links."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from endpoint import lab as ep
from mininet_labs import faults
from tests.loopcheck import LEAVES, SPINE, figures, one_agent_pushed_to_a_remote_host, t1_mapped_out_by_every_host


def _blackhole(lab: Any) -> tuple[Callable[[], None], Callable[[], None]]:
    """SPINE's egress to every leaf blackholed (carrier up), and undone."""
    targets = [[SPINE, leaf] for leaf in LEAVES]

    def stop() -> None:
        for t in targets:
            faults.inject(lab, "blackhole", t)

    def restart() -> None:
        for t in targets:
            faults.undo(lab, "blackhole", t)

    return stop, restart


def test_a_t1_that_stops_forwarding_is_mapped_out_by_every_host_with_no_controller(lab: Any) -> None:
    ep.enable(lab)
    print(figures(t1_mapped_out_by_every_host(lab, *_blackhole(lab))))


def test_one_hosts_report_pushed_maps_the_t1_out_at_a_sender_on_the_other_leaf(lab: Any) -> None:
    ep.enable(lab)
    print(one_agent_pushed_to_a_remote_host(lab, *_blackhole(lab)))
