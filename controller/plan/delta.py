"""Deltas: the updates that turn what a switch holds into the plan, in dependency order (pure; no switch)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, Iterable, NamedTuple, TypeGuard, TypeVar

from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Entity, TableEntry, entity_key


class UpdateType(str, Enum):
    """The P4Runtime Update.Type of a write."""

    INSERT = "INSERT"
    MODIFY = "MODIFY"
    DELETE = "DELETE"


class Update(NamedTuple):
    """One write: (type, entity); a plain (\"INSERT\", entity) tuple is accepted wherever an Update is."""

    type: UpdateType
    entity: Entity


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Changes(Generic[T]):
    """What differs between a switch's plan and what it holds, whatever the southbound's unit (entities, routes)."""

    inserts: tuple[T, ...] = ()
    modifies: tuple[T, ...] = ()
    deletes: tuple[T, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.inserts or self.modifies or self.deletes)

    def __len__(self) -> int:
        return len(self.inserts) + len(self.modifies) + len(self.deletes)

    def summary(self) -> str:
        return f"{len(self.inserts)} inserts, {len(self.modifies)} modifies, {len(self.deletes)} deletes"


@dataclass(frozen=True, slots=True)
class Delta(Changes[Entity]):
    """What differs between plan and switch; each tuple sorted by kind (members, groups, entries), then key.

    `unwatch` and `rewatch` only for a stock PI (diff's `pi_workarounds`; patches/pi-watch-port.patch makes
    both unneeded). `unwatch`: groups to modify before the others, as they are with the planned watch ports
    but no watch on the members about to leave: stock PI (f96af95) throws (UNKNOWN "Unexpected error in RPC
    handling") when a MODIFY takes a watched member out of a group (action_prof_mgr.cpp looks up the member
    it has just erased).
    """

    unwatch: tuple[ActionProfileGroup, ...] = ()
    # Stages of group modifies before those: a group whose members on the switch watch nothing while the plan
    # gives them watch ports, one member at a time taken out and put back watched. Stock PI (f96af95) refuses a
    # MODIFY giving an active member a watch port (INTERNAL "error when activating member").
    rewatch: tuple[tuple[ActionProfileGroup, ...], ...] = ()


# Set to 1 where the switches run a stock PI (f96af95 without patches/pi-watch-port.patch): its group
# read-back and its two MODIFY failures above then need the workarounds. The toolchain this project builds
# and tests with carries the patch (docs/toolchain.md).
PI_WORKAROUNDS_VARIABLE = "SRV6_FABRIC_PI_WORKAROUNDS"


def needs_pi_workarounds() -> bool:
    """Whether diffs work around a stock PI's watch-port defects: $SRV6_FABRIC_PI_WORKAROUNDS is 1 (or true, yes, on)."""
    return os.environ.get(PI_WORKAROUNDS_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")


_RANK = {ActionProfileMember: 0, ActionProfileGroup: 1, TableEntry: 2}


def _sortable(x: Any) -> Any:
    """A total order over keys that may mix ints, strings, None and match dataclasses."""
    if x is None:
        return (0,)
    if isinstance(x, (bool, int)):
        return (1, int(x))
    if isinstance(x, str):
        return (2, x)
    if isinstance(x, tuple):
        return (3, tuple(_sortable(i) for i in x))
    if dataclasses.is_dataclass(x):
        return (4, type(x).__name__, tuple(_sortable(getattr(x, f.name)) for f in dataclasses.fields(x)))
    return (5, repr(x))


def sort_key(entity: Entity) -> Any:
    """Deterministic install order: members, groups, table entries; then by key."""
    return (_RANK[type(entity)], _sortable(entity_key(entity)))


def _same(desired: Entity, actual: Entity, stock_pi: bool = False) -> bool:
    """Equal for the switch; a group's max_size 0 in the plan means \"whatever the switch has\". Each
    member's own watch port is read back (patches/pi-watch-port.patch): a group whose members all watch
    one of the planned ports differs. With `stock_pi`, that form is what a stock PI reads back for the
    planned group (pi_read_watch_ports), so no change."""
    if isinstance(desired, ActionProfileGroup) and isinstance(actual, ActionProfileGroup):
        if desired.max_size == 0:
            actual = dataclasses.replace(actual, max_size=0)
        if stock_pi and actual.watch_ports != desired.watch_ports and actual.watch_ports in pi_read_watch_ports(desired):
            actual = dataclasses.replace(actual, watch_ports=desired.watch_ports)
    return desired == actual


def pi_read_watch_ports(group: ActionProfileGroup) -> set[tuple[tuple[int, int], ...]]:
    """The watch ports a stock PI (p4lang/PI up to f96af95 at least) may return for `group` on a read: every member with
    the watch port of the group's member last in the switch's handle order (device_mgr.cpp keeps one WatchPort
    across its loop over the members; patches/pi-watch-port.patch fixes it), when all are watched.
    Which member is last depends on the order the members were written, so any of them."""
    if not group.watch_ports or len(group.watch_ports) != len(group.members):
        return set()
    return {tuple((m, port) for m in group.members) for _, port in group.watch_ports}


def _is_default(entity: Entity) -> TypeGuard[TableEntry]:
    return isinstance(entity, TableEntry) and entity.is_default


def _by_key(entities: Iterable[Entity], side: str) -> dict[tuple, Entity]:
    index: dict[tuple, Entity] = {}
    for e in entities:
        key = entity_key(e)
        if key in index and index[key] != e:
            raise ValueError(f"{side} has two different entities with the same key {key}: {index[key]} and {e}")
        index[key] = e
    return index


def diff(desired: Iterable[Entity], actual: Iterable[Entity], *, pi_workarounds: bool | None = None) -> Delta:
    """The Delta taking `actual` to `desired` (both in the same, canonical, form).

    Default entries are only ever modified: one missing from `actual` is modified, one only in
    `actual` is left alone. A group whose member list changes is a modify. `pi_workarounds` (None:
    needs_pi_workarounds()): for a switch with a stock PI, its group read-back taken as no change and
    Delta.unwatch / Delta.rewatch filled; without, a group's watch ports compare exactly and change in one MODIFY.
    """
    stock_pi = needs_pi_workarounds() if pi_workarounds is None else pi_workarounds
    want, have = _by_key(desired, "the plan"), _by_key(actual, "the switch")
    inserts: list[Entity] = []
    modifies: list[Entity] = []
    unwatch: list[ActionProfileGroup] = []
    rewatch: list[list[ActionProfileGroup]] = []
    for key, entity in want.items():
        current = have.get(key)
        if current is None:
            (modifies if _is_default(entity) else inserts).append(entity)
        elif not _same(entity, current, stock_pi):
            modifies.append(entity)
            if stock_pi and isinstance(entity, ActionProfileGroup) and isinstance(current, ActionProfileGroup):
                steps = _rewatched(entity, current)
                for k, g in enumerate(steps):
                    if k == len(rewatch):
                        rewatch.append([])
                    rewatch[k].append(g)
                if steps:
                    current = steps[-1]
                first = _unwatched(entity, current)
                if first is not None:
                    unwatch.append(first)
    deletes = [e for k, e in have.items() if k not in want and not _is_default(e)]
    return Delta(tuple(sorted(inserts, key=sort_key)), tuple(sorted(modifies, key=sort_key)),
                 tuple(sorted(deletes, key=sort_key)),
                 unwatch=tuple(sorted(unwatch, key=sort_key)),
                 rewatch=tuple(tuple(sorted(stage, key=sort_key)) for stage in rewatch))


def _rewatched(desired: ActionProfileGroup, current: ActionProfileGroup) -> list[ActionProfileGroup]:
    """The groups to write, in turn, before `desired` when `current` watches nothing and members it keeps are
    watched in `desired`: per such member, the group without it, then with it back and watched (members of
    `current`, watch ports of `desired` for those done). Empty when there is nothing to give a watch to."""
    want = dict(desired.watch_ports)
    todo = [m for m in current.members if m in want]
    if current.watch_ports or not todo:
        return []
    out: list[ActionProfileGroup] = []
    done: list[tuple[int, int]] = []
    size = desired.max_size or current.max_size
    for m in todo:
        out.append(ActionProfileGroup(current.profile, current.group_id,
                                      tuple(x for x in current.members if x != m), size, tuple(done)))
        done.append((m, want[m]))
        out.append(ActionProfileGroup(current.profile, current.group_id, current.members, size, tuple(done)))
    return out


def _unwatched(desired: ActionProfileGroup, current: ActionProfileGroup) -> ActionProfileGroup | None:
    """The group to write before `desired` when watched members of `current` leave it: all of `current`'s members,
    the watch ports `desired` gives those that stay, none on those that leave; None when no watched member leaves."""
    leaving = set(current.members) - set(desired.members)
    if not leaving or not any(m in leaving for m, _ in current.watch_ports):
        return None
    members = set(current.members)
    return ActionProfileGroup(desired.profile, desired.group_id, current.members, desired.max_size or current.max_size,
                              tuple((m, port) for m, port in desired.watch_ports if m in members))


def ordered_updates(delta: Delta) -> list[list[Update]]:
    """Update batches to write one after the other: each may need the previous ones done.

    Inserts/modifies of members, then groups (a group gaining watch ports first one member at a time:
    Delta.rewatch; one that loses watched members first without their watch: Delta.unwatch), then entries;
    then deletes of entries, groups, members.
    """
    stages: list[list[Update]] = []
    for kind in (ActionProfileMember, ActionProfileGroup, TableEntry):
        if kind is ActionProfileGroup:
            stages += [[Update(UpdateType.MODIFY, g) for g in stage] for stage in delta.rewatch]
            if delta.unwatch:
                stages.append([Update(UpdateType.MODIFY, g) for g in delta.unwatch])
        stages.append(
            [Update(UpdateType.INSERT, e) for e in delta.inserts if type(e) is kind]
            + [Update(UpdateType.MODIFY, e) for e in delta.modifies if type(e) is kind]
        )
    for kind in (TableEntry, ActionProfileGroup, ActionProfileMember):
        stages.append([Update(UpdateType.DELETE, e) for e in delta.deletes if type(e) is kind])
    return [s for s in stages if s]


def with_resets(want: list[Entity], resets: Iterable[TableEntry]) -> list[Entity]:
    """`want` and each of `resets` (a default entry as the program declares it) whose table has no
    default entry in `want`: what the controller once set there goes back to the program's default
    when the plan stops setting it (turning ECN marking or trimming off resets the switch)."""
    named = {e.table for e in want if _is_default(e)}
    return want + [r for r in resets if r.table not in named]
