"""Which host pairs a failure set cuts off: a fast pure function over positions, and the same
answer from the controller's own failover code (failover.with_failures + unreachable)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from controller.analysis.design import Design, Kind
from controller.model.failures import Failure, HostPortDown, LinkDown, SwitchDown
from controller.model.topology import switch_name


@dataclass
class Down:
    """The components that are down, by position (as the controller's Health holds them):
    links (plane, t0, t1), T1s (plane, t1), T0s (plane, t0), NIC ports (plane, host)."""

    design: Design
    links: set[tuple[int, int, int]] = field(default_factory=set)
    t1: set[tuple[int, int]] = field(default_factory=set)
    t0: set[tuple[int, int]] = field(default_factory=set)
    nics: set[tuple[int, int]] = field(default_factory=set)
    _cut: dict[tuple[int, int], set[int]] = field(default_factory=dict, repr=False)
    _dead_t1: dict[int, set[int]] = field(default_factory=dict, repr=False)

    def add(self, kind: Kind, index: int) -> bool:
        """Take down the component of a kind with this index (see `position`); False if already down."""
        d = self.design
        if kind == "link":
            p, rest = divmod(index, d.t0 * d.t1)
            i, j = divmod(rest, d.t1)
            if (p, i, j) in self.links:
                return False
            self.links.add((p, i, j))
            self._cut.setdefault((p, i), set()).add(j)
        elif kind == "t1":
            pos = divmod(index, d.t1)
            if pos in self.t1:
                return False
            self.t1.add(pos)
            self._dead_t1.setdefault(pos[0], set()).add(pos[1])
        elif kind == "t0":
            pos = divmod(index, d.t0)
            if pos in self.t0:
                return False
            self.t0.add(pos)
        else:
            pos = divmod(index, d.hosts)
            if pos in self.nics:
                return False
            self.nics.add(pos)
        return True

    def remove(self, kind: Kind, index: int) -> None:
        """Bring a component back (a repair)."""
        d = self.design
        if kind == "link":
            p, rest = divmod(index, d.t0 * d.t1)
            i, j = divmod(rest, d.t1)
            self.links.discard((p, i, j))
            cut = self._cut.get((p, i))
            if cut is not None:
                cut.discard(j)
                if not cut:
                    del self._cut[(p, i)]
        elif kind == "t1":
            p, j = divmod(index, d.t1)
            self.t1.discard((p, j))
            dead = self._dead_t1.get(p)
            if dead is not None:
                dead.discard(j)
                if not dead:
                    del self._dead_t1[p]
        elif kind == "t0":
            self.t0.discard(divmod(index, d.t0))
        else:
            self.nics.discard(divmod(index, d.hosts))

    def count(self) -> int:
        return len(self.links) + len(self.t1) + len(self.t0) + len(self.nics)

    # --- the path math -----------------------------------------------------------------------

    def host_up(self, plane: int, host: int) -> bool:
        """The host's NIC port and its T0 are up in this plane."""
        return (plane, host) not in self.nics and (plane, self.design.column(host)) not in self.t0

    def plane_paths(self, plane: int, a: int, b: int) -> int:
        """Live paths between two hosts in a plane: T0 -> T1 -> T0 (one per live T1 both T0s
        reach), or 1 through their shared T0; 0 if cut."""
        if not (self.host_up(plane, a) and self.host_up(plane, b)):
            return 0
        d = self.design
        la, lb = d.column(a), d.column(b)
        if la == lb:
            return 1
        dead = self._dead_t1.get(plane, set()) | self._cut.get((plane, la), set()) | self._cut.get((plane, lb), set())
        return d.t1 - len(dead)

    def connected(self, a: int, b: int) -> bool:
        """Some plane still has a live path between hosts a and b."""
        return any(self.plane_paths(p, a, b) for p in range(self.design.planes))

    def job_cut(self, hosts: Sequence[int] | range) -> bool:
        """Some pair of these hosts has no live path in any plane. Exact, and cheap when few
        components are down: hosts with the same T0 column and the same dead NIC planes behave
        alike, so it checks pairs among at most two of each kind (docs/analysis.md)."""
        return _cut_pair(self, hosts) is not None

    def uplink_capacity_lost(self) -> float:
        """The fraction of T0-T1 link capacity lost: a link carries traffic only if it, its T0
        and its T1 are up."""
        d = self.design
        dead = set(self.links)
        for (p, j) in self.t1:
            dead.update((p, i, j) for i in range(d.t0))
        for (p, i) in self.t0:
            dead.update((p, i, j) for j in range(d.t1))
        return len(dead) / d.count("link")


def _cut_pair(down: Down, hosts: Sequence[int] | range) -> tuple[int, int] | None:
    """A cut pair of `hosts`, or None (see Down.job_cut)."""
    d = down.design
    if len(hosts) < 2:
        return None
    dirty_cols = {i for (_, i) in down.t0} | {i for (_, i) in down._cut}
    nic_dead: dict[int, set[int]] = {}
    for (p, h) in down.nics:
        nic_dead.setdefault(h, set()).add(p)
    lo, hi = (hosts.start, hosts.stop) if isinstance(hosts, range) and hosts.step == 1 else (None, None)
    member = (lambda h: lo <= h < hi) if lo is not None else set(hosts).__contains__
    reps: list[int] = []
    classes: dict[tuple[int, frozenset[int]], int] = {}

    def keep(h: int) -> None:
        key = (d.column(h), frozenset(nic_dead.get(h, ())))
        n = classes.get(key, 0)
        if n < 2:
            classes[key] = n + 1
            reps.append(h)

    # hosts on T0 columns with a failure of their own, and hosts with a dead NIC port
    for col in sorted(dirty_cols):
        for h in range(col * d.hosts_per_t0, (col + 1) * d.hosts_per_t0):
            if member(h):
                keep(h)
    nic_cols: set[int] = set()
    for h in sorted(nic_dead):
        if member(h):
            keep(h)
            nic_cols.add(d.column(h))
    # clean hosts: one beside each NIC-only-affected host, and some on two distinct clean columns
    def clean_on(col: int, skip: int = -1) -> int | None:
        for h in range(col * d.hosts_per_t0, (col + 1) * d.hosts_per_t0):
            if h != skip and member(h) and h not in nic_dead:
                return h
        return None

    for col in sorted(nic_cols - dirty_cols):
        clean = clean_on(col)
        if clean is not None:
            keep(clean)
    clean_cols = 0
    columns = (range(d.column(hosts[0]), d.column(hosts[-1]) + 1) if isinstance(hosts, range)
               else sorted({d.column(h) for h in hosts}))
    for col in columns:
        if clean_cols == 2:
            break
        if col in dirty_cols:
            continue
        clean = clean_on(col)
        if clean is not None:
            reps.append(clean)
            clean_cols += 1
    return _first_cut_pair(down, sorted(set(reps)))


def _first_cut_pair(down: Down, reps: list[int]) -> tuple[int, int] | None:
    """The first cut pair among `reps`, in bitmasks: a host's usable planes, and per pair of T0
    columns the planes where some T1 is live from both."""
    d = down.design
    full = (1 << d.t1) - 1
    dead_t1 = [sum(1 << j for j in down._dead_t1.get(p, ())) for p in range(d.planes)]
    live_cache: dict[int, list[int]] = {}

    def live(col: int) -> list[int]:
        out = live_cache.get(col)
        if out is None:
            out = live_cache[col] = [full & ~dead_t1[p] & ~sum(1 << j for j in down._cut.get((p, col), ()))
                                     for p in range(d.planes)]
        return out

    every = (1 << d.planes) - 1
    t0_dead: dict[int, int] = {}
    for (p, i) in down.t0:
        t0_dead[i] = t0_dead.get(i, 0) | 1 << p
    nic_dead: dict[int, int] = {}
    for (p, h) in down.nics:
        nic_dead[h] = nic_dead.get(h, 0) | 1 << p
    seen: dict[tuple[int, int], list[int]] = {}
    for h in reps:
        col = d.column(h)
        mask = every & ~t0_dead.get(col, 0) & ~nic_dead.get(h, 0)
        hs = seen.setdefault((col, mask), [])
        if len(hs) < 2:
            hs.append(h)
    keys = sorted(seen)
    planes = range(d.planes)
    for x, (c1, m1) in enumerate(keys):
        if len(seen[(c1, m1)]) == 2 and not m1:
            return (seen[(c1, m1)][0], seen[(c1, m1)][1])
        l1 = live(c1)
        for (c2, m2) in keys[x + 1:]:
            both = m1 & m2
            if both and c1 != c2:
                l2 = live(c2)
                both = next((1 for p in planes if both >> p & 1 and l1[p] & l2[p]), 0)
            if not both:
                return (seen[(c1, m1)][0], seen[(c2, m2)][0])
    return None


# --- the controller's answer -----------------------------------------------------------------

def failures(down: Down) -> list[Failure]:
    """The failure set of the controller (failover.LinkDown / SwitchDown / HostPortDown) for these positions,
    on the design's topology (Design.topology)."""
    d = down.design
    out: list[Failure] = [LinkDown(switch_name(p, "t0", i), switch_name(p, "t1", j)) for (p, i, j) in sorted(down.links)]
    out += [SwitchDown(switch_name(p, "t1", j)) for (p, j) in sorted(down.t1)]
    out += [SwitchDown(switch_name(p, "t0", i)) for (p, i) in sorted(down.t0)]
    # topology.build puts host slot k on T0 data port k + 1 (cpu_port None)
    out += [HostPortDown(switch_name(p, "t0", d.column(h)), h % d.hosts_per_t0 + 1) for (p, h) in sorted(down.nics)]
    return out


class ControllerReach:
    """Host-pair reachability as the controller computes it: the fabric of the design's topology
    with these failures (planning.fabric, failover.with_failures), read through failover.unreachable
    (and Health for pairs on one T0, which the T0 switches locally)."""

    def __init__(self, design: Design) -> None:
        from controller import planning

        self.design = design
        self.topo = design.topology()
        self.base = planning.fabric(self.topo, "srv6_spray")

    def cut_pairs(self, down: Down, hosts: Iterable[int]) -> set[tuple[int, int]]:
        """Every pair (a < b) of these hosts with no live path in any plane."""
        from controller import failover

        f = failover.with_failures(self.base, failures(down))
        gone = {(u.plane, u.dst, u.src) for u in failover.unreachable(f)}
        h = f.health
        d, topo = self.design, self.topo
        hosts = sorted(set(hosts))
        out: set[tuple[int, int]] = set()

        def usable(p: int, host: int) -> bool:
            leaf = topo.t0(p, d.column(host))
            return (p, f"h{host}", "*") not in gone and h.slot_up(p, leaf.index, host % d.hosts_per_t0)

        for x, a in enumerate(hosts):
            for b in hosts[x + 1:]:
                if not any(self._plane_ok(p, a, b, gone, usable) for p in range(d.planes)):
                    out.add((a, b))
        return out

    def _plane_ok(self, p: int, a: int, b: int, gone: set[tuple[int, str, str]],
                  usable: Callable[[int, int], bool]) -> bool:
        if not (usable(p, a) and usable(p, b)):
            return False
        la, lb = self.topo.t0(p, self.design.column(a)).name, self.topo.t0(p, self.design.column(b)).name
        if la == lb:
            return True
        return not ({(p, la, "*"), (p, lb, "*"), (p, la, lb), (p, lb, la)} & gone)
