"""The fabric plan as a value: per-switch entities (lazy or held), counts, diffs and JSON."""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TextIO

from controller.plan.entries import (
    ActionProfileGroup,
    ActionProfileMember,
    Entity,
    Exact,
    Lpm,
    Match,
    TableEntry,
    Ternary,
)
from controller.plan.gcpause import gc_paused
from controller.plan.probes import PUNT, fabric_ports, probed_host_ports
from controller.plan.delta import Delta, diff
from controller.routes import (
    ECMP_ROUTES,
    ECMP_SELECTOR,
    HASH_POLICY,
    HOST_FIRST_USID,
    HOST_POLICY,
    MY_SID,
    PINNED_PATH,
    ROUTES_V6,
    SPRAY,
    SPRAY_DEST,
    SPRAY_SELECTOR,
    THRESHOLDS,
    Fabric,
    spray_leaf_pins,
    switch_entities,
)
from controller.plan.p4names import SPRAY_PATHS
from controller.plan.options import leaf_blocks
from controller.model.topology import Switch

FORMAT = "srv6-fabric-plan/1"


class Plan(Mapping[str, tuple[Entity, ...]]):
    """Switch name -> its desired entities (members, groups, entries). Built from a Fabric, a
    switch's entities are generated when asked for and not kept; from JSON they are held."""

    def __init__(self, fabric: Fabric | None = None, held: Mapping[str, tuple[Entity, ...]] | None = None,
                 names: Iterable[str] | None = None) -> None:
        self.fabric = fabric
        self._held = dict(held) if held is not None else None
        if names is not None:
            self._names = list(names)
        elif fabric is not None:
            self._names = [s.name for s in fabric.topo.switches]
        else:
            self._names = list(self._held or {})

    def only(self, names: Iterable[str]) -> Plan:
        """The same plan restricted to these switches (still lazy when built from a Fabric)."""
        names = list(names)
        if self._held is not None:
            return Plan(held={n: self._held[n] for n in names})
        return Plan(self.fabric, names=names)

    def __getitem__(self, name: str) -> tuple[Entity, ...]:
        if self._held is not None:
            return self._held[name]
        assert self.fabric is not None
        return tuple(switch_entities(self.fabric, self.fabric.topo.switch(name)).all())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return set(self) == set(other) and all(set(self[n]) == set(other[n]) for n in self)

    __hash__ = None  # type: ignore[assignment]  # unhashable: equality compares the entities

    def counts(self) -> dict[str, dict[str, int]]:
        """Switch -> {table or 'profile/members' / 'profile/groups': count}; computed without
        generating entities when the plan comes from a Fabric."""
        if self.fabric is not None:
            return {n: count_switch(self.fabric, self.fabric.topo.switch(n)) for n in self._names}
        return {n: count_entities(self[n]) for n in self}

    def to_json(self, indent: int | None = None) -> str:
        out = io.StringIO()
        self.write_json(out, indent)
        return out.getvalue()

    def write_json(self, out: TextIO, indent: int | None = None) -> None:
        """Write the JSON document switch by switch: one switch's entities at a time are in
        memory (a plan from a Fabric), so a 1,152-switch export costs what one switch costs."""
        nl, pad = ("", "") if indent is None else ("\n", " " * indent)
        sep = ", " if indent is None else ","
        out.write(f'{{{nl}{pad}"format": {json.dumps(FORMAT)}{sep}{nl}{pad}"switches": {{')
        first = True
        with gc_paused():
            for name in self:
                body = json.dumps([entity_to_json(e) for e in self[name]], indent=indent)
                if indent is not None:
                    body = body.replace("\n", "\n" + pad * 2)
                out.write(("" if first else sep) + f"{nl}{pad * 2}{json.dumps(name)}: {body}")
                first = False
        out.write(f"{nl}{pad}}}{nl}}}" if not first else f"}}{nl}}}")

    @classmethod
    def from_json(cls, text: str) -> Plan:
        doc = json.loads(text)
        if doc.get("format") != FORMAT:
            raise ValueError(f"not a plan in format {FORMAT}: {doc.get('format')!r}")
        return cls(held={n: tuple(entity_from_json(e) for e in es) for n, es in doc["switches"].items()})


def plan(fabric: Fabric) -> Plan:
    """The plan of a fabric (lazy: nothing is generated until a switch is read)."""
    return Plan(fabric)


def diff_plans(new: Mapping[str, Iterable[Entity]], old: Mapping[str, Iterable[Entity]]) -> dict[str, Delta]:
    """Per switch, the Delta taking `old` to `new` (switches with no change are left out)."""
    out: dict[str, Delta] = {}
    for name in dict.fromkeys([*old, *new]):
        d = diff(new.get(name, ()), old.get(name, ()))
        if d:
            out[name] = d
    return out


# --- counting --------------------------------------------------------------------------------

def count_key(entity: Entity) -> str:
    """What an entity counts under: its table, or 'profile/members', 'profile/groups'."""
    if isinstance(entity, TableEntry):
        return entity.table
    if isinstance(entity, ActionProfileMember):
        return f"{entity.profile}/members"
    return f"{entity.profile}/groups"


def count_entities(entities: Iterable[Entity]) -> dict[str, int]:
    return dict(Counter(count_key(e) for e in entities))


def _dest_counts(f: Fabric, leaf: Switch) -> tuple[int, int, int]:
    """(destination leaves reachable, of them needing an exception group, unreachable ones)."""
    p, i = leaf.plane, leaf.index
    live = f.live(p, i)
    n = len(f.topo.t0s(p)) - 1
    if not live:
        return 0, 0, n
    others = range(n + 1) if live != f.base(p) else sorted(f.health.cut_leaves(p))
    exc = dead = 0
    for d in others:
        if d == i:
            continue
        both = live & f.live(p, d)
        if not both:
            dead += 1
        elif both != live:
            exc += 1
    return n - dead, exc, dead


def _own_mode_dests(f: Fabric, leaf: Switch) -> int:
    """Reachable destination leaves (not the leaf itself) with a hash mode of their own."""
    p, live = leaf.plane, f.live(leaf.plane, leaf.index)
    return sum(1 for d in f.shared.mode_dests.get(p, ()) if d != leaf.index and live & f.live(p, d))


def count_switch(f: Fabric, sw: Switch) -> dict[str, int]:
    """The entity counts of one switch, from the path math alone (equal to count_entities of it)."""
    p, h = sw.plane, f.health
    spray = f.options.program == SPRAY
    opts = f.options
    thresholds = 1 if opts.ecn_qdepth or opts.trim_qdepth else 0
    if thresholds and not opts.ecn_host_ports:
        thresholds += len(sw.host_ports)  # a spine has none
    punts = {PUNT: len(fabric_ports(sw)) + (1 if probed_host_ports(sw) else 0)}
    if sw.role == "t1":
        up = sum(1 for i in range(len(sw.downlinks)) if h.link_up(p, i, sw.index))
        if spray:
            return _nonzero({MY_SID: 1 + up, ROUTES_V6: up + 1, THRESHOLDS: thresholds, **punts})
        return _nonzero({f"{ECMP_SELECTOR}/members": up, ECMP_ROUTES: up, THRESHOLDS: thresholds, **punts})
    live = len(f.live(p, sw.index))
    slots = 0 if (p, sw.index) in h.leaves else len(sw.host_ports) - len(h.dead_slots(p, sw.index))
    reach, exc, dead = _dest_counts(f, sw)
    has_group = 1 if live else 0
    if spray:
        blocks = len(leaf_blocks(len(f.topo.t0s(p)))) if live else 0
        own_modes = _own_mode_dests(f, sw) if live else 0
        return _nonzero({
            f"{SPRAY_SELECTOR}/members": live, f"{SPRAY_SELECTOR}/groups": has_group + exc,
            MY_SID: 2 + slots, ROUTES_V6: slots + live + 1,
            SPRAY_DEST: blocks + has_group + (dead if live else 0) + own_modes, SPRAY_PATHS: blocks + exc,
            PINNED_PATH: len(spray_leaf_pins(f, sw)),
            HOST_POLICY: len(sw.host_ports), THRESHOLDS: thresholds,
            HOST_FIRST_USID: len(f.topo.t1s(p)) + 1 if opts.host_source_routing else 0, **punts})
    return _nonzero({THRESHOLDS: thresholds,
        f"{ECMP_SELECTOR}/members": live + 1 + slots, f"{ECMP_SELECTOR}/groups": has_group + exc,
        ECMP_ROUTES: has_group + slots + 1 + (exc + dead if live else 0),
        HASH_POLICY: 1 + sum(1 for q, _, _ in opts.dest_modes if q == p) + sum(1 for x in opts.host_pins if x.plane == p),
        **punts})


def _nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


def totals(counts: Mapping[str, Mapping[str, int]], f: Fabric) -> dict[str, dict[str, int]]:
    """Counts summed per switch role ('t0', 't1') and table, plus 'all' per role."""
    out: dict[str, Counter[str]] = {"t0": Counter(), "t1": Counter()}
    for name, c in counts.items():
        out[f.topo.switch(name).role].update(c)
    return {role: {**dict(sorted(c.items())), "all": sum(c.values())} for role, c in out.items()}


# --- JSON ------------------------------------------------------------------------------------

def _match_to_json(m: Match) -> dict[str, Any]:
    if isinstance(m, Exact):
        return {"exact": m.value}
    if isinstance(m, Lpm):
        return {"lpm": [m.value, m.prefix_len]}
    return {"ternary": [m.value, m.mask]}


def _match_from_json(d: Mapping[str, Any]) -> Match:
    if "exact" in d:
        return Exact(d["exact"])
    if "lpm" in d:
        return Lpm(d["lpm"][0], d["lpm"][1])
    return Ternary(d["ternary"][0], d["ternary"][1])


def entity_to_json(e: Entity) -> dict[str, Any]:
    """A JSON object for an entity; `kind` says which (table, member, group)."""
    if isinstance(e, TableEntry):
        d: dict[str, Any] = {"kind": "table", "table": e.table,
                             "match": [[n, _match_to_json(m)] for n, m in e.match]}
        for attr in ("action", "member_id", "group_id"):
            if getattr(e, attr) is not None:
                d[attr] = getattr(e, attr)
        if e.params:
            d["params"] = [list(p) for p in e.params]
        if e.priority:
            d["priority"] = e.priority
        if e.is_default:
            d["is_default"] = True
        return d
    if isinstance(e, ActionProfileMember):
        return {"kind": "member", "profile": e.profile, "member_id": e.member_id, "action": e.action,
                "params": [list(p) for p in e.params]}
    d = {"kind": "group", "profile": e.profile, "group_id": e.group_id, "members": list(e.members),
         "max_size": e.max_size}
    if e.watch_ports:
        d["watch_ports"] = [list(w) for w in e.watch_ports]
    return d


def entity_from_json(d: Mapping[str, Any]) -> Entity:
    params = tuple((str(n), v) for n, v in d.get("params", ()))
    if d["kind"] == "table":
        return TableEntry(d["table"], tuple((n, _match_from_json(m)) for n, m in d["match"]), d.get("action"),
                          params, d.get("member_id"), d.get("group_id"), d.get("priority", 0),
                          d.get("is_default", False))
    if d["kind"] == "member":
        return ActionProfileMember(d["profile"], d["member_id"], d["action"], params)
    if d["kind"] == "group":
        return ActionProfileGroup(d["profile"], d["group_id"], tuple(d["members"]), d.get("max_size", 0),
                                  tuple((int(m), int(p)) for m, p in d.get("watch_ports", ())))
    raise ValueError(f"unknown entity kind {d['kind']!r}")
