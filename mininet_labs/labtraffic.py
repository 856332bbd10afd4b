"""Traffic on a lab: every host pair and plane, run to the end or started in the background."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


from mininet_labs import traffic as tr
from mininet_labs.labstate import LabError
from mininet_labs.labhost import LabHost
from mininet_labs.processes import wait_files, with_repo_path
from mininet_labs.trafficrun import TrafficRun


class LabTraffic:
    """Traffic on a lab's hosts: senders and receivers started in their namespaces (`host` names a host's handle),
    writing under DIR/traffic, reading the lab's topology file."""

    def __init__(self, lab_dir: Path, topology_path: Path, host: Callable[[str], LabHost]) -> None:
        self.dir, self.topology_path, self.host = lab_dir, topology_path, host

    def start(self, hosts: Sequence[str], pairs: Sequence[tuple[str, str]] | None = None, *, qps: int = 4,
              messages: int = 8, message_size: int = 1024, mtu: int = 1024, verb: tr.Verb = "send",
              plane_mode: tr.PlaneMode = "packet", planes: Sequence[int] | None = None, rate: float = 1000.0,
              start_psn: int = 0, sport: int | None = None, ipv4: bool = False,
              qp_base: int | Mapping[str, int] = 0x100, rehome: bool = False, timeline_ms: float = 0.0,
              start_delay: float = 0.0, interleave: bool = False, timeout: float = 120.0) -> TrafficRun:
        """Start one sender per source and one receiver per destination of `pairs` (default: every ordered pair
        of `hosts`) and return while they run (TrafficRun.wait() collects the report). `qp_base` may differ per
        sender; `rehome` lets senders move QPs off a plane whose NIC lost carrier or that
        TrafficRun.tell_dead_planes names; `timeline_ms` bins receptions per plane; `start_delay` > 0: every
        sender starts sending that long after this call (TrafficRun.started_ns), whenever its process came up,
        so a schedule can be kept; `interleave`: each sender's message m goes to every destination in turn, so every
        pair flows all along (TrafficRun.stop() then ends every pair at once, `messages` the run's bound)."""
        pairs = list(pairs) if pairs is not None else [(a, b) for a in hosts for b in hosts if a != b]
        for a, b in pairs:
            self.host(a), self.host(b)
            if a == b:
                raise LabError(f"a pair needs two hosts, got {a} -> {b}")
        run = self.dir / "traffic" / time.strftime("%Y%m%d-%H%M%S") / str(time.monotonic_ns())
        run.mkdir(parents=True)
        dests: dict[str, list[str]] = {}
        for a, b in pairs:
            dests.setdefault(a, []).append(b)
        per_dest = messages * tr.SendSpec("", "", [], message_size=message_size, mtu=mtu).packets_per_message()
        expect: dict[str, int] = {}
        for a, b in pairs:
            expect[b] = expect.get(b, 0) + per_dest
        py = [sys.executable, "-m", "mininet_labs.traffic"]
        topo = str(self.topology_path)
        env = with_repo_path(os.environ)
        handle = TrafficRun(self, run, timeout)
        try:
            for dst, n in expect.items():
                with open(run / f"recv-{dst}.err", "w") as err:
                    handle.receivers[dst] = self.host(dst).popen(
                        [*py, "recv", "--topology", topo, "--host", dst, "--expect", str(n), "--timeout", str(timeout),
                         "--ready-file", str(run / f"{dst}.ready"), "--out", str(run / f"recv-{dst}.json"),
                         "--timeline-ms", str(timeline_ms)],
                        env=env, stdout=subprocess.DEVNULL, stderr=err)
            wait_files([run / f"{d}.ready" for d in handle.receivers], handle.receivers, 30.0)
            handle.started_ns = time.monotonic_ns() + int(start_delay * 1e9)
            for src, to in dests.items():
                base = qp_base if isinstance(qp_base, int) else qp_base.get(src, 0x100)
                argv = [*py, "send", "--topology", topo, "--host", src, "--qps", str(qps), "--messages", str(messages),
                        "--message-size", str(message_size), "--mtu", str(mtu), "--verb", verb,
                        "--plane-mode", plane_mode, "--rate", str(rate), "--start-psn", str(start_psn),
                        "--qp-base", str(base), "--out", str(run / f"send-{src}.json")]
                for d in to:
                    argv += ["--to", d]
                if planes is not None:
                    argv += ["--planes", ",".join(map(str, planes))]
                if sport is not None:
                    argv += ["--sport", str(sport)]
                if ipv4:
                    argv.append("--ipv4")
                if rehome:
                    argv += ["--rehome", "--dead-planes-file", str(handle.dead_planes_file(src))]
                if start_delay > 0:
                    argv += ["--start-at-ns", str(handle.started_ns)]
                if interleave:
                    argv.append("--interleave")
                argv += ["--sending-file", str(handle.sending_file(src)), "--stop-file", str(handle.stop_file)]
                with open(run / f"send-{src}.err", "w") as err:
                    handle.senders[src] = self.host(src).popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
        except BaseException:
            handle.kill()
            raise
        return handle
