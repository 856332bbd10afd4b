"""Endpoint mode on a Mininet lab: the leaves' host-SRv6 option on, the EV export, senders and receivers in the hosts.

    enable(lab)                                   # Options(host_source_routing=True), reconciled
    run = start(lab, [("h0", "h2")], Workload(policy="health", rate=400))
    ... lab.cut_link(...) ...
    report = run.wait()                           # EndpointReport: senders' and receivers' JSON
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller import planning
from controller.files.atomic import write_atomic
from controller.plan.evs import export, leaf_spray
from controller.routes import Options
from endpoint.ev import EvConfig
from mininet_labs.lab import Lab, LabError
from mininet_labs.trafficrun import wait_senders_receivers
from mininet_labs.processes import wait_files, with_repo_path

MAX_SOCKET_PATH = 100  # a Unix socket path is at most 107 bytes (sun_path)


@dataclass
class Workload:
    """What every sender sends to each of its destinations, and how (see `python3 -m endpoint send --help`)."""

    policy: str = "health"
    mode: str = "host"  # host: the hosts write the carriers (endpoint mode); leaf: plain RoCEv2, the leaves spray
    qps: int = 4
    messages: int = 256
    per_message: int = 1
    size: int = 256
    window: int = 16
    ev_count: int = 0
    evs_per_qp: int = 0
    parts: int = 4
    rate: float = 400.0
    min_rto_ms: float = 25.0
    probe_ms: float = 20.0
    duration: float = 30.0
    bin_ms: float = 20.0
    cc: bool = False  # DCTCP congestion window per QP (endpoint.cc)
    recover_probes: int = EvConfig.recover_probes  # answered probes that bring an ASSUMED_BAD EV back
    link_mbit: float = 0.0  # the shaped links' rate the EV timers are fitted to (0: unshaped; endpoint.timers)
    queued_frames: int = 0  # data frames a round trip can queue behind on those links

    def argv(self) -> list[str]:
        return ["--policy", self.policy, "--qps", str(self.qps), "--messages", str(self.messages),
                "--per-message", str(self.per_message), "--size", str(self.size), "--window", str(self.window),
                "--ev-count", str(self.ev_count), "--evs-per-qp", str(self.evs_per_qp), "--parts", str(self.parts), "--rate", str(self.rate),
                "--min-rto-ms", str(self.min_rto_ms), "--probe-ms", str(self.probe_ms),
                "--duration", str(self.duration), "--bin-ms", str(self.bin_ms), "--recover-probes", str(self.recover_probes),
                "--link-mbit", str(self.link_mbit), "--queued-frames", str(self.queued_frames),
                *(["--cc"] if self.cc else [])]


def enable(lab: Lab) -> None:
    """Endpoint mode on the leaves: the plan with host_source_routing, reconciled on every switch."""
    lab.options = dataclasses.replace(lab.options or Options(), host_source_routing=True)
    bad = [o for o in lab.install().values() if not o.ok]
    if bad:
        raise LabError(f"installing endpoint mode failed: {bad[0].error}")


def export_evs(lab: Lab, path: Path, mode: str = "host") -> Path:
    """Every host's EVs from the lab's healthy plan (hosts route around failures themselves); mode
    "leaf": one EV per plane without a carrier, the baseline where the leaves spray."""
    doc = export(planning.fabric(lab.model, "srv6_spray"))
    write_atomic(path, json.dumps(leaf_spray(doc) if mode == "leaf" else doc, indent=1) + "\n")
    return path


@dataclass
class EndpointReport:
    senders: dict[str, dict[str, Any]]
    receivers: dict[str, dict[str, Any]]
    started_ns: int

    def totals(self) -> dict[str, int]:
        qps = [q for r in self.receivers.values() for q in r["qps"]]
        sq = [q for s in self.senders.values() for q in s["qps"]]
        return {"expected": sum(q["expected"] for q in qps), "received": sum(q["received"] for q in qps),
                "lost": sum(q["lost"] for q in qps), "duplicated": sum(q["duplicated"] for q in qps),
                "icrc_bad": sum(q["icrc_bad"] for q in qps), "ecn": sum(q["ecn"] for q in qps),
                "trimmed": sum(q["trimmed"] for q in qps), "lost_first_try": sum(q["lost_first_try"] for q in sq),
                "retransmitted": sum(q["retransmitted"] for q in sq), "probes": sum(s["probes"] for s in self.senders.values())}

    def to_json(self) -> dict[str, Any]:
        return {"started_ns": self.started_ns, "totals": self.totals(), "senders": self.senders,
                "receivers": self.receivers}


@dataclass
class EndpointRun:
    """Endpoint senders and receivers running in the lab's hosts; `wait()` collects their results."""

    lab: Lab
    dir: Path
    timeout: float
    senders: dict[str, subprocess.Popen[Any]] = field(default_factory=dict)
    receivers: dict[str, subprocess.Popen[Any]] = field(default_factory=dict)
    started_ns: int = 0

    def wait(self) -> EndpointReport:
        try:
            wait_senders_receivers(self.senders, self.receivers, self.dir, self.timeout, "endpoint ")
        finally:
            self.kill()
        return EndpointReport({s: json.loads((self.dir / f"send-{s}.json").read_text()) for s in self.senders},
                              {d: json.loads((self.dir / f"recv-{d}.json").read_text()) for d in self.receivers},
                              self.started_ns)

    def kill(self) -> None:
        for p in (*self.senders.values(), *self.receivers.values()):
            if p.poll() is None:
                p.kill()
                p.wait()


def start(lab: Lab, pairs: Sequence[tuple[str, str]], work: Workload, *, start_delay: float = 1.5,
          timeout: float | None = None) -> EndpointRun:
    """Start a receiver on every destination and a sender on every source (its destinations together)."""
    run_dir = lab.dir / "endpoint" / str(time.monotonic_ns())
    run_dir.mkdir(parents=True)
    evs = export_evs(lab, run_dir / "evs.json", work.mode)
    topo = str(lab.topology_path)
    dests: dict[str, list[str]] = {}
    expect: dict[str, int] = {}
    for a, b in pairs:
        lab.host(a), lab.host(b)
        dests.setdefault(a, []).append(b)
        expect[b] = expect.get(b, 0) + work.messages * work.per_message
    py = [sys.executable, "-m", "endpoint"]
    env = with_repo_path(os.environ)
    handle = EndpointRun(lab, run_dir, timeout or work.duration + start_delay + 30)
    try:
        for dst, n in expect.items():
            with open(run_dir / f"recv-{dst}.err", "w") as err:
                handle.receivers[dst] = lab.host(dst).popen(
                    [*py, "recv", "--topology", topo, "--evs", str(evs), "--host", dst, "--expect", str(n),
                     "--timeout", str(work.duration + start_delay + 5), "--ready-file", str(run_dir / f"{dst}.ready"),
                     "--bin-ms", str(work.bin_ms), "--out", str(run_dir / f"recv-{dst}.json")],
                    env=env, stdout=subprocess.DEVNULL, stderr=err)
        wait_files([run_dir / f"{d}.ready" for d in handle.receivers], handle.receivers, 30.0)
        handle.started_ns = time.monotonic_ns() + int(start_delay * 1e9)
        for src, to in dests.items():
            argv = [*py, "send", "--topology", topo, "--evs", str(evs), "--host", src, *work.argv(),
                    "--start-at-ns", str(handle.started_ns), "--out", str(run_dir / f"send-{src}.json"),
                    "--events", str(run_dir / f"events-{src}.jsonl")]
            control = run_dir / f"control-{src}.sock"
            if len(str(control)) <= MAX_SOCKET_PATH:  # else the run has no control socket (`fabricctl endpoint query`)
                argv += ["--control", str(control)]
            for d in to:
                argv += ["--to", d]
            with open(run_dir / f"send-{src}.err", "w") as err:
                handle.senders[src] = lab.host(src).popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
    except BaseException:
        handle.kill()
        raise
    return handle
