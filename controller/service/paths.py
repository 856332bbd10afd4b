"""Which path each cell of a headend's `path_packets` counter counts: labels read from the plan's path actions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.plan.entries import ActionProfileMember, Entity, TableEntry
from controller.model.sids import UN_LEN, SidError, SidPlan, fmt_v6
from controller.model.topology import Topology

PATH_COUNTER = "IngressPipe.headend.path_packets"  # srv6_spray.p4: indexed by the path action's path_index
_PATH_ACTIONS = {f"IngressPipe.headend.{a}" for a in ("via_spine", "encap_carrier", "encap_srh2", "encap_srh3")}
_CARRIERS = ("carrier", "carrier0", "carrier1", "carrier2")


@dataclass(frozen=True, order=True)
class PathLabel:
    """One path of a source leaf: its plane, the spine it crosses and its segment list as text. A
    `via_spine` member serves every destination, so its segment list is the spine's uN /48 followed
    by '+dst' (the destination's uN and decap uSID that spray_dest appends)."""

    plane: int
    spine: str
    segments: str


def path_labels(topo: Topology, sids: SidPlan, plan: Mapping[str, Sequence[Entity]]) -> dict[str, dict[int, PathLabel]]:
    """Per source leaf, path_index -> its label, for the path actions (selector members, pinned paths)
    the plan gives it. An index two actions share with different labels keeps the first (sorted)."""
    spines = {sids.t1_usid(s.plane, s.index): s.name for s in topo.switches if s.role == "t1"}
    out: dict[str, dict[int, PathLabel]] = {}
    for name, entities in plan.items():
        sw = topo.switch(name)
        if sw.role != "t0":
            continue
        labels: dict[int, PathLabel] = {}
        for e in entities:
            if not isinstance(e, (ActionProfileMember, TableEntry)) or e.action not in _PATH_ACTIONS:
                continue
            params = dict(e.params)
            index = params.get("path_index")
            if not isinstance(index, int):
                continue
            label = _label(sw.plane, params, sids, spines)
            if label is not None:
                labels.setdefault(index, label)
        if labels:
            out[name] = dict(sorted(labels.items()))
    return out


def _label(plane: int, params: dict[str, object], sids: SidPlan, spines: Mapping[int, str]) -> PathLabel | None:
    if "spine_usid" in params:
        u = int(params["spine_usid"])  # type: ignore[arg-type]
        return PathLabel(plane, spines.get(u, f"uSID {u:#06x}"), f"{fmt_v6(sids.un_prefix(u))}/{UN_LEN}+dst")
    carriers = [params[k] for k in _CARRIERS if k in params]
    if not carriers:
        return None
    texts = [c if isinstance(c, str) else fmt_v6(int(c)) for c in carriers]  # type: ignore[call-overload]
    try:
        first = sids.parse(texts[0])[0]
    except (SidError, IndexError):
        first = -1
    return PathLabel(plane, spines.get(first, "none"), ",".join(texts))
