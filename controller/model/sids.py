"""F3216 uSID plan: uSID = plane(4) | index(12) in a /32 block; carriers; host IPv6/IPv4 addresses.

Bit layout (docs/sid-plan.md has the worked example):

    uSID (16 bits)  = plane (4 bits, 0..15) | index (12 bits)
    index 0x000          never used: a zero uSID ends a carrier
    index 0x001..0x3FF   T1 uN, spine j -> 0x001 + j     (global in the plane, up to 1023 spines)
    index 0x400..0xBFF   T0 uN, leaf i  -> 0x400 + i     (global in the plane, up to 2048 leaves)
    index 0xC00..0xFFE   End.DX6 of host slot k -> 0xC00 + k  (local to a leaf, reused by every leaf)
    index 0xFFF          End.DT6 of the leaf                 (local to a leaf, reused by every leaf)

    carrier (128 bits) = block (32) | uSID1 | ... | uSID6 (16 each), zero-filled after the last
    spray path         = block | T1 uN | dst T0 uN | dst T0 DT6 | 0 | 0 | 0

    host IPv6 (plane NIC) = fd00:<plane>:<t0>::<slot+1>, one /64 per (plane, leaf)
    host IPv4 (eecmp)     = 10.0.0.0 | plane << 20 | t0 << 9 | (slot + 1): /23 per leaf, /12 per plane
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

USID_BITS = 16
MAX_USIDS = 6
PLANE_SHIFT = 12
MAX_PLANES = 16
T1_BASE, T1_MAX = 0x001, 0x3FF
T0_BASE, T0_MAX = 0x400, 0xBFF
DX6_BASE, DX6_MAX = 0xC00, 0xFFE
DT6_INDEX = 0xFFF
DEFAULT_BLOCK = "fcbb:bb00::/32"


class SidError(ValueError):
    """An invalid SID, carrier or address plan (one line)."""


def _block_value(block: str) -> int:
    try:
        net = ipaddress.IPv6Network(block, strict=True)
    except ValueError as e:
        raise SidError(f"uSID block {block!r} is not an IPv6 prefix with zero host bits: {e}") from None
    if net.prefixlen != 32:
        raise SidError(f"uSID block {block} must be a /32 (F3216), not /{net.prefixlen}")
    return int(net.network_address) >> 96


@dataclass(frozen=True, slots=True)
class SidPlan:
    """The address plan of a fabric: the uSID block (its 32 bits) and the host address bases."""

    block: int = _block_value(DEFAULT_BLOCK)
    host_base: int = 0xFD00  # first 16 bits of every host IPv6 /64
    v4_base: int = 10  # first octet of every host IPv4 address

    @classmethod
    def from_block(cls, block: str = DEFAULT_BLOCK) -> SidPlan:
        """A plan with the block given as a /32 prefix, e.g. 'fcbb:bb00::/32'."""
        return cls(block=_block_value(block))

    @property
    def block_prefix(self) -> int:
        """The block as a 128-bit address (its /32 prefix)."""
        return self.block << 96

    # --- uSIDs -------------------------------------------------------------------------------
    def t1_usid(self, plane: int, spine: int) -> int:
        return usid(plane, T1_BASE + _bounded("spine", spine, T1_MAX - T1_BASE))

    def t0_usid(self, plane: int, leaf: int) -> int:
        return usid(plane, T0_BASE + _bounded("leaf", leaf, T0_MAX - T0_BASE))

    def dx6_usid(self, plane: int, slot: int) -> int:
        return usid(plane, DX6_BASE + _bounded("host slot", slot, DX6_MAX - DX6_BASE))

    def dt6_usid(self, plane: int) -> int:
        return usid(plane, DT6_INDEX)

    # --- carriers ----------------------------------------------------------------------------
    def carrier(self, usids: Sequence[int]) -> int:
        """block | u1 | ... | un, zero-filled (1 <= n <= 6, every uSID in 1..0xFFFF)."""
        return make_carrier(self.block, usids)

    def parse(self, addr: int | str) -> tuple[int, ...]:
        """The uSIDs of a carrier in this block (SidError if it is not one)."""
        return parse_carrier(self.block, addr)

    def un_prefix(self, u: int) -> int:
        """block | uN: the /48 of a node."""
        return self.block << 96 | u << 80

    def local_sid(self, un: int, local: int) -> int:
        """block | uN | local uSID: the /64 of a leaf's decap SID."""
        return self.block << 96 | un << 80 | local << 64

    def local_sid_text(self, un: int, local: int) -> str:
        """fmt_v6(local_sid(un, local)) without the generic formatter: un and local are never 0,
        so the four trailing zero groups are always the run RFC 5952 compresses."""
        return self.un_text(un) + f"{local:x}::"

    def un_text(self, un: int) -> str:
        """'block hi:block lo:uN:', what every local SID text of a node starts with."""
        return f"{self.block >> 16:x}:{self.block & 0xFFFF:x}:{un:x}:"

    # --- hosts -------------------------------------------------------------------------------
    def leaf_v6(self, plane: int, leaf: int) -> int:
        """The /64 of the host NICs of a leaf in its plane."""
        return (self.host_base << 112) | (plane << 96) | (leaf << 80)

    def host_v6(self, plane: int, leaf: int, slot: int) -> int:
        return self.leaf_v6(plane, leaf) | (slot + 1)

    def host_v6_text(self, plane: int, leaf: int, slot: int) -> str:
        """fmt_v6(host_v6(...)) fast: with host_base and leaf not 0, groups 3..6 are the zero run."""
        prefix = self.leaf_v6_text(plane, leaf)
        return fmt_v6(self.host_v6(plane, leaf, slot)) if prefix is None else prefix + f"::{slot + 1:x}"

    def leaf_v6_text(self, plane: int, leaf: int) -> str | None:
        """What every host_v6_text of a leaf starts with (its slot follows '::'); None where the
        generic formatter is needed (host_base or leaf 0 moves the zero run)."""
        if not self.host_base or not leaf:
            return None
        return f"{self.host_base:x}:{plane:x}:{leaf:x}"

    def plane_v4(self, plane: int) -> int:
        """The /12 of all host IPv4 addresses of a plane."""
        return self.v4_base << 24 | plane << 20

    def leaf_v4(self, plane: int, leaf: int) -> int:
        """The /23 of the host IPv4 addresses of a leaf."""
        return self.plane_v4(plane) | leaf << 9

    def host_v4(self, plane: int, leaf: int, slot: int) -> int:
        return self.leaf_v4(plane, leaf) | (slot + 1)

    def capacity_problems(self, planes: int, spines: int, leaves: int, slots: int) -> list[str]:
        """What of a fabric this plan cannot number, one line each."""
        out = []
        if planes > MAX_PLANES:
            out.append(f"{planes} planes: the uSID plane field holds {MAX_PLANES}")
        if spines > T1_MAX - T1_BASE + 1:
            out.append(f"{spines} spines per plane: T1 uN range holds {T1_MAX - T1_BASE + 1}")
        if leaves > T0_MAX - T0_BASE + 1:
            out.append(f"{leaves} leaves per plane: T0 uN range holds {T0_MAX - T0_BASE + 1}")
        if slots > DX6_MAX - DX6_BASE + 1:
            out.append(f"{slots} hosts per leaf: End.DX6 range holds {DX6_MAX - DX6_BASE + 1}")
        if slots > 510:
            out.append(f"{slots} hosts per leaf: the IPv4 /23 per leaf holds 510")
        return out


V4_PLANE_LEN, V4_LEAF_LEN, V6_LEAF_LEN = 12, 23, 64
UN_LEN, LOCAL_SID_LEN, BLOCK_LEN = 48, 64, 32
V4_MAPPED = 0xFFFF << 32


def _bounded(what: str, n: int, top: int) -> int:
    if not 0 <= n <= top:
        raise SidError(f"{what} {n} out of range 0..{top} for the uSID layout")
    return n


def usid(plane: int, index: int) -> int:
    """plane(4) | index(12); index 0 is never a uSID."""
    if not 0 <= plane < MAX_PLANES:
        raise SidError(f"plane {plane} out of range 0..{MAX_PLANES - 1}")
    if not 1 <= index <= 0xFFF:
        raise SidError(f"uSID index {index:#x} out of range 0x001..0xfff")
    return plane << PLANE_SHIFT | index


def split_usid(u: int) -> tuple[int, str, int]:
    """(plane, kind, n) of a uSID: kind t1/t0 with the switch index, dx6 with the slot, dt6."""
    plane, index = u >> PLANE_SHIFT, u & 0xFFF
    if index == 0 or not 0 <= u <= 0xFFFF:
        raise SidError(f"uSID {u:#06x} is not valid")
    if index <= T1_MAX:
        return plane, "t1", index - T1_BASE
    if index <= T0_MAX:
        return plane, "t0", index - T0_BASE
    if index <= DX6_MAX:
        return plane, "dx6", index - DX6_BASE
    return plane, "dt6", 0


def make_carrier(block: int, usids: Sequence[int]) -> int:
    """block(32) | u1 | ... | un (16 each), zero-filled."""
    if not 1 <= len(usids) <= MAX_USIDS:
        raise SidError(f"a carrier holds 1..{MAX_USIDS} uSIDs, got {len(usids)}")
    value = block
    for u in usids:
        if not 1 <= u <= 0xFFFF:
            raise SidError(f"uSID {u:#x} out of range 0x0001..0xffff")
        value = value << USID_BITS | u
    return value << USID_BITS * (MAX_USIDS - len(usids))


def parse_carrier(block: int, addr: int | str) -> tuple[int, ...]:
    """The uSIDs of a carrier: its block must match and nothing may follow the first zero uSID."""
    value = int(ipaddress.IPv6Address(addr)) if isinstance(addr, str) else addr
    if value >> 96 != block:
        raise SidError(f"{fmt_v6(value)} is not in the uSID block {fmt_v6(block << 96)}/32")
    usids = [(value >> USID_BITS * (MAX_USIDS - 1 - n)) & 0xFFFF for n in range(MAX_USIDS)]
    count = usids.index(0) if 0 in usids else MAX_USIDS
    if any(usids[count:]):
        raise SidError(f"{fmt_v6(value)} has a uSID after the zero uSID at position {count + 1}")
    if count == 0:
        raise SidError(f"{fmt_v6(value)} carries no uSID")
    return tuple(usids[:count])


@lru_cache(maxsize=1 << 16)
def fmt_v6(value: int) -> str:
    """Canonical (RFC 5952) text of a 128-bit address, without ipaddress' cost."""
    h = f"{value:032x}"
    groups = [h[i:i + 4].lstrip("0") or "0" for i in range(0, 32, 4)]
    best, best_len, start = -1, 1, -1
    for i in range(9):
        if i < 8 and groups[i] == "0":
            if start < 0:
                start = i
        elif start >= 0:
            if i - start > best_len:
                best, best_len = start, i - start
            start = -1
    if best < 0:
        return ":".join(groups)
    return ":".join(groups[:best]) + "::" + ":".join(groups[best + best_len:])


def fmt_v4(value: int) -> str:
    return f"{value >> 24 & 255}.{value >> 16 & 255}.{value >> 8 & 255}.{value & 255}"


def v4_mapped(value: int) -> int:
    """::ffff:a.b.c.d as a 128-bit value (RFC 4291 2.5.5.2)."""
    return V4_MAPPED | value


def fmt_mapped(value: int) -> str:
    """Text of an IPv4-mapped address, '::ffff:10.0.0.1'."""
    return "::ffff:" + fmt_v4(value)
