"""The service's parts that need no switch: probe frames and punt entries, the events file and
`fabricctl events`, the status view, the Prometheus metrics over HTTP, `fabricctl run` bad input."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import urllib.request
from pathlib import Path

from click.testing import CliRunner

from fabricctl.main import cli
from controller.plan.entries import CounterValue, TableEntry, Ternary
from controller.plan.probes import (PROBE_ETHERTYPE, PROBE_SIZE, Probe, advertised_target, neighbor_solicitation, parse_probe,
                               probe_frame, punt_entries)
from controller.service import events as ev
from controller.service import status as st
from controller.service.metrics import Metrics, drop_reason_names
from controller.model.failures import HostPortDown
from controller.planning import sid_plan as sids_of
from controller.service.directions import directions
from controller.model.topology import load
from tests.paths import UNIT_DATA

DATA = UNIT_DATA


def test_probe_frame_round_trip_and_foreign_frames():
    p = Probe(link=7, direction=1, seq=123456, sent_ns=987654321)
    frame = probe_frame(p)
    assert len(frame) == PROBE_SIZE and frame[12:14] == PROBE_ETHERTYPE.to_bytes(2, "big")
    assert parse_probe(frame) == p
    assert parse_probe(frame[:20]) is None  # truncated
    assert parse_probe(frame[:12] + b"\x86\xdd" + frame[14:]) is None  # another ethertype
    assert parse_probe(frame[:14] + b"NOTAPROB" + frame[22:]) is None  # another magic


def test_punt_entries_one_per_fabric_port_and_directions_cover_each_link_twice():
    topo = load(DATA / "two_plane_lab.yaml")
    leaf = topo.switch("p0-t0-0")
    assert punt_entries(leaf) == [
        TableEntry("IngressPipe.cpu.punt", (("ether_type", Ternary(PROBE_ETHERTYPE, 0xFFFF)),
                                            ("ingress_port", Ternary(port, 0x1FF))), "IngressPipe.cpu.send_to_cpu",
                   priority=10) for port in (3, 4)] + [
        TableEntry("IngressPipe.cpu.punt", (("ether_type", Ternary(0x86DD, 0xFFFF)),
                                            ("ipv6_dst", Ternary(0xFE80 << 112 | 0x88B5 << 32, (1 << 128) - (1 << 16)))),
                   "IngressPipe.cpu.send_to_cpu", priority=10)]  # the hosts' NAs to fe80::88b5:0:0/112
    spine = topo.switch("p0-t1-0")
    assert [e.match[0][1].value for e in punt_entries(spine)] == [PROBE_ETHERTYPE] * 2  # no hosts, no NA entry
    ds = directions(topo)
    assert len(ds) == 2 * 8
    with_hosts = directions(topo, hosts=True)
    assert with_hosts[:16] == ds
    nics = [(d.src, d.src_port, d.host, d.target) for d in with_hosts[16:]]
    assert len(nics) == 8 and len({d.link_id for d in with_hosts}) == 8 + 8  # a link id each
    assert nics[0] == ("p0-t0-0", 1, "h0", sids_of(topo).host_v6(0, 0, 0))
    assert all(d.src == d.dst and d.src_port == d.dst_port and isinstance(d.link, HostPortDown) for d in with_hosts[16:])
    d = next(d for d in ds if d.src == "p0-t0-0" and d.dst == "p0-t1-1")
    assert (d.src_port, d.dst_port) == (4, 1)  # the leaf's uplink to spine 1, the spine's downlink to leaf 0
    back = next(x for x in ds if x.link == d.link and x.direction == 1)
    assert (back.src, back.src_port, back.dst, back.dst_port) == ("p0-t1-1", 1, "p0-t0-0", 4)


def test_neighbor_solicitation_is_what_scapy_builds_and_only_our_nas_are_taken():
    from scapy.layers.inet6 import (ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr, ICMPv6NDOptSrcLLAddr, IPv6,
                                    in6_getnsma, in6_getnsmac)
    from scapy.layers.l2 import Ether
    from scapy.utils import inet_pton
    import socket

    host = "2001:db8:7:1::3"
    target = int.from_bytes(inet_pton(socket.AF_INET6, host), "big")
    group = socket.inet_ntop(socket.AF_INET6, in6_getnsma(inet_pton(socket.AF_INET6, host)))
    want = (Ether(src="02:5f:00:00:ff:fe", dst=in6_getnsmac(inet_pton(socket.AF_INET6, group)))
            / IPv6(src="fe80::88b5:0:2a", dst=group, hlim=255) / ICMPv6ND_NS(tgt=host)
            / ICMPv6NDOptSrcLLAddr(lladdr="02:5f:00:00:ff:fe"))
    assert neighbor_solicitation(target, 42) == bytes(want)  # scapy computes the checksum
    assert neighbor_solicitation(target, 42 + 64) == bytes(want)  # 64 probe addresses, in turn
    na = (Ether(dst="02:5f:00:00:ff:fe", src="00:00:00:00:00:01") / IPv6(src=host, dst="fe80::88b5:0:2a", hlim=255)
          / ICMPv6ND_NA(tgt=host, S=1) / ICMPv6NDOptDstLLAddr(lladdr="00:00:00:00:00:01"))
    assert advertised_target(bytes(na)) == (target, 42)
    assert advertised_target(bytes(na)[:70]) is None  # truncated
    na[IPv6].dst = "fe80::1"
    assert advertised_target(bytes(na)) is None  # not to our probe address
    na[IPv6].dst = "fe80::88b5:0:40"
    assert advertised_target(bytes(na)) is None  # not one of the 64
    ns = Ether(bytes(want))
    ns[IPv6].dst = "fe80::88b5:0:2a"
    assert advertised_target(bytes(ns)) is None  # an NS, not an NA


def test_events_file_and_follow(tmp_path: Path):
    log = ev.EventLog(tmp_path / "e.jsonl")
    log.emit("link_down", link=["a", "b"], evidence="3 consecutive probes lost")
    stop = threading.Event()
    seen: list[dict] = []

    def follow() -> None:
        for e in ev.read(log.path, follow=True, poll=0.01, stop=stop):
            seen.append(e)
            if len(seen) == 2:
                stop.set()

    t = threading.Thread(target=follow)
    t.start()
    with open(log.path, "a") as f:  # a torn line is held back until it is whole
        f.write('{"kind": "par')
        f.flush()
        f.write('tial", "t": 0}\n')
    t.join(timeout=10)
    assert [e["kind"] for e in seen] == ["link_down", "partial"]
    assert seen[0]["link"] == ["a", "b"] and seen[0]["pid"] > 0
    log.close()


def test_fabricctl_events_prints_filters_and_refuses_a_missing_file(tmp_path: Path):
    topo = tmp_path / "lab.yaml"
    shutil.copy(DATA / "two_plane_lab.yaml", topo)
    log = ev.EventLog(tmp_path / "fabric-events.jsonl")  # the default place: beside the state file
    log.emit("link_down", link=["p0-t0-0", "p0-t1-1"])
    log.emit("link_up", link=["p0-t0-0", "p0-t1-1"])
    log.close()
    runner = CliRunner()
    r = runner.invoke(cli, ["--topology", str(topo), "events", "--kind", "link_up", "--json"], prog_name="fabricctl")
    assert r.exit_code == 0 and [json.loads(x)["kind"] for x in r.stdout.splitlines()] == ["link_up"]
    r = runner.invoke(cli, ["--topology", str(topo), "events"], prog_name="fabricctl")
    assert r.exit_code == 0 and " link_down link=" in r.stdout.splitlines()[0]
    r = runner.invoke(cli, ["--topology", str(topo), "events", "--events", str(tmp_path / "none.jsonl")],
                      prog_name="fabricctl")
    assert (r.exit_code, r.stderr) == (2, f"error: no events file {tmp_path / 'none.jsonl'} ('fabricctl run' writes it)\n")


def test_run_refuses_a_probe_timeout_below_the_period(tmp_path: Path):
    topo = tmp_path / "lab.yaml"
    shutil.copy(DATA / "two_plane_lab.yaml", topo)
    r = CliRunner().invoke(cli, ["--topology", str(topo), "run", "--period", "50", "--probe-timeout", "20"],
                           prog_name="fabricctl")
    assert (r.exit_code, r.stderr) == (2, "error: --probe-timeout (20 ms) must be at least --period (50 ms)\n")
    assert not (tmp_path / "fabric-events.jsonl").exists()  # nothing started


def test_status_view_of_a_dead_controller_is_ignored(tmp_path: Path):
    state = tmp_path / ".fabric-state.json"
    view = {"pid": 2 ** 22 + 12345, "election_id": 10, "sessions": {}, "links": {}}
    st.write_status(st.status_path(state), view)
    assert st.read_status(state) is None  # no such process: not shown as running
    import os

    st.write_status(st.status_path(state), {**view, "pid": os.getpid(), "updated": 100.0, "sessions": {
        "s1": {"role": "primary"}, "s2": {"role": "backup"}}, "links": {"a -- b": {"up": False, "directions": {
            "a:1->b:2": {"up": False, "sent": 10, "lost": 4, "last_probe": 99.5, "last_delay_ms": None,
                         "reason": "3 consecutive probes lost"}}}}})
    lines = st.lines(st.read_status(state))
    assert lines == [f"controller: pid {os.getpid()}, election id 10, 1 primary / 1 backup / 0 down",
                     "  link a -- b: DOWN, probes 6/10 back, last 0.5s ago (3 consecutive probes lost)"]


def test_metrics_over_http_name_drop_reasons():
    names = drop_reason_names()
    assert names[7] == "no_route" and names[14] == "controller"
    m = Metrics()
    m.set_counters("p0-t0-0", [CounterValue("rx", 3, 11)], [CounterValue("tx", 4, 12)],
                   [CounterValue("d", 7, 5), CounterValue("d", 0, 99)], names)
    m.reconcile.labels("p0-t0-0").observe(0.03)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    m.serve(port)
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'fabric_port_rx_packets{port="3",switch="p0-t0-0"} 11.0' in text
    assert 'fabric_port_tx_packets{port="4",switch="p0-t0-0"} 12.0' in text
    assert 'fabric_drops{reason="no_route",switch="p0-t0-0"} 5.0' in text
    assert 'reason="none"' not in text  # index 0 is no drop
    assert 'fabric_reconcile_seconds_bucket{le="0.05",switch="p0-t0-0"} 1.0' in text
