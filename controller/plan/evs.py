"""Entropy values (EVs) of a host: one static uSID carrier per plane and spine towards each destination, from the plan's paths."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from controller.routes import Fabric, Path
from controller.model.sids import fmt_v6

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
