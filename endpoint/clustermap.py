"""Host loop probes and failure localization (the paper's "Clustermapper"), pure: no sockets, no clock.

Every loop leaves a host's plane NIC and comes back to it, written with the uSID plan as it is (block |
uSIDs | 0, the leaf's End.DT6 last, the inner packet addressed to the host itself):

    nic     host -> T0 -> host                           T0 uN | DT6
    spine   host -> T0 -> T1 j -> T0 -> host             T1j uN | T0 uN | DT6      (the spray carrier to its own leaf)
    cycle   host -> T0 -> T1 j -> T0 b -> T1 k -> T0 -> host
                                                         T1j uN | T0b uN | T1k uN | T0 uN | DT6

A loop that retraces its way crosses every link both ways, so nic and spine loops alone cannot tell a
direction; a cycle crosses T0 -> T1 j upwards and T1 k -> T0 downwards only, so the cycles (one per ordered
spine pair and other leaf) tell which direction of a link fails.

Localization is boolean tomography over directed links: a link any answered loop crossed is good; the
failed links are the smallest explanation of the lost loops, found greedily: the not-good links crossed by
the most lost loops not yet explained, all of them on a tie (a host cannot tell a NIC's two directions, or
a dead spine's up and down links, apart: both are kept). The denylist is the EVs whose path crosses a
failed link.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.model.denylist import Denylist as Denylist, Link as Link  # the merge is the controller's
from controller.model.sids import SidPlan, fmt_v6
from controller.model.topology import Topology


@dataclass(frozen=True, slots=True)
class LoopProbe:
    """One loop: its name, the plane NIC it leaves from, its uSIDs and carrier, the directed links it crosses."""

    name: str
    plane: int
    usids: tuple[int, ...]
    carrier: str
    links: tuple[Link, ...]


def loop_probes(topo: Topology, sids: SidPlan, host: str, *, cycles: bool = True) -> list[LoopProbe]:
    """Every loop of `host`: per plane NIC the nic loop, one spine loop per spine of its plane and (cycles)
    one cycle per ordered pair of spines and other leaf of the plane."""
    if host not in topo.hosts:
        raise ValueError(f"unknown host '{host}'")
    out: list[LoopProbe] = []
    for nic in topo.hosts[host]:
        p = nic.plane
        leaf = topo.t0(p, nic.t0)
        me, dt6 = sids.t0_usid(p, nic.t0), sids.dt6_usid(p)
        up, down = (host, leaf.name), (leaf.name, host)

        def probe(name: str, usids: tuple[int, ...], links: tuple[Link, ...]) -> LoopProbe:
            return LoopProbe(name, p, usids, fmt_v6(sids.carrier(usids)), (up, *links, down))

        out.append(probe(f"{leaf.name} nic", (me, dt6), ()))
        spines = topo.t1s(p)
        for s in spines:
            out.append(probe(f"{leaf.name} via {s.name}", (sids.t1_usid(p, s.index), me, dt6),
                             ((leaf.name, s.name), (s.name, leaf.name))))
        if not cycles:
            continue
        for other in topo.t0s(p):
            if other.index == nic.t0:
                continue
            for j in spines:
                for k in spines:
                    if j.index == k.index:
                        continue
                    usids = (sids.t1_usid(p, j.index), sids.t0_usid(p, other.index), sids.t1_usid(p, k.index), me, dt6)
                    out.append(probe(f"{leaf.name} {j.name}>{other.name}>{k.name}", usids,
                                     ((leaf.name, j.name), (j.name, other.name), (other.name, k.name),
                                      (k.name, leaf.name))))
    return out


@dataclass(frozen=True)
class Localization:
    """What a round of loops says: the failed directed links, the links an answered loop crossed, and the lost loops."""

    failed: frozenset[Link] = frozenset()
    good: frozenset[Link] = frozenset()
    lost: tuple[str, ...] = ()

    def to_json(self, topo: Topology) -> dict[str, Any]:
        return {"failed": [{"from": a, "to": b, "kind": link_kind(topo, (a, b))} for a, b in sorted(self.failed)],
                "lost": list(self.lost)}


def link_kind(topo: Topology, link: Link) -> str:
    """'nic-t0' / 't0-nic' (a host's NIC and its leaf, by direction), 't0-t1' (up) or 't1-t0' (down)."""
    if not topo.has_switch(link[0]):
        return "nic-t0"
    if not topo.has_switch(link[1]):
        return "t0-nic"
    return "t0-t1" if topo.switch(link[0]).role == "t0" else "t1-t0"


def localize(probes: Sequence[LoopProbe], answered: Mapping[str, bool]) -> Localization:
    """The failed links from which loops were answered (True) or lost (False); a loop not in `answered`
    was not sent (its NIC is down, say) and says nothing."""
    good = frozenset(link for p in probes if answered.get(p.name) is True for link in p.links)
    lost = [p for p in probes if answered.get(p.name) is False]
    suspects = {p.name: set(p.links) - good for p in lost}
    failed: set[Link] = set()
    open_ = [p.name for p in lost if suspects[p.name]]
    while open_:
        counts: dict[Link, int] = {}
        for name in open_:
            for link in suspects[name]:
                counts[link] = counts.get(link, 0) + 1
        top = max(counts.values())
        chosen = {link for link, n in counts.items() if n == top}
        failed |= chosen
        open_ = [name for name in open_ if not suspects[name] & chosen]
    return Localization(frozenset(failed), good, tuple(p.name for p in lost))


def ev_links(src_host: str, dst_host: str, ev: Any) -> tuple[Link, ...]:
    """The directed links an EV's packets cross (controller.plan.evs.Ev, or its JSON): source host, its leaf,
    the spine, the destination leaf, the destination host."""
    get = (lambda k: ev[k]) if isinstance(ev, Mapping) else (lambda k: getattr(ev, k))
    src_leaf, spine, dst_leaf = get("src_leaf"), get("spine_name"), get("dst_leaf")
    return ((src_host, src_leaf), (src_leaf, spine), (spine, dst_leaf), (dst_leaf, dst_host))


def denied_evs(src_host: str, evs: Mapping[str, Sequence[Any]], failed: Iterable[Link]) -> dict[str, list[int]]:
    """Per destination, the ids of `src_host`'s EVs whose path crosses a failed link (destinations with none left out)."""
    bad = set(failed)
    out: dict[str, list[int]] = {}
    for dst, dst_evs in evs.items():
        ids = sorted({(e["id"] if isinstance(e, Mapping) else e.id) for e in dst_evs
                      if bad & set(ev_links(src_host, dst, e))})
        if ids:
            out[dst] = ids
    return out


def fabric_denied(export: Mapping[str, Any], failed: Iterable[Link]) -> dict[str, dict[str, list[int]]]:
    """Per host of an EV export ({"hosts": {host: {dst: [ev JSON]}}}), its EVs crossing a failed link: what the
    fabric-wide denylist denies at every endpoint (hosts with none left out)."""
    bad = set(failed)
    out = {h: denied_evs(h, dsts, bad) for h, dsts in export.get("hosts", {}).items()}
    return {h: d for h, d in sorted(out.items()) if d}
