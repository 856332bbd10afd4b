"""Packets per second through simple_switch_grpc: srv6_spray as headend and as uN transit,
each against the minimal forwarding program (p4/l3_baseline.p4) run the same way in the same run,
on each bmv2 build there is (the logging build `$P4_TOOLCHAIN_BIN/simple_switch_grpc` and the
throughput build `$P4_TOOLCHAIN_BIN/../perf/bin/simple_switch_grpc`), and the same four cases on the
kernel data plane (a Linux namespace routing with seg6 encap and seg6local End next-csid, docs/kernel.md).

Prints one JSON document: per build, pps per case and the ratios srv6_spray / baseline (aim >= 0.7),
each build's traits; then the kernel's figures. Rounds interleave builds and cases, so a shared
machine's load drifts hit them alike. With --compare-build DIR (another p4/build, e.g. of main),
srv6_spray from there is run the same way on the throughput build (else the logging one), and the
ratios this build / that build are printed too. Needs root and simple_switch_grpc. Not a test:
nothing here asserts a time. The sender and receiver are this Python process (one packet at a
time through raw sockets): the kernel's figure is bounded by that, not by the kernel.

    python3 bench/dataplane_pps.py [--packets 20000] [--window 64] [--base-rounds 1] [--builds logging,throughput]
                                   [--no-kernel] [--compare-build DIR] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402

from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Exact, Lpm, TableEntry  # noqa: E402
from controller.programs.bmv2build import traits  # noqa: E402
from controller.runtime.p4rt import SwitchConnection  # noqa: E402
from controller.programs.toolchain import Artifacts, find_binary  # noqa: E402
from mininet_labs.bmv2proc import lab_binary  # noqa: E402
from mininet_labs.nsswitch import NetnsSwitch  # noqa: E402
from mininet_labs.roce import roce_v6  # noqa: E402
from _kernel_router import KernelRouter  # noqa: E402

IN, OUT = 1, 2
BLOCK = 0xFCBBBB00
NEXT_HOP = (("port", OUT), ("smac", "02:aa:00:00:00:02"), ("dmac", "02:bb:00:00:00:02"))


def _route(table: str, action: str, prefix: str, plen: int) -> TableEntry:
    return TableEntry(table, (("dst_addr", Lpm(prefix, plen)),), action, NEXT_HOP)


def headend_entries(p4info_text: str) -> list:
    """A source leaf as the controller sets one up; with the host port's SR-domain policy where
    the program has it (checked by the packets' source) and the egress thresholds on (ECN, trim)
    at depths the benchmark's queue never reaches, so both are evaluated per packet. This build gives
    the boundary and the headend one host_policy entry; builds before it, host_policy and host_port."""
    profile = "IngressPipe.headend.spray_selector"
    host = [("host_addr", "fd00:0:0:11::1"), ("usid_block", BLOCK)]
    headend = [("src_addr", "2001:db8:ff::1"), ("usid_block", BLOCK)]
    policy = []
    if "IngressPipe.headend.host_port" not in p4info_text:
        policy.append(TableEntry("IngressPipe.boundary.host_policy", (("ingress_port", Exact(IN)),),
                                 "IngressPipe.boundary.sr_boundary",
                                 (*host, ("src_addr", "2001:db8:ff::1"), ("headend", 1))))
    else:
        if "IngressPipe.boundary.host_policy" in p4info_text:
            policy.append(TableEntry("IngressPipe.boundary.host_policy", (("ingress_port", Exact(IN)),),
                                     "IngressPipe.boundary.sr_boundary", tuple(host)))
        policy.append(TableEntry("IngressPipe.headend.host_port", (("ingress_port", Exact(IN)),),
                                 "IngressPipe.headend.set_headend", tuple(headend)))
    return policy + [
        TableEntry("IngressPipe.headend.spray_dest", (("dst_addr", Lpm("fd00:0:0:12::", 64)),),
                   "IngressPipe.headend.set_spray", (("mode", 2), ("dst_usids", 0x0012_E000))),
        ActionProfileMember(profile, 1, "IngressPipe.headend.via_spine", (("spine_usid", 1), ("path_index", 1))),
        ActionProfileGroup(profile, 1, (1,), max_size=4),
        TableEntry("IngressPipe.headend.spray_paths", (("dst_addr", Lpm("fd00:0:0:12::", 64)),), group_id=1),
        _route("IngressPipe.routing.routes_v6", "IngressPipe.routing.set_next_hop", "fcbb:bb00:1::", 48),
    ]


def transit_entries(p4info_text: str = "") -> list:
    """A spine as the controller sets one up: its uN, the route to the next leaf's uN and, where the
    program has it, the uN with that next hop in one my_sid entry (the lookup the packets hit)."""
    out = [
        TableEntry("IngressPipe.endpoint.my_sid", (("dst_addr", Lpm("fcbb:bb00:1::", 48)),),
                   "IngressPipe.endpoint.usid_un"),
        _route("IngressPipe.routing.routes_v6", "IngressPipe.routing.set_next_hop", "fcbb:bb00:12::", 48),
    ]
    if "IngressPipe.endpoint.usid_un_next_hop" in p4info_text:
        out.append(_route("IngressPipe.endpoint.my_sid", "IngressPipe.endpoint.usid_un_next_hop",
                          "fcbb:bb00:1:12::", 64))
    return out


def roce_frames(n: int) -> list[bytes]:
    """n RoCEv2 packets of one QP with rising PSN, 256-byte payloads."""
    return [bytes(roce_v6("fd00:0:0:11::1", "fd00:0:0:12::1", qp=0x100, psn=p, payload=b"\x00" * 256))
            for p in range(n)]


def encapsulated_frames(n: int) -> list[bytes]:
    """The same packets as the headend emits them: outer IPv6 to block|1|0x12|0xe000."""
    return [bytes(Ether(src="02:bb:00:00:00:01", dst="02:aa:00:00:00:01") / IPv6(src="2001:db8:ff::1", dst="fcbb:bb00:1:12:e000::", nh=41)
                  / Raw(f[14:])) for f in roce_frames(n)]


def measure(switch: NetnsSwitch, frames: list[bytes], window: int) -> dict:
    """Keep at most `window` packets in the switch; pps = delivered / (last out - first in).

    A packet not out within a second of the last progress is counted lost, and the window
    reopens; so loss shows in the figures instead of stalling the run.
    """
    send_sock, recv_sock = switch._socks[IN], switch._socks[OUT]
    switch.drain()
    sent = received = lost = 0
    start = last_rx = last_progress = time.perf_counter()
    while received + lost < len(frames):
        while sent < len(frames) and sent - received - lost < window:
            send_sock.send(frames[sent])
            sent += 1
        ready, _, _ = select.select([recv_sock], [], [], 0.2)
        now = time.perf_counter()
        if ready:
            data, addr = recv_sock.recvfrom(65535)
            if addr[2] != 4:  # not PACKET_OUTGOING
                received += 1
                last_rx = last_progress = now
        elif now - last_progress > 1.0:
            lost += sent - received - lost
            last_progress = now
    elapsed = last_rx - start
    return {"packets": len(frames), "delivered": received, "lost": lost, "seconds": round(elapsed, 3),
            "pps": round(received / elapsed, 1) if elapsed > 0 else 0.0}


def thresholds(p4info_text: str) -> list:
    """ECN and trimming on, at depths never reached; in ingress (this build) or egress (builds before it)."""
    for control in ("IngressPipe", "FabricEgress"):
        if f"{control}.congestion.thresholds" in p4info_text:
            return [TableEntry(f"{control}.congestion.thresholds", (), f"{control}.congestion.set_thresholds",
                               (("ecn_qdepth", 60000), ("trim_qdepth", 60001), ("trim_dscp", 46)), is_default=True)]
    return []


def run_case(program: str | Artifacts, entries: list, frames: list[bytes], window: int, tag: str,
             binary: str | None = None) -> dict:
    switch = NetnsSwitch(f"bench{tag}{os.getpid()}", ports=(IN, OUT), binary=binary)
    with switch:
        with SwitchConnection(tag, switch.grpc_address, device_id=1, election_id=1) as conn:
            artifacts = program if isinstance(program, Artifacts) else Artifacts.of(program)
            conn.set_pipeline(artifacts)
            conn.write([("INSERT", e) for e in entries])
            conn.write([("MODIFY", e) for e in thresholds(artifacts.p4info.read_text())])
            measure(switch, frames[:200], window)  # warm-up
            return measure(switch, frames, window)


def run_kernel(case: str, frames: list[bytes], window: int, tag: str) -> dict:
    """One case on a Linux router in a namespace (_kernel_router.KernelRouter), measured as the switches are."""
    with KernelRouter(f"bench{tag}{os.getpid()}", case, dst_mac=Ether(frames[0]).dst) as router:
        measure(router, frames[:200], window)  # warm-up (and the neighbour entries resolved)
        return measure(router, frames, window)


def compare(other: Artifacts, plain: list[bytes], encapsulated: list[bytes], args: argparse.Namespace) -> dict:
    """This build's srv6_spray against another's, round after round (A, B, A, B ...): pps per round,
    and the ratio of the medians this / other per case."""
    here = Artifacts.of("srv6_spray")
    cases = {"headend": (plain, headend_entries), "transit_un": (encapsulated, transit_entries)}
    out: dict = {"other_build": str(other.bmv2_json.parent)}
    for case, (frames, entries) in cases.items():
        pps: dict[str, list[float]] = {"this": [], "other": []}
        for r in range(args.rounds):
            for name, art in (("this", here), ("other", other)):
                got = run_case(art, entries(art.p4info.read_text()), frames, args.window, f"c{r}{name[0]}",
                               lab_binary("warn"))
                pps[name].append(got["pps"])
        med = {k: sorted(v)[len(v) // 2] for k, v in pps.items()}
        out[case] = {"pps_this": pps["this"], "pps_other": pps["other"],
                     "ratio_of_medians": round(med["this"] / med["other"], 3) if med["other"] else None}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=20000)
    parser.add_argument("--window", type=int, default=64, help="packets in flight at most")
    parser.add_argument("--compare-build", type=Path, metavar="DIR",
                        help="another build directory holding srv6_spray.json and its P4Info")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds with --compare-build")
    parser.add_argument("--base-rounds", type=int, default=1, metavar="N",
                        help="rounds of the cases (builds, srv6_spray and baseline interleaved); medians reported")
    parser.add_argument("--builds", default="logging,throughput",
                        help="bmv2 builds to run, of: logging, throughput (a missing one is reported as such); '' for none")
    parser.add_argument("--no-kernel", action="store_true", help="leave out the kernel data plane")
    args = parser.parse_args()
    if find_binary("simple_switch_grpc") is None or os.geteuid() != 0:
        print(json.dumps({"skipped": "needs root and simple_switch_grpc"}))
        return 2
    builds = bmv2_builds([b for b in args.builds.split(",") if b])
    plain = roce_frames(args.packets)
    encapsulated = encapsulated_frames(args.packets)
    baseline_route = [_route("IngressPipe.routes_v6", "IngressPipe.set_next_hop", p, plen)
                      for p, plen in (("fd00:0:0:12::", 64), ("fcbb:bb00:1::", 48))]
    spray_p4info = Artifacts.of("srv6_spray").p4info.read_text()
    cases = {
        "headend": ("srv6_spray", headend_entries(spray_p4info), plain),
        "headend_baseline": ("l3_baseline", baseline_route, plain),
        "transit_un": ("srv6_spray", transit_entries(spray_p4info), encapsulated),
        "transit_baseline": ("l3_baseline", baseline_route, encapsulated),
    }
    # --base-rounds N: each case N times, builds and cases interleaved round by round, so srv6_spray, the
    # baseline and the builds meet the same load of a shared machine; each case reports its median round.
    runs: dict[str, dict[str, list[dict]]] = {b: {name: [] for name in cases} for b in [*builds, "kernel"]}
    load_start = [round(x, 2) for x in os.getloadavg()]
    for r in range(args.base_rounds):
        for build, binary in builds.items():
            if binary is None:
                continue
            for name, (program, entries, frames) in cases.items():
                runs[build][name].append(run_case(program, entries, frames, args.window,
                                                  f"{build[0]}{name[0]}{name[-1]}{r}", binary))
        if not args.no_kernel:
            for name, (_, _, frames) in cases.items():
                runs["kernel"][name].append(run_kernel(name, frames, args.window, f"k{name[0]}{name[-1]}{r}"))
    results: dict = {"aim": ">= 0.7 of l3_baseline (srv6_spray headend and uN transit, the throughput build)",
                     "lab_build": None if lab_binary("warn") is None else traits(str(lab_binary("warn"))).kind}
    for build, binary in builds.items():
        results[build] = ({"missing": "no such build beside the toolchain's bin"} if binary is None
                          else {"bmv2": traits(binary).as_dict(), **summary(runs[build], args.base_rounds)})
    if not args.no_kernel:
        results["kernel"] = {"dataplane": "Linux namespace: seg6 encap.red headend, seg6local End next-csid uN",
                             **summary(runs["kernel"], args.base_rounds)}
    results["config"] = {"packets": args.packets, "window": args.window, "payload_bytes": 256,
                         "base_rounds": args.base_rounds}
    results["machine"] = {"cpus": os.cpu_count(), "load_start": load_start,
                          "load_end": [round(x, 2) for x in os.getloadavg()]}
    if args.compare_build is not None:
        results["compare"] = compare(Artifacts.of("srv6_spray", args.compare_build), plain, encapsulated, args)
    print(json.dumps(results, indent=2))
    return 0


def bmv2_builds(names: list[str]) -> dict[str, str | None]:
    """build name -> binary (None: not there): logging is the one found, throughput the perf/bin beside it."""
    logging = find_binary("simple_switch_grpc")
    fast = lab_binary("warn")
    out: dict[str, str | None] = {}
    for name in names:
        if name == "logging":
            out[name] = logging
        elif name == "throughput":
            out[name] = fast if fast != logging and fast is not None and traits(fast).kind == "throughput" else None
        else:
            raise SystemExit(f"unknown build {name!r}: logging or throughput")
    return out


def summary(runs: dict[str, list[dict]], rounds: int) -> dict:
    """Each case's median round (with every round's pps), and srv6_spray / baseline per case."""
    out: dict = {}
    for name, got in runs.items():
        ranked = sorted(got, key=lambda g: g["pps"])
        out[name] = {**ranked[len(ranked) // 2], "pps_rounds": [g["pps"] for g in got]}
    out["ratio_headend"] = round(out["headend"]["pps"] / out["headend_baseline"]["pps"], 3)
    out["ratio_transit_un"] = round(out["transit_un"]["pps"] / out["transit_baseline"]["pps"], 3)
    if rounds > 1:
        out["ratio_rounds"] = {
            case: [round(a["pps"] / b["pps"], 3) if b["pps"] else None
                   for a, b in zip(runs[case], runs[f"{case.split('_')[0]}_baseline"])]
            for case in ("headend", "transit_un")}
    return out


if __name__ == "__main__":
    sys.exit(main())
