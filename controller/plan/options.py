"""Plan parts that depend on neither health nor the switch holding them (Shared: built once per fabric), and the plan's options (pins, per-destination modes)."""

from __future__ import annotations

from dataclasses import dataclass

from controller.plan import probes
from controller.model.congestion import TRIM_DSCP  # the DSCP a trimmed packet carries unless Options say otherwise
from controller.plan.entries import (
    ActionProfileGroup,
    ActionProfileMember,
    Entity,
    Exact,
    Lpm,
    TableEntry,
)
from controller.model.sids import (
    BLOCK_LEN,
    UN_LEN,
    V4_LEAF_LEN,
    V6_LEAF_LEN,
    SidPlan,
    fmt_mapped,
    fmt_v6,
)
from controller.model.topology import Switch, Topology, host_mac_suffix
from controller.plan.p4names import DERIVE_SPRAY, DROP_USID_UNKNOWN, ECMP_DROP, ECMP_ROUTES, ECMP_SELECTOR, NO_PATH, PACKET, Program, ROUTES_V6, SPRAY, SPRAY_DEST, SPRAY_PATHS, SPRAY_SELECTOR, VIA_SPINE


SHARED_GROUP = 1  # a source leaf's one spray set / uplink group


DROP_MEMBER = 0xFFFF  # eecmp: the member routes to unreachable destinations point to


MAPPED_LEN = 96  # IPv4 prefixes become ::ffff:a.b.c.d/(96 + len)


LEAF_FIELD_END = 48  # host IPv6 <base 16>:<plane 16>:<leaf 16>: a block of 2^b leaves is a /(48 - b)


def leaf_blocks(leaves: int) -> list[tuple[int, int]]:
    """(first leaf, log2 size) of the aligned power-of-two blocks that exactly cover 0..leaves-1
    (as prefixes of the leaf field they never overlap a leaf's own /64, a longer prefix)."""
    out, start = [], 0
    for bits in range(leaves.bit_length() - 1, -1, -1):
        if leaves >> bits & 1:
            out.append((start, bits))
            start += 1 << bits
    return out


@dataclass(frozen=True, slots=True, order=True)
class Pin:
    """srv6_spray: RoCE traffic to (destination host, QP) from one source leaf takes one spine."""

    plane: int
    src: int
    dst: int
    slot: int
    qp: int
    spine: int


@dataclass(frozen=True, slots=True, order=True)
class HostPin:
    """eecmp: traffic to a destination host uses hash mode PIN with this host index."""

    plane: int
    dst: int
    slot: int
    host_index: int


@dataclass(frozen=True, slots=True)
class Options:
    """What the user chooses: program, default hash mode, per-destination-leaf modes, pins, whether
    hosts may send their own SRv6 (endpoint mode), and the egress queue depths (packets) at which
    switches mark ECN CE and trim RoCEv2 packets (0: off; docs/pipeline.md)."""

    program: Program = SPRAY
    mode: int = PACKET
    dest_modes: tuple[tuple[int, int, int], ...] = ()  # (plane, dst leaf, mode)
    pins: tuple[Pin, ...] = ()
    host_pins: tuple[HostPin, ...] = ()
    host_source_routing: bool = False  # endpoint mode: leaves transit carriers their hosts write
    # leaf uplink group members watch their uplink ports (P4Runtime watch_port: the switch leaves out a member whose
    # carrier is lost). Off unless asked for: stock bmv2 1.15.5 divides by zero when every member of a group is down
    # (patches/bmv2-group-all-members-down.patch), which a leaf losing all its uplinks does (docs/faults.md)
    watch_ports: bool = False
    ecn_qdepth: int = 0
    trim_qdepth: int = 0
    trim_dscp: int = TRIM_DSCP
    # leaves mark CE on their host-facing ports too (the last hop). False: those ports mark none and incast is
    # left to trimming, as MRC does (CE steers load away from a fabric path; the last hop has no other path)
    ecn_host_ports: bool = True


class Shared:
    """Entities that depend on neither health nor the switch holding them, built once and reused."""

    def __init__(self, topo: Topology, sids: SidPlan, options: Options) -> None:
        self.topo, self.sids, self.options = topo, sids, options
        self.full: list[frozenset[int]] = [frozenset(range(len(topo.t1s(p)))) for p in range(topo.planes)]
        self.modes = {(p, d): m for p, d, m in options.dest_modes}
        self.pins: dict[tuple[int, int], list[Pin]] = {}
        for pin in options.pins:
            self.pins.setdefault((pin.plane, pin.src), []).append(pin)
        self.block_drop = TableEntry(ROUTES_V6, (("dst_addr", Lpm(fmt_v6(sids.block_prefix), BLOCK_LEN)),),
                                     DROP_USID_UNKNOWN)
        self.drop_member = ActionProfileMember(ECMP_SELECTOR, DROP_MEMBER, ECMP_DROP)
        self._members: dict[tuple[int, int], ActionProfileMember] = {}
        self._groups: dict[tuple[str, int, tuple[int, ...], tuple[int, ...]], ActionProfileGroup] = {}
        self._dest: dict[tuple[int, int, int], tuple[TableEntry, ...]] = {}
        self._aggregate: dict[int, tuple[TableEntry, ...]] = {}
        self._port_matches: dict[int, tuple[tuple[str, Exact], ...]] = {}
        self._sorted: dict[frozenset[int], tuple[int, ...]] = {}
        self._via: dict[tuple[int, frozenset[int]], tuple[ActionProfileMember, ...]] = {}
        self._un_matches: dict[int, list[tuple[tuple[str, Lpm], ...]]] = {}
        self._spine_macs: dict[int, list[str]] = {}
        self._dx6: dict[int, list[str]] = {}
        self._slot_texts: list[str] = []
        self._mac_suffixes: list[str] = []
        self._leaf_un: dict[tuple[int, int], tuple[tuple[str, Lpm], ...]] = {}
        self.mode_dests: dict[int, frozenset[int]] = {}
        for p, d, _ in options.dest_modes:
            self.mode_dests[p] = self.mode_dests.get(p, frozenset()) | {d}
        self._spine_routes: dict[tuple[int, int], Lpm] = {}
        self._ids: dict[frozenset[int], tuple[int, ...]] = {}
        self._punts: dict[tuple[int, ...], list[TableEntry]] = {}

    def punts(self, sw: Switch) -> list[Entity]:
        """The probe punt entries of a switch (controller.plan.probes); switches with equal fabric ports, and
        hosts or none, share them."""
        key = (*probes.fabric_ports(sw), -1 if probes.probed_host_ports(sw) else 0)
        if key not in self._punts:
            self._punts[key] = probes.punt_entries(sw)
        return list(self._punts[key])

    def port_match(self, port: int) -> tuple[tuple[str, Exact], ...]:
        """host_policy's match on an ingress port (the same ports repeat on every leaf)."""
        m = self._port_matches.get(port)
        if m is None:
            m = self._port_matches[port] = (("ingress_port", Exact(port)),)
        return m

    def dx6_texts(self, plane: int, slots: int) -> list[str]:
        """'<DX6 uSID of slot k>::' for k < slots: the tail of each host port's local SID text."""
        out = self._dx6.get(plane)
        if out is None or len(out) < slots:
            out = self._dx6[plane] = [f"{self.sids.dx6_usid(plane, k):x}::" for k in range(slots)]
        return out

    def slot_texts(self, slots: int) -> list[str]:
        """'::<k + 1>' for k < slots: the tail of each host's address text."""
        if len(self._slot_texts) < slots:
            self._slot_texts = [f"::{k + 1:x}" for k in range(slots)]
        return self._slot_texts

    def mac_suffixes(self, slots: int) -> list[str]:
        """The last two octets of the derived MAC of each host slot k < slots."""
        if len(self._mac_suffixes) < slots:
            self._mac_suffixes = [host_mac_suffix(k) for k in range(slots)]
        return self._mac_suffixes

    def leaf_un_match(self, plane: int, leaf: int) -> tuple[tuple[str, Lpm], ...]:
        """A spine's route match for a leaf's uN /48 (the same on every spine of the plane)."""
        key = (plane, leaf)
        m = self._leaf_un.get(key)
        if m is None:
            m = self._leaf_un[key] = (("dst_addr", Lpm(fmt_v6(self.sids.un_prefix(self.sids.t0_usid(plane, leaf))),
                                                        UN_LEN)),)
        return m

    def via_spine(self, plane: int, spine: int) -> ActionProfileMember:
        key = (plane, spine)
        m = self._members.get(key)
        if m is None:
            m = self._members[key] = ActionProfileMember(
                SPRAY_SELECTOR, spine + 1, VIA_SPINE,
                (("spine_usid", self.sids.t1_usid(plane, spine)), ("path_index", spine)))
        return m

    def sorted_spines(self, spines: frozenset[int]) -> tuple[int, ...]:
        """A spine set in order; cached, sets repeat across leaves (the full set on most)."""
        out = self._sorted.get(spines)
        if out is None:
            out = self._sorted[spines] = tuple(sorted(spines))
        return out

    def via_spines(self, plane: int, spines: frozenset[int]) -> tuple[ActionProfileMember, ...]:
        """The via_spine members of a spine set, by spine."""
        key = (plane, spines)
        out = self._via.get(key)
        if out is None:
            out = self._via[key] = tuple(self.via_spine(plane, j) for j in self.sorted_spines(spines))
        return out

    def spine_un_matches(self, plane: int) -> list[tuple[tuple[str, Lpm], ...]]:
        """Per spine of a plane, a leaf's route match for its uN /48."""
        out = self._un_matches.get(plane)
        if out is None:
            out = self._un_matches[plane] = [(("dst_addr", self.un_match(plane, j)),)
                                             for j in range(len(self.topo.t1s(plane)))]
        return out

    def spine_macs(self, plane: int) -> list[str]:
        out = self._spine_macs.get(plane)
        if out is None:
            out = self._spine_macs[plane] = [s.mac for s in self.topo.t1s(plane)]
        return out

    def member_ids(self, spines: frozenset[int]) -> tuple[int, ...]:
        """The member ids (spine + 1, sorted) of a spine set; cached, sets repeat across leaves."""
        ids = self._ids.get(spines)
        if ids is None:
            ids = self._ids[spines] = tuple(sorted(j + 1 for j in spines))
        return ids

    def group(self, profile: str, group_id: int, members: tuple[int, ...], uplinks: tuple[int, ...]) -> ActionProfileGroup:
        """A leaf's uplink group over `members` (spine j + 1), each member watching its uplink port
        `uplinks[j]` where Options.watch_ports says so, max_size the leaf's uplink count; cached, leaves with the
        same ports share it."""
        key = (profile, group_id, members, uplinks)
        g = self._groups.get(key)
        if g is None:
            watch = tuple((m, uplinks[m - 1]) for m in members) if self.options.watch_ports else ()
            g = self._groups[key] = ActionProfileGroup(profile, group_id, members, len(uplinks), watch)
        return g

    def un_match(self, plane: int, spine: int) -> Lpm:
        key = (plane, spine)
        m = self._spine_routes.get(key)
        if m is None:
            m = self._spine_routes[key] = Lpm(fmt_v6(self.sids.un_prefix(self.sids.t1_usid(plane, spine))), UN_LEN)
        return m

    def leaf_match(self, plane: int, leaf: int) -> tuple[tuple[str, Lpm], ...]:
        """The /64 of a leaf's hosts as a dst_addr match."""
        return (("dst_addr", Lpm(fmt_v6(self.sids.leaf_v6(plane, leaf)), V6_LEAF_LEN)),)

    def derive(self, plane: int, match: tuple[tuple[str, Lpm], ...], mode: int) -> TableEntry:
        """spray_dest: derive the destination leaf's uSIDs from the address (plane's uN base, DT6)."""
        return TableEntry(SPRAY_DEST, match, DERIVE_SPRAY, (
            ("mode", mode), ("t0_usid_base", self.sids.t0_usid(plane, 0)), ("decap_usid", self.sids.dt6_usid(plane))))

    def spray_aggregate(self, plane: int) -> tuple[TableEntry, ...]:
        """spray_dest (derive) and spray_paths (-> group 1) for every leaf of a plane: one pair per
        prefix of the exact cover of leaf numbers 0..L-1 (popcount(L) prefixes; 1 for 512 leaves)."""
        out = self._aggregate.get(plane)
        if out is None:
            entries: list[TableEntry] = []
            for start, bits in leaf_blocks(len(self.topo.t0s(plane))):
                match = (("dst_addr", Lpm(fmt_v6(self.sids.leaf_v6(plane, start)), LEAF_FIELD_END - bits)),)
                entries += (self.derive(plane, match, self.options.mode),
                            TableEntry(SPRAY_PATHS, match, group_id=SHARED_GROUP))
            out = self._aggregate[plane] = tuple(entries)
        return out

    def spray_dest(self, plane: int, dst: int, group_id: int | None, reachable: bool = True) -> tuple[TableEntry, ...]:
        """What a source leaf needs for one destination leaf beyond the aggregate, the same at every
        source: no_path when unreachable; else its own hash mode (derive_spray), if it has one, and
        spray_paths to an exception group (group_id, None: the shared group of the aggregate)."""
        key = (plane, dst, -2 if not reachable else -1 if group_id is None else group_id)
        out = self._dest.get(key)
        if out is None:
            match = self.leaf_match(plane, dst)
            if not reachable:
                out = (TableEntry(SPRAY_DEST, match, NO_PATH),)
            else:
                mode = self.modes.get((plane, dst))
                out = (*(() if mode is None else (self.derive(plane, match, mode),)),
                       *(() if group_id is None else (TableEntry(SPRAY_PATHS, match, group_id=group_id),)))
            self._dest[key] = out
        return out

    def ecmp_dest(self, plane: int, dst: int, group_id: int | None) -> TableEntry:
        """eecmp route to a destination leaf's /23: to an exception group, or to the drop member."""
        key = (plane, dst, -1 if group_id is None else group_id)
        out = self._dest.get(key)
        if out is None:
            match = (("l3_dst", Lpm(fmt_mapped(self.sids.leaf_v4(plane, dst)), MAPPED_LEN + V4_LEAF_LEN)),)
            entry = (TableEntry(ECMP_ROUTES, match, member_id=DROP_MEMBER) if group_id is None
                     else TableEntry(ECMP_ROUTES, match, group_id=group_id))
            out = self._dest[key] = (entry,)
        return out[0]
