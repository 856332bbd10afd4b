"""Reachability under failures by position, on spine bitmasks: what a Monte Carlo calls thousands of times.

A leaf's usable spines are a bitmask (bit j: spine j). Paths src -> dst in a plane go through
`live(src) & live(dst)`; a leaf with no failure of its own has every spine that is up, a superset
of any other leaf's, so only pairs of leaves with a failure of their own can be cut from each
other. The cost of one failure set is O(failures^2 / 64) word operations, not O(leaves^2), and
nothing is named or allocated per leaf. `Reach.unreachable()` gives exactly
`failover.unreachable(with_failures(fabric, failures))` (tests/unit/controller/plan/test_reachability.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from controller.routes import Health
from controller.model.topology import Topology

Link = tuple[int, int, int]  # (plane, leaf, spine)
Node = tuple[int, int]  # (plane, index)
Slot = tuple[int, int, int]  # (plane, leaf, host slot)


@dataclass(frozen=True, slots=True)
class PlaneReach:
    """What one plane can no longer reach. `down`: no spine is up, every leaf is cut off.
    `isolated`: leaves with no live uplink (unreachable from every leaf); `cut`: (src, dst) leaf
    pairs, neither isolated, with no common live spine; `dead_slots`: host slots (leaf, slot)
    whose port is down on a leaf that is itself up."""

    plane: int
    down: bool = False
    isolated: tuple[int, ...] = ()
    cut: tuple[tuple[int, int], ...] = ()
    dead_slots: tuple[tuple[int, int], ...] = ()
    _live: dict[int, int] = field(default_factory=dict, repr=False, compare=False)
    _base: int = field(default=0, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Every leaf pair and every host port of the plane is reachable."""
        return not (self.down or self.isolated or self.cut or self.dead_slots)

    def live(self, leaf: int) -> int:
        """The spine bitmask of a leaf (bit j: spine j is usable from it)."""
        return self._live.get(leaf, self._base)

    def leaf_pair_ok(self, src: int, dst: int) -> bool:
        """src can reach dst (another leaf, or itself while it is up) in this plane."""
        if src == dst:
            return not self.down and src not in self.isolated
        return bool(self.live(src) & self.live(dst))

    def path_count(self, src: int, dst: int) -> int:
        """The number of live spine paths src -> dst (0: cut off)."""
        return (self.live(src) & self.live(dst)).bit_count()


class Reach:
    """Reachability of one fabric design by position: planes, spines and leaves per plane.
    Build it once (from a Topology or sizes), then call `plane()`/`unreachable()` per failure set."""

    def __init__(self, spines: Sequence[int], leaves: Sequence[int],
                 leaf_names: Sequence[Sequence[str]] | None = None,
                 host_names: Sequence[Sequence[Sequence[str]]] | None = None,
                 host_ports: Sequence[Sequence[Sequence[int]]] | None = None) -> None:
        if len(spines) != len(leaves):
            raise ValueError("spines and leaves need one count per plane")
        self.planes = len(spines)
        self.spines = tuple(spines)
        self.leaves = tuple(leaves)
        self.full = tuple((1 << n) - 1 for n in spines)
        self._leaf_names = leaf_names
        self._host_names = host_names
        self._host_ports = host_ports

    @classmethod
    def of(cls, topo: Topology) -> Reach:
        """The Reach of a topology (with its names, for `unreachable()`)."""
        ps = range(topo.planes)
        return cls([len(topo.t1s(p)) for p in ps], [len(topo.t0s(p)) for p in ps],
                   [[s.name for s in topo.t0s(p)] for p in ps],
                   [[s.host_names for s in topo.t0s(p)] for p in ps],
                   [[s.host_ports for s in topo.t0s(p)] for p in ps])

    @classmethod
    def regular(cls, planes: int, t1_per_plane: int, t0_per_plane: int) -> Reach:
        """A regular design with no names (positions only): cheap at any scale."""
        return cls([t1_per_plane] * planes, [t0_per_plane] * planes)

    def planes_reach(self, links: Iterable[Link] = (), leaves: Iterable[Node] = (), spines: Iterable[Node] = (),
                     slots: Iterable[Slot] = ()) -> list[PlaneReach]:
        """Per plane, what the failures (by position) make unreachable."""
        cut: list[dict[int, int]] = [{} for _ in range(self.planes)]
        for p, i, j in links:
            d = cut[p]
            d[i] = d.get(i, 0) | 1 << j
        down_leaves: list[set[int]] = [set() for _ in range(self.planes)]
        for p, i in leaves:
            down_leaves[p].add(i)
        dead = [0] * self.planes
        for p, j in spines:
            dead[p] |= 1 << j
        dead_slots: list[set[tuple[int, int]]] = [set() for _ in range(self.planes)]
        for p, i, k in slots:
            dead_slots[p].add((i, k))
        return [self._plane(p, cut[p], down_leaves[p], dead[p], dead_slots[p]) for p in range(self.planes)]

    def _plane(self, p: int, cut: dict[int, int], down: set[int], dead: int, slots: set[tuple[int, int]]) -> PlaneReach:
        base = self.full[p] & ~dead
        if not base:
            return PlaneReach(p, down=True)
        live = {i: base & ~m for i, m in cut.items()}
        for i in down:
            live[i] = 0
        special = sorted(live)
        isolated = tuple(i for i in special if not live[i])
        alive = [(i, live[i]) for i in special if live[i]]
        pairs = tuple(sorted(_disjoint_pairs(alive, base.bit_count()), key=_by_dst))
        dead_slots = tuple(sorted(x for x in slots if x[0] not in down))
        return PlaneReach(p, False, isolated, pairs, dead_slots, live, base)

    def of_health(self, health: Health) -> list[PlaneReach]:
        """planes_reach of a failover/routes Health (failover.health(topo, failures) names them)."""
        return self.planes_reach(health.links, health.leaves, health.spines, health.slots)

    def unreachable(self, links: Iterable[Link] = (), leaves: Iterable[Node] = (), spines: Iterable[Node] = (),
                    slots: Iterable[Slot] = ()) -> list:  # list[failover.Unreachable]
        """The same list, in the same order, as failover.unreachable of the fabric with these failures."""
        from controller.model.failures import Unreachable  # failover imports this module's users, not this module

        if self._leaf_names is None or self._host_names is None or self._host_ports is None:
            raise ValueError("unreachable() needs names: build the Reach with Reach.of(topology)")
        out: list[Unreachable] = []
        for r in self.planes_reach(links, leaves, spines, slots):
            p, names = r.plane, self._leaf_names[r.plane]
            if r.down:
                out.extend(Unreachable(p, n) for n in names)
                continue
            out.extend(Unreachable(p, names[d]) for d in r.isolated)
            out.extend(Unreachable(p, names[d], names[s]) for s, d in r.cut)
            for i, k in r.dead_slots:
                hosts = self._host_names[p][i]
                out.append(Unreachable(p, hosts[k] if k < len(hosts)
                                       else f"{names[i]} port {self._host_ports[p][i][k]}"))
        return out


def _by_dst(pair: tuple[int, int]) -> tuple[int, int]:
    return pair[1], pair[0]


def _disjoint_pairs(alive: list[tuple[int, int]], spines_up: int) -> set[tuple[int, int]]:
    """Ordered pairs of leaves whose spine masks share no bit. Two disjoint subsets of the up
    spines hold at most `spines_up` spines together, so one of them holds at most half: only
    those "light" leaves are checked against the others (none at all under sparse failures)."""
    counts = {i: m.bit_count() for i, m in alive}
    out: set[tuple[int, int]] = set()
    for a, ma in alive:
        ca = counts[a]
        if 2 * ca > spines_up:
            continue
        room = spines_up - ca
        for b, mb in alive:
            if b != a and counts[b] <= room and not ma & mb:
                out.add((a, b))
                out.add((b, a))
    return out
