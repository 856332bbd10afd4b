"""Entropy values (EVs) of a host: one static uSID carrier per plane and spine towards each destination, from the plan's paths.

Also the OCP MRC EV profile (mrc_ctl.h, `struct mrc_ctl_ev_field`): fields with a width, an initial value,
a mask and min/max, expanded into the packet's SRv6 address (an algorithmic EV-to-path mapping), in the
explicit mode (the controller lists the EVs) and the generated mode (every value within min/max).
`srv6_profile` gives the profile of our SID plan for one (plane, destination leaf): the EV is the spine.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from controller.routes import Fabric, Path
from controller.model.sids import MAX_USIDS, PLANE_SHIFT, T1_BASE, USID_BITS, SidPlan, fmt_v6

SPINE_BITS = 10  # an EV id is plane << SPINE_BITS | spine: 14 bits, the low bits of the inner UDP source port


@dataclass(frozen=True, slots=True, order=True)
class Ev:
    """One EV of a host towards one destination host: the static path (plane, spine) and the carrier
    the host writes as outer destination (block | spine uN | destination leaf uN | End.DT6), the
    same carrier the destination leaf's spray member gives the source leaf."""

    id: int
    plane: int
    spine: int
    src: str  # the host's NIC address in the plane: outer source and inner source
    dst: str  # the destination host's address in the plane: inner destination
    carrier: str  # outer destination
    usids: tuple[int, ...]
    src_leaf: str
    spine_name: str
    dst_leaf: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Ev:
        return cls(**{**doc, "usids": tuple(doc["usids"])})


def ev_id(plane: int, spine: int) -> int:
    return plane << SPINE_BITS | spine


def host_evs(fabric: Fabric, host: str, dsts: list[str] | None = None) -> dict[str, list[Ev]]:
    """Per destination host (default: every other host), the EVs of `host`: one per plane both
    hosts have a NIC in and per spine of a live path between their leaves (the plan's health),
    ordered by id. Destinations under the host's own leaf in a plane get no EV in that plane (no
    spine path: the leaf routes them itself)."""
    topo, sids = fabric.topo, fabric.sids
    hosts = topo.hosts
    if host not in hosts:
        raise ValueError(f"unknown host '{host}'")
    mine = {n.plane: n for n in hosts[host]}
    out: dict[str, list[Ev]] = {}
    for dst in dsts if dsts is not None else [h for h in hosts if h != host]:
        if dst not in hosts:
            raise ValueError(f"unknown host '{dst}'")
        if dst == host:
            raise ValueError(f"{host} has no EVs to itself")
        evs: list[Ev] = []
        for nic in hosts[dst]:
            src = mine.get(nic.plane)
            if src is None or src.t0 == nic.t0 or not fabric.health.slot_up(nic.plane, nic.t0, nic.slot):
                continue
            for spine in sorted(fabric.path_spines(nic.plane, src.t0, nic.t0)):
                path = Path(nic.plane, src.t0, spine, nic.t0)
                usids = path.usids(sids)
                evs.append(Ev(ev_id(nic.plane, spine), nic.plane, spine,
                              sids.host_v6_text(nic.plane, src.t0, src.slot), sids.host_v6_text(nic.plane, nic.t0, nic.slot),
                              fmt_v6(path.carrier(sids)), usids, topo.t0(nic.plane, src.t0).name,
                              topo.t1(nic.plane, spine).name, topo.t0(nic.plane, nic.t0).name))
        out[dst] = sorted(evs)
    return out


LEAF_CHOICE = (1 << SPINE_BITS) - 1  # the spine field of a leaf-spray EV: the leaf chooses the spine


def leaf_spray(doc: dict[str, Any]) -> dict[str, Any]:
    """An export for the baseline: per destination one EV per plane without a carrier (the host sends
    plain RoCEv2 and the leaf sprays it over its spines, as without endpoint mode)."""
    hosts: dict[str, Any] = {}
    for host, dsts in doc["hosts"].items():
        hosts[host] = {}
        for dst, evs in dsts.items():
            planes: dict[int, dict[str, Any]] = {}
            for e in evs:
                planes.setdefault(e["plane"], {**e, "id": ev_id(e["plane"], LEAF_CHOICE), "spine": LEAF_CHOICE,
                                               "carrier": "", "usids": [], "spine_name": "leaf's choice"})
            hosts[host][dst] = [planes[p] for p in sorted(planes)]
    return {**doc, "hosts": hosts}


def export(fabric: Fabric, hosts: list[str] | None = None) -> dict[str, Any]:
    """The EV export of every (or the named) host: {"hosts": {host: {dst: [ev, ...]}}}."""
    names = hosts if hosts is not None else list(fabric.topo.hosts)
    return {"block": fmt_v6(fabric.sids.block_prefix) + "/32",
            "hosts": {h: {d: [e.to_json() for e in evs] for d, evs in host_evs(fabric, h).items()} for h in names}}


def load_export(doc: dict[str, Any], host: str) -> dict[str, list[Ev]]:
    """One host's EVs per destination from an export (ValueError if the host is not in it)."""
    try:
        mine = doc["hosts"][host]
    except (KeyError, TypeError):
        raise ValueError(f"the EV export has no host '{host}'") from None
    return {d: [Ev.from_json(e) for e in evs] for d, evs in mine.items()}


# --- EV profiles (OCP MRC mrc_ctl.h) ------------------------------------------------------------------

EV_MAX_BYTES = 32  # MRC_CTL_EV_MAX_BYTES: an EV value, and an expanded one (SRv6: address, SRH segment)


class ProfileError(ValueError):
    """An EV profile the specification's restrictions refuse (one line)."""


@dataclass(frozen=True, slots=True)
class EvField:
    """`struct mrc_ctl_ev_field`: `width` bits; `init_val` before the EV's bits are laid over it at the
    bits set in `mask`; generated values run from `min_val` to `max_val`. A fixed part of the address is
    a field with its value in `init_val` and mask, min and max 0."""

    width: int
    init_val: int = 0
    min_val: int = 0
    max_val: int = 0
    mask: int = 0

    @property
    def ev_bits(self) -> int:
        """How many EV bits the field takes (the bits set in its mask)."""
        return bin(self.mask).count("1")


def check_profile(fields: Sequence[EvField], fmt_widths: Sequence[int]) -> None:
    """The specification's restrictions on an EV profile against its EV Format profile's field widths."""
    if len(fields) > len(fmt_widths):
        raise ProfileError(f"{len(fields)} fields but the format has {len(fmt_widths)}")
    if sum(f.width for f in fields) > sum(fmt_widths):
        raise ProfileError(f"fields {sum(f.width for f in fields)} bits wide, the format {sum(fmt_widths)}")
    if sum(fmt_widths) > EV_MAX_BYTES * 8:
        raise ProfileError(f"the format is {sum(fmt_widths)} bits, more than {EV_MAX_BYTES * 8}")
    for i, (f, w) in enumerate(zip(fields, fmt_widths)):
        top = (1 << f.width) - 1
        if not 0 < f.width <= 32 or f.width > w:
            raise ProfileError(f"field {i}: width {f.width} is not within 1-{min(32, w)} (its format field's)")
        if f.init_val > top:
            raise ProfileError(f"field {i}: init_val {f.init_val:#x} is wider than {f.width} bits")
        if f.mask & ~top:
            raise ProfileError(f"field {i}: mask {f.mask:#x} has bits outside its {f.width} bits")
        if f.mask and f.max_val > (1 << f.ev_bits) - 1:
            raise ProfileError(f"field {i}: max_val {f.max_val:#x} is wider than its {f.ev_bits} mask bits")
        if f.min_val > f.max_val and f.mask:
            raise ProfileError(f"field {i}: min_val {f.min_val:#x} is above max_val {f.max_val:#x}")


def _overlay(init: int, bits: int, mask: int, width: int) -> int:
    """Lay `bits` over `init` at the mask's set bits, the least significant EV bit at the lowest mask bit."""
    value, k = init, 0
    for i in range(width):
        if mask >> i & 1:
            value = value & ~(1 << i) | (bits >> k & 1) << i
            k += 1
    return value


def expand(ev: bytes, fields: Sequence[EvField], fmt_widths: Sequence[int]) -> bytes:
    """The expanded EV (EV_MAX_BYTES bytes): per field its init_val with the EV's next mask-bit-count bits
    (most significant first) laid over the mask, right-aligned in its format field (zero-filled on the
    left), the fields concatenated; ProfileError if the EV has bits set past those the fields take."""
    check_profile(fields, fmt_widths)
    src = int.from_bytes(ev.ljust(EV_MAX_BYTES, b"\x00")[:EV_MAX_BYTES], "big")
    total = EV_MAX_BYTES * 8
    out, taken, placed = 0, 0, 0
    for f, w in zip(fields, fmt_widths):
        value = f.init_val
        if f.mask:
            n = f.ev_bits
            bits = src >> (total - taken - n) & ((1 << n) - 1)
            value = _overlay(value, bits, f.mask, f.width)
            taken += n
        out |= value << (total - placed - w)
        placed += w
    if src & ((1 << (total - taken)) - 1):
        raise ProfileError(f"the EV has bits set past the {taken} its fields take")
    return out.to_bytes(EV_MAX_BYTES, "big")


def pack_values(values: Sequence[int], fields: Sequence[EvField]) -> bytes:
    """An EV value from one value per generated field (fields with a mask), most significant first."""
    gen = [f for f in fields if f.mask]
    if len(values) != len(gen):
        raise ProfileError(f"{len(values)} values for {len(gen)} generated fields")
    v, n = 0, 0
    for x, f in zip(values, gen):
        v, n = v << f.ev_bits | x, n + f.ev_bits
    return (v << (EV_MAX_BYTES * 8 - n)).to_bytes(EV_MAX_BYTES, "big")


def generate(fields: Sequence[EvField], fmt_widths: Sequence[int], count: int = 0) -> list[bytes]:
    """Generated mode: every combination of the generated fields' values from min_val to max_val (the
    first field varying slowest), as EV values; the first `count` of them (0: all)."""
    check_profile(fields, fmt_widths)
    ranges = [range(f.min_val, f.max_val + 1) for f in fields if f.mask]
    combos = itertools.product(*ranges)
    return [pack_values(c, fields) for c in (itertools.islice(combos, count) if count else combos)]


def srv6_profile(sids: SidPlan, plane: int, dst_leaf: int, spines: int) -> tuple[list[EvField], list[int]]:
    """Our SID plan as an SRv6 EV profile for one plane (the EV's port) and destination leaf: the block
    (32 bits, fixed), the T1 uN (plane fixed, its index 0x001 + spine from the EV: min 1, max `spines`),
    the destination leaf's uN and End.DT6 (fixed), three zero uSIDs; the format a 32-bit locator and six
    16-bit uSIDs. The EV of spine j is the value j + 1 in the field's mask bits."""
    if not 0 < spines <= 0x3FF:
        raise ProfileError(f"{spines} spines is not within 1-1023")
    un_bits = (spines + T1_BASE).bit_length()
    t1 = EvField(USID_BITS, plane << PLANE_SHIFT, T1_BASE, spines, (1 << un_bits) - 1)
    fields = [EvField(32, sids.block), t1, EvField(USID_BITS, sids.t0_usid(plane, dst_leaf)),
              EvField(USID_BITS, sids.dt6_usid(plane))] + [EvField(USID_BITS) for _ in range(MAX_USIDS - 3)]
    return fields, [32] + [USID_BITS] * MAX_USIDS


def spine_ev(spine: int, fields: Sequence[EvField]) -> bytes:
    """The EV value of `spine` in an srv6_profile (explicit mode: the controller's array holds these)."""
    return pack_values([spine + T1_BASE], fields)


def profiles(fabric: Fabric, host: str) -> dict[str, dict[int, dict[str, Any]]]:
    """Per destination and plane, the generated-mode EV profile of `host`'s EVs (srv6_profile) and the EV
    values of its live paths (the explicit mode's array): {dst: {plane: {"fields", "widths", "evs"}}}."""
    topo = fabric.topo
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for dst, evs in host_evs(fabric, host).items():
        for e in evs:
            leaf = next(i for i, t in enumerate(topo.t0s(e.plane)) if t.name == e.dst_leaf)
            fields, widths = srv6_profile(fabric.sids, e.plane, leaf, len(topo.t1s(e.plane)))
            p = out.setdefault(dst, {}).setdefault(e.plane, {"fields": [asdict(f) for f in fields], "widths": widths,
                                                             "evs": []})
            p["evs"].append({"id": e.id, "value": spine_ev(e.spine, fields)[:2].hex(), "carrier": e.carrier})
    return out


def carrier_of(expanded: bytes) -> str:
    """The SRv6 address (the first 16 bytes) of an expanded SRv6 EV, as text."""
    return fmt_v6(int.from_bytes(expanded[:16], "big"))
