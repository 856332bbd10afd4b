"""Route messages with the SRv6 attributes pyroute2 0.9 does not encode: seg6 `encap.red`, seg6local `flavors next-csid`.

pyroute2 carries the socket, the namespace, framing, acks and dumps; this module gives its route
message an RTA_ENCAP it passes through as bytes (here and in each RTA_MULTIPATH nexthop), and packs
and parses those bytes from the kernel's uapi (linux/seg6_iptunnel.h, linux/seg6_local.h, linux/seg6.h).
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from pyroute2.netlink.rtnl.rtmsg import nh as _nh
from pyroute2.netlink.rtnl.rtmsg import rtmsg as _rtmsg

LWTUNNEL_ENCAP_SEG6, LWTUNNEL_ENCAP_SEG6_LOCAL = 5, 7
SEG6_IPTUNNEL_SRH = 1
SEG6_IPTUN_MODE_ENCAP, SEG6_IPTUN_MODE_ENCAP_RED = 1, 3
MODES = {"encap": SEG6_IPTUN_MODE_ENCAP, "encap.red": SEG6_IPTUN_MODE_ENCAP_RED}
SEG6_LOCAL_ACTION, SEG6_LOCAL_TABLE, SEG6_LOCAL_NH6, SEG6_LOCAL_OIF, SEG6_LOCAL_FLAVORS = 1, 3, 5, 7, 11
ACTIONS = {"End": 1, "End.DX6": 5, "End.DT6": 7}
SEG6_LOCAL_FLV_OPERATION, SEG6_LOCAL_FLV_LCBLOCK_BITS, SEG6_LOCAL_FLV_LCNODE_FN_BITS = 1, 2, 3
SEG6_LOCAL_FLV_OP_NEXT_CSID = 4
NLA_F_NESTED = 1 << 15
SRH_TYPE = 4


class nh(_nh):
    """A multipath nexthop whose RTA_ENCAP is raw bytes (seg6 encap.red is packed here)."""

    __slots__ = ()
    nla_map = tuple((n, "cdata") if n == "RTA_ENCAP" else (n, t) for n, t in _nh.nla_map)


class rtmsg(_rtmsg):
    """A route message whose RTA_ENCAP, also in multipath nexthops, is raw bytes."""

    __slots__ = ()
    nla_map = tuple((n, "cdata") if n == "RTA_ENCAP" else (n, t) for n, t in _rtmsg.nla_map)

    @staticmethod
    def get_nh(self, *argv, **kwarg):  # type: ignore[no-untyped-def]
        return nh


def _attr(kind: int, value: bytes) -> bytes:
    size = 4 + len(value)
    return struct.pack("HH", size, kind) + value + b"\0" * (-size % 4)


def _attrs(data: bytes) -> dict[int, bytes]:
    out, at = {}, 0
    while at + 4 <= len(data):
        size, kind = struct.unpack_from("HH", data, at)
        if size < 4:
            break
        out[kind & ~NLA_F_NESTED & 0x7FFF] = data[at + 4:at + size]
        at += size + (-size % 4)
    return out


def seg6_encap(segments: list[str], mode: str = "encap.red") -> bytes:
    """SEG6_IPTUNNEL_SRH: the mode, then an SRH whose segment list is in reverse order (segments[0] last)."""
    segs = b"".join(socket.inet_pton(socket.AF_INET6, s) for s in reversed(segments))
    n = len(segments)
    srh = struct.pack("BBBBBBH", 0, 2 * n, SRH_TYPE, n - 1, n - 1, 0, 0) + segs
    return _attr(SEG6_IPTUNNEL_SRH, struct.pack("i", MODES[mode]) + srh)


def parse_seg6_encap(data: bytes) -> tuple[str, list[str]]:
    """(mode, segments in travel order) of a SEG6 RTA_ENCAP."""
    raw = _attrs(data)[SEG6_IPTUNNEL_SRH]
    mode = struct.unpack_from("i", raw)[0]
    n = raw[4 + 4] + 1  # first_segment + 1
    segs = [socket.inet_ntop(socket.AF_INET6, raw[12 + 16 * k:28 + 16 * k]) for k in range(n)]
    name = next((k for k, v in MODES.items() if v == mode), str(mode))
    return name, list(reversed(segs))


def seg6local(action: str, *, table: int | None = None, nh6: str | None = None, oif: int | None = None,
              next_csid: tuple[int, int] | None = None) -> bytes:
    """A SEG6_LOCAL RTA_ENCAP: the action and its parameters; next_csid = (locator-block bits, node-function bits)."""
    out = _attr(SEG6_LOCAL_ACTION, struct.pack("I", ACTIONS[action]))
    if table is not None:
        out += _attr(SEG6_LOCAL_TABLE, struct.pack("I", table))
    if nh6 is not None:
        out += _attr(SEG6_LOCAL_NH6, socket.inet_pton(socket.AF_INET6, nh6))
    if oif is not None:
        out += _attr(SEG6_LOCAL_OIF, struct.pack("I", oif))
    if next_csid is not None:
        flv = (_attr(SEG6_LOCAL_FLV_OPERATION, struct.pack("I", 1 << SEG6_LOCAL_FLV_OP_NEXT_CSID))
               + _attr(SEG6_LOCAL_FLV_LCBLOCK_BITS, struct.pack("B", next_csid[0]))
               + _attr(SEG6_LOCAL_FLV_LCNODE_FN_BITS, struct.pack("B", next_csid[1])))
        out += _attr(SEG6_LOCAL_FLAVORS | NLA_F_NESTED, flv)
    return out


@dataclass(frozen=True)
class Seg6Local:
    """A seg6local behaviour as read back."""

    action: str
    table: int | None = None
    nh6: str | None = None
    oif: int | None = None
    next_csid: tuple[int, int] | None = None


def parse_seg6local(data: bytes) -> Seg6Local:
    a = _attrs(data)
    code = struct.unpack("I", a[SEG6_LOCAL_ACTION][:4])[0]
    action = next((k for k, v in ACTIONS.items() if v == code), str(code))
    csid = None
    if SEG6_LOCAL_FLAVORS in a:
        f = _attrs(a[SEG6_LOCAL_FLAVORS])
        ops = struct.unpack("I", f.get(SEG6_LOCAL_FLV_OPERATION, b"\0\0\0\0")[:4])[0]
        if ops & 1 << SEG6_LOCAL_FLV_OP_NEXT_CSID:
            csid = (f[SEG6_LOCAL_FLV_LCBLOCK_BITS][0] if SEG6_LOCAL_FLV_LCBLOCK_BITS in f else 32,
                    f[SEG6_LOCAL_FLV_LCNODE_FN_BITS][0] if SEG6_LOCAL_FLV_LCNODE_FN_BITS in f else 16)
    return Seg6Local(action, struct.unpack("I", a[SEG6_LOCAL_TABLE][:4])[0] if SEG6_LOCAL_TABLE in a else None,
                     socket.inet_ntop(socket.AF_INET6, a[SEG6_LOCAL_NH6][:16]) if SEG6_LOCAL_NH6 in a else None,
                     struct.unpack("I", a[SEG6_LOCAL_OIF][:4])[0] if SEG6_LOCAL_OIF in a else None, csid)
