"""What a port's namespace keeps through the port (mininet_labs.linkroutes), on hand-made rtnetlink route messages as
`ip route save` writes them: which routes the kernel drops with the port, a multipath route thinned to its members on
devices that are up, and only the routes whose key is gone put back."""

from __future__ import annotations

import ipaddress
import socket
import struct

import pytest

from mininet_labs.linkroutes import (NLMSG, RTA_DST, RTA_MULTIPATH, RTA_OIF, RTA_PRIORITY, RTA_TABLE, RTMSG, RTNH,
                                     LinkRoutesError, missing, pack_attr, parse, split, through, without)

RTA_GATEWAY, RTA_ENCAP_TYPE, RTA_ENCAP, RTA_NH_ID = 5, 21, 22, 30
MAGIC = struct.pack("=I", 0x45311224)
PROTO = 0x5F  # the netlink southbound's protocol number


def v6(text: str) -> bytes:
    return ipaddress.IPv6Address(text).packed


def u32(n: int) -> bytes:
    return struct.pack("=I", n)


def member(ifindex: int, gateway: str, encap: bytes = b"") -> bytes:
    body = pack_attr(RTA_GATEWAY, v6(gateway))
    if encap:
        body += pack_attr(RTA_ENCAP_TYPE, struct.pack("=H", 5)) + pack_attr(RTA_ENCAP, encap)
    return RTNH.pack(RTNH.size + len(body), 0, 0, ifindex) + body


def route(dst: str, *, oif: int | None = None, gateway: str | None = None, encap: bytes = b"",
          members: tuple[bytes, ...] = (), proto: int = PROTO, table: int = 254, metric: int = 1024,
          nh_id: int | None = None) -> bytes:
    """An RTM_NEWROUTE message as the kernel dumps it (NLM_F_MULTI)."""
    net = ipaddress.IPv6Network(dst)
    attrs = pack_attr(RTA_TABLE, u32(table)) + pack_attr(RTA_DST, net.network_address.packed)
    attrs += pack_attr(RTA_PRIORITY, u32(metric))
    if oif is not None:
        attrs += pack_attr(RTA_OIF, u32(oif))
    if gateway:
        attrs += pack_attr(RTA_GATEWAY, v6(gateway))
    if encap:
        attrs += pack_attr(RTA_ENCAP_TYPE, struct.pack("=H", 5)) + pack_attr(RTA_ENCAP, encap)
    if members:
        attrs += pack_attr(RTA_MULTIPATH, b"".join(members))
    if nh_id is not None:
        attrs += pack_attr(RTA_NH_ID, u32(nh_id))
    head = RTMSG.pack(socket.AF_INET6, net.prefixlen, 0, 0, min(table, 252), proto, 0, 1, 0)
    return NLMSG.pack(NLMSG.size + len(head) + len(attrs), 24, 2, 1, 0) + head + attrs


SEGS = b"\x03" * 40  # an encap seg6 payload: carried through untouched
UPLINK, OTHER, SR0 = 3, 4, 2
SPINE_UN = route("fcbb:bb00:1::/48", oif=UPLINK, gateway="fe80::1")
TO_LEAF = route("fd00:0:1::/64", members=(member(UPLINK, "fe80::1", SEGS), member(OTHER, "fe80::2", SEGS)))
ELSEWHERE = route("fcbb:bb00:2::/48", oif=OTHER, gateway="fe80::2")
KERNELS = route("fe80::/64", oif=UPLINK, proto=2)
ON_NEXTHOP = route("fd00:0:3::/64", nh_id=11)
END = route("fcbb:bb00:100::/48", oif=SR0)


def test_a_dump_splits_into_its_messages_and_each_reads_back() -> None:
    magic, msgs = split(MAGIC + SPINE_UN + TO_LEAF + KERNELS)
    assert magic == MAGIC and msgs == [SPINE_UN, TO_LEAF, KERNELS]
    r = parse(TO_LEAF)
    assert (r.family, r.table, r.dst, r.dst_len, r.metric, r.oif, r.members) == (
        socket.AF_INET6, 254, v6("fd00:0:1::"), 64, 1024, None, (UPLINK, OTHER))
    assert parse(SPINE_UN).oif == UPLINK and parse(SPINE_UN).devices() == {UPLINK}
    assert parse(route("fd00::/64", oif=1, table=1000)).table == 1000  # the table above 255 is in RTA_TABLE
    assert split(MAGIC) == (MAGIC, [])


@pytest.mark.parametrize("dump, why", [(b"\x01", "not a route dump: 1 bytes"),
                                       (MAGIC + SPINE_UN[:10], "a route dump cut short at byte 4"),
                                       (MAGIC + SPINE_UN[:-4], f"a route message of length {len(SPINE_UN)} at byte 4")])
def test_a_dump_that_is_not_one_says_where(dump: bytes, why: str) -> None:
    with pytest.raises(LinkRoutesError, match=why):
        split(dump)


def test_the_routes_through_a_port_are_its_own_and_the_multipath_ones_it_is_a_member_of() -> None:
    routes = [parse(m) for m in (SPINE_UN, TO_LEAF, ELSEWHERE, KERNELS, ON_NEXTHOP, END)]
    assert [r.raw for r in through(routes, UPLINK)] == [SPINE_UN, TO_LEAF]  # not the kernel's, not on a nexthop object
    assert [r.raw for r in through(routes, OTHER)] == [TO_LEAF, ELSEWHERE]
    assert through(routes, 9) == []


def test_a_route_goes_back_without_its_members_on_devices_still_down() -> None:
    r = parse(TO_LEAF)
    assert without(r, set()) == TO_LEAF and without(r, {9}) == TO_LEAF
    thinned = without(r, {OTHER})
    assert thinned is not None
    back = parse(thinned)
    assert back.members == (UPLINK,) and back.key == r.key
    assert dict(back.attrs)[RTA_MULTIPATH] == member(UPLINK, "fe80::1", SEGS)  # the member as dumped, encap and all
    assert NLMSG.unpack_from(thinned)[0] == len(thinned) == len(TO_LEAF) - len(member(OTHER, "fe80::2", SEGS))
    assert without(r, {UPLINK, OTHER}) is None
    assert without(parse(SPINE_UN), {UPLINK}) is None and without(parse(SPINE_UN), {OTHER}) == SPINE_UN


def test_only_the_routes_whose_key_is_gone_are_put_back() -> None:
    kept = [parse(m) for m in (SPINE_UN, TO_LEAF)]
    assert missing(kept, [], set(), UPLINK) == [SPINE_UN, TO_LEAF]
    # the multipath route is there whole (the kernel revived its member): left as it is
    assert missing(kept, [parse(TO_LEAF), parse(END)], set(), UPLINK) == [SPINE_UN]
    # another metric is another route: the kept one is still missing
    assert missing(kept, [parse(route("fcbb:bb00:1::/48", oif=UPLINK, gateway="fe80::1", metric=10))],
                   set(), UPLINK) == [SPINE_UN, TO_LEAF]
    # a route of that key that is not the kept one (the controller rewrote it): left as it is
    rewritten = route("fcbb:bb00:1::/48", oif=OTHER, gateway="fe80::2")
    assert missing(kept, [parse(rewritten), parse(TO_LEAF)], set(), UPLINK) == []


def test_a_multipath_route_gets_back_its_members_through_the_port_and_no_others() -> None:
    """Two faults on a leaf's two uplinks: the second one's port going down took the whole multipath route (all its
    members dead). Undoing one fault puts the route back with the member on its port only (the other port is still
    down); undoing the other adds that port's member to it, whichever order."""
    kept = [parse(TO_LEAF)]
    first = missing(kept, [], {OTHER}, UPLINK)
    assert first == [without(parse(TO_LEAF), {OTHER})] and parse(first[0]).members == (UPLINK,)
    (second,) = missing(kept, [parse(first[0])], set(), OTHER)
    assert parse(second).members == (OTHER,) and dict(parse(second).attrs)[RTA_MULTIPATH] == member(OTHER, "fe80::2",
                                                                                                    SEGS)
    # as the kernel dumps a one-member route: device, gateway and encapsulation of its own, no multipath attribute
    single = parse(route("fd00:0:1::/64", oif=UPLINK, gateway="fe80::1", encap=SEGS))
    assert single.members == () and single.hops == {(UPLINK, v6("fe80::1"), struct.pack("=H", 5), SEGS)}
    assert missing(kept, [single], set(), UPLINK) == []  # that is the member through the port
    # a nexthop through the port that is not the kept one (no encapsulation): the kept member is added beside it
    plain = parse(route("fd00:0:1::/64", oif=UPLINK, gateway="fe80::1"))
    assert [parse(m).members for m in missing(kept, [plain], set(), UPLINK)] == [(UPLINK,)]
    # nothing for a member through another port, nor while the port is down
    assert missing(kept, [parse(first[0])], set(), UPLINK) == []
    assert missing(kept, [parse(first[0])], {OTHER}, OTHER) == []
