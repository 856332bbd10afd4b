"""Leaf spraying + the unattended controller: a FabricService in this process finds the fault by its own probes.

Used by the `leaf-unattended` mode of `endpoint compare`: nobody tells the controller anything; the
service (controller.service.runner, through its public constructor, start and stop only) probes the
links, records the failure it detects in the lab's state file and reconciles the leaves, then
restores the link when its probes come back. Its events (link_down, link_up, deltas_written) are
read back from its event log and put on the scenario's timeline.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.plan.p4names import fabric_program
from controller.service.runner import Config, FabricService
from mininet_labs.lab import Lab, LabError

ELECTION_ID = 10  # above the lab's own (1): the service is primary while it runs
KINDS = ("link_down", "link_up", "deltas_written", "switch_down", "switch_up", "carrier")


@dataclass(frozen=True)
class Probing:
    """The service's probe period, timeout floor (s) and nice value: `fabricctl run`'s defaults."""

    period: float = 0.05
    probe_timeout: float = 0.08
    nice: int | None = -10
    carrier_events: Path | None = None  # the port-status socket (`fabricctl run --carrier-events`); None: probes only


@contextmanager
def service(lab: Lab, events: Path, probing: Probing = Probing(), ready_within: float = 60.0) -> Iterator[FabricService]:
    """A FabricService over the lab (its options: endpoint mode and all), primary everywhere, until the block ends."""
    svc = FabricService(lab.model, fabric_program(lab.program), lab.failure_state_path,
                        Config(period=probing.period, probe_timeout=probing.probe_timeout, election_id=ELECTION_ID,
                               counters_every=0, events=events, nice=probing.nice,
                               carrier_events=probing.carrier_events), options=lab.options)
    svc.start()
    try:
        end = time.monotonic() + ready_within
        while not all(s.ready for s in svc.sessions.values()):
            if time.monotonic() > end:
                raise LabError(f"the controller service was not primary on every switch within {ready_within:.0f} s")
            time.sleep(0.05)
        yield svc
    finally:
        svc.stop()


def timeline(events: Path, since_ns: int, started_ns: int) -> list[dict[str, Any]]:
    """The service's link and reconcile events since `since_ns`, in seconds after `started_ns`."""
    out = []
    for line in events.read_text().splitlines():
        e = json.loads(line)
        t = e.get("t_mono_ns", e.get("mono_ns", 0))
        if e.get("kind") in KINDS and t >= since_ns:
            what = f"controller (unattended): {e['kind']}" + (f" {'--'.join(e['link'])}" if "link" in e else
                                                               f" {e['switch']}" if "switch" in e else "")
            out.append({"what": what, "t_s": round((t - started_ns) / 1e9, 4),
                        **({"evidence": e["evidence"]} if "evidence" in e else {}),
                        **({"ms": e["ms"]} if "ms" in e else {})})
    return out
