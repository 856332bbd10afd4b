"""What bmv2's port poll costs (root, bmv2 with BM_PORT_MONITOR_MS; prints JSON): idle simple_switch_grpc
processes shaped like a lab's switches (as many, with as many ports, no program), each port a veth in one
namespace, and the CPU they use (utime + stime from /proc) over --seconds, per BM_PORT_MONITOR_MS value in turn.
The poll reads every port's status once per period, so its cost grows with ports / period; what an idle
switch costs anyway (its other threads) is the 200 ms row (bmv2's own period).

    P4_TOOLCHAIN_BIN=/opt/p4-toolchain/bin flock /tmp/srv6-lab.lock timeout 900 .venv/bin/python bench/port_poll_cpu.py --lab default
    ... --lab scale    # 4 planes x 8 T1 x 16 T0 x 4 hosts: 96 switches, 1,280 ports

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _stats import spread  # noqa: E402

from controller.programs.bmv2build import traits  # noqa: E402
from mininet_labs import netns  # noqa: E402
from mininet_labs.bmv2proc import PORT_POLL_VARIABLE, lab_binary, stop_process  # noqa: E402
from mininet_labs.labstate import default_topology  # noqa: E402

LABS = {"default": (2, 2, 2, 2), "scale": (4, 8, 16, 4)}  # planes, T1 per plane, T0 per plane, hosts per leaf
TICK = os.sysconf("SC_CLK_TCK")


def ports_per_switch(lab: str) -> list[int]:
    """Data ports of each switch of the lab: a leaf's hosts and uplinks, a spine's downlinks."""
    planes, t1, t0, hosts = LABS[lab]
    model = default_topology(planes, t1, t0, hosts)
    return [len(s.host_ports) + len(s.uplinks) + len(s.downlinks) for s in model.switches]


def cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total


def measure(binary: str, ns: str, shape: list[int], poll_ms: int, seconds: float, workdir: Path) -> dict:
    """Start one switch per entry of `shape` on its veths, wait, then CPU over `seconds`."""
    procs: list[subprocess.Popen[bytes]] = []
    env = {**os.environ, PORT_POLL_VARIABLE: str(poll_ms)}
    try:
        for i, n in enumerate(shape):
            cmd = ["ip", "netns", "exec", ns, binary, "--device-id", str(i + 1), "--log-level", "off",
                   "--thrift-port", str(30000 + i), "--no-p4"]
            for p in range(n):
                cmd += ["-i", f"{p + 1}@s{i}p{p}"]
            cmd += ["--", "--grpc-server-addr", f"unix://{workdir}/s{i}.sock", "--cpu-port", "255"]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + 120
        while not all((workdir / f"s{i}.sock").exists() for i in range(len(shape))):
            if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                raise RuntimeError("a switch did not start")
            time.sleep(0.2)
        time.sleep(5.0)  # start-up work done
        pids = [p.pid for p in procs]
        load = os.getloadavg()[0]
        t0, c0 = time.monotonic(), cpu_ticks(pids)
        time.sleep(seconds)
        t1, c1 = time.monotonic(), cpu_ticks(pids)
        core = (c1 - c0) / TICK / (t1 - t0)  # cores busy
        return {"poll_ms": poll_ms, "cpu_percent_of_one_core": round(100 * core, 2),
                "per_switch_percent": round(100 * core / len(shape), 3),
                "port_reads_per_s": round(sum(shape) * 1000 / poll_ms), "load_1min_before": round(load, 2)}
    finally:
        for p in procs:
            stop_process(p.pid, p)
        for sock in workdir.glob("s*.sock"):
            sock.unlink(missing_ok=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lab", choices=sorted(LABS), default="default")
    ap.add_argument("--polls", default="200,20,10,5", help="BM_PORT_MONITOR_MS values, in turn")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=2, help="the polls in turn this many times")
    args = ap.parse_args()
    binary = lab_binary("warn")
    if binary is None or os.geteuid() != 0:
        print(json.dumps({"skipped": "needs root and simple_switch_grpc"}))
        return 2
    shape = ports_per_switch(args.lab)
    ns = f"ppcpu{os.getpid()}"
    netns.add_netns(ns)
    rows: dict[int, list[dict]] = {}
    try:
        for i, n in enumerate(shape):
            for p in range(n):
                netns.add_veth(ns, f"s{i}p{p}", f"x{i}p{p}")
        with tempfile.TemporaryDirectory(prefix="ppcpu-") as d:
            for _ in range(args.rounds):
                for poll in (int(x) for x in args.polls.split(",")):
                    rows.setdefault(poll, []).append(measure(binary, ns, shape, poll, args.seconds, Path(d)))
    finally:
        netns.delete_netns(ns)
    out = {"bench": "port_poll_cpu", "lab": args.lab, "switches": len(shape), "ports": sum(shape),
           "bmv2": traits(binary).as_dict(), "seconds_per_sample": args.seconds,
           "per_poll": {str(poll): {"cpu_percent_of_one_core": spread([r["cpu_percent_of_one_core"] for r in rs], 2),
                                    "port_reads_per_s": rs[0]["port_reads_per_s"], "samples": rs}
                        for poll, rs in rows.items()},
           "machine": {"cpus": os.cpu_count(), "load_end": [round(x, 2) for x in os.getloadavg()]}}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
