"""Malformed and hostile frames for a fabric's ports, each with the drop reason it must be counted under.

Three ports of every plane are attacked: a leaf's host port (what a misbehaving host can send), a
spine's downlink (what a broken or hostile leaf sends) and a leaf's uplink (what a spine sends).
Every frame is built so that the first switch that parses it drops it, for one documented reason
(docs/pipeline.md); `attacks` returns exactly `total` of them. Pure: bytes in, bytes out.
"""

from __future__ import annotations

import ipaddress
import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from controller.programs.drops import DropReason as R
from controller.model.sids import SidPlan
from controller.model.topology import Topology
from mininet_labs.frames import mac_bytes
from mininet_labs.roce import roce_v6

ETH, IP6, SRH_FIXED, UDP_LEN, BTH_LEN = 14, 40, 8, 8, 12
PROTO_IPV4, PROTO_IPV6, PROTO_ROUTING, PROTO_UDP, PROTO_ICMPV6 = 4, 41, 43, 17, 58
ROCE_PAYLOAD = bytes(range(64))


@dataclass(frozen=True)
class Target:
    """A switch port under attack; `host` names the host whose NIC sends into it (a host port),
    otherwise the frame leaves the peer switch's interface (`peer`, `peer_port`)."""

    switch: str
    port: int
    plane: int
    host: str | None = None
    peer: str | None = None
    peer_port: int | None = None


@dataclass(frozen=True)
class Attack:
    target: Target
    frame: bytes
    reason: R


def _v6(addr: int | str) -> bytes:
    return ipaddress.IPv6Address(addr).packed


def ipv6_header(src: int | str, dst: int | str, payload_len: int, next_hdr: int, hop_limit: int = 64,
                traffic_class: int = 0, flow_label: int = 0) -> bytes:
    """RFC 8200 3, fields as given (including lies)."""
    first = 6 << 28 | traffic_class << 20 | flow_label
    return struct.pack("!IHBB", first, payload_len, next_hdr, hop_limit) + _v6(src) + _v6(dst)


def srh(next_hdr: int, segments: list[int], segments_left: int, *, hdr_ext_len: int | None = None,
        routing_type: int = 4, last_entry: int | None = None) -> bytes:
    """RFC 8754 2: fixed part + Segment List[0..n] (segments given as Segment List[0] first)."""
    ext = 2 * len(segments) if hdr_ext_len is None else hdr_ext_len
    le = len(segments) - 1 if last_entry is None else last_entry
    return struct.pack("!BBBBBBH", next_hdr, ext, routing_type, segments_left, le, 0, 0) + b"".join(
        _v6(s) for s in segments)


def with_bytes(frame: bytes, offset: int, value: bytes) -> bytes:
    return frame[:offset] + value + frame[offset + len(value):]


def set_payload_len(frame: bytes, ip_offset: int, value: int) -> bytes:
    return with_bytes(frame, ip_offset + 4, value.to_bytes(2, "big"))


def set_version(frame: bytes, ip_offset: int, version: int) -> bytes:
    return with_bytes(frame, ip_offset, bytes([version << 4 | frame[ip_offset] & 0x0F]))


class Fabric:
    """Addresses and MACs of one plane of a topology, as the frames need them."""

    def __init__(self, topo: Topology, sids: SidPlan, plane: int) -> None:
        self.topo, self.sids, self.p = topo, sids, plane
        self.leaf0, self.leaf1 = topo.t0(plane, 0), topo.t0(plane, 1)
        self.spine0 = topo.t1(plane, 0)
        self.host = sids.host_v6(plane, 0, 0)  # the attacking host: slot 0 of leaf 0
        self.victim = sids.host_v6(plane, 1, len(self.leaf1.host_ports) - 1)
        self.leaf0_sid = sids.local_sid(sids.t0_usid(plane, 0), sids.dx6_usid(plane, 0))
        self.dt6 = sids.dt6_usid(plane)

    def carrier(self, *usids: int) -> int:
        return self.sids.carrier(usids)

    def inner(self, psn: int = 1, hop_limit: int = 64) -> bytes:
        """The RoCEv2 packet (IPv6 on) the attacking host would send to the victim."""
        return bytes(roce_v6(ipaddress.IPv6Address(self.host).compressed,
                             ipaddress.IPv6Address(self.victim).compressed, qp=0x77, psn=psn, hlim=hop_limit,
                             payload=ROCE_PAYLOAD))[ETH:]

    def eth(self, dst: str, src: str) -> bytes:
        return mac_bytes(dst) + mac_bytes(src) + b"\x86\xdd"

    def host_target(self) -> Target:
        return Target(self.leaf0.name, self.leaf0.host_ports[0], self.p, host=self.leaf0.host_names[0])

    def spine_target(self) -> Target:
        return Target(self.spine0.name, self.spine0.downlinks[0], self.p, peer=self.leaf0.name,
                      peer_port=self.leaf0.uplinks[0])

    def uplink_target(self) -> Target:
        return Target(self.leaf1.name, self.leaf1.uplinks[0], self.p, peer=self.spine0.name,
                      peer_port=self.spine0.downlinks[1])


def _parser_attacks(t: Target, frame: bytes, inner_at: int) -> Iterator[Attack]:
    """What every switch's parser must catch in a frame whose IPv6 header starts at ETH and whose
    inner IPv6 (or, inner_at == ETH, the only one) starts at inner_at, with UDP 4791 + BTH after it."""
    ip_end, bth_end = ETH + IP6, inner_at + IP6 + UDP_LEN + BTH_LEN
    # cut at every offset, Payload Length left as it was: the header lies about the frame
    for cut in range(ETH, len(frame)):
        yield Attack(t, frame[:cut], R.PARSER_OTHER if cut < ip_end else R.IPV6_LENGTH)
    # cut at every offset up to the BTH's end, lengths made true: the header that is cut is named
    for cut in range(ip_end, bth_end):
        f = set_payload_len(frame[:cut], ETH, cut - ip_end)
        if inner_at > ETH and cut >= inner_at + IP6:
            f = set_payload_len(f, inner_at, cut - inner_at - IP6)
        if cut < inner_at:
            reason = R.SRH_TRUNCATED
        elif cut < inner_at + IP6 + UDP_LEN:
            reason = R.PARSER_OTHER
        else:
            reason = R.BTH_TRUNCATED
        yield Attack(t, f, reason)
    for version in range(16):
        if version != 6:
            yield Attack(t, set_version(frame, ETH, version), R.IPV6_VERSION)
            if inner_at > ETH:
                yield Attack(t, set_version(frame, inner_at, version), R.IPV6_VERSION)
    true_len = len(frame) - ip_end
    for lie in (true_len + 1, true_len + 2, true_len + 64, 1500, 9000, 0xFFFF):
        yield Attack(t, set_payload_len(frame, ETH, lie), R.IPV6_LENGTH)
    if inner_at > ETH:
        yield Attack(t, set_payload_len(frame, inner_at, len(frame) - inner_at - IP6 + 1), R.IPV6_LENGTH)


def _srh_attacks(t: Target, fab: Fabric, eth: bytes, dst: int) -> Iterator[Attack]:
    """SRH lies and foreign Routing types in carriers arriving at a SID of the receiving switch."""
    inner = fab.inner()
    segs = [fab.carrier(fab.sids.t0_usid(fab.p, 1), fab.dt6), dst]

    def frame(routing: bytes, nh: int = PROTO_ROUTING) -> bytes:
        body = routing + inner
        return eth + ipv6_header(fab.leaf0_sid, dst, len(body), nh) + body

    base = frame(srh(PROTO_IPV6, segs, 1))
    yield from _parser_attacks(t, base, ETH + IP6 + SRH_FIXED + 32)
    for sl in range(3, 256):  # Segments Left > Last Entry + 1
        yield Attack(t, frame(srh(PROTO_IPV6, segs, sl)), R.SRH_SEGMENTS_LEFT)
    available = SRH_FIXED + 32 + len(inner)
    for ext in range(256):
        if ext < 4:  # too small for Last Entry 1
            yield Attack(t, frame(srh(PROTO_IPV6, segs, 1, hdr_ext_len=ext)), R.SRH_LENGTH)
        elif (ext + 1) * 8 > available:  # runs past the end of the packet
            yield Attack(t, frame(srh(PROTO_IPV6, segs, 1, hdr_ext_len=ext)), R.SRH_TRUNCATED)
    for le in range(4, 256):  # deeper than the parsed segment list, announced with a matching length
        yield Attack(t, frame(srh(PROTO_IPV6, segs, 1, last_entry=le, hdr_ext_len=min(255, 2 * (le + 1)))),
                     R.SRH_TOO_DEEP if 8 * (min(255, 2 * (le + 1)) + 1) <= available else R.SRH_TRUNCATED)
    for rtype in range(256):  # RFC 8200 4.4: an unknown Routing type with Segments Left != 0
        if rtype != 4:
            routing = struct.pack("!BBBB", PROTO_IPV6, 2, rtype, 1) + bytes(4) + _v6(dst)
            yield Attack(t, frame(routing), R.ROUTING_TYPE)


def _unknown_usids(fab: Fabric, rng: random.Random) -> Iterator[int]:
    """uSIDs nobody in this plane owns: spine and leaf indices beyond the fabric, other planes' uSIDs."""
    p, spines, leaves = fab.p, len(fab.topo.t1s(fab.p)), len(fab.topo.t0s(fab.p))
    own = {p << 12 | (1 + j) for j in range(spines)} | {p << 12 | (0x400 + i) for i in range(leaves)}
    while True:
        u = rng.randrange(1, 0x10000)
        if u not in own and u >> 12 == p and 0xC00 > (u & 0xFFF):
            yield u
        elif u >> 12 != p and u & 0xFFF:
            yield u


def _fabric_port(fab: Fabric, t: Target, eth: bytes, dst: int, rng: random.Random) -> tuple[list[Attack], Iterator[Attack]]:
    """The fixed attacks on a fabric port, and an endless supply of more (uSIDs nobody owns)."""
    fixed = list(_srh_attacks(t, fab, eth, dst))
    inner = fab.inner()
    if t.switch == fab.spine0.name:  # transit: a hop limit that expires here (at a leaf's DT6 it is ours)
        for hl in (0, 1):
            fixed.append(Attack(t, eth + ipv6_header(fab.leaf0_sid, dst, len(inner), PROTO_IPV6, hl) + inner,
                                R.HOP_LIMIT))

    def more() -> Iterator[Attack]:
        for u in _unknown_usids(fab, rng):
            carrier = fab.carrier(u, fab.sids.t0_usid(fab.p, 1), fab.dt6)
            yield Attack(t, eth + ipv6_header(fab.leaf0_sid, carrier, len(inner), PROTO_IPV6,
                                              flow_label=rng.randrange(1 << 20)) + inner, R.USID_NO_MATCH)
    return fixed, more()


def _host_port(fab: Fabric, rng: random.Random) -> tuple[list[Attack], Iterator[Attack]]:
    """What a host may not send: lies, SRv6 across the boundary, others' source addresses."""
    t = fab.host_target()
    eth = fab.eth(fab.leaf0.mac, fab.topo.host_mac(fab.leaf0, 0))
    inner = fab.inner()
    fixed = list(_parser_attacks(t, eth + inner, ETH))
    fixed += [Attack(t, eth + fab.inner(hop_limit=hl), R.HOP_LIMIT) for hl in (0, 1)]
    routing = srh(PROTO_IPV6, [fab.victim], 0)
    fixed.append(Attack(t, eth + ipv6_header(fab.host, fab.victim, len(routing) + len(inner), PROTO_ROUTING)
                        + routing + inner, R.SR_BOUNDARY))
    for rtype in range(256):
        if rtype != 4:
            rt = struct.pack("!BBBB", PROTO_IPV6, 2, rtype, 1) + bytes(4) + _v6(fab.victim)
            fixed.append(Attack(t, eth + ipv6_header(fab.host, fab.victim, len(rt) + len(inner), PROTO_ROUTING)
                                + rt + inner, R.SR_BOUNDARY))
    v4 = bytes.fromhex("450000140000000040ff0000") + bytes(8)  # IPv4-in-IPv6
    fixed.append(Attack(t, eth + ipv6_header(fab.host, fab.victim, len(v4), PROTO_IPV4) + v4, R.SR_BOUNDARY))
    sids = fab.sids

    def more() -> Iterator[Attack]:
        spines = len(fab.topo.t1s(fab.p))
        while True:
            k = rng.randrange(4)
            if k == 0:  # someone else's source address
                src = rng.choice([sids.host_v6(fab.p, 1, 0), fab.victim, sids.host_v6(fab.p, 0, 1),
                                  fab.host ^ rng.randrange(1, 1 << 64), fab.leaf0_sid])
                yield Attack(t, eth + ipv6_header(src, fab.victim, len(inner) - IP6, PROTO_UDP) + inner[IP6:],
                             R.HOST_SOURCE)
            elif k == 1:  # IPv6-in-IPv6 to a carrier of the fabric (the spray path a leaf would write)
                c = fab.carrier(sids.t1_usid(fab.p, rng.randrange(spines)), sids.t0_usid(fab.p, 1), fab.dt6)
                yield Attack(t, eth + ipv6_header(fab.host, c, len(inner), PROTO_IPV6,
                                                  flow_label=rng.randrange(1 << 20)) + inner, R.SR_BOUNDARY)
            elif k == 2:  # ICMPv6 echo tunnelled to another host
                echo = ipv6_header(fab.host, fab.victim, 8, PROTO_ICMPV6) + bytes([128, 0, 0, 0]) + \
                    rng.randrange(1 << 32).to_bytes(4, "big")
                c = fab.carrier(sids.t1_usid(fab.p, 0), sids.t0_usid(fab.p, 1), fab.dt6)
                yield Attack(t, eth + ipv6_header(fab.host, c, len(echo), PROTO_IPV6) + echo, R.SR_BOUNDARY)
            else:  # an SRH of carriers, well formed
                c = fab.carrier(sids.t1_usid(fab.p, 0), sids.t0_usid(fab.p, 1), fab.dt6)
                body = srh(PROTO_IPV6, [c, c], rng.randrange(2)) + inner
                yield Attack(t, eth + ipv6_header(fab.host, c, len(body), PROTO_ROUTING,
                                                  flow_label=rng.randrange(1 << 20)) + body, R.SR_BOUNDARY)
    return fixed, more()


def attacks(topo: Topology, sids: SidPlan, total: int = 10_000, seed: int = 7) -> list[Attack]:
    """`total` attacks over every plane's host port, spine downlink and leaf uplink: all fixed
    cases first, then generated ones (uSIDs nobody owns, spoofed sources, SRv6 from hosts)
    round-robin until `total`. Fewer fixed cases than `total` are needed (ValueError otherwise)."""
    rng = random.Random(seed)
    fixed: list[Attack] = []
    supplies: list[Iterator[Attack]] = []
    for p in range(topo.planes):
        fab = Fabric(topo, sids, p)
        f, more = _host_port(fab, rng)
        fixed += f
        supplies.append(more)
        spine = fab.spine_target()
        f, more = _fabric_port(fab, spine, fab.eth(fab.spine0.mac, fab.leaf0.mac),
                               fab.carrier(sids.t1_usid(p, 0), sids.t0_usid(p, 1), fab.dt6), rng)
        fixed += f
        supplies.append(more)
        up = fab.uplink_target()
        f, more = _fabric_port(fab, up, fab.eth(fab.leaf1.mac, fab.spine0.mac),
                               fab.carrier(sids.t0_usid(p, 1), fab.dt6), rng)
        fixed += f
        supplies.append(more)
    if len(fixed) > total:
        raise ValueError(f"{len(fixed)} fixed attacks do not fit in {total}")
    out = fixed
    while len(out) < total:
        out.append(next(supplies[len(out) % len(supplies)]))
    return out
