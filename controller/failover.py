"""Failures (link, switch, host port): dead paths, unreachable destinations, plan deltas."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

from controller.plan.entries import Entity
from controller.plan.gcpause import gc_paused
from controller.plan.delta import Delta, diff
from controller.routes import (
    SPRAY,
    Fabric,
    Health,
    Path,
    leaf_dest,
    leaf_dests,
    leaf_local,
    leaf_uplinks,
    spine_entities,
    spray_leaf_pins,
)
from controller.model.failures import Failure, FailoverError, LinkDown, SwitchDown, Unreachable
from controller.model.topology import Topology


def health(topo: Topology, failures: Iterable[Failure]) -> Health:
    """The positions that are down, for the path math; FailoverError for a failure naming nothing."""
    links: set[tuple[int, int, int]] = set()
    leaves: set[tuple[int, int]] = set()
    spines: set[tuple[int, int]] = set()
    slots: set[tuple[int, int, int]] = set()
    for f in failures:
        if isinstance(f, LinkDown):
            a, b = _switch(topo, f.t0, "t0"), _switch(topo, f.t1, "t1")
            if a.plane != b.plane:
                raise FailoverError(f"no link {f.t0} -- {f.t1}: planes {a.plane} and {b.plane}")
            links.add((a.plane, a.index, b.index))
        elif isinstance(f, SwitchDown):
            if not topo.has_switch(f.name):
                raise FailoverError(f"unknown switch '{f.name}'")
            s = topo.switch(f.name)
            (leaves if s.role == "t0" else spines).add((s.plane, s.index))
        else:
            a = _switch(topo, f.t0, "t0")
            if f.port not in a.host_ports:
                raise FailoverError(f"port {f.port} of {f.t0} does not face a host")
            slots.add((a.plane, a.index, a.host_ports.index(f.port)))
    return Health(frozenset(links), frozenset(leaves), frozenset(spines), frozenset(slots))


def _switch(topo: Topology, name: str, role: str):  # type: ignore[no-untyped-def]
    if not topo.has_switch(name):
        raise FailoverError(f"unknown switch '{name}'")
    s = topo.switch(name)
    if s.role != role:
        raise FailoverError(f"{name} is a {s.role}, expected a {role}")
    return s


def with_failures(f: Fabric, failures: Iterable[Failure]) -> Fabric:
    """The fabric with exactly these failures (sharing f's prebuilt entities)."""
    return dataclasses.replace(f, health=health(f.topo, failures), shared=f.shared)


def dead_paths(f: Fabric) -> Iterator[Path]:
    """Every static leaf-to-leaf path that a failure has cut."""
    h = f.health
    for p in range(f.topo.planes):
        full, n = f.shared.full[p], len(f.topo.t0s(p))
        everyone = f.base(p) != full
        cut = h.cut_leaves(p)
        for s in range(n):
            for d in (range(n) if everyone or s in cut else sorted(cut)):
                if d != s:
                    for j in sorted(full - f.path_spines(p, s, d)):
                        yield Path(p, s, j, d)


def unreachable(f: Fabric) -> list[Unreachable]:
    """Destinations with no live path in a plane (leaves: per source or from all; hosts on dead ports)."""
    out: list[Unreachable] = []
    h, topo = f.health, f.topo
    for p in range(topo.planes):
        leaves = topo.t0s(p)
        if not f.base(p):
            out.extend(Unreachable(p, leaf.name) for leaf in leaves)
            continue
        cut = sorted(h.cut_leaves(p))
        isolated = {d for d in cut if not f.live(p, d)}
        out.extend(Unreachable(p, leaves[d].name) for d in sorted(isolated))
        for d in cut:
            if d in isolated:
                continue
            for s in cut:
                if s != d and s not in isolated and not f.path_spines(p, s, d):
                    out.append(Unreachable(p, leaves[d].name, leaves[s].name))
        for (q, i, k) in sorted(h.slots):
            if q == p and (p, i) not in h.leaves:
                out.append(Unreachable(p, leaves[i].host_names[k] if k < len(leaves[i].host_names)
                                       else f"{leaves[i].name} port {leaves[i].host_ports[k]}"))
    return out


def _changed_leaves(old: Fabric, new: Fabric, plane: int) -> list[int]:
    """Leaves of a plane whose own entities may differ between two healths, beyond what a
    change of the plane's spines does to every leaf (see delta)."""
    ho, hn = old.health, new.health
    candidates = ho.cut_leaves(plane) | hn.cut_leaves(plane)
    candidates |= {i for (p, i, _) in ho.slots | hn.slots if p == plane}
    return sorted(i for i in candidates
                  if old.live(plane, i) != new.live(plane, i)
                  or ho.dead_slots(plane, i) != hn.dead_slots(plane, i)
                  or ((plane, i) in ho.leaves) != ((plane, i) in hn.leaves))


def delta(old: Fabric, new: Fabric) -> dict[str, Delta]:
    """Per switch, the Delta taking plan(old) to plan(new), computing only what the health
    change touches: changed leaves in full, one destination slice per changed leaf elsewhere in
    the plane, and the spines whose downlinks changed. Equal to plan.diff_plans of whole plans."""
    with gc_paused():  # acyclic values only: the collector would re-walk the whole topology
        return _delta(old, new)


def _delta(old: Fabric, new: Fabric) -> dict[str, Delta]:
    out: dict[str, Delta] = {}
    memo: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[Delta, list[Entity], list[Entity]]] = {}
    topo = new.topo
    for p in range(topo.planes):
        changed = _changed_leaves(old, new, p)
        spines_changed = old.base(p) != new.base(p)
        if not changed and not spines_changed:
            continue
        leaves = topo.t0s(p)
        spines: set[int] = {j for (q, j) in old.health.spines ^ new.health.spines if q == p}
        if spines_changed:
            # A spine failing (or coming back) changes every leaf's uplink entities, but not
            # its host entities, nor its slices towards leaves with no failure of their own
            # (both before and after, they use the shared group). So leaves left with no
            # uplink at all are re-planned in full; the others get their uplink entities and
            # their slices towards the failure-special leaves re-diffed.
            changed = sorted(set(changed) | {i for i in range(len(leaves))
                                             if not old.live(p, i) or not new.live(p, i)})
        changed_set = set(changed)
        towards = sorted(changed_set | old.health.cut_leaves(p) | new.health.cut_leaves(p)) \
            if spines_changed else changed
        for i in changed:
            spines |= old.live(p, i) ^ new.live(p, i)
            if _only_uplinks_changed(old, new, p, i):
                _put(out, leaves[i].name, [*leaf_uplinks(new, leaves[i]), *leaf_dests(new, leaves[i])],
                     [*leaf_uplinks(old, leaves[i]), *leaf_dests(old, leaves[i])])
            else:
                _put(out, leaves[i].name, _leaf_all(new, leaves[i]), _leaf_all(old, leaves[i]))
        by_live: dict[tuple[frozenset[int], int], Delta | None] = {}
        for x in leaves:
            if x.index in changed_set:
                continue
            # With the plane's spines unchanged, x's own spines are too (x is not changed), and
            # its slices towards the changed leaves are a function of them and its uplink count
            # alone (x is not one of those leaves): leaves alike share one diff.
            pinned = new.options.program == SPRAY and bool(new.shared.pins.get((p, x.index)))
            key = (new.live(p, x.index), len(x.uplinks))
            if not spines_changed and not pinned and key in by_live:
                hit = by_live[key]
                if hit:
                    out[x.name] = hit
                continue
            slices_new = [e for d in towards for e in leaf_dest(new, x, d)]
            slices_old = [e for d in towards for e in leaf_dest(old, x, d)]
            if spines_changed:
                spines |= old.live(p, x.index) ^ new.live(p, x.index)
                slices_new += leaf_uplinks(new, x)
                slices_old += leaf_uplinks(old, x)
            elif pinned:
                slices_new += spray_leaf_pins(new, x)
                slices_old += spray_leaf_pins(old, x)
            _put(out, x.name, slices_new, slices_old, None if spines_changed else memo)
            if not spines_changed and not pinned:
                by_live[key] = out.get(x.name)
        for j in sorted(spines):
            spine = topo.t1(p, j)
            # with the plane's spines unchanged, only its links to changed leaves can differ
            only = None if spines_changed else [i for i in changed if (j in old.live(p, i)) != (j in new.live(p, i))]
            _put(out, spine.name, spine_entities(new, spine, only), spine_entities(old, spine, only))
    return out


def _only_uplinks_changed(old: Fabric, new: Fabric, plane: int, leaf: int) -> bool:
    """The leaf is up with some live uplink before and after, with the same host ports up: of its
    own entities only those of leaf_uplinks (and its destination slices) can differ."""
    ho, hn = old.health, new.health
    return (bool(old.live(plane, leaf)) and bool(new.live(plane, leaf))
            and ho.dead_slots(plane, leaf) == hn.dead_slots(plane, leaf)
            and (plane, leaf) not in ho.leaves and (plane, leaf) not in hn.leaves)


def _leaf_all(f: Fabric, leaf) -> list[Entity]:  # type: ignore[no-untyped-def]
    return [*leaf_local(f, leaf), *leaf_dests(f, leaf)]


def _put(out: dict[str, Delta], name: str, new: list[Entity], old: list[Entity],
         memo: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[Delta, list[Entity], list[Entity]]] | None = None,
         ) -> None:
    """Record diff(new, old) for a switch. Slices built from shared objects repeat across the
    leaves of a plane: `memo` reuses their diff (keyed by object ids; it holds the objects)."""
    if new == old:
        return
    if memo is None:
        d = diff(new, old)
    else:
        key = (tuple(map(id, new)), tuple(map(id, old)))
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = (diff(new, old), new, old)
        d = hit[0]
    if d:
        out[name] = d

