"""Static multi-plane T0 -> T1 -> T0 paths and each switch's desired entities (srv6_spray, eecmp_qp_hash).

A leaf's entities are cut into slices with disjoint keys, so a failure delta recomputes only the
slices it touches: `leaf_local` (ports, SIDs, routes, members, the shared group), `leaf_dest`
(what one destination leaf needs: nothing, the shared spray entries, or an exception group) and
`leaf_pins`. Entities that are the same on many switches are built once (`Shared`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

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
    LOCAL_SID_LEN,
    UN_LEN,
    V4_LEAF_LEN,
    V4_PLANE_LEN,
    SidPlan,
    fmt_mapped,
    fmt_v6,
)
from controller.model.topology import Switch, Topology, host_mac_prefix
from controller.plan.p4names import ECMP_ROUTES, ECMP_SELECTOR, END_DT6, END_DX6, FIRST_USID_ALLOWED, HASH_POLICY, HOST_FIRST_USID, HOST_POLICY, HOST_SOURCE_ROUTING, LOCAL_LEAF, MY_SID, PINNED_PATH, ROUTES_V6, SET_HASH_MODE, SET_NEXT_HOP, SET_NEXT_HOP_V6, SET_HOST_PORT_THRESHOLDS, SET_PIN, SET_THRESHOLDS, SPRAY, SPRAY_DEST, SPRAY_SELECTOR, SR_BOUNDARY, THRESHOLDS, USID_UN, USID_UN_NEXT_HOP, VIA_SPINE
from controller.plan.options import MAPPED_LEN, Options, SHARED_GROUP, Shared


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


def spray_leaf_local(f: Fabric, leaf: Switch) -> list[Entity]:
    """host_policy, my_sid, routes_v6, the via_spine members and the shared spray group of a leaf."""
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
    a host carrier may start with. The same entry gives the headend the port's source address (its
    DX6 SID) and turns it on while the port and the leaf are up (`headend` 1; host_port's entry
    before the two tables were one)."""
    p, i, sids = leaf.plane, leaf.index, f.sids
    action = HOST_SOURCE_ROUTING if f.options.host_source_routing else SR_BOUNDARY
    un, block = sids.t0_usid(p, i), sids.block
    dx6 = f.shared.dx6_texts(p, len(leaf.host_ports))
    sid_prefix = sids.un_text(un)
    dead = range(len(leaf.host_ports)) if (p, i) in f.health.leaves else f.health.dead_slots(p, i)
    out: list[Entity] = [TableEntry(HOST_POLICY, f.shared.port_match(port), action,
                                    (("host_addr", sids.host_v6_text(p, i, k)), ("usid_block", block),
                                     ("src_addr", sid_prefix + dx6[k]), ("headend", 0 if dead and k in dead else 1)))
                         for k, port in enumerate(leaf.host_ports)]
    if f.options.host_source_routing:
        out += host_first_usids(f, leaf)
    return out


def _spray_host_entities(f: Fabric, leaf: Switch, un: int) -> list[Entity]:
    """Per host port that is up: my_sid End.DX6 and the host's /128 route (its headend is turned on
    by its host_policy entry). The hot loop of a plan (a quarter million ports at MRC scale): the
    address and MAC texts are a per-leaf prefix plus a per-slot suffix built once (Shared)."""
    p, i, sids, sh = leaf.plane, leaf.index, f.sids, f.shared
    mac, dead, n = leaf.mac, f.health.dead_slots(p, i), len(leaf.host_ports)
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


def congestion_thresholds(f: Fabric, sw: Switch) -> list[Entity]:
    """The egress thresholds (default entry, both programs), when the Options turn a signal on; with
    `ecn_host_ports` off, one entry per host-facing port of a leaf that keeps trimming and marks no CE."""
    o = f.options
    if not (o.ecn_qdepth or o.trim_qdepth):
        return []
    out: list[Entity] = [TableEntry(THRESHOLDS, (), SET_THRESHOLDS, (
        ("ecn_qdepth", o.ecn_qdepth), ("trim_qdepth", o.trim_qdepth), ("trim_dscp", o.trim_dscp)), is_default=True)]
    if not o.ecn_host_ports:
        out += [TableEntry(THRESHOLDS, (("port", Exact(port)),), SET_HOST_PORT_THRESHOLDS, (
            ("trim_qdepth", o.trim_qdepth), ("trim_dscp", o.trim_dscp))) for port in sw.host_ports]
    return out


def _spray_uplink_members(f: Fabric, leaf: Switch) -> list[Entity]:
    """The via_spine member of each live uplink and the shared spray group over them."""
    p, sh = leaf.plane, f.shared
    live = f.live(p, leaf.index)
    out: list[Entity] = list(sh.via_spines(p, live))
    if live:
        out.append(sh.group(SPRAY_SELECTOR, SHARED_GROUP, sh.member_ids(live), leaf.uplinks))
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
    group = f.shared.group(SPRAY_SELECTOR, gid, f.shared.member_ids(both), leaf.uplinks)
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
    """A spine's uN, per leaf it reaches a /48 route and the uN with that next hop (block | our uN |
    the leaf's uN as /64: the transit's one lookup, docs/pipeline.md), and the block drop (`only`:
    just the entries towards these leaves, if they are reached)."""
    p, j, sids, h = spine.plane, spine.index, f.sids, f.health
    own = sids.t1_usid(p, j)
    out: list[Entity] = [] if only is not None else [
        TableEntry(MY_SID, (("dst_addr", Lpm(fmt_v6(sids.un_prefix(own)), UN_LEN)),), USID_UN)]
    leaves, match, mac = f.topo.t0s(p), f.shared.leaf_un_match, spine.mac
    healthy = not (h.links or h.leaves or h.spines)
    for i, port in _downlinks(spine, only):
        if healthy or h.link_up(p, i, j):
            hop = (("port", port), ("smac", mac), ("dmac", leaves[i].mac))
            out.append(TableEntry(ROUTES_V6, match(p, i), SET_NEXT_HOP_V6, hop))
            out.append(TableEntry(MY_SID, (("dst_addr", Lpm(sids.local_sid_text(own, sids.t0_usid(p, i)), LOCAL_SID_LEN)),),
                                  USID_UN_NEXT_HOP, hop))
    if only is None:
        out.append(f.shared.block_drop)
    return out


def _downlinks(spine: Switch, only: Collection[int] | None) -> Iterable[tuple[int, int]]:
    """(leaf, port) of every downlink of a spine, or of those towards `only`, by leaf."""
    return enumerate(spine.downlinks) if only is None else ((i, spine.downlinks[i]) for i in sorted(only))


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
    return [f.shared.group(ECMP_SELECTOR, SHARED_GROUP, tuple(j + 1 for j in live), leaf.uplinks),
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
    return (f.shared.group(ECMP_SELECTOR, gid, f.shared.member_ids(both), leaf.uplinks),
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


def leaf_local(f: Fabric, leaf: Switch) -> list[Entity]:
    """A leaf's own entities, with the probes' punt entries and the congestion thresholds (whatever fails)."""
    if f.options.program == SPRAY:
        own = spray_leaf_local(f, leaf) + spray_leaf_pins(f, leaf)
    else:
        own = ecmp_leaf_local(f, leaf)
    return own + f.shared.punts(leaf) + congestion_thresholds(f, leaf)


def leaf_dest(f: Fabric, leaf: Switch, dst: int) -> Sequence[Entity]:
    return spray_leaf_dest(f, leaf, dst) if f.options.program == SPRAY else ecmp_leaf_dest(f, leaf, dst)


def spine_entities(f: Fabric, spine: Switch, only: Collection[int] | None = None) -> list[Entity]:
    """A spine's entities (`only`: just those towards these leaves, without the switch-wide ones: the
    probes' punt entries and the congestion thresholds, the same whatever fails)."""
    own = spray_spine(f, spine, only) if f.options.program == SPRAY else ecmp_spine(f, spine, only)
    return own if only is not None else own + f.shared.punts(spine) + congestion_thresholds(f, spine)


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
        return SwitchEntities(entries=entries)
    return SwitchEntities([e for e in items if type(e) is ActionProfileMember],
                          [e for e in items if type(e) is ActionProfileGroup], entries)
