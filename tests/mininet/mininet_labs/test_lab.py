"""The Mininet lab: the default fabric up, hosts addressed from the SID plan, RoCEv2 between every
host pair over every plane with ICRCs intact at the receiver, and `lab down` leaving nothing.

The first tests need no lab (frame building, traffic planning); the lab tests share one lab.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.model.topology import build
from mininet_labs import traffic as tr
from mininet_labs.roce import icrc_ok, roce_v6
from tests.paths import REPO
from mininet_labs.frames import GATEWAY_V6, icrc, parse_roce

ROOT = REPO


# --- without a lab -------------------------------------------------------------------------------

@pytest.mark.parametrize("opcode", [0x04, 0x00, 0x0A])
def test_frames_are_byte_identical_to_scapy_roce_packets(opcode):
    payload = bytes(range(96))
    ours = tr.roce_frame("02:00:00:00:00:01", "02:00:00:00:00:02", "fd00::1", "fd00:1:1::2", opcode, 0x123,
                         0xFFFFFE, payload, sport=50000, tc=0x68, hlim=17)
    theirs = roce_v6("fd00::1", "fd00:1:1::2", 0x123, 0xFFFFFE, sport=50000, opcode=opcode, payload=payload,
                     tc=0x68, hlim=17)
    assert ours == bytes(theirs)
    assert icrc_ok(ours)


def test_icrc_ignores_the_fields_routers_change_and_catches_payload_changes():
    frame = bytearray(tr.roce_frame("02:00:00:00:00:01", "02:00:00:00:00:02", "fd00::1", "fd00::2", 4, 7, 1, b"x" * 64))
    ip = 14
    frame[ip + 7] -= 3  # hop limit, as routers change it
    frame[ip + 1] |= 0xF0  # traffic class bits
    assert icrc(bytes(frame[ip:])) == bytes(frame[-4:])
    frame[-10] ^= 1
    assert icrc(bytes(frame[ip:])) != bytes(frame[-4:])


def test_messages_round_robin_over_qps_with_rising_psns_and_planes_per_qp():
    topo = build(2, 2, 2, 2)
    spec = tr.SendSpec("", "h0", ["h3"], qps=3, messages=7, message_size=2500, mtu=1024, verb="write",
                       plane_mode="qp", start_psn=0xFFFFFF)
    packets = list(tr.plan_packets(spec, topo))
    assert len(packets) == 7 * 3
    by_qp: dict[int, list[tuple[int, int, int]]] = {}
    for nic, frame, q in packets:
        ip, qp, psn, body = parse_roce(frame)
        tag = tr.Tag.unpack(body)
        assert tag is not None and tag.qp == qp and tag.plane == nic.plane
        by_qp.setdefault(qp, []).append((psn, nic.plane, frame[14 + 40 + 8]))
    # message m on QP m % 3: QP 0 gets messages 0, 3, 6 (9 packets), the others 6
    assert [len(v) for _, v in sorted(by_qp.items())] == [9, 6, 6]
    for k, (qp, items) in enumerate(sorted(by_qp.items())):
        start = (0xFFFFFF + k * 0x1000) & 0xFFFFFF
        assert [psn for psn, _, _ in items] == [(start + i) & 0xFFFFFF for i in range(len(items))]
        assert {plane for _, plane, _ in items} == {k % 2}
        assert [op for _, _, op in items[:3]] == [0x06, 0x07, 0x08]  # WRITE FIRST, MIDDLE, LAST


def test_host_nics_follow_the_sid_plan():
    topo = build(2, 2, 2, 2)
    nics = tr.host_nics(topo, "h3")
    assert [(n.plane, n.intf, n.v6, n.leaf, n.slot) for n in nics] == [
        (0, "h3-eth0", "fd00:0:1::2", "p0-t0-1", 1), (1, "h3-eth1", "fd00:1:1::2", "p1-t0-1", 1)]
    assert nics[1].gateway_mac == topo.switch("p1-t0-1").mac
    assert nics[1].mac == topo.host_mac(topo.switch("p1-t0-1"), 1)


# --- the lab -------------------------------------------------------------------------------------

def test_lab_is_up_and_every_switch_holds_its_plan(lab):
    st = lab.status()
    assert st["phase"] == "ready" and st["pid_alive"]
    assert {n: s["alive"] for n, s in st["switches"].items()} == {s.name: True for s in lab.model.switches}
    assert all(h["alive"] for h in st["hosts"].values()) and len(st["hosts"]) == 4
    assert st["intfs_present"] == st["intfs"] == 24  # 8 leaf host ports + both ends of 8 leaf-spine links
    outcomes = lab.install(dry_run=True, push="never")
    assert {n: (o.error, o.pipeline, bool(o.delta)) for n, o in outcomes.items()} == {
        s.name: (None, "kept", False) for s in lab.model.switches}


def test_hosts_are_addressed_from_the_sid_plan_with_a_static_gateway(lab):
    for name in lab.hosts:
        host = lab.host(name)
        for nic in host.nics:
            link = json.loads(host.run(["ip", "-j", "addr", "show", "dev", nic.intf]).stdout)[0]
            assert link["address"] == nic.mac
            assert nic.v6 in {a["local"] for a in link["addr_info"] if a["family"] == "inet6"}
            neigh = host.run(["ip", "-6", "neigh", "show", "dev", nic.intf]).stdout
            assert f"{GATEWAY_V6} lladdr {nic.gateway_mac} PERMANENT" in neigh
            route = host.run(["ip", "-6", "route", "get", lab.host(lab.hosts[-1] if name != lab.hosts[-1]
                                                                   else lab.hosts[0]).nic(nic.plane).v6]).stdout
            assert f"via {GATEWAY_V6} dev {nic.intf}" in route


def _counters(lab, name: str) -> dict[str, int]:
    with lab.client() as client:
        result = client.run(lambda c: sum(v.packets for v in c.read_counter(name)))
    assert result.ok, result.summary()
    return result.results


def test_every_host_reaches_every_other_over_every_plane_with_intact_icrc(lab):
    spines_before = _counters(lab, "IngressPipe.port_rx")
    report = lab.traffic(qps=4, messages=8, plane_mode="packet")
    assert report.problems() == []
    pairs = {(p.src, p.dst, p.plane): (p.sent, p.received) for p in report.pairs()}
    expected = {(a, b, plane) for a in lab.hosts for b in lab.hosts if a != b for plane in (0, 1)}
    assert set(pairs) == expected
    assert all(sent == received == 4 for sent, received in pairs.values())  # 8 messages alternate planes
    totals = report.totals()
    assert totals["icrc_bad"] == totals["lost"] == totals["duplicated"] == totals["wrong_plane"] == 0
    for r in report.received.values():
        assert r.icrc_bad == 0 and r.packets == 3 * 8
        assert all(q.received == q.expected == 2 for q in r.qps)  # 8 messages over 4 QPs per sender
    # Leaf-to-leaf packets crossed the spines of both planes (the spray set holds both spines).
    after = _counters(lab, "IngressPipe.port_rx")
    for s in lab.model.switches:
        if s.role == "t1":
            assert after[s.name] > spines_before[s.name], s.name


def test_rdma_write_messages_stay_on_their_qps_plane(lab):
    report = lab.traffic([("h0", "h3"), ("h3", "h0"), ("h1", "h2")], qps=2, messages=4, message_size=3000,
                         verb="write", plane_mode="qp")
    assert report.problems() == []
    for r in report.received.values():
        for q in r.qps:
            assert q.received == q.expected == 6  # 2 messages of 3 packets per QP
            assert list(q.per_plane) == [(q.qp - 0x100) % 2]


def test_the_receiver_counts_a_corrupted_packet_as_bad_icrc(lab):
    """A control for the ICRC check: switches do not check ICRCs, so a corrupted packet arrives and
    the receiver must flag it."""
    run = Path(lab.dir) / "traffic" / "corrupt"
    run.mkdir(parents=True, exist_ok=True)
    recv = lab.host("h2").popen(
        [sys.executable, "-m", "mininet_labs.traffic", "recv", "--topology", str(lab.topology_path), "--host", "h2",
         "--expect", "2", "--timeout", "30", "--ready-file", str(run / "ready"), "--out", str(run / "recv.json")],
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"})
    try:
        from mininet_labs.processes import wait_files

        wait_files([run / "ready"], {"h2": recv}, 30.0)
        script = (
            "import socket, sys\n"
            "from controller.model.topology import load\n"
            "from mininet_labs import traffic as tr\n"
            f"topo = load({str(lab.topology_path)!r})\n"
            "src, dst = tr.host_nics(topo, 'h1')[1], tr.host_nics(topo, 'h2')[1]\n"
            "def frame(psn):\n"
            "    tag = tr.Tag('h1', 0x300, psn, 0, 1, 2, 5).pack()\n"
            "    return tr.roce_frame(src.mac, src.gateway_mac, src.v6, dst.v6, 4, 0x300, 5 + psn, tag.ljust(64, b'\\0'))\n"
            "bad = bytearray(frame(1)); bad[-8] ^= 0x40\n"
            "s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind((src.intf, 0))\n"
            "s.send(frame(0)); s.send(bytes(bad))\n")
        lab.host("h1").run([sys.executable, "-c", script])
        assert recv.wait(timeout=30) == 0
    finally:
        if recv.poll() is None:
            recv.kill()
    result = tr.RecvResult.from_json(json.loads((run / "recv.json").read_text()))
    (q,) = result.qps
    assert (result.packets, result.icrc_bad, q.received, q.icrc_bad, q.lost) == (2, 1, 1, 1, 1)
    assert q.per_plane == {1: 1}


def test_lab_down_leaves_no_namespace_veth_or_process(lab):
    from mininet_labs.cleanup import marked_pids
    from mininet_labs.topo import all_intfs

    host_pids = [h["pid"] for h in lab.state.hosts.values()]
    switch_pids = [s["pid"] for s in lab.state.switches.values()]
    proc = subprocess.run([sys.executable, "-m", "fabricctl", "lab", "down", "--dir", str(lab.dir), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["clean"] is True
    assert marked_pids(lab.dir) == []
    for pid in [lab.state.pid, *host_pids, *switch_pids]:  # the lab process, host shells (their namespaces), bmv2
        assert not _running(pid), pid
    assert [i for i in all_intfs(lab.model, lab.tag) if Path("/sys/class/net", i).exists()] == []
    assert not lab.state_path.exists()


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
