"""Kernel data plane healing on link probes (prints JSON): `fabricctl run` on the default kernel lab; a one-way
blackhole that keeps carrier (nftables netdev egress drop on a leaf uplink) to the link recorded in the state file
and to every touched switch reconciled, and the drop removed to the link restored; the same for 30 % random loss
(`numgen random`); false failures in a quiet window with no fault. Baseline in the same process and lab: the announced failover of the
same link (Lab.fail, as `fabricctl fail`). Times are CLOCK_MONOTONIC, shared by this process and the controller's
events (`mono_ns`, `recorded_mono_ns`), from just before the nft call that inserts or removes the drop.

Needs root; run it under the machine's lab lock: `flock /tmp/srv6-lab.lock python3 bench/kernel_probe_heal.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.model.failures import LinkDown  # noqa: E402
from controller.southbound.kroutes import intf  # noqa: E402
from mininet_labs.lab import Lab  # noqa: E402
from mininet_labs.backends import nodes_for  # noqa: E402
from mininet_labs.labstate import default_topology  # noqa: E402
from kernel_heal import announced_failover_ms  # noqa: E402  (bench/ is on sys.path: this script's folder)

TABLE = "sf_bench_probe_drop"
SETTLE_S = 6.0  # after a restore: more than `window` (100) probes of 50 ms, so the next drop is no flap (no damping)


def spread(xs: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(xs), 1), "min": round(min(xs), 1), "max": round(max(xs), 1),
            "runs": [round(x, 1) for x in xs]}


class Events:
    """The controller's events file, read as it grows; `wait` hands out each event once, in order."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.seen, self.cursor = path, 0, [], 0  # type: ignore[var-annotated]

    def poll(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8") as f:
            f.seek(self.offset)
            data = f.read()
        whole = data[: data.rfind("\n") + 1]
        self.offset += len(whole.encode())
        self.seen += [json.loads(line) for line in whole.splitlines() if line.strip()]

    def skip(self) -> None:
        """Forget what came so far (the next `wait` looks at newer events only)."""
        self.poll()
        self.cursor = len(self.seen)

    def wait(self, pred: Any, limit: float, what: str) -> dict[str, Any]:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            self.poll()
            while self.cursor < len(self.seen):
                e = self.seen[self.cursor]
                self.cursor += 1
                if pred(e):
                    return e
            time.sleep(0.005)
        raise RuntimeError(f"not within {limit} s: {what}")


def nft(ns: str, rules: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True, check=True)


def drop_rules(dev: str, how: str) -> str:
    return (f"table netdev {TABLE} {{\n chain egress {{\n  type filter hook egress device \"{dev}\" priority 0; "
            f"policy accept;\n  {how}\n }}\n}}\n")


def cycle(ev: Events, ns: str, dev: str, link: list[str], how: str, limit: float) -> dict[str, float]:
    """Insert the drop, wait for the link recorded and reconciled, remove it, wait for the restore (ms each)."""
    ev.skip()
    t0 = time.monotonic_ns()
    nft(ns, drop_rules(dev, how))
    down = ev.wait(lambda e: e["kind"] == "link_down" and e["link"] == link, limit, "link_down")
    recorded = ev.wait(lambda e: e["kind"] == "failures_recorded", limit, "failures_recorded")
    applied = ev.wait(lambda e: e["kind"] == "deltas_written", limit, "deltas_written")
    t1 = time.monotonic_ns()
    nft(ns, f"delete table netdev {TABLE}\n")
    up = ev.wait(lambda e: e["kind"] == "link_up" and e["link"] == link, 4 * limit, "link_up")
    restored = ev.wait(lambda e: e["kind"] == "deltas_written", limit, "deltas_written after link_up")
    return {"recorded_ms": (recorded["mono_ns"] - t0) / 1e6, "reconciled_ms": (applied["mono_ns"] - t0) / 1e6,
            "restored_ms": (restored["mono_ns"] - t1) / 1e6, "evidence": down["evidence"], "up": up["evidence"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="blackhole cycles (and random-loss cycles: min(runs, 3))")
    ap.add_argument("--quiet", type=float, default=60.0, help="seconds with no fault, counting false failures")
    args = ap.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kernel-probe-") as tmp:
        lab = Lab(default_topology(), tmp, nodes_for("kernel", name=f"kp{os.getpid()}")).up()
        run = None
        try:
            topo = lab.model
            leaf, spine = topo.switch("p0-t0-0"), topo.switch("p0-t1-1")
            ns, dev = lab.netns_of(leaf.name), intf(leaf.uplinks[spine.index])
            link = LinkDown(leaf.name, spine.name)
            announced = announced_failover_ms(lab, link, args.runs)
            ev = Events(Path(tmp) / "fabric-events.jsonl")
            run = subprocess.Popen([sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path), "run"],
                                   cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            ev.wait(lambda e: e["kind"] == "probes_armed", 30, "every probe direction armed")
            q0 = time.monotonic()
            time.sleep(args.quiet)
            ev.poll()
            quiet = [e for e in ev.seen if e["mono_ns"] >= q0 * 1e9]
            quiet_downs = [e for e in quiet if e["kind"] in ("link_down", "switch_down", "port_down")]
            quiet_stalls = sum(e["kind"] == "probe_stall" for e in quiet)
            blackhole = [cycle(ev, ns, dev, [link.t0, link.t1], "drop", 10.0) for _ in range(args.runs)
                         if time.sleep(SETTLE_S) is None]
            loss = [cycle(ev, ns, dev, [link.t0, link.t1], "numgen random mod 100 < 30 drop", 30.0)
                    for _ in range(min(args.runs, 3)) if time.sleep(SETTLE_S) is None]
            run.send_signal(signal.SIGTERM)
            _, err = run.communicate(timeout=30)
            ev.poll()
            started = next((e for e in ev.seen if e["kind"] == "started"), {})
            in_sync = all(o.ok and not o.delta for o in lab.install(dry_run=True).values())
        finally:
            if run is not None and run.poll() is None:
                run.kill()
                run.wait()
            lab.down()
    rec = [c["reconciled_ms"] for c in blackhole]
    doc = {"bench": "kernel_probe_heal", "kernel": platform.release(), "cpus": os.cpu_count(),
           "loadavg_1_5_15_before": [round(x, 2) for x in load_before],
           "loadavg_1_5_15_after": [round(x, 2) for x in os.getloadavg()],
           "lab": "2 planes x 2 T1 x 2 T0 x 2 hosts", "link": f"{link.t0} -- {link.t1}", "runs": args.runs,
           "probing": {k: started.get(k) for k in ("links", "period_ms", "probe_timeout_ms", "thresholds")},
           "announced_fail_ms": spread(announced),
           "blackhole_to_recorded_ms": spread([c["recorded_ms"] for c in blackhole]),
           "blackhole_to_reconciled_ms": spread(rec),
           "blackhole_removed_to_restored_ms": spread([c["restored_ms"] for c in blackhole]),
           "blackhole_evidence": sorted({c["evidence"] for c in blackhole}),
           "loss30_to_recorded_ms": spread([c["recorded_ms"] for c in loss]),
           "loss30_to_reconciled_ms": spread([c["reconciled_ms"] for c in loss]),
           "loss30_removed_to_restored_ms": spread([c["restored_ms"] for c in loss]),
           "loss30_evidence": sorted({c["evidence"] for c in loss}),
           "ratio_blackhole_reconciled_over_announced": round(statistics.median(rec) / statistics.median(announced), 2),
           "quiet_s": args.quiet, "quiet_false_failures": len(quiet_downs),
           "quiet_stalls": quiet_stalls,
           "controller_stderr_lines": len(err.splitlines()), "plan_in_sync_after": in_sync}
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
