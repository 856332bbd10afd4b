"""The operator's names looked up in a topology (switches, a link, a host port, a switch down) and a
failure named back in the same words; an unknown name is an OpError listing the close matches."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from controller.exitcodes import OpError
from controller.model.failures import Failure, HostPortDown, LinkDown, SwitchDown
from controller.model.topology import Switch, Topology


def unknown(kind: str, name: str, known: Sequence[str]) -> OpError:
    """`unknown switch 'x' (known: a, b, ...)`: the close matches first, else the first names."""
    ordered = sorted(known)
    close = sorted(difflib.get_close_matches(name, ordered, n=5, cutoff=0.6))
    shown = close or ordered[:5]
    more = ", ..." if len(ordered) > len(shown) else ""
    listed = f" (known: {', '.join(shown)}{more})" if shown else f" (the topology has no {kind})"
    return OpError(f"unknown {kind} '{name}'{listed}")


def switches(topo: Topology, names: Iterable[str]) -> list[Switch]:
    """The named switches (each once, in the order given); OpError naming the first unknown one."""
    out: dict[str, Switch] = {}
    for name in names:
        if not topo.has_switch(name):
            raise unknown("switch", name, [s.name for s in topo.switches])
        out.setdefault(name, topo.switch(name))
    return list(out.values())


def link(topo: Topology, a: str, b: str) -> LinkDown:
    """The link between a leaf and a spine, named in either order."""
    sa, sb = switches(topo, [a, b]) if a != b else (switches(topo, [a]) * 2)
    if sa.role == sb.role:
        raise OpError(f"{a} and {b} are both {sa.role} switches: a link joins a t0 and a t1")
    leaf, spine = (sa, sb) if sa.role == "t0" else (sb, sa)
    if leaf.plane != spine.plane:
        raise OpError(f"no link {leaf.name} -- {spine.name}: {leaf.name} is in plane {leaf.plane}, "
                      f"{spine.name} in plane {spine.plane}")
    return LinkDown(leaf.name, spine.name)


def _slots(leaf: Switch) -> str:
    items = [f"{k} {h} (port {p})" for k, (h, p) in enumerate(zip(leaf.host_names, leaf.host_ports))]
    return ", ".join(items[:4]) + (f", ... {len(items)} in all" if len(items) > 4 else "")


def host_port(topo: Topology, leaf_name: str, slot: str) -> HostPortDown:
    """A leaf's host port by host slot (0-based position among its hosts) or by host name."""
    (leaf,) = switches(topo, [leaf_name])
    if leaf.role != "t0":
        raise OpError(f"{leaf.name} is a t1: host ports are on t0 switches")
    if not leaf.host_ports:
        raise OpError(f"{leaf.name} has no host ports")
    if slot in leaf.host_names:
        k = leaf.host_names.index(slot)
    else:
        try:
            k = int(slot)
        except ValueError:
            raise OpError(f"{leaf.name} has no host slot or host '{slot}' (slots: {_slots(leaf)})") from None
        if not 0 <= k < len(leaf.host_ports):
            raise OpError(f"{leaf.name} has no host slot {k} (slots: {_slots(leaf)})")
    return HostPortDown(leaf.name, leaf.host_ports[k])


def switch_failure(topo: Topology, name: str) -> SwitchDown:
    (sw,) = switches(topo, [name])
    return SwitchDown(sw.name)


def describe_failure(topo: Topology, f: Failure) -> str:
    """One phrase for a failure: 'link p0-t0-0 -- p0-t1-0', 'switch p0-t1-1', 'host port p0-t0-0 slot 1 (port 2, h1)'."""
    if isinstance(f, LinkDown):
        return f"link {f.t0} -- {f.t1}"
    if isinstance(f, SwitchDown):
        return f"switch {f.name}"
    leaf = topo.switch(f.t0) if topo.has_switch(f.t0) else None
    if leaf is None or f.port not in leaf.host_ports:
        return f"host port {f.t0} port {f.port}"
    k = leaf.host_ports.index(f.port)
    host = f", {leaf.host_names[k]}" if k < len(leaf.host_names) else ""
    return f"host port {f.t0} slot {k} (port {f.port}{host})"
