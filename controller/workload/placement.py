"""Ranks on hosts: which host of which leaf runs each rank of a job (any hosts, balanced or uneven)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from controller.model.topology import Topology

PLACEMENTS = ("packed", "spread", "uneven")


class PlacementError(ValueError):
    """A placement that cannot be made on this fabric (one line)."""


@dataclass(frozen=True, slots=True)
class Rank:
    """One rank of the job: its host, and the leaf index and host slot of that host (the same in every plane)."""

    rank: int
    host: str
    leaf: int
    slot: int


@dataclass(frozen=True)
class Placement:
    """The ranks of a job in rank order, on a fabric of `planes` planes (a host has one NIC per plane)."""

    ranks: tuple[Rank, ...]
    planes: int = 1

    def __post_init__(self) -> None:
        hosts = [r.host for r in self.ranks]
        if len(set(hosts)) != len(hosts):
            dup = next(h for h in hosts if hosts.count(h) > 1)
            raise PlacementError(f"host {dup} holds two ranks: one rank per host")
        if any(r.rank != i for i, r in enumerate(self.ranks)):
            raise PlacementError("ranks must be numbered 0..n-1 in order")
        if self.planes < 1:
            raise PlacementError(f"planes must be at least 1, got {self.planes}")

    @property
    def size(self) -> int:
        return len(self.ranks)

    @property
    def leaves(self) -> tuple[int, ...]:
        return tuple(r.leaf for r in self.ranks)

    @property
    def slots(self) -> tuple[int, ...]:
        return tuple(r.slot for r in self.ranks)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(r.host for r in self.ranks)


def on_hosts(topo: Topology, hosts: Sequence[str]) -> Placement:
    """Rank i on hosts[i]; every host must be a host of the topology."""
    where = topo.hosts
    ranks: list[Rank] = []
    for i, h in enumerate(hosts):
        nics = where.get(h)
        if not nics:
            raise PlacementError(f"host {h!r} is not in topology {topo.name} (hosts: {_sample(list(where))})")
        ranks.append(Rank(i, h, nics[0].t0, nics[0].slot))
    return Placement(tuple(ranks), topo.planes)


def grid(planes: int, leaves: int, hosts_per_leaf: int, spec: str, n: int) -> Placement:
    """A placement on a regular fabric (topology.build's naming: host k is 'h{k}' on leaf k // hosts_per_leaf,
    slot k % hosts_per_leaf) without building the topology: what the analysis uses at MRC scale.

    spec: 'packed' (ranks fill hosts from h0: whole leaves), 'spread' (rank i on leaf i % leaves, slots
    in turn: balanced over every leaf), 'uneven' (slot 0 of each leaf first, then slot 2, 4...: one host
    of each leaf's pair busy, Meta's fragmented placement), or 'h3,h7,...' (these hosts, in rank order)."""
    total = leaves * hosts_per_leaf
    if spec not in PLACEMENTS:
        names = [s.strip() for s in spec.split(",") if s.strip()]
        ids: list[int] = []
        for name in names:
            if not (name.startswith("h") and name[1:].isdigit() and int(name[1:]) < total):
                raise PlacementError(f"placement host {name!r} is not h0..h{total - 1}")
            ids.append(int(name[1:]))
        if len(ids) < 2:
            raise PlacementError(f"placement {spec!r}: give 'packed', 'spread', 'uneven' or at least two hosts h0,h1,...")
        return Placement(tuple(Rank(i, f"h{k}", k // hosts_per_leaf, k % hosts_per_leaf) for i, k in enumerate(ids)),
                         planes)
    if n < 2:
        raise PlacementError(f"a collective needs at least 2 ranks, got {n}")
    if spec == "uneven":
        order = [(leaf, slot) for slot in range(0, hosts_per_leaf, 2) for leaf in range(leaves)]
    elif spec == "spread":
        order = [(leaf, slot) for slot in range(hosts_per_leaf) for leaf in range(leaves)]
    else:
        order = [(leaf, slot) for leaf in range(leaves) for slot in range(hosts_per_leaf)][:n]
    if n > len(order):
        raise PlacementError(f"placement {spec} has room for {len(order)} ranks on this fabric "
                             f"({leaves} leaves x {hosts_per_leaf} hosts), asked for {n}")
    return Placement(tuple(Rank(i, f"h{leaf * hosts_per_leaf + slot}", leaf, slot)
                           for i, (leaf, slot) in enumerate(order[:n])), planes)


def place(topo: Topology, spec: str, n: int | None = None) -> Placement:
    """`grid`'s placements on a topology: 'packed', 'spread', 'uneven' (n ranks; default: as many as
    fit) or an explicit host list 'h0,h3,...'. The topology's leaves must hold the same number of hosts."""
    counts = {len(s.host_names) for s in topo.t0s(0)}
    if spec not in PLACEMENTS:
        return on_hosts(topo, [s.strip() for s in spec.split(",") if s.strip()])
    if len(counts) != 1:
        raise PlacementError(f"placement {spec} needs leaves with equal host counts; name the hosts instead (h0,h2,...)")
    per = counts.pop()
    leaves = len(topo.t0s(0))
    room = leaves * per if spec != "uneven" else leaves * ((per + 1) // 2)
    grid_placement = grid(topo.planes, leaves, per, spec, room if n is None else n)
    names = [topo.t0(0, r.leaf).host_names[r.slot] for r in grid_placement.ranks]
    return on_hosts(topo, names)


def _sample(names: list[str]) -> str:
    return ", ".join(names[:6]) + (" ..." if len(names) > 6 else "")
