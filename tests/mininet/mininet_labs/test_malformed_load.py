"""10,000 malformed and hostile frames into a running fabric (the default lab): sent into leaf host
ports, spine downlinks and leaf uplinks of both planes, each dropped by the first switch that parses
it and counted under its reason. Every switch stays up, no frame reaches a host, the drop-reason
counters read back over P4Runtime add up to exactly what was sent (reason by reason), and RoCEv2
traffic passes afterwards.

A host port is attacked from the host's NIC. A fabric port is attacked from the switch's own
interface: bmv2 (libpcap without PCAP_D_IN) takes the frames it sees leave its interface as
received there, and the veth carries them on to the peer switch, which would take them too. So the
peer's end is cut until the counters are read (MTU 68, `Lab.cut`): only frames of at most 86 bytes
(a veth passes MTU + Ethernet header + a VLAN tag) still get through, every one a truncation the
peer's parser drops for the same reason; they count twice. Whatever the hosts' kernels send
meanwhile (MLD, from link-local sources) is seen leaving their NICs and counted as HOST_SOURCE.
"""

from __future__ import annotations

import errno
import ipaddress
import select
import socket
import time
from collections import Counter, defaultdict

from controller.programs.drops import DROP_REASONS_COUNTER, DropReason
from controller.planning import sid_plan
from mininet_labs import malformed, netns
from mininet_labs.labstate import CUT_MTU
from mininet_labs.topo import port_intf

TOTAL = 10_000
BATCH = 250  # frames in flight per port at most, so that no socket or pcap buffer overflows
PORT_RX = "IngressPipe.port_rx"
PEER_PASSES = CUT_MTU + 14 + 4  # the longest frame a cut veth end still takes in


def _raw_socket(intf: str, ns: str | None = None) -> socket.socket:
    if ns is not None:
        return netns.open_raw_sockets(ns, [intf])[intf]
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(netns.ETH_P_ALL))
    sock.bind((intf, 0))
    return sock


def _seen(listen: dict[socket.socket, str], ours: set[bytes]) -> tuple[list[bytes], Counter]:
    """Since the last call: the frames the hosts received, and the drop reasons the frames their
    kernels sent (not ours) meet at the leaf; a kernel frame of another kind fails the test."""
    got: list[bytes] = []
    noise: Counter = Counter()
    while True:
        ready, _, _ = select.select(list(listen), [], [], 0)
        if not ready:
            return got, noise
        for sock in ready:
            data, addr = sock.recvfrom(65535)
            if addr[2] != netns.PACKET_OUTGOING:
                got.append(data)
            elif data not in ours:
                assert data[12:14] == b"\x86\xdd" and data[22:38] != ipaddress.IPv6Address(listen[sock]).packed, \
                    f"a host sent a frame the test cannot account for: {data[:64].hex()}"
                noise[DropReason.HOST_SOURCE.value] += 1


def test_ten_thousand_malformed_frames_are_each_dropped_once_and_counted_by_reason(lab):
    attacks = malformed.attacks(lab.model, sid_plan(lab.model), TOTAL)
    by_target: dict[malformed.Target, list[bytes]] = defaultdict(list)
    for a in attacks:
        by_target[a.target].append(a.frame)
    send: dict[malformed.Target, socket.socket] = {}
    listen: dict[socket.socket, str] = {}  # host NIC sockets -> the NIC's own address
    cut: list[str] = []
    with lab.client() as client:
        def read(fn, names=None):  # type: ignore[no-untyped-def]
            result = client.run(fn, names)
            assert result.ok, result.summary()
            return result.results

        def drops() -> dict[str, Counter]:
            return read(lambda c: Counter({v.index: v.packets for v in c.read_counter(DROP_REASONS_COUNTER)}))

        def received(t: malformed.Target) -> int:
            return read(lambda c: c.read_counter(PORT_RX, t.port)[0].packets, [t.switch])[t.switch]

        try:
            for t in by_target:
                if t.host is not None:
                    host = lab.host(t.host)
                    send[t] = _raw_socket(host.nic(t.plane).intf, f"/proc/{host.pid}/ns/net")
                else:
                    send[t] = _raw_socket(port_intf(lab.model.switch(t.switch), t.port, lab.tag))
            for name in lab.hosts:
                host = lab.host(name)
                listen.update({_raw_socket(n.intf, f"/proc/{host.pid}/ns/net"): n.v6 for n in host.nics})
            _seen(listen, set())
            before = drops()
            for t, frames in by_target.items():
                if t.host is None:
                    cut += lab.cut([port_intf(lab.model.switch(t.peer), t.peer_port, lab.tag)])
                base = received(t)
                for start in range(0, len(frames), BATCH):
                    batch = frames[start:start + BATCH]
                    for frame in batch:
                        _send(send[t], frame)
                    # a host port also counts what the host's kernel sends meanwhile (MLD): those frames are
                    # accounted exactly below, as `noise`, in the drop totals
                    _wait(lambda: received(t) - base, start + len(batch), f"{t.switch} port {t.port}",
                          exact=t.host is None)
            delivered, noise = _seen(listen, {a.frame for a in attacks})
            # until every frame sent (ours, and the hosts' seen so far) is counted where it is dropped: a frame
            # forwarded on instead never is, and the totals below then show where it went
            after = _settled(drops, before, sum(_expected(attacks, noise).values()))
            # the hosts' kernels may send while the counters are read: such a frame may or may not be counted yet
            late_delivered, late_noise = _seen(listen, {a.frame for a in attacks})
            delivered += late_delivered
        finally:
            lab.mend(cut)
            for sock in [*send.values(), *listen]:
                sock.close()

    dropped = _dropped(after, before)
    want = _expected(attacks, noise)
    late = {r: dropped[r] - want[r] for r in late_noise}  # 0 up to all of the hosts' frames seen after the read
    assert all(0 <= n <= late_noise[r] for r, n in late.items()), (late, late_noise)
    assert {DropReason(r).name: n for r, n in sorted(dropped.items()) if r not in late_noise} == \
        {DropReason(r).name: n for r, n in sorted(want.items()) if r not in late_noise}
    assert sum(dropped.values()) == sum(want.values()) + sum(late.values()) >= TOTAL
    assert delivered == []
    switches = lab.status()["switches"]
    assert all(s["alive"] for s in switches.values()), switches

    report = lab.traffic([("h0", "h3"), ("h3", "h0"), ("h1", "h2")], qps=2, messages=4, plane_mode="packet")
    assert report.problems() == []
    assert report.totals()["lost"] == report.totals()["icrc_bad"] == 0


def _send(sock: socket.socket, frame: bytes) -> None:
    """Send a frame; ENOBUFS is the cut veth refusing it on the far side, after bmv2 saw it leave."""
    try:
        sock.send(frame)
    except OSError as e:
        if e.errno != errno.ENOBUFS:
            raise


def _expected(attacks: list, noise: Counter) -> Counter:
    """The drops by reason the attacks and the hosts' own frames must add up to."""
    want = Counter(a.reason.value for a in attacks)
    want.update(a.reason.value for a in attacks if a.target.host is None and len(a.frame) <= PEER_PASSES)
    want.update(noise)
    return want


def _dropped(after: dict[str, Counter], before: dict[str, Counter]) -> Counter:
    out: Counter = Counter()
    for name in after:
        out.update(after[name] - before[name])
    return out


def _settled(read, before: dict[str, Counter], total: int, timeout: float = 60.0) -> dict[str, Counter]:  # type: ignore[no-untyped-def]
    """The drop counters once they count at least `total` drops since `before`, or as they are after
    `timeout` (the caller's exact comparison then says what is missing)."""
    end = time.monotonic() + timeout
    while True:
        now = read()
        if sum(_dropped(now, before).values()) >= total or time.monotonic() >= end:
            return now
        time.sleep(0.05)


def _wait(count_now, want: int, what: str, timeout: float = 20.0, exact: bool = True) -> None:
    """Until count_now() reaches `want` (the switch's ingress counted every frame sent so far);
    `exact`: and not one more."""
    end = time.monotonic() + timeout
    while True:
        got = count_now()
        if got >= want:
            assert got == want or not exact, f"{what} counted {got} frames, {want} were sent"
            return
        assert time.monotonic() < end, f"{what} counted {got} of {want} frames in {timeout:.0f} s"
        time.sleep(0.02)
