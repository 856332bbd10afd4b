"""Static multi-plane T0 -> T1 -> T0 paths and each switch's desired entities (srv6_spray, eecmp_qp_hash).

A leaf's entities are cut into slices with disjoint keys, so a failure delta recomputes only the
slices it touches: `leaf_local` (ports, SIDs, routes, members, the shared group), `leaf_dest`
(what one destination leaf needs: nothing, the shared spray entries, or an exception group) and
`leaf_pins`. Entities that are the same on many switches are built once (`Shared`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from controller.plan import probes
from controller.model.congestion import TRIM_DSCP  # the DSCP a trimmed packet carries unless Options say otherwise
from controller.plan.entries import (
    ActionProfileGroup,
    ActionProfileMember,
    Entity,
    Exact,
    Lpm,
    SwitchEntities,
    TableEntry,
)
from controller.model.sids import (
    BLOCK_LEN,
    LOCAL_SID_LEN,
    UN_LEN,
    V4_LEAF_LEN,
    V4_PLANE_LEN,
    V6_LEAF_LEN,
    SidPlan,
    fmt_mapped,
    fmt_v6,
)
from controller.model.topology import Switch, Topology, host_mac_prefix, host_mac_suffix

Program = Literal["srv6_spray", "eecmp_qp_hash"]
SPRAY: Program = "srv6_spray"
EECMP: Program = "eecmp_qp_hash"

FLOW, QP, PACKET, PIN = 0, 1, 2, 3  # hash modes (docs/pipeline.md)

# srv6_spray names
HOST_PORT = "IngressPipe.headend.host_port"
SPRAY_DEST = "IngressPipe.headend.spray_dest"
PINNED_PATH = "IngressPipe.headend.pinned_path"
SPRAY_PATHS = "IngressPipe.headend.spray_paths"
SPRAY_SELECTOR = "IngressPipe.headend.spray_selector"
MY_SID = "IngressPipe.endpoint.my_sid"
ROUTES_V6 = "IngressPipe.routing.routes_v6"
SET_HEADEND = "IngressPipe.headend.set_headend"
SET_SPRAY = "IngressPipe.headend.set_spray"
DERIVE_SPRAY = "IngressPipe.headend.derive_spray"
LOCAL_LEAF = "IngressPipe.headend.local_leaf"
NO_PATH = "IngressPipe.headend.no_path"
VIA_SPINE = "IngressPipe.headend.via_spine"
USID_UN = "IngressPipe.endpoint.usid_un"
END_DX6 = "IngressPipe.endpoint.end_dx6"
END_DT6 = "IngressPipe.endpoint.end_dt6"
SET_NEXT_HOP_V6 = "IngressPipe.routing.set_next_hop"
DROP_USID_UNKNOWN = "IngressPipe.routing.drop_usid_unknown"
HOST_POLICY = "IngressPipe.boundary.host_policy"
HOST_FIRST_USID = "IngressPipe.boundary.host_first_usid"
SR_BOUNDARY = "IngressPipe.boundary.sr_boundary"
HOST_SOURCE_ROUTING = "IngressPipe.boundary.host_source_routing"
FIRST_USID_ALLOWED = "IngressPipe.boundary.first_usid_allowed"
# both programs
THRESHOLDS = "FabricEgress.congestion.thresholds"
SET_THRESHOLDS = "FabricEgress.congestion.set_thresholds"
# eecmp_qp_hash names
HASH_POLICY = "IngressPipe.ecmp.hash_policy"
ECMP_ROUTES = "IngressPipe.ecmp.routes"
ECMP_SELECTOR = "IngressPipe.ecmp.ecmp_selector"
SET_HASH_MODE = "IngressPipe.ecmp.set_hash_mode"
SET_PIN = "IngressPipe.ecmp.set_pin"
SET_NEXT_HOP = "IngressPipe.ecmp.set_next_hop"
ECMP_DROP = "IngressPipe.ecmp.drop"

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


def exception_group(dst_leaf: int) -> int:
    """The group id a source leaf uses for a destination leaf whose path set differs from its own."""
    return dst_leaf + 2


@dataclass(frozen=True, slots=True, order=True)
class Path:
    """One static path in a plane: source leaf -> spine -> destination leaf (indices)."""

    plane: int
    src: int
    spine: int
    dst: int

    def usids(self, sids: SidPlan) -> tuple[int, int, int]:
        """T1 uN, destination leaf uN, destination leaf End.DT6."""
        return (sids.t1_usid(self.plane, self.spine), sids.t0_usid(self.plane, self.dst),
                sids.dt6_usid(self.plane))

    def carrier(self, sids: SidPlan) -> int:
        return sids.carrier(self.usids(sids))


def paths(topo: Topology, plane: int, src: int, dst: int) -> Iterator[Path]:
    """Every static path between two distinct leaves of a plane (one per spine)."""
    for spine in range(len(topo.t1s(plane))):
        yield Path(plane, src, spine, dst)


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
    host_source_routing: bool = False  # endpoint mode (issue 10): leaves transit carriers their hosts write
    ecn_qdepth: int = 0
    trim_qdepth: int = 0
    trim_dscp: int = TRIM_DSCP


@dataclass(frozen=True)
class Health:
    """What is down, by position: links (plane, leaf, spine), leaves and spines (plane, index),
    host slots (plane, leaf, slot). A down switch counts as all of its links down."""

    links: frozenset[tuple[int, int, int]] = frozenset()
    leaves: frozenset[tuple[int, int]] = frozenset()
    spines: frozenset[tuple[int, int]] = frozenset()
    slots: frozenset[tuple[int, int, int]] = frozenset()
    _cut: dict[tuple[int, int], frozenset[int]] = field(default_factory=dict, compare=False, repr=False)
    _dead_spines: dict[int, frozenset[int]] = field(default_factory=dict, compare=False, repr=False)
    _dead_slots: dict[tuple[int, int], frozenset[int]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        cut: dict[tuple[int, int], set[int]] = {}
        for p, i, j in self.links:
            cut.setdefault((p, i), set()).add(j)
        self._cut.update((k, frozenset(v)) for k, v in cut.items())
        spines: dict[int, set[int]] = {}
        for p, j in self.spines:
            spines.setdefault(p, set()).add(j)
        self._dead_spines.update((k, frozenset(v)) for k, v in spines.items())
        slots: dict[tuple[int, int], set[int]] = {}
        for p, i, k in self.slots:
            slots.setdefault((p, i), set()).add(k)
        self._dead_slots.update((k, frozenset(v)) for k, v in slots.items())

    def dead_spines(self, plane: int) -> frozenset[int]:
        return self._dead_spines.get(plane, frozenset())

    def dead_slots(self, plane: int, leaf: int) -> frozenset[int]:
        return self._dead_slots.get((plane, leaf), frozenset())

    def cut_leaves(self, plane: int) -> set[int]:
        """Leaves of a plane with a down uplink or down themselves (their path sets are special)."""
        return {i for (p, i) in self._cut if p == plane} | {i for (p, i) in self.leaves if p == plane}

    def link_up(self, plane: int, leaf: int, spine: int) -> bool:
        return ((plane, leaf) not in self.leaves and (plane, spine) not in self.spines
                and spine not in self._cut.get((plane, leaf), ()))

    def slot_up(self, plane: int, leaf: int, slot: int) -> bool:
        return (plane, leaf) not in self.leaves and slot not in self._dead_slots.get((plane, leaf), ())


HEALTHY = Health()


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
        self._groups: dict[tuple[str, int, tuple[int, ...], int], ActionProfileGroup] = {}
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
        """host_port's match on an ingress port (the same ports repeat on every leaf)."""
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

    def group(self, profile: str, group_id: int, members: tuple[int, ...], max_size: int) -> ActionProfileGroup:
        key = (profile, group_id, members, max_size)
        g = self._groups.get(key)
        if g is None:
            g = self._groups[key] = ActionProfileGroup(profile, group_id, members, max_size)
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


@dataclass(frozen=True)
class Fabric:
    """Everything a plan is a function of: topology, address plan, options and health."""

    topo: Topology
    sids: SidPlan = SidPlan()
    options: Options = Options()
    health: Health = HEALTHY
    shared: Shared = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.shared is None:
            object.__setattr__(self, "shared", Shared(self.topo, self.sids, self.options))

    def live(self, plane: int, leaf: int) -> frozenset[int]:
        """The spines a leaf reaches (the spines of its usable uplinks)."""
        h = self.health
        if (plane, leaf) in h.leaves:
            return frozenset()
        full = self.shared.full[plane]
        dead = h._dead_spines.get(plane)
        cut = h._cut.get((plane, leaf))
        if dead:
            full = full - dead
        return full - cut if cut else full

    def base(self, plane: int) -> frozenset[int]:
        """The spine set of a leaf with no failure of its own (all spines that are up)."""
        dead = self.health.dead_spines(plane)
        return self.shared.full[plane] - dead if dead else self.shared.full[plane]

    def path_spines(self, plane: int, src: int, dst: int) -> frozenset[int]:
        """The spines of the live paths src -> dst (empty: unreachable in this plane)."""
        return self.live(plane, src) & self.live(plane, dst)


# --- srv6_spray ------------------------------------------------------------------------------

def spray_leaf_local(f: Fabric, leaf: Switch) -> list[Entity]:
    """host_port, my_sid, routes_v6, the via_spine members and the shared spray group of a leaf."""
    p, i, sids, h = leaf.plane, leaf.index, f.sids, f.health
    out = _spray_uplink_members(f, leaf)
    un = sids.t0_usid(p, i)
    out.append(TableEntry(MY_SID, (("dst_addr", Lpm(fmt_v6(sids.un_prefix(un)), UN_LEN)),), USID_UN))
    out.append(TableEntry(MY_SID, (("dst_addr", Lpm(fmt_v6(sids.local_sid(un, sids.dt6_usid(p))),
                                                     LOCAL_SID_LEN)),), END_DT6))
    if (p, i) not in h.leaves:
        out += _spray_host_entities(f, leaf, un)
    out += _spray_uplink_routes(f, leaf)
    out.append(f.shared.block_drop)
    if f.live(p, i):  # a leaf with no uplink sprays nothing: no aggregate, as before no destination
        out += f.shared.spray_aggregate(p)
        out.append(TableEntry(SPRAY_DEST, f.shared.leaf_match(p, i), LOCAL_LEAF))
    return out + host_policies(f, leaf)


def host_policies(f: Fabric, leaf: Switch) -> list[Entity]:
    """The SR-domain boundary of every host port (whatever its health: a port the plan thinks
    down is still outside the domain), its host's own address, and in endpoint mode the uSIDs
    a host carrier may start with."""
    p, i, sids = leaf.plane, leaf.index, f.sids
    action = HOST_SOURCE_ROUTING if f.options.host_source_routing else SR_BOUNDARY
    out: list[Entity] = [TableEntry(HOST_POLICY, (("ingress_port", Exact(port)),), action,
                                    (("host_addr", sids.host_v6_text(p, i, k)), ("usid_block", sids.block)))
                         for k, port in enumerate(leaf.host_ports)]
    if f.options.host_source_routing:
        out += host_first_usids(f, leaf)
    return out


def _spray_host_entities(f: Fabric, leaf: Switch, un: int) -> list[Entity]:
    """Per host port that is up: host_port (set_headend with its DX6 SID), my_sid End.DX6 and
    the host's /128 route. The hot loop of a plan (a quarter million ports at MRC scale): the
    address and MAC texts are a per-leaf prefix plus a per-slot suffix built once (Shared)."""
    p, i, sids, sh = leaf.plane, leaf.index, f.sids, f.shared
    mac, block, dead, n = leaf.mac, sids.block, f.health.dead_slots(p, i), len(leaf.host_ports)
    sid_prefix, host_prefix = sids.un_text(un), sids.leaf_v6_text(p, i)
    local_sids = [sid_prefix + t for t in sh.dx6_texts(p, n)[:n]]
    hosts = ([sids.host_v6_text(p, i, k) for k in range(n)] if host_prefix is None
             else [host_prefix + t for t in sh.slot_texts(n)[:n]])
    if leaf.host_macs is None:
        mac_prefix = host_mac_prefix(p, i)
        macs = [mac_prefix + t for t in sh.mac_suffixes(n)[:n]]
    else:
        macs = list(leaf.host_macs)
    out: list[Entity] = []
    append = out.append
    for k, port, sid, host, host_mac in zip(range(n), leaf.host_ports, local_sids, hosts, macs):
        if dead and k in dead:
            continue
        hop = (("port", port), ("smac", mac), ("dmac", host_mac))
        append(TableEntry(HOST_PORT, sh.port_match(port), SET_HEADEND, (("src_addr", sid), ("usid_block", block))))
        append(TableEntry(MY_SID, (("dst_addr", Lpm(sid, LOCAL_SID_LEN)),), END_DX6, hop))
        append(TableEntry(ROUTES_V6, (("dst_addr", Lpm(host, 128)),), SET_NEXT_HOP_V6, hop))
    return out


def host_first_usids(f: Fabric, leaf: Switch) -> list[Entity]:
    """Endpoint mode: the uSIDs a host carrier may start with at this leaf, every spine of its plane
    and the leaf itself (the carrier enters the fabric here; a spine that is down drops it as
    USID_NO_MATCH, which the host sees as loss on that EV)."""
    p, sids = leaf.plane, f.sids
    usids = [sids.t1_usid(p, j) for j in range(len(f.topo.t1s(p)))] + [sids.t0_usid(p, leaf.index)]
    return [TableEntry(HOST_FIRST_USID, (("first_usid", Exact(u)),), FIRST_USID_ALLOWED) for u in usids]


# Default entries the controller may change, as the programs declare them: reconcile puts a switch's
# back when the plan no longer sets one (reconcile.with_resets).
DEFAULT_RESETS: tuple[TableEntry, ...] = (
    TableEntry(THRESHOLDS, (), SET_THRESHOLDS, (("ecn_qdepth", 0), ("trim_qdepth", 0), ("trim_dscp", 0)),
               is_default=True),
)


def congestion_thresholds(f: Fabric) -> list[Entity]:
    """The egress thresholds (default entry, both programs), when the Options turn a signal on."""
    o = f.options
    if not (o.ecn_qdepth or o.trim_qdepth):
        return []
    return [TableEntry(THRESHOLDS, (), SET_THRESHOLDS, (("ecn_qdepth", o.ecn_qdepth), ("trim_qdepth", o.trim_qdepth),
                                                        ("trim_dscp", o.trim_dscp)), is_default=True)]


def _spray_uplink_members(f: Fabric, leaf: Switch) -> list[Entity]:
    """The via_spine member of each live uplink and the shared spray group over them."""
    p, sh = leaf.plane, f.shared
    live = f.live(p, leaf.index)
    out: list[Entity] = list(sh.via_spines(p, live))
    if live:
        out.append(sh.group(SPRAY_SELECTOR, SHARED_GROUP, sh.member_ids(live), len(leaf.uplinks)))
    return out


def _spray_uplink_routes(f: Fabric, leaf: Switch) -> list[Entity]:
    """A /48 route to each live spine's uN."""
    p, sh, ports, mac = leaf.plane, f.shared, leaf.uplinks, leaf.mac
    matches, macs = sh.spine_un_matches(p), sh.spine_macs(p)
    return [TableEntry(ROUTES_V6, matches[j], SET_NEXT_HOP_V6, (("port", ports[j]), ("smac", mac), ("dmac", macs[j])))
            for j in sh.sorted_spines(f.live(p, leaf.index))]


def _dest_spines(f: Fabric, leaf: Switch, dst: int) -> tuple[frozenset[int], frozenset[int]]:
    """(the source leaf's spines, the spines of its live paths to dst); both empty for itself."""
    if dst == leaf.index:
        return frozenset(), frozenset()
    live = f.live(leaf.plane, leaf.index)
    return live, live & f.live(leaf.plane, dst)


def spray_leaf_dest(f: Fabric, leaf: Switch, dst: int) -> Sequence[Entity]:
    """A source leaf's entities for one destination leaf beyond its plane aggregate: no_path when
    unreachable, the leaf's own hash mode if it has one, an exception group when its path set is
    smaller than the source's (none for itself, nor from a leaf with no uplink)."""
    p = leaf.plane
    live, both = _dest_spines(f, leaf, dst)
    if not live:
        return ()
    if not both:
        return f.shared.spray_dest(p, dst, None, reachable=False)
    if both == live:
        return f.shared.spray_dest(p, dst, None)
    gid = exception_group(dst)
    group = f.shared.group(SPRAY_SELECTOR, gid, f.shared.member_ids(both), len(leaf.uplinks))
    return (group, *f.shared.spray_dest(p, dst, gid))


def spray_leaf_pins(f: Fabric, leaf: Switch) -> list[Entity]:
    """pinned_path entries of a source leaf whose pinned path is alive."""
    out: list[Entity] = []
    for pin in f.shared.pins.get((leaf.plane, leaf.index), ()):
        if pin.spine in f.path_spines(pin.plane, pin.src, pin.dst) and f.health.slot_up(pin.plane, pin.dst, pin.slot):
            out.append(TableEntry(
                PINNED_PATH,
                (("dst_addr", Exact(fmt_v6(f.sids.host_v6(pin.plane, pin.dst, pin.slot)))), ("dest_qp", Exact(pin.qp))),
                VIA_SPINE, (("spine_usid", f.sids.t1_usid(pin.plane, pin.spine)), ("path_index", pin.spine))))
    return out


def spray_spine(f: Fabric, spine: Switch, only: Collection[int] | None = None) -> list[Entity]:
    """A spine's uN, a /48 route per leaf it reaches, and the block drop (`only`: just the
    routes towards these leaves, if they are reached)."""
    p, j, sids, h = spine.plane, spine.index, f.sids, f.health
    out: list[Entity] = [] if only is not None else [
        TableEntry(MY_SID, (("dst_addr", Lpm(fmt_v6(sids.un_prefix(sids.t1_usid(p, j))), UN_LEN)),), USID_UN)]
    leaves, match, mac = f.topo.t0s(p), f.shared.leaf_un_match, spine.mac
    healthy = not (h.links or h.leaves or h.spines)
    out += [TableEntry(ROUTES_V6, match(p, i), SET_NEXT_HOP_V6, (("port", port), ("smac", mac), ("dmac", leaves[i].mac)))
            for i, port in _downlinks(spine, only) if healthy or h.link_up(p, i, j)]
    if only is None:
        out.append(f.shared.block_drop)
    return out


def _downlinks(spine: Switch, only: Collection[int] | None) -> Iterable[tuple[int, int]]:
    """(leaf, port) of every downlink of a spine, or of those towards `only`, by leaf."""
    return enumerate(spine.downlinks) if only is None else ((i, spine.downlinks[i]) for i in sorted(only))


# --- eecmp_qp_hash ---------------------------------------------------------------------------

def ecmp_leaf_local(f: Fabric, leaf: Switch) -> list[Entity]:
    """Uplink and host members, the uplink group, host routes, the plane route, hash policy."""
    p, i, sids, sh, h = leaf.plane, leaf.index, f.sids, f.shared, f.health
    n_up, mac = len(leaf.uplinks), leaf.mac
    out = _ecmp_uplink_members(f, leaf)
    out.append(sh.drop_member)
    out += _ecmp_uplink_group(f, leaf)
    plane_match = _ecmp_plane_match(f, p)
    dead = h.dead_slots(p, i)
    leaf_down = (p, i) in h.leaves
    for k, port in enumerate(leaf.host_ports):
        if leaf_down or k in dead:
            continue
        mid = n_up + k + 1
        out.append(ActionProfileMember(ECMP_SELECTOR, mid, SET_NEXT_HOP, (
            ("port", port), ("smac", mac), ("dmac", f.topo.host_mac(leaf, k)), ("member_index", n_up + k))))
        out.append(TableEntry(ECMP_ROUTES, (("l3_dst", Lpm(fmt_mapped(sids.host_v4(p, i, k)), 128)),), member_id=mid))
    out.append(sh.ecmp_dest(p, i, None))  # own /23: hosts not up are dropped here, not sent back up
    out.append(TableEntry(HASH_POLICY, plane_match, SET_HASH_MODE, (("mode", f.options.mode),)))
    for plane, dst, mode in f.options.dest_modes:
        if plane == p:
            out.append(TableEntry(HASH_POLICY, (("l3_dst", Lpm(fmt_mapped(sids.leaf_v4(p, dst)),
                                                               MAPPED_LEN + V4_LEAF_LEN)),), SET_HASH_MODE,
                                  (("mode", mode),)))
    for pin in f.options.host_pins:
        if pin.plane == p:
            out.append(TableEntry(HASH_POLICY, (("l3_dst", Lpm(fmt_mapped(sids.host_v4(p, pin.dst, pin.slot)), 128)),),
                                  SET_PIN, (("host_index", pin.host_index),)))
    return out


def _ecmp_plane_match(f: Fabric, plane: int) -> tuple[tuple[str, Lpm], ...]:
    return (("l3_dst", Lpm(fmt_mapped(f.sids.plane_v4(plane)), MAPPED_LEN + V4_PLANE_LEN)),)


def _ecmp_uplink_members(f: Fabric, leaf: Switch) -> list[Entity]:
    """The next-hop member of each live uplink."""
    spines = f.topo.t1s(leaf.plane)
    return [ActionProfileMember(ECMP_SELECTOR, j + 1, SET_NEXT_HOP, (
        ("port", leaf.uplinks[j]), ("smac", leaf.mac), ("dmac", spines[j].mac), ("member_index", j)))
        for j in sorted(f.live(leaf.plane, leaf.index))]


def _ecmp_uplink_group(f: Fabric, leaf: Switch) -> list[Entity]:
    """The shared uplink group and the plane route to it (none when no uplink is live)."""
    live = sorted(f.live(leaf.plane, leaf.index))
    if not live:
        return []
    return [f.shared.group(ECMP_SELECTOR, SHARED_GROUP, tuple(j + 1 for j in live), len(leaf.uplinks)),
            TableEntry(ECMP_ROUTES, _ecmp_plane_match(f, leaf.plane), group_id=SHARED_GROUP)]


def leaf_uplinks(f: Fabric, leaf: Switch) -> list[Entity]:
    """The part of a leaf's own entities that depends on which of its uplinks are live (and,
    for srv6_spray, its pins): all that a spine failing changes on a leaf not failed itself."""
    if f.options.program == SPRAY:
        return _spray_uplink_members(f, leaf) + _spray_uplink_routes(f, leaf) + spray_leaf_pins(f, leaf)
    return _ecmp_uplink_members(f, leaf) + _ecmp_uplink_group(f, leaf)


def ecmp_leaf_dest(f: Fabric, leaf: Switch, dst: int) -> Sequence[Entity]:
    """Nothing while the plane route serves dst; else an exception group and route, or a drop route."""
    p = leaf.plane
    live, both = _dest_spines(f, leaf, dst)
    if both == live:
        return ()
    if not both:
        return (f.shared.ecmp_dest(p, dst, None),)
    gid = exception_group(dst)
    return (f.shared.group(ECMP_SELECTOR, gid, f.shared.member_ids(both), len(leaf.uplinks)),
            f.shared.ecmp_dest(p, dst, gid))


def ecmp_spine(f: Fabric, spine: Switch, only: Collection[int] | None = None) -> list[Entity]:
    """A member and a /23 route per leaf the spine reaches (`only`: towards these leaves)."""
    p, j, h, sids = spine.plane, spine.index, f.health, f.sids
    leaves = f.topo.t0s(p)
    out: list[Entity] = []
    for i, port in _downlinks(spine, only):
        if h.link_up(p, i, j):
            out.append(ActionProfileMember(ECMP_SELECTOR, i + 1, SET_NEXT_HOP, (
                ("port", port), ("smac", spine.mac), ("dmac", leaves[i].mac), ("member_index", i))))
            out.append(TableEntry(ECMP_ROUTES, (("l3_dst", Lpm(fmt_mapped(sids.leaf_v4(p, i)),
                                                               MAPPED_LEN + V4_LEAF_LEN)),), member_id=i + 1))
    return out


# --- whole switches --------------------------------------------------------------------------

def leaf_local(f: Fabric, leaf: Switch) -> list[Entity]:
    """A leaf's own entities, with the probes' punt entries and the congestion thresholds (whatever fails)."""
    if f.options.program == SPRAY:
        own = spray_leaf_local(f, leaf) + spray_leaf_pins(f, leaf)
    else:
        own = ecmp_leaf_local(f, leaf)
    return own + f.shared.punts(leaf) + congestion_thresholds(f)


def leaf_dest(f: Fabric, leaf: Switch, dst: int) -> Sequence[Entity]:
    return spray_leaf_dest(f, leaf, dst) if f.options.program == SPRAY else ecmp_leaf_dest(f, leaf, dst)


def spine_entities(f: Fabric, spine: Switch, only: Collection[int] | None = None) -> list[Entity]:
    """A spine's entities (`only`: just those towards these leaves, without the switch-wide ones: the
    probes' punt entries and the congestion thresholds, the same whatever fails)."""
    own = spray_spine(f, spine, only) if f.options.program == SPRAY else ecmp_spine(f, spine, only)
    return own if only is not None else own + f.shared.punts(spine) + congestion_thresholds(f)


def leaf_dests(f: Fabric, leaf: Switch) -> Iterator[Entity]:
    """The per-destination slices of a leaf. A destination leaf with no failure of its own has
    every up spine, a superset of the source's spines, so the plane aggregate (srv6_spray) or
    the plane route (eecmp) serves it; only cut leaves (and srv6_spray leaves with their own hash
    mode) need leaf_dest."""
    p, i = leaf.plane, leaf.index
    if not f.live(p, i):
        return
    special = f.health.cut_leaves(p) if f.health.links or f.health.leaves else set()
    if f.options.program != SPRAY:
        for d in sorted(special):
            yield from ecmp_leaf_dest(f, leaf, d)
        return
    for d in sorted(special | f.shared.mode_dests.get(p, frozenset())):
        if d != i:
            yield from spray_leaf_dest(f, leaf, d)


def switch_entities(f: Fabric, sw: Switch) -> SwitchEntities:
    """All entities a switch should hold, members first, then groups, then table entries."""
    items: list[Entity] = spine_entities(f, sw) if sw.role == "t1" else [*leaf_local(f, sw), *leaf_dests(f, sw)]
    entries = [e for e in items if type(e) is TableEntry]
    if len(entries) == len(items):
        return SwitchEntities(entries=entries)  # type: ignore[arg-type]
    return SwitchEntities([e for e in items if type(e) is ActionProfileMember],  # type: ignore[misc]
                          [e for e in items if type(e) is ActionProfileGroup], entries)  # type: ignore[misc]
