"""What a packet costs in bmv2, per switch role: the work srv6_spray does on each packet, counted from
simple_switch_grpc's own trace log, and the switch's CPU time per packet.

Roles: headend (a host port's RoCEv2, encapsulated towards a spine), transit_un (a spine's uN shift),
egress_dt6 and egress_dx6 (the destination leaf decapsulating), each set up as bench/dataplane_pps.py
sets up its cases (ECN and trimming on at depths never reached). For every role one switch runs at log
level trace for a handful of packets; each log line carries the packet's id, so the parser states,
headers extracted, parser assignments, table applies (the program's tables, and the keyless tables p4c
makes of straight-line code), conditions, primitives, counter and register accesses and headers
deparsed are counted per packet. With --cpu N, a second switch at log level warn forwards N packets
and the CPU time the process used (utime + stime from /proc) is divided by N: less sensitive to the
other jobs on a shared machine than packets per second.

Prints one JSON document (and with --markdown a table). Needs root and simple_switch_grpc. Not a test.

    python3 bench/dataplane_profile.py [--build DIR] [--packets 4] [--cpu 10000] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import dataplane_pps as pps  # noqa: E402
from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402

from controller.plan.entries import Lpm, TableEntry  # noqa: E402
from controller.programs.toolchain import Artifacts, find_binary  # noqa: E402
from controller.runtime.p4rt import SwitchConnection  # noqa: E402
from mininet_labs.nsswitch import NetnsSwitch  # noqa: E402

DT6_SID, DX6_SID = "fcbb:bb00:12:e000::", "fcbb:bb00:12:e001::"
HOP = (("port", pps.OUT), ("smac", "02:aa:00:00:00:02"), ("dmac", "02:bb:00:00:00:02"))

# A trace line: [time] [bmv2] [T] [thread N] [<packet id>] [cxt 0] <message>
LINE = re.compile(r"\] \[(\d+\.\d+)\] \[cxt \d+\] (?:\S+\(\d+\) )?(.*)$")
KINDS: tuple[tuple[str, str], ...] = (
    ("parser_states", "entering state"),
    ("headers_extracted", "Extracting header"),
    ("parser_assignments", "Parser set:"),
    ("conditions", "Condition "),
    ("primitives", "Primitive "),
    ("counter_updates", "Updated counter"),
    ("register_accesses", " register "),
    ("headers_deparsed", "Deparsing header"),
)


@dataclass(frozen=True)
class Role:
    """One switch role: its table entries (given the P4Info text) and the frames it receives."""

    name: str
    entries: Callable[[str], list]
    frames: Callable[[int], list[bytes]]
    program: str = "srv6_spray"


def to_sid(sid: str, n: int) -> list[bytes]:
    """The spine's output: outer IPv6 to the destination leaf's decap uSID, the RoCEv2 packet inside."""
    return [bytes(Ether(src="02:bb:00:00:00:01", dst="02:aa:00:00:00:01")
                  / IPv6(src="2001:db8:ff::1", dst=sid, nh=41, hlim=63) / Raw(f[14:]))
            for f in pps.roce_frames(n)]


def dt6_entries(_p4info: str) -> list:
    return [TableEntry("IngressPipe.endpoint.my_sid", (("dst_addr", Lpm(DT6_SID, 64)),), "IngressPipe.endpoint.end_dt6"),
            TableEntry("IngressPipe.routing.routes_v6", (("dst_addr", Lpm("fd00:0:0:12::1", 128)),),
                       "IngressPipe.routing.set_next_hop", HOP)]


def dx6_entries(_p4info: str) -> list:
    return [TableEntry("IngressPipe.endpoint.my_sid", (("dst_addr", Lpm(DX6_SID, 64)),),
                       "IngressPipe.endpoint.end_dx6", HOP)]


def baseline_entries() -> list:
    """The minimal program forwarding the transit case's packets (one LPM route)."""
    return [TableEntry("IngressPipe.routes_v6", (("dst_addr", Lpm("fcbb:bb00:1::", 48)),), "IngressPipe.set_next_hop", HOP)]


ROLES: tuple[Role, ...] = (
    Role("headend", pps.headend_entries, pps.roce_frames),
    Role("transit_un", pps.transit_entries, pps.encapsulated_frames),
    Role("egress_dt6", dt6_entries, lambda n: to_sid(DT6_SID, n)),
    Role("egress_dx6", dx6_entries, lambda n: to_sid(DX6_SID, n)),
    Role("l3_baseline", lambda _p4info: baseline_entries(), pps.encapsulated_frames, "l3_baseline"),
)


def count_trace(text: str) -> dict[str, dict[str, int]]:
    """Per packet id: how many of each kind of work the trace log shows, and the program tables applied."""
    per: dict[str, Counter] = {}
    tables: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = LINE.search(line)
        if m is None:
            continue
        pkt, msg = m.groups()
        c = per.setdefault(pkt, Counter())
        if msg.startswith("Applying table '"):
            name = msg.split("'")[1]
            if name.startswith("tbl_"):
                c["tables_straight_line"] += 1
            else:
                c["tables_program"] += 1
                tables.setdefault(pkt, []).append(name)
            continue
        for kind, needle in KINDS:
            if needle in msg:
                c[kind] += 1
                break
    return {pkt: {**dict(c), "program_tables": tables.get(pkt, [])} for pkt, c in per.items()}  # type: ignore[dict-item]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_role(role: Role, art: Artifacts, packets: int, cpu_packets: int, tag: str) -> dict:
    """The role's per-packet counts from a trace-level switch, and its CPU time per packet at level warn."""
    out: dict = {}
    switch = NetnsSwitch(f"prof{tag}{os.getpid()}", ports=(pps.IN, pps.OUT), log_level="trace")
    with switch, SwitchConnection(tag, switch.grpc_address, device_id=1, election_id=1) as conn:
        text = art.p4info.read_text()
        conn.set_pipeline(art)
        conn.write([("INSERT", e) for e in role.entries(text)])
        conn.write([("MODIFY", e) for e in pps.thresholds(text)])
        got = pps.measure(switch, role.frames(packets), 8)
        time.sleep(0.5)  # the log is flushed per line; let the egress threads finish theirs
        log = "".join(p.read_text(errors="replace") for p in sorted(switch.workdir.glob("bmv2*")))  # type: ignore[union-attr]
    counts = count_trace(log)
    delivered = [c for c in counts.values() if c.get("headers_deparsed")]
    out["delivered"] = got["delivered"]
    if delivered:
        first = delivered[-1]
        out["per_packet"] = {k: v for k, v in first.items() if k != "program_tables"}
        out["program_tables"] = first["program_tables"]
    if cpu_packets:
        switch = NetnsSwitch(f"cpu{tag}{os.getpid()}", ports=(pps.IN, pps.OUT))
        with switch, SwitchConnection(tag, switch.grpc_address, device_id=1, election_id=1) as conn:
            conn.set_pipeline(art)
            conn.write([("INSERT", e) for e in role.entries(text)])
            conn.write([("MODIFY", e) for e in pps.thresholds(text)])
            frames = role.frames(cpu_packets)
            pps.measure(switch, frames[:200], 64)
            assert switch._proc is not None
            before = _cpu_seconds(switch._proc.pid)
            got = pps.measure(switch, frames, 64)
            used = _cpu_seconds(switch._proc.pid) - before
        out["cpu_us_per_packet"] = round(used / cpu_packets * 1e6, 1)
        out["pps"] = got["pps"]
        out["lost"] = got["lost"]
    return out


def markdown(results: dict) -> str:
    kinds = ["parser_states", "headers_extracted", "parser_assignments", "tables_program", "tables_straight_line",
             "conditions", "primitives", "counter_updates", "register_accesses", "headers_deparsed"]
    rows = ["| role | " + " | ".join(kinds) + " | CPU µs/packet | program tables |",
            "|---" * (len(kinds) + 3) + "|"]
    for name, r in results["roles"].items():
        per = r.get("per_packet", {})
        rows.append(f"| {name} | " + " | ".join(str(per.get(k, 0)) for k in kinds)
                    + f" | {r.get('cpu_us_per_packet', '')} | {', '.join(t.rsplit('.', 1)[-1] for t in r.get('program_tables', []))} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, help="build directory holding srv6_spray.json and its P4Info")
    parser.add_argument("--packets", type=int, default=4, help="packets per role at log level trace")
    parser.add_argument("--cpu", type=int, default=0, metavar="N", help="also the CPU time per packet over N packets")
    parser.add_argument("--roles", default=",".join(r.name for r in ROLES))
    parser.add_argument("--markdown", action="store_true", help="print a table after the JSON")
    args = parser.parse_args()
    if find_binary("simple_switch_grpc") is None or os.geteuid() != 0:
        print(json.dumps({"skipped": "needs root and simple_switch_grpc"}))
        return 2
    build = args.build
    wanted = args.roles.split(",")
    unknown = [w for w in wanted if w not in {r.name for r in ROLES}]
    if unknown:
        print(f"error: unknown role {unknown[0]!r} (roles: {', '.join(r.name for r in ROLES)})", file=sys.stderr)
        return 2
    results = {"build": str(Artifacts.of("srv6_spray", build).bmv2_json.parent) if build else "p4/build", "roles": {
        r.name: run_role(r, Artifacts.of(r.program, build) if build else Artifacts.of(r.program), args.packets,
                         args.cpu, f"{i}")
        for i, r in enumerate(ROLES) if r.name in wanted}}
    print(json.dumps(results, indent=2))
    if args.markdown:
        print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
