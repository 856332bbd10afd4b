"""Host loop probes on the bmv2 lab, no controller running: a T1 that stops forwarding (its egress to every
leaf blackholed, carrier up) is localized by the loop agent of every host, the far leaf's included, as its
own leaf's links to that T1, and the EVs through it are denied at every host; clean again, nothing is."""

from __future__ import annotations

from typing import Any

from endpoint import lab as ep
from mininet_labs import faults
from tests.loopcheck import LEAVES, SPINE, figures, t1_mapped_out_by_every_host


def test_a_t1_that_stops_forwarding_is_mapped_out_by_every_host_with_no_controller(lab: Any) -> None:
    ep.enable(lab)
    targets = [[SPINE, leaf] for leaf in LEAVES]

    def stop() -> None:
        for t in targets:
            faults.inject(lab, "blackhole", t)

    def restart() -> None:
        for t in targets:
            faults.undo(lab, "blackhole", t)

    print(figures(t1_mapped_out_by_every_host(lab, stop, restart)))
