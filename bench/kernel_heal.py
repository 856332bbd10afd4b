"""Kernel data plane healing on carrier (prints JSON): from a leaf uplink set down (netlink, in its namespace) to the
record written and every touched switch's delta written by the controller service (controller/service/runner.py, in
this process, over the lab's netlink switches), and back up (restored by M probes back, so the up figure is mostly
M x period); beside it, in the same process and lab, the announced failover of `fabricctl fail` (Lab.fail) as the
baseline. Every figure over --runs cycles with its spread.

Needs root; run it under the machine's lab lock: `flock /tmp/srv6-lab.lock python3 bench/kernel_heal.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyroute2 import IPRoute  # noqa: E402

from controller.model.failures import LinkDown  # noqa: E402
import queue  # noqa: E402

from controller.service.runner import Config, FabricService  # noqa: E402
from controller.southbound.kroutes import intf  # noqa: E402
from mininet_labs.lab import Lab  # noqa: E402
from mininet_labs.backends import nodes_for  # noqa: E402
from mininet_labs.labstate import default_topology  # noqa: E402


def spread(xs: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(xs), 2), "min": round(min(xs), 2), "max": round(max(xs), 2),
            "runs": [round(x, 2) for x in xs]}


def set_link(netns: str, dev: str, state: str) -> None:
    with IPRoute(netns=netns, flags=0) as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname=dev)[0], state=state)


def announced_failover_ms(lab: Lab, link: LinkDown, runs: int) -> list[float]:
    """`runs` announced failovers of `link` (`Lab.fail`, as `fabricctl fail`), each restored: ms each."""
    out = []
    for _ in range(runs):
        t0 = time.monotonic_ns()
        lab.fail(link)
        out.append((time.monotonic_ns() - t0) / 1e6)
        lab.restore()
    return out


def heal_once(events: queue.Queue[dict[str, Any]], netns: str, dev: str, state: str, limit: float = 30.0) -> float:
    """ms from the link set `state` to the service's deltas written for it."""
    while not events.empty():
        events.get_nowait()
    t0 = time.monotonic_ns()
    set_link(netns, dev, state)
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            e = events.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            break
        if e["kind"] == "deltas_written" and e["switches"]:
            return (e["mono_ns"] - t0) / 1e6
    raise RuntimeError(f"no deltas written within {limit} s of {dev} {state}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kernel-heal-") as tmp:
        lab = Lab(default_topology(), tmp, nodes_for("kernel", name=f"kh{os.getpid()}")).up()
        try:
            topo = lab.model
            leaf, spine = topo.switch("p0-t0-0"), topo.switch("p0-t1-1")
            netns, dev = lab.netns_of(leaf.name), intf(leaf.uplinks[spine.index])
            link = LinkDown(leaf.name, spine.name)
            announced = announced_failover_ms(lab, link, args.runs)
            seen: queue.Queue[dict[str, Any]] = queue.Queue()
            svc = FabricService(topo, "srv6_spray", lab.failure_state_path, Config(events=Path(tmp) / "events.jsonl"),
                                sink=seen.put)
            svc.start()
            down, up = [], []
            try:
                end = time.monotonic() + 30  # every probe direction armed: its losses count from here
                while not all(s.armed for s in svc.prober.states) and time.monotonic() < end:
                    time.sleep(0.05)
                for _ in range(args.runs):
                    down.append(heal_once(seen, netns, dev, "down"))
                    up.append(heal_once(seen, netns, dev, "up"))
            finally:
                svc.stop()
            in_sync = all(o.ok and not o.delta for o in lab.install(dry_run=True).values())
        finally:
            lab.down()
    doc = {"bench": "kernel_heal", "kernel": platform.release(), "cpus": os.cpu_count(), "runs": args.runs,
           "lab": "2 planes x 2 T1 x 2 T0 x 2 hosts", "link": f"{link.t0} -- {link.t1}",
           "announced_fail_ms": spread(announced), "carrier_down_to_reconciled_ms": spread(down),
           "carrier_up_to_restored_ms": spread(up),
           "ratio_carrier_down_over_announced": round(statistics.median(down) / statistics.median(announced), 2),
           "plan_in_sync_after": in_sync}
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
