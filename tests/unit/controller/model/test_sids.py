"""uSID layout, carriers and host addresses."""

from __future__ import annotations

import ipaddress
import random

import pytest

from controller.model.sids import SidError, SidPlan, fmt_v6, parse_carrier, split_usid, usid

S = SidPlan()


def test_layout() -> None:
    assert S.block == 0xFCBBBB00
    assert S.t1_usid(0, 0) == 0x0001 and S.t1_usid(3, 255) == 0x3100
    assert S.t0_usid(0, 0) == 0x0400 and S.t0_usid(7, 511) == 0x75FF
    assert S.dx6_usid(2, 0) == 0x2C00 and S.dx6_usid(2, 255) == 0x2CFF
    assert S.dt6_usid(5) == 0x5FFF
    assert split_usid(0x75FF) == (7, "t0", 511)
    assert split_usid(0x3100) == (3, "t1", 255)
    assert split_usid(0x2CFF) == (2, "dx6", 255)
    assert split_usid(0x5FFF) == (5, "dt6", 0)


def test_usids_unique_per_plane_and_never_zero() -> None:
    for plane in (0, 1, 15):
        nodes = [S.t1_usid(plane, j) for j in range(1023)] + [S.t0_usid(plane, i) for i in range(2048)]
        local = [S.dx6_usid(plane, k) for k in range(1023)] + [S.dt6_usid(plane)]
        assert len(set(nodes + local)) == len(nodes + local)
        assert all(u >> 12 == plane and u & 0xFFF for u in nodes + local)


def test_carrier_and_addresses_text() -> None:
    c = S.carrier([S.t1_usid(1, 0), S.t0_usid(1, 3), S.dt6_usid(1)])
    assert fmt_v6(c) == "fcbb:bb00:1001:1403:1fff::"
    assert S.parse("fcbb:bb00:1001:1403:1fff::") == (0x1001, 0x1403, 0x1FFF)
    assert fmt_v6(S.un_prefix(S.t0_usid(0, 1))) == "fcbb:bb00:401::"
    assert fmt_v6(S.local_sid(S.t0_usid(0, 1), S.dx6_usid(0, 0))) == "fcbb:bb00:401:c00::"
    assert fmt_v6(S.host_v6(2, 5, 0)) == "fd00:2:5::1"
    assert fmt_v6(S.leaf_v6(0, 0)) == "fd00::"
    assert str(ipaddress.IPv4Address(S.host_v4(1, 3, 255))) == "10.16.7.0"  # slot 255 -> host 256 of 10.16.6.0/23
    assert str(ipaddress.IPv4Address(S.leaf_v4(7, 511))) == "10.115.254.0"  # 10 | 7 << 20 | 511 << 9
    full = S.carrier([1, 2, 3, 4, 5, 6])
    assert parse_carrier(S.block, full) == (1, 2, 3, 4, 5, 6)


def test_configurable_block() -> None:
    plan = SidPlan.from_block("fc00:1::/32")
    assert fmt_v6(plan.carrier([0x1001])) == "fc00:1:1001::"


@pytest.mark.parametrize("call, message", [
    (lambda: S.carrier([1, 2, 3, 4, 5, 6, 7]), "a carrier holds 1..6 uSIDs, got 7"),
    (lambda: S.carrier([]), "a carrier holds 1..6 uSIDs, got 0"),
    (lambda: S.carrier([1, 0, 3]), "uSID 0x0 out of range 0x0001..0xffff"),
    (lambda: S.carrier([0x10000]), "uSID 0x10000 out of range 0x0001..0xffff"),
    (lambda: S.parse("fcbb:bb01:1::"), "fcbb:bb01:1:: is not in the uSID block fcbb:bb00::/32"),
    (lambda: S.parse("fcbb:bb00:1:0:3::"), "fcbb:bb00:1:0:3:: has a uSID after the zero uSID at position 2"),
    (lambda: S.parse("fcbb:bb00::"), "fcbb:bb00:: carries no uSID"),
    (lambda: usid(16, 1), "plane 16 out of range 0..15"),
    (lambda: usid(0, 0), "uSID index 0x0 out of range 0x001..0xfff"),
    (lambda: S.t1_usid(0, 1023), "spine 1023 out of range 0..1022 for the uSID layout"),
    (lambda: S.t0_usid(0, 2048), "leaf 2048 out of range 0..2047 for the uSID layout"),
    (lambda: SidPlan.from_block("fcbb:bb00::/48"), "uSID block fcbb:bb00::/48 must be a /32 (F3216), not /48"),
])
def test_errors_are_one_line(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SidError) as err:
        call()
    assert str(err.value) == message


def test_block_with_host_bits_is_rejected() -> None:
    with pytest.raises(SidError, match="not an IPv6 prefix with zero host bits"):
        SidPlan.from_block("fcbb:bb00::1/32")


def test_fmt_v6_is_canonical() -> None:
    rnd = random.Random(7)
    for _ in range(20000):
        groups = [rnd.choice((0, 0, 1, 0xFFFF, 0x0A0B)) for _ in range(8)]
        value = int("".join(f"{g:04x}" for g in groups), 16)
        assert fmt_v6.__wrapped__(value) == str(ipaddress.IPv6Address(value))


def test_capacity() -> None:
    assert S.capacity_problems(8, 256, 512, 256) == []
    assert S.capacity_problems(17, 1024, 2049, 1024) == [
        "17 planes: the uSID plane field holds 16",
        "1024 spines per plane: T1 uN range holds 1023",
        "2049 leaves per plane: T0 uN range holds 2048",
        "1024 hosts per leaf: End.DX6 range holds 1023",
        "1024 hosts per leaf: the IPv4 /23 per leaf holds 510",
    ]


def test_fast_text_equals_canonical() -> None:
    for plan in (S, SidPlan.from_block("fc00::/32"), SidPlan.from_block("0:1::/32")):
        for un, local in ((0x400, 0xC00), (0x7FFF, 0xFFF), (1, 1)):
            assert plan.local_sid_text(un, local) == fmt_v6(plan.local_sid(un, local))
        for plane, leaf, slot in ((0, 0, 0), (1, 0, 5), (0, 7, 0), (15, 2047, 1022)):
            assert plan.host_v6_text(plane, leaf, slot) == fmt_v6(plan.host_v6(plane, leaf, slot))
    zero = SidPlan(host_base=0)
    assert zero.host_v6_text(0, 0, 0) == "::1"
