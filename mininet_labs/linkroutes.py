"""What Linux drops from a namespace when one of its interfaces is set down, kept and put back once it is up.

Setting an interface down (`ip link set DEV down`) makes the kernel delete, in that interface's namespace, every
route whose only nexthop leaves through it (a multipath route only marks that member dead and revives it on up;
one whose members all died goes whole), and every neighbour entry on it, permanent ones included; setting it up
again restores neither. The far end of a veth only loses carrier and keeps both. A switch's FIB does not forget
its routes when a link drops, so a fault that takes a port down keeps what the port's namespace holds through it
(`snapshot`) and puts back what is missing once the port is up again (`restore`).

Kept: the routes of any table that name the interface (as their device or as a multipath member's), except the
kernel's own (protocol kernel: connected, link-local, local and multicast routes come back with the interface's
addresses), and the permanent neighbours on it. A route whose key (family, table, destination, TOS, metric) is
gone is put back without the multipath members whose device is still down (the kernel refuses a nexthop on a device
that is down: another fault's port, whose undo adds them); one that is there is left as it is (the controller may
have replaced it meanwhile), but for its members through the port that it lacks. Routes on nexthop objects (`nhid`)
are not kept: the labs do not install any.

Routes travel as the kernel dumps them (`ip route save`, rtnetlink messages) and go back through `ip route restore`,
so every attribute (protocol, metric, SRv6 encapsulation) is what it was. `wrap` makes an argv run where the
interface lives (a switch's or a host's namespace)."""

from __future__ import annotations

import json
import struct
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

Wrap = Callable[[Sequence[str]], list[str]]

NLMSG = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port
RTMSG = struct.Struct("=BBBBBBBBI")  # rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags
RTA = struct.Struct("=HH")  # rtattr: length, type
RTNH = struct.Struct("=HBBi")  # rtnexthop: length, flags, hops, ifindex
RTA_DST, RTA_OIF, RTA_GATEWAY, RTA_PRIORITY, RTA_MULTIPATH, RTA_TABLE = 1, 4, 5, 6, 9, 15
RTA_ENCAP_TYPE, RTA_ENCAP, RTA_NH_ID = 21, 22, 30
AF_INET6 = 10
RTPROT_KERNEL = 2
DUMP_MAGIC_LEN = 4  # `ip route save` writes a magic number first (host order), then the messages as dumped


class LinkRoutesError(RuntimeError):
    """A dump that is not one, or a command that failed (one line)."""


def _align(n: int) -> int:
    return (n + 3) & ~3


def attrs(buf: bytes) -> list[tuple[int, bytes]]:
    """The rtattrs packed in buf, as (type, payload)."""
    out, at = [], 0
    while at + RTA.size <= len(buf):
        length, kind = RTA.unpack_from(buf, at)
        if length < RTA.size or at + length > len(buf):
            raise LinkRoutesError(f"a route attribute of length {length} at {at} runs past its message")
        out.append((kind, buf[at + RTA.size:at + length]))
        at += _align(length)
    return out


def pack_attr(kind: int, payload: bytes) -> bytes:
    length = RTA.size + len(payload)
    return RTA.pack(length, kind) + payload + b"\0" * (_align(length) - length)


def split(dump: bytes) -> tuple[bytes, list[bytes]]:
    """An `ip route save` dump as its magic number and its messages (each a whole nlmsghdr + rtmsg + attributes)."""
    if len(dump) < DUMP_MAGIC_LEN:
        raise LinkRoutesError(f"not a route dump: {len(dump)} bytes")
    out, at = [], DUMP_MAGIC_LEN
    while at < len(dump):
        if at + NLMSG.size > len(dump):
            raise LinkRoutesError(f"a route dump cut short at byte {at}")
        length = NLMSG.unpack_from(dump, at)[0]
        if length < NLMSG.size + RTMSG.size or at + length > len(dump):
            raise LinkRoutesError(f"a route message of length {length} at byte {at} of {len(dump)}")
        out.append(dump[at:at + length])
        at += _align(length)
    return dump[:DUMP_MAGIC_LEN], out


Hop = tuple[int, bytes, bytes, bytes]  # a nexthop as the kernel tells them apart: ifindex, gateway, encap type, encap


@dataclass(frozen=True)
class RouteMsg:
    """One route message, read: what identifies the route and the devices it leaves through."""

    raw: bytes
    family: int
    dst_len: int
    tos: int
    table: int
    protocol: int
    dst: bytes
    metric: int
    oif: int | None
    members: tuple[int, ...] = ()  # multipath: each member's ifindex
    nh_id: int | None = None
    attrs: tuple[tuple[int, bytes], ...] = field(default=(), repr=False)
    hops: frozenset[Hop] = frozenset()  # its nexthops, a multipath route's members or a route's own

    @property
    def key(self) -> tuple[int, int, bytes, int, int, int]:
        """What the kernel tells routes apart by: one route per key (a second add with the key is refused)."""
        return self.family, self.table, self.dst, self.dst_len, self.tos, self.metric

    def devices(self) -> set[int]:
        return ({self.oif} if self.oif is not None else set()) | set(self.members)


def _hop(ifindex: int, attrs: dict[int, bytes]) -> Hop:
    return ifindex, attrs.get(RTA_GATEWAY, b""), attrs.get(RTA_ENCAP_TYPE, b""), attrs.get(RTA_ENCAP, b"")


def _member_hop(member: bytes) -> Hop:
    return _hop(RTNH.unpack_from(member, 0)[3], dict(attrs(member[RTNH.size:])))


def parse(raw: bytes) -> RouteMsg:
    family, dst_len, _src_len, tos, table, protocol, _scope, _type, _flags = RTMSG.unpack_from(raw, NLMSG.size)
    a = attrs(raw[NLMSG.size + RTMSG.size:NLMSG.unpack_from(raw)[0]])
    got = dict(a)
    u32 = (lambda k: struct.unpack("=I", got[k][:4])[0] if k in got else None)
    records = _members(got.get(RTA_MULTIPATH, b""))
    oif = u32(RTA_OIF)
    hops = [_member_hop(m) for m in records] + ([_hop(oif, got)] if oif is not None else [])
    return RouteMsg(raw, family, dst_len, tos, u32(RTA_TABLE) or table, protocol, got.get(RTA_DST, b""),
                    u32(RTA_PRIORITY) or 0, oif, tuple(h[0] for h in hops[:len(records)]), u32(RTA_NH_ID), tuple(a),
                    frozenset(hops))


def _members(buf: bytes) -> list[bytes]:
    """The rtnexthop records of an RTA_MULTIPATH payload, each with its own attributes."""
    out, at = [], 0
    while at + RTNH.size <= len(buf):
        length = RTNH.unpack_from(buf, at)[0]
        if length < RTNH.size or at + length > len(buf):
            raise LinkRoutesError(f"a multipath member of length {length} runs past its route")
        out.append(buf[at:at + length])
        at += _align(length)
    return out


def through(routes: Iterable[RouteMsg], ifindex: int) -> list[RouteMsg]:
    """The routes the kernel drops or thins when `ifindex` goes down, and does not make again by itself."""
    return [r for r in routes
            if ifindex in r.devices() and r.protocol != RTPROT_KERNEL and r.nh_id is None]


def without(route: RouteMsg, down: set[int]) -> bytes | None:
    """The route's message without its multipath members on devices in `down` (None when nothing is left: a
    single-nexthop route through one of them, or every member)."""
    if route.oif in down:
        return None
    if not route.members or not set(route.members) & down:
        return route.raw
    return _only(route, lambda m: RTNH.unpack_from(m, 0)[3] not in down)


def _only(route: RouteMsg, keep: Callable[[bytes], bool]) -> bytes | None:
    """A multipath route's message with only the members `keep` takes (None when it takes none)."""
    kept = [m for m in _members(dict(route.attrs)[RTA_MULTIPATH]) if keep(m)]
    if not kept:
        return None
    body = b"".join(pack_attr(k, b"".join(m + b"\0" * (_align(len(m)) - len(m)) for m in kept)
                              if k == RTA_MULTIPATH else v) for k, v in route.attrs)
    head = route.raw[:NLMSG.size + RTMSG.size]
    length = len(head) + len(body)
    return NLMSG.pack(length, *NLMSG.unpack_from(head)[1:]) + head[NLMSG.size:] + body


def missing(kept: Iterable[RouteMsg], now: Iterable[RouteMsg], down: set[int], port: int) -> list[bytes]:
    """What to add so the kept routes through `port` hold again: each one whose key no route holds now (without its
    members on `down` devices), and to an IPv6 multipath route that is there, its members through `port` that it
    lacks (the kernel adds a nexthop of a route that exists as one more member). A route that is there is not
    otherwise touched: who changed it meanwhile (the controller) is right."""
    have = {r.key: r for r in now}
    out = []
    for r in kept:
        there = have.get(r.key)
        if there is None:
            msg = without(r, down)
        elif r.family == AF_INET6 and r.members and there.nh_id is None and port not in down:
            msg = _only(r, lambda m: RTNH.unpack_from(m, 0)[3] == port and _member_hop(m) not in there.hops)
        else:
            msg = None
        if msg is not None:
            out.append(msg)
    return out


# --- in a namespace -------------------------------------------------------------------------------

@dataclass
class Kept:
    """What a namespace holds through one interface: its routes (rtnetlink messages, hex) and permanent
    neighbours ({dst, lladdr}); JSON in a fault's record."""

    intf: str
    routes: list[str] = field(default_factory=list)
    neighbours: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"intf": self.intf, "routes": self.routes, "neighbours": self.neighbours}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Kept:
        return cls(str(doc["intf"]), [str(r) for r in doc.get("routes", [])],
                   [dict(n) for n in doc.get("neighbours", [])])


def _out(wrap: Wrap, argv: Sequence[str], stdin: Any = None) -> bytes:
    proc = subprocess.run(wrap(argv), capture_output=True, stdin=stdin, timeout=30)
    if proc.returncode != 0:
        raise LinkRoutesError(f"{' '.join(argv)}: {proc.stderr.decode(errors='replace').strip() or proc.returncode}")
    return proc.stdout


def _links(wrap: Wrap) -> dict[str, tuple[int, bool]]:
    """Each interface's ifindex and whether it is up (IFF_UP: the kernel takes nexthops only on those)."""
    return {link["ifname"]: (int(link["ifindex"]), "UP" in link.get("flags", []))
            for link in json.loads(_out(wrap, ["ip", "-j", "link", "show"]) or b"[]")}


def _dump(wrap: Wrap) -> tuple[bytes, list[RouteMsg]]:
    """Every IPv4 and IPv6 route of every table: the dump's magic number and the routes."""
    magic, out = b"", []
    for family in ("-4", "-6"):
        magic, msgs = split(_out(wrap, ["ip", family, "route", "save", "table", "all"]))
        out += [parse(m) for m in msgs]
    return magic, out


def _neighbours(wrap: Wrap, intf: str) -> list[dict[str, str]]:
    doc = json.loads(_out(wrap, ["ip", "-j", "neigh", "show", "dev", intf, "nud", "permanent"]) or b"[]")
    return [{"dst": n["dst"], "lladdr": n["lladdr"]} for n in doc if n.get("lladdr")]


def snapshot(wrap: Wrap, intf: str) -> Kept:
    """What the namespace holds through `intf` now and would lose when it goes down."""
    links = _links(wrap)
    if intf not in links:
        raise LinkRoutesError(f"no interface {intf} here")
    _, routes = _dump(wrap)
    return Kept(intf, [r.raw.hex() for r in through(routes, links[intf][0])], _neighbours(wrap, intf))


def restore(wrap: Wrap, kept: Kept) -> tuple[int, int]:
    """Put back, with `kept.intf` up again, the kept neighbours and routes that are missing; how many of each."""
    links = _links(wrap)
    if kept.intf not in links:
        raise LinkRoutesError(f"no interface {kept.intf} here")
    down = {index for index, up in links.values() if not up}
    have = {n["dst"] for n in _neighbours(wrap, kept.intf)}
    neighbours = [n for n in kept.neighbours if n["dst"] not in have]
    for n in neighbours:
        _out(wrap, ["ip", "neigh", "replace", n["dst"], "lladdr", n["lladdr"], "dev", kept.intf, "nud", "permanent"])
    magic, now = _dump(wrap)
    add = missing([parse(bytes.fromhex(r)) for r in kept.routes], now, down, links[kept.intf][0])
    if add:
        with tempfile.TemporaryFile() as f:  # `ip route restore` reads its input three times (seeks back)
            f.write(magic + b"".join(m + b"\0" * (_align(len(m)) - len(m)) for m in add))
            f.seek(0)
            _out(wrap, ["ip", "route", "restore"], stdin=f)
    return len(neighbours), len(add)
