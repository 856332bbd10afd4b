"""Kernel-lab benchmark (prints JSON): `lab up` of the default lab and of a 4-plane, 16-leaf, 8-spine, 64-host fabric,
memory, a RoCEv2 permutation delivered, and the demo end to end; every figure over --runs runs with its spread.

Needs root; run it under the machine's lab lock: `flock /tmp/srv6-lab.lock python3 bench/lab_scale.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mininet_labs.kernel import demo  # noqa: E402
from mininet_labs.lab import Lab  # noqa: E402
from mininet_labs.backends import nodes_for  # noqa: E402
from mininet_labs.lab import LabError  # noqa: E402
from mininet_labs.labstate import default_topology

SETTLE_S = 5.0
SCALE = {"planes": 4, "t1": 8, "t0": 16, "hosts": 4}  # 4 x 16 leaves x 8 spines, 64 hosts (4 per leaf)


def mem_available_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


def spread(xs: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(xs), 3), "min": round(min(xs), 3), "max": round(max(xs), 3),
            "runs": [round(x, 3) for x in xs]}


def up_down(size: dict[str, int], name: str, permutation: bool, seed: int) -> dict[str, Any]:
    model = default_topology(size["planes"], size["t1"], size["t0"], size["hosts"])
    with tempfile.TemporaryDirectory(prefix="lab-scale-") as tmp:
        time.sleep(SETTLE_S)  # a pause between labs; the kernel destroys the last lab's namespaces for longer, so
        # kernel_mem_mb can overlap that teardown (docs/kernel.md)
        before = mem_available_kb()
        t0 = time.monotonic()
        try:
            lab = Lab(model, tmp, nodes_for("kernel", name=name)).up()
        except LabError as e:
            return {"error": str(e), "switches": len(model.switches), "hosts": len(model.hosts)}
        up_s = time.monotonic() - t0
        out: dict[str, Any] = {"up_s": up_s, "phases": lab.state.timings,
                               "kernel_mem_mb": round((before - mem_available_kb()) / 1024, 1),
                               "switches": len(model.switches), "hosts": len(model.hosts)}
        try:
            if permutation:
                hosts = lab.hosts
                rng = random.Random(seed)
                while True:
                    dst = hosts[:]
                    rng.shuffle(dst)
                    if all(a != b for a, b in zip(hosts, dst)):
                        break
                t1 = time.monotonic()
                report = lab.traffic(list(zip(hosts, dst)), qps=4, messages=16, rate=0, timeout=300)
                tot = report.totals()
                out["permutation"] = {"pairs": len(hosts), "sent": tot["sent"], "received": tot["received"],
                                      "lost": tot["lost"], "icrc_bad": tot["icrc_bad"], "ok": report.ok,
                                      "seconds": round(time.monotonic() - t1, 2)}
        finally:
            t2 = time.monotonic()
            report = lab.down()
            out["down_s"] = time.monotonic() - t2
            out["clean"] = report.clean
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-scale", action="store_true", help="Only the default lab and the demo.")
    ap.add_argument("--no-demo", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("lab_scale needs root (network namespaces)", file=sys.stderr)
        return 5
    doc: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "kernel": platform.release()}, "runs": args.runs}
    base = [up_down({"planes": 2, "t1": 2, "t0": 2, "hosts": 2}, f"b{os.getpid()}", False, 0) for _ in range(args.runs)]
    doc["default_lab"] = {"up_s": spread([r["up_s"] for r in base]), "down_s": spread([r["down_s"] for r in base]),
                          "aim_up_s": 5.0, "clean": all(r["clean"] for r in base)}
    if not args.no_scale:
        tried = [up_down(SCALE, f"s{os.getpid()}", True, n) for n in range(args.runs)]
        scale = [r for r in tried if "error" not in r]
        doc["scale_errors"] = [r["error"] for r in tried if "error" in r]
    if not args.no_scale and scale:
        doc["scale_lab"] = {"size": SCALE, "switches": scale[0]["switches"], "hosts": scale[0]["hosts"],
                            "up_s": spread([r["up_s"] for r in scale]), "aim_up_s": 30.0,
                            "up_over_default": round(statistics.median(r["up_s"] for r in scale)
                                                     / statistics.median(r["up_s"] for r in base), 1),
                            "kernel_mem_mb": spread([r["kernel_mem_mb"] for r in scale]),
                            "down_s": spread([r["down_s"] for r in scale]),
                            "permutation": [r["permutation"] for r in scale], "clean": all(r["clean"] for r in scale),
                            "phases": scale[0]["phases"]}
    if not args.no_demo:
        runs = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="lab-demo-") as tmp:
                t0 = time.monotonic()
                result = demo.run("kernel", "bench", Path(tmp))
                runs.append({"s": time.monotonic() - t0, "ok": result["ok"],
                             "loss_window_ms": next(c.get("loss_window_ms") for c in result["checks"]
                                                    if c["check"] == "plane 0 QPs recover"),
                             "announced_ms": next(c.get("announced_ms") for c in result["checks"]
                                                  if c["check"] == "cut + fail link")})
        doc["demo"] = {"s": spread([r["s"] for r in runs]), "aim_s": 60.0, "ok": all(r["ok"] for r in runs),
                       "loss_window_ms": spread([r["loss_window_ms"] for r in runs]),
                       "announced_ms": spread([r["announced_ms"] for r in runs])}
    doc["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
