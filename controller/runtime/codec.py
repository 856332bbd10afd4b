"""Encoding between controller.plan.entries values and P4Runtime messages (canonical bytestrings, Entity)."""

from __future__ import annotations

import functools
import ipaddress
import operator
import re
import socket
import weakref
from typing import Callable, TypeVar, cast, overload

from controller.runtime.proto import p4runtime_pb2

from controller.plan.entries import (
    ActionProfileGroup,
    ActionProfileMember,
    CounterValue,
    Entity,
    Exact,
    Lpm,
    Match,
    TableEntry,
    Ternary,
    Value,
)
from controller.runtime.p4info import ActionInfo, ActionProfileInfo, MatchFieldInfo, P4Info, ParamInfo, TableInfo

_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


def _inet(family: int, text: str) -> int | None:
    """An address read by the C parser (fast), or None to leave the text to ipaddress (and its errors)."""
    try:
        return int.from_bytes(socket.inet_pton(family, text), "big")
    except (OSError, ValueError):
        return None


def to_int(value: Value | bytes) -> int:
    """A value as an int: ints as they are, bytes big-endian, strings as MAC, IPv4, IPv6 or int literal."""
    if isinstance(value, bool):
        raise TypeError(f"not a field value: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    if not isinstance(value, str):
        raise TypeError(f"not a field value: {value!r}")
    text = value.strip()
    if _MAC.match(text):
        return int(text.replace(":", ""), 16)
    if ":" in text:
        number = _inet(socket.AF_INET6, text)
        if number is not None:
            return number
        try:
            return int(ipaddress.IPv6Address(text))
        except ValueError:
            pass
    elif text.count(".") == 3:
        number = _inet(socket.AF_INET, text)
        if number is not None:
            return number
        try:
            return int(ipaddress.IPv4Address(text))
        except ValueError:
            pass
    try:
        return int(text, 0)
    except ValueError:
        raise ValueError(f"cannot read {value!r} as a MAC, IPv4, IPv6 address or integer") from None


def checked_int(value: Value | bytes, bitwidth: int, name: str = "value") -> int:
    """A value as an int, checked to fit an unsigned field of `bitwidth` bits (0: unchecked)."""
    number = value if type(value) is int else to_int(value)
    if number < 0:
        raise ValueError(f"{name}: negative value {value!r}")
    if bitwidth and number.bit_length() > bitwidth:
        raise ValueError(f"{name}: value {value!r} does not fit in {bitwidth} bits")
    return number


def encode_value(value: Value | bytes, bitwidth: int, name: str = "value") -> bytes:
    """The canonical P4Runtime bytestring (spec 8.3: big-endian, shortest, zero is b'\\x00')."""
    return int_bytes(checked_int(value, bitwidth, name))


def int_bytes(number: int) -> bytes:
    """The canonical bytestring of a non-negative int already checked against its field's width."""
    return number.to_bytes((number.bit_length() + 7) // 8 or 1, "big")


# int_bytes for the values of an entity canonical() returned: every one is an int there (it read the
# notation), which the entity's Value type cannot say. A cast of the function, not of each value: no
# call added on the encoders' path.
canonical_bytes = cast(Callable[[Value], bytes], int_bytes)


def decode_value(data: bytes) -> int:
    """A P4Runtime bytestring as an int (canonical or zero-padded)."""
    return int.from_bytes(data, "big")


# --- per-P4Info lookups ---------------------------------------------------------------------

_CACHES: dict[int, tuple[weakref.ref, dict]] = {}
_T = TypeVar("_T")


def _forget(key: int, _ref: weakref.ref) -> None:
    """Drop what was derived from a P4Info once it is gone (its id may be reused)."""
    _CACHES.pop(key, None)


def derived(p4info: P4Info, factory: Callable[[], _T]) -> _T:
    """The object factory() made for `p4info` on first use; it lives as long as the P4Info.

    For what encoders derive from a P4Info once instead of per entity: a P4Info's indexes do not
    change after it is built, so neither does anything derived from them.
    """
    key = id(p4info)
    hit = _CACHES.get(key)
    if hit is None or hit[0]() is not p4info:
        hit = _CACHES[key] = (weakref.ref(p4info, functools.partial(_forget, key)), {})
    made = hit[1].get(factory)
    if made is None:
        made = hit[1][factory] = factory()
    return made


class _Lookups:
    """What canonical() looks up for every entity, by the names the entities give; filled on first use.

    A miss asks the P4Info itself, so an unknown name or a refused action raises what it always did.
    """

    def __init__(self) -> None:
        self.tables: dict[str, tuple[TableInfo, dict[str, MatchFieldInfo]]] = {}
        self.table_actions: dict[tuple[int, str, bool], ActionInfo] = {}
        self.member_actions: dict[tuple[int, str], ActionInfo] = {}
        self.params: dict[int, dict[str, ParamInfo]] = {}

    def table(self, p4info: P4Info, name: str) -> tuple[TableInfo, dict[str, MatchFieldInfo]]:
        hit = self.tables.get(name)
        if hit is None:
            info = p4info.table(name)
            hit = self.tables[name] = (info, {f.name: f for f in info.match_fields})
        return hit

    def table_action(self, p4info: P4Info, table: TableInfo, action: str, default: bool) -> ActionInfo:
        key = (table.id, action, default)
        info = self.table_actions.get(key)
        if info is None:
            info = self.table_actions[key] = p4info.table_action(table, action, default)
        return info

    def member_action(self, p4info: P4Info, profile: ActionProfileInfo, action: str) -> ActionInfo:
        """A member's action, checked to be an entry action of every table the profile implements."""
        key = (profile.id, action)
        info = self.member_actions.get(key)
        if info is None:
            info = p4info.action(action)
            for table_id in profile.table_ids:
                p4info.table_action(p4info.table.by_id(table_id), info.name)
            self.member_actions[key] = info
        return info

    def action_params(self, action: ActionInfo) -> dict[str, ParamInfo]:
        hit = self.params.get(action.id)
        if hit is None:
            hit = self.params[action.id] = {p.name: p for p in action.params}
        return hit


# --- canonical form -------------------------------------------------------------------------

_MATCH_KINDS = {"EXACT": Exact, "LPM": Lpm, "TERNARY": Ternary}
_INT32 = (-(1 << 31), (1 << 31) - 1)
_UINT32 = (0, (1 << 32) - 1)
_WATCH_PORT = (1, (1 << 31) - 1)


def scalar(value: object, bounds: tuple[int, int], what: str) -> int:
    """An integer field that no P4Info width covers (priority, member and group ids), checked to its
    protobuf type's range (int32, uint32, ...), as protobuf checks it when a message is built."""
    try:
        number = operator.index(value)  # type: ignore[arg-type]  # any object: a non-integer raises TypeError, told below
    except TypeError:
        raise TypeError(f"{what}: {value!r} is not an integer") from None
    if not bounds[0] <= number <= bounds[1]:
        raise ValueError(f"{what}: {value!r} outside {bounds[0]}..{bounds[1]}")
    return number


def _canonical_match(name: str, match: Match, bitwidth: int, match_type: str) -> Match | None:
    """One match in canonical form, or None for a don't-care (LPM /0, ternary mask 0): P4Runtime omits those.

    A match that is canonical already is returned as it is.
    """
    kind = _MATCH_KINDS.get(match_type)
    if kind is None or not isinstance(match, kind):
        raise ValueError(f"match field {name} is {match_type}, got {type(match).__name__}")
    value = checked_int(match.value, bitwidth, f"match field {name}")
    same = type(match) is kind and value is match.value
    if isinstance(match, Exact):
        return match if same else Exact(value)
    if isinstance(match, Lpm):
        if not 0 <= match.prefix_len <= bitwidth:
            raise ValueError(f"match field {name}: prefix length {match.prefix_len} outside 0..{bitwidth}")
        host_bits = bitwidth - match.prefix_len
        if value & ((1 << host_bits) - 1):
            raise ValueError(
                f"match field {name}: value {match.value!r} has bits set beyond prefix length {match.prefix_len}"
            )
        if not match.prefix_len:
            return None
        return match if same else Lpm(value, match.prefix_len)
    mask = checked_int(match.mask, bitwidth, f"match field {name} mask")
    if value & ~mask:
        raise ValueError(f"match field {name}: value {match.value!r} has bits set outside mask {match.mask!r}")
    if not mask:
        return None
    return match if same and mask is match.mask else Ternary(value, mask)


def _canonical_params(
    action: ActionInfo, params: tuple[tuple[str, Value], ...], lookups: _Lookups
) -> tuple[tuple[str, int], ...]:
    given = dict(params)
    if len(given) != len(params):
        raise ValueError(f"action {action.name}: a parameter is given twice")
    known = lookups.action_params(action)
    for name in given:
        if name not in known:
            action.param(name)  # raises UnknownNameError with the close names
    if len(given) != len(known):
        missing = [p.name for p in action.params if p.name not in given]
        raise ValueError(f"action {action.name}: missing parameter(s) {', '.join(missing)}")
    return tuple(
        (p.name, checked_int(given[p.name], p.bitwidth, f"{action.name} parameter {p.name}"))
        for p in action.params
    )


def _canonical_entry(entry: TableEntry, p4info: P4Info, lookups: _Lookups) -> TableEntry:
    table, fields = lookups.table(p4info, entry.table)
    if not isinstance(entry.is_default, int):  # bool is an int; protobuf takes both for a bool field
        raise TypeError(f"table {table.name}: is_default {entry.is_default!r} is not a bool")
    is_default = bool(entry.is_default)
    given = dict(entry.match)
    if len(given) != len(entry.match):
        raise ValueError(f"table {table.name}: a match field is given twice")
    if entry.is_default and given:
        raise ValueError(f"table {table.name}: a default entry has no match fields")
    for name in given:
        if name not in fields:
            table.match_field(name)  # raises UnknownNameError with the close names
    match: list[tuple[str, Match]] = []
    for f in table.match_fields:
        if f.name in given:
            m = _canonical_match(f.name, given[f.name], f.bitwidth, f.match_type)
            if m is not None:
                match.append((f.name, m))
        elif f.match_type == "EXACT" and not entry.is_default:
            raise ValueError(f"table {table.name}: missing exact match field {f.name}")
    priority = scalar(entry.priority, _INT32, f"table {table.name}: priority")
    if not entry.is_default and table.needs_priority != (priority > 0):
        need = "needs a priority > 0" if table.needs_priority else "takes no priority"
        raise ValueError(f"table {table.name}: an entry {need} (priority {entry.priority})")
    chosen = sum(x is not None for x in (entry.action, entry.member_id, entry.group_id))
    if chosen != 1:
        raise ValueError(f"table {table.name}: an entry names exactly one of action, member_id, group_id")
    action: str | None = None
    params: tuple[tuple[str, int], ...] = ()
    member_id, group_id = entry.member_id, entry.group_id
    if entry.action is not None:
        if table.implementation_id:
            raise ValueError(f"table {table.name} takes members or groups of its action profile, not actions")
        info = lookups.table_action(p4info, table, entry.action, entry.is_default)
        action, params = info.name, _canonical_params(info, entry.params, lookups)
    elif not table.implementation_id:
        raise ValueError(f"table {table.name} has no action profile: name an action, not a member or group")
    elif entry.params:
        raise ValueError(f"table {table.name}: params belong to the member, not the entry")
    elif member_id is not None:
        member_id = scalar(member_id, _UINT32, f"table {table.name}: member_id")
    else:
        group_id = scalar(group_id, _UINT32, f"table {table.name}: group_id")
    return TableEntry(table.name, tuple(match), action, params, member_id, group_id, priority, is_default)


@overload
def canonical(entity: TableEntry, p4info: P4Info) -> TableEntry: ...
@overload
def canonical(entity: ActionProfileMember, p4info: P4Info) -> ActionProfileMember: ...
@overload
def canonical(entity: ActionProfileGroup, p4info: P4Info) -> ActionProfileGroup: ...
@overload
def canonical(entity: Entity, p4info: P4Info) -> Entity: ...
def canonical(entity: Entity, p4info: P4Info) -> Entity:
    """The one form an entity has on both sides of a comparison, checked against the P4Info.

    Full names (not aliases); values as ints; match fields and params in P4Info order; don't-care
    matches (LPM /0, ternary mask 0) left out; group members sorted. decode_entity returns this form.
    Priority, member and group ids (and a group's max_size) are checked to their protobuf types' ranges.
    """
    lookups = derived(p4info, _Lookups)
    if isinstance(entity, TableEntry):
        return _canonical_entry(entity, p4info, lookups)
    if isinstance(entity, ActionProfileMember):
        profile = p4info.action_profile(entity.profile)
        action = lookups.member_action(p4info, profile, entity.action)
        member_id = scalar(entity.member_id, _UINT32, f"member of {profile.name}: member_id")
        return ActionProfileMember(profile.name, member_id, action.name, _canonical_params(action, entity.params, lookups))
    if isinstance(entity, ActionProfileGroup):
        profile = p4info.action_profile(entity.profile)
        if not profile.with_selector:
            raise ValueError(f"action profile {profile.name} has no selector: it has no groups")
        if profile.max_group_size and len(entity.members) > profile.max_group_size:
            raise ValueError(
                f"group {entity.group_id} of {profile.name}: {len(entity.members)} members,"
                f" more than max_group_size {profile.max_group_size}"
            )
        what = f"group {entity.group_id!r} of {profile.name}"
        members = tuple(sorted({scalar(m, _UINT32, f"{what}: member_id") for m in entity.members}))
        return ActionProfileGroup(
            profile.name,
            scalar(entity.group_id, _UINT32, f"{what}: group_id"),
            members,
            scalar(entity.max_size, _INT32, f"{what}: max_size"),
            _canonical_watch(entity.watch_ports, members, what) if entity.watch_ports else (),
        )
    raise TypeError(f"not an entity: {entity!r}")


def _canonical_watch(watch_ports: tuple[tuple[int, int], ...], members: tuple[int, ...],
                     what: str) -> tuple[tuple[int, int], ...]:
    """A group's (member_id, watch port) pairs by member id, each member a member of the group and watched once.

    Ports from 1 to 2**31 - 1: PI keeps a port as an int32 and takes 0 or less for "not watched", silently.
    """
    out: dict[int, int] = {}
    for member_id, port in watch_ports:
        member_id = scalar(member_id, _UINT32, f"{what}: watched member_id")
        if member_id not in members:
            raise ValueError(f"{what}: member {member_id} watches a port but is not in the group")
        if member_id in out:
            raise ValueError(f"{what}: member {member_id} watches two ports")
        out[member_id] = scalar(port, _WATCH_PORT, f"{what}: watch port of member {member_id}")
    return tuple(sorted(out.items()))


# --- Entity messages ------------------------------------------------------------------------

def _fill_action(msg: p4runtime_pb2.Action, action: ActionInfo, params: tuple[tuple[str, Value], ...], lookups: _Lookups) -> None:
    """Fill an Action message in place from canonical (checked) params."""
    msg.action_id = action.id
    known = lookups.action_params(action)
    for name, value in params:
        msg.params.add(param_id=known[name].id, value=canonical_bytes(value))


def _fill_match(msg: p4runtime_pb2.FieldMatch, f: MatchFieldInfo, match: Match) -> None:
    """Fill a FieldMatch message in place from a canonical (checked) match."""
    msg.field_id = f.id
    if isinstance(match, Exact):
        msg.exact.value = canonical_bytes(match.value)
    elif isinstance(match, Lpm):
        msg.lpm.value = canonical_bytes(match.value)
        msg.lpm.prefix_len = match.prefix_len
    else:
        msg.ternary.value = canonical_bytes(match.value)
        msg.ternary.mask = canonical_bytes(match.mask)


def fill_entity(msg: p4runtime_pb2.Entity, entity: Entity, p4info: P4Info) -> None:
    """Fill an (empty) Entity message in place, e.g. an Update's, for an entity (canonicalised, hence checked, first)."""
    entity = canonical(entity, p4info)
    lookups = derived(p4info, _Lookups)
    if isinstance(entity, TableEntry):
        table, fields = lookups.table(p4info, entity.table)
        te = msg.table_entry
        te.table_id = table.id
        for name, m in entity.match:
            _fill_match(te.match.add(), fields[name], m)
        te.priority = entity.priority
        te.is_default_action = entity.is_default
        if entity.action is not None:
            _fill_action(te.action.action, p4info.action(entity.action), entity.params, lookups)
        elif entity.member_id is not None:
            te.action.action_profile_member_id = entity.member_id
        else:
            assert entity.group_id is not None
            te.action.action_profile_group_id = entity.group_id
    elif isinstance(entity, ActionProfileMember):
        m = msg.action_profile_member
        m.action_profile_id = p4info.action_profile(entity.profile).id
        m.member_id = entity.member_id
        _fill_action(m.action, p4info.action(entity.action), entity.params, lookups)
    else:
        g = msg.action_profile_group
        g.action_profile_id = p4info.action_profile(entity.profile).id
        g.group_id = entity.group_id
        g.max_size = entity.max_size
        watch = dict(entity.watch_ports)
        for member_id in entity.members:
            port = watch.get(member_id)
            if port is None:
                g.members.add(member_id=member_id, weight=1)
            else:
                g.members.add(member_id=member_id, weight=1, watch_port=int_bytes(port))


def encode_entity(entity: Entity, p4info: P4Info) -> p4runtime_pb2.Entity:
    """A p4runtime Entity message for an entity (canonicalised, hence checked, first)."""
    msg = p4runtime_pb2.Entity()
    fill_entity(msg, entity, p4info)
    return msg


class _Decoding:
    """What decode_entity looks up per entity, by id, filled on first use: a table's name and its match
    fields' order and names; an action's name and its params' names in P4Info order. A miss asks the
    P4Info itself, so an unknown id raises what it always did."""

    def __init__(self) -> None:
        self.tables: dict[int, tuple[TableInfo, dict[int, tuple[int, str]]]] = {}
        self.actions: dict[int, tuple[str, tuple[tuple[int, str], ...]]] = {}

    def table(self, p4info: P4Info, table_id: int) -> tuple[TableInfo, dict[int, tuple[int, str]]]:
        hit = self.tables.get(table_id)
        if hit is None:
            info = p4info.table.by_id(table_id)
            hit = self.tables[table_id] = (info, {f.id: (i, f.name) for i, f in enumerate(info.match_fields)})
        return hit

    def action(self, p4info: P4Info, action_id: int) -> tuple[str, tuple[tuple[int, str], ...]]:
        hit = self.actions.get(action_id)
        if hit is None:
            info = p4info.action.by_id(action_id)
            hit = self.actions[action_id] = (info.name, tuple((p.id, p.name) for p in info.params))
        return hit


def _decode_action(msg: p4runtime_pb2.Action, p4info: P4Info, decoding: _Decoding) -> tuple[str, tuple[tuple[str, int], ...]]:
    name, params = decoding.action(p4info, msg.action_id)
    values = {p.param_id: int.from_bytes(p.value, "big") for p in msg.params}
    return name, tuple((param, values[pid]) for pid, param in params if pid in values)


def _decode_match(f: p4runtime_pb2.FieldMatch, table: TableInfo, name: str | None) -> tuple[str, Match]:
    if name is None:
        name = table.match_field_by_id(f.field_id).name  # an id the table does not have: raises
    kind = f.WhichOneof("field_match_type")
    if kind == "exact":
        return name, Exact(int.from_bytes(f.exact.value, "big"))
    if kind == "lpm":
        lpm = f.lpm
        return name, Lpm(int.from_bytes(lpm.value, "big"), lpm.prefix_len)
    if kind == "ternary":
        ternary = f.ternary
        return name, Ternary(int.from_bytes(ternary.value, "big"), int.from_bytes(ternary.mask, "big"))
    raise ValueError(f"table {table.name}: {kind} matches are not supported")


def decode_entity(msg: p4runtime_pb2.Entity, p4info: P4Info) -> Entity:
    """The entity a message describes, in canonical form (so it compares equal to canonical(plan))."""
    decoding = derived(p4info, _Decoding)
    kind = msg.WhichOneof("entity")
    if kind == "table_entry":
        te = msg.table_entry
        table, fields = decoding.table(p4info, te.table_id)
        last = (len(fields), None)
        found = sorted(((fields.get(f.field_id, last), f) for f in te.match), key=lambda pair: pair[0][0])
        match = tuple(_decode_match(f, table, name) for (_, name), f in found)
        action, member_id, group_id = None, None, None
        params: tuple[tuple[str, int], ...] = ()
        ta = te.action
        which = ta.WhichOneof("type")
        if which == "action":
            action, params = _decode_action(ta.action, p4info, decoding)
        elif which == "action_profile_member_id":
            member_id = ta.action_profile_member_id
        elif which == "action_profile_group_id":
            group_id = ta.action_profile_group_id
        else:
            raise ValueError(f"table {table.name}: entry without a supported action ({which})")
        return TableEntry(table.name, match, action, params, member_id, group_id, te.priority, te.is_default_action)
    if kind == "action_profile_member":
        m = msg.action_profile_member
        name, params = _decode_action(m.action, p4info, decoding)
        return ActionProfileMember(p4info.action_profile.by_id(m.action_profile_id).name, m.member_id, name, params)
    if kind == "action_profile_group":
        g = msg.action_profile_group
        return ActionProfileGroup(
            p4info.action_profile.by_id(g.action_profile_id).name,
            g.group_id,
            tuple(sorted({m.member_id for m in g.members})),
            g.max_size,
            _decode_watch(g),
        )
    raise ValueError(f"unsupported entity kind {kind}")


def _decode_watch(g: p4runtime_pb2.ActionProfileGroup) -> tuple[tuple[int, int], ...]:
    """The (member_id, port) pairs of a group's watched members: watch_port (bytes), or the deprecated int32 watch."""
    out = []
    for m in g.members:
        kind = m.WhichOneof("watch_kind")
        if kind == "watch_port":
            out.append((m.member_id, decode_value(m.watch_port)))
        elif kind == "watch" and m.watch:
            out.append((m.member_id, m.watch))
    return tuple(sorted(out))


# --- read requests ---------------------------------------------------------------------------

def table_read(p4info: P4Info, table: str | None = None, *, default: bool = False) -> p4runtime_pb2.Entity:
    """A wildcard read of one table's entries (all tables if None), or of its default entry."""
    msg = p4runtime_pb2.Entity()
    msg.table_entry.table_id = p4info.table(table).id if table else 0
    if default:
        if not table:
            raise ValueError("reading a default entry needs a table name")
        msg.table_entry.is_default_action = True
    return msg


def members_read(p4info: P4Info, profile: str) -> p4runtime_pb2.Entity:
    """A wildcard read of an action profile's members."""
    msg = p4runtime_pb2.Entity()
    msg.action_profile_member.action_profile_id = p4info.action_profile(profile).id
    return msg


def groups_read(p4info: P4Info, profile: str) -> p4runtime_pb2.Entity:
    """A wildcard read of an action selector's groups."""
    msg = p4runtime_pb2.Entity()
    msg.action_profile_group.action_profile_id = p4info.action_profile(profile).id
    return msg


def counter_read(p4info: P4Info, counter: str, index: int | None = None) -> p4runtime_pb2.Entity:
    """A read of one counter cell, or of the whole counter array when index is None."""
    info = p4info.counter(counter)
    msg = p4runtime_pb2.Entity()
    msg.counter_entry.counter_id = info.id
    if index is not None:
        if not 0 <= index < info.size:
            raise ValueError(f"counter {info.name}: index {index} outside 0..{info.size - 1}")
        msg.counter_entry.index.index = index
    return msg


def decode_counter(msg: p4runtime_pb2.Entity, p4info: P4Info) -> CounterValue:
    """One counter cell read back."""
    ce = msg.counter_entry
    return CounterValue(p4info.counter.by_id(ce.counter_id).name, ce.index.index, ce.data.packet_count, ce.data.byte_count)
