"""Encoding between controller.entries values and P4Runtime messages (canonical bytestrings, Entity)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import replace

from p4.v1 import p4runtime_pb2

from controller.entries import (
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
from controller.p4info import ActionInfo, P4Info, ParamInfo, TableInfo

_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


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
        try:
            return int(ipaddress.IPv6Address(text))
        except ValueError:
            pass
    elif text.count(".") == 3:
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
    number = to_int(value)
    if number < 0:
        raise ValueError(f"{name}: negative value {value!r}")
    if bitwidth and number.bit_length() > bitwidth:
        raise ValueError(f"{name}: value {value!r} does not fit in {bitwidth} bits")
    return number


def encode_value(value: Value | bytes, bitwidth: int, name: str = "value") -> bytes:
    """The canonical P4Runtime bytestring (spec 8.3: big-endian, shortest, zero is b'\\x00')."""
    number = checked_int(value, bitwidth, name)
    return number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")


def decode_value(data: bytes) -> int:
    """A P4Runtime bytestring as an int (canonical or zero-padded)."""
    return int.from_bytes(data, "big")


# --- canonical form -------------------------------------------------------------------------

def _canonical_match(name: str, match: Match, bitwidth: int, match_type: str) -> Match | None:
    """One match in canonical form, or None for a don't-care (LPM /0, ternary mask 0): P4Runtime omits those."""
    kind = {"EXACT": Exact, "LPM": Lpm, "TERNARY": Ternary}.get(match_type)
    if kind is None or not isinstance(match, kind):
        raise ValueError(f"match field {name} is {match_type}, got {type(match).__name__}")
    value = checked_int(match.value, bitwidth, f"match field {name}")
    if isinstance(match, Exact):
        return Exact(value)
    if isinstance(match, Lpm):
        if not 0 <= match.prefix_len <= bitwidth:
            raise ValueError(f"match field {name}: prefix length {match.prefix_len} outside 0..{bitwidth}")
        host_bits = bitwidth - match.prefix_len
        if value & ((1 << host_bits) - 1):
            raise ValueError(
                f"match field {name}: value {match.value!r} has bits set beyond prefix length {match.prefix_len}"
            )
        return Lpm(value, match.prefix_len) if match.prefix_len else None
    mask = checked_int(match.mask, bitwidth, f"match field {name} mask")
    if value & ~mask:
        raise ValueError(f"match field {name}: value {match.value!r} has bits set outside mask {match.mask!r}")
    return Ternary(value, mask) if mask else None


def _canonical_params(action: ActionInfo, params: tuple[tuple[str, Value], ...]) -> tuple[tuple[str, int], ...]:
    given = dict(params)
    if len(given) != len(params):
        raise ValueError(f"action {action.name}: a parameter is given twice")
    for name in given:
        action.param(name)
    missing = [p.name for p in action.params if p.name not in given]
    if missing:
        raise ValueError(f"action {action.name}: missing parameter(s) {', '.join(missing)}")
    return tuple(
        (p.name, checked_int(given[p.name], p.bitwidth, f"{action.name} parameter {p.name}"))
        for p in action.params
    )


def _canonical_entry(entry: TableEntry, p4info: P4Info) -> TableEntry:
    table = p4info.table(entry.table)
    given = dict(entry.match)
    if len(given) != len(entry.match):
        raise ValueError(f"table {table.name}: a match field is given twice")
    if entry.is_default and given:
        raise ValueError(f"table {table.name}: a default entry has no match fields")
    for name in given:
        table.match_field(name)
    match: list[tuple[str, Match]] = []
    for f in table.match_fields:
        if f.name in given:
            m = _canonical_match(f.name, given[f.name], f.bitwidth, f.match_type)
            if m is not None:
                match.append((f.name, m))
        elif f.match_type == "EXACT" and not entry.is_default:
            raise ValueError(f"table {table.name}: missing exact match field {f.name}")
    if not entry.is_default and table.needs_priority != (entry.priority > 0):
        need = "needs a priority > 0" if table.needs_priority else "takes no priority"
        raise ValueError(f"table {table.name}: an entry {need} (priority {entry.priority})")
    chosen = sum(x is not None for x in (entry.action, entry.member_id, entry.group_id))
    if chosen != 1:
        raise ValueError(f"table {table.name}: an entry names exactly one of action, member_id, group_id")
    action: str | None = None
    params: tuple[tuple[str, int], ...] = ()
    if entry.action is not None:
        if table.implementation_id:
            raise ValueError(f"table {table.name} takes members or groups of its action profile, not actions")
        info = p4info.table_action(table, entry.action, entry.is_default)
        action, params = info.name, _canonical_params(info, entry.params)
    elif not table.implementation_id:
        raise ValueError(f"table {table.name} has no action profile: name an action, not a member or group")
    elif entry.params:
        raise ValueError(f"table {table.name}: params belong to the member, not the entry")
    return replace(entry, table=table.name, match=tuple(match), action=action, params=params)


def canonical(entity: Entity, p4info: P4Info) -> Entity:
    """The one form an entity has on both sides of a comparison, checked against the P4Info.

    Full names (not aliases); values as ints; match fields and params in P4Info order; don't-care
    matches (LPM /0, ternary mask 0) left out; group members sorted. decode_entity returns this form.
    """
    if isinstance(entity, TableEntry):
        return _canonical_entry(entity, p4info)
    if isinstance(entity, ActionProfileMember):
        profile = p4info.action_profile(entity.profile)
        action = p4info.action(entity.action)
        for table_id in profile.table_ids:
            p4info.table_action(p4info.table.by_id(table_id), action.name)
        return ActionProfileMember(profile.name, entity.member_id, action.name, _canonical_params(action, entity.params))
    if isinstance(entity, ActionProfileGroup):
        profile = p4info.action_profile(entity.profile)
        if not profile.with_selector:
            raise ValueError(f"action profile {profile.name} has no selector: it has no groups")
        if profile.max_group_size and len(entity.members) > profile.max_group_size:
            raise ValueError(
                f"group {entity.group_id} of {profile.name}: {len(entity.members)} members,"
                f" more than max_group_size {profile.max_group_size}"
            )
        return ActionProfileGroup(profile.name, entity.group_id, tuple(sorted(set(entity.members))), entity.max_size)
    raise TypeError(f"not an entity: {entity!r}")


# --- Entity messages ------------------------------------------------------------------------

def _encode_action(action: ActionInfo, params: tuple[tuple[str, Value], ...]) -> p4runtime_pb2.Action:
    msg = p4runtime_pb2.Action(action_id=action.id)
    for name, value in params:
        p: ParamInfo = action.param(name)
        msg.params.add(param_id=p.id, value=encode_value(value, p.bitwidth, f"{action.name} parameter {name}"))
    return msg


def _encode_match(table: TableInfo, name: str, match: Match) -> p4runtime_pb2.FieldMatch:
    f = table.match_field(name)
    msg = p4runtime_pb2.FieldMatch(field_id=f.id)
    what = f"match field {name}"
    if isinstance(match, Exact):
        msg.exact.value = encode_value(match.value, f.bitwidth, what)
    elif isinstance(match, Lpm):
        msg.lpm.value = encode_value(match.value, f.bitwidth, what)
        msg.lpm.prefix_len = match.prefix_len
    else:
        msg.ternary.value = encode_value(match.value, f.bitwidth, what)
        msg.ternary.mask = encode_value(match.mask, f.bitwidth, what + " mask")
    return msg


def encode_entity(entity: Entity, p4info: P4Info) -> p4runtime_pb2.Entity:
    """A p4runtime Entity message for an entity (canonicalised, hence checked, first)."""
    entity = canonical(entity, p4info)
    msg = p4runtime_pb2.Entity()
    if isinstance(entity, TableEntry):
        table = p4info.table(entity.table)
        te = msg.table_entry
        te.table_id = table.id
        te.match.extend(_encode_match(table, name, m) for name, m in entity.match)
        te.priority = entity.priority
        te.is_default_action = entity.is_default
        if entity.action is not None:
            te.action.action.CopyFrom(_encode_action(p4info.action(entity.action), entity.params))
        elif entity.member_id is not None:
            te.action.action_profile_member_id = entity.member_id
        else:
            assert entity.group_id is not None
            te.action.action_profile_group_id = entity.group_id
    elif isinstance(entity, ActionProfileMember):
        m = msg.action_profile_member
        m.action_profile_id = p4info.action_profile(entity.profile).id
        m.member_id = entity.member_id
        m.action.CopyFrom(_encode_action(p4info.action(entity.action), entity.params))
    else:
        g = msg.action_profile_group
        g.action_profile_id = p4info.action_profile(entity.profile).id
        g.group_id = entity.group_id
        g.max_size = entity.max_size
        for member_id in entity.members:
            g.members.add(member_id=member_id, weight=1)
    return msg


def _decode_action(msg: p4runtime_pb2.Action, p4info: P4Info) -> tuple[str, tuple[tuple[str, int], ...]]:
    action = p4info.action.by_id(msg.action_id)
    values = {p.param_id: decode_value(p.value) for p in msg.params}
    return action.name, tuple((p.name, values[p.id]) for p in action.params if p.id in values)


def _decode_match(f: p4runtime_pb2.FieldMatch, table: TableInfo) -> tuple[str, Match]:
    name = table.match_field_by_id(f.field_id).name
    kind = f.WhichOneof("field_match_type")
    if kind == "exact":
        return name, Exact(decode_value(f.exact.value))
    if kind == "lpm":
        return name, Lpm(decode_value(f.lpm.value), f.lpm.prefix_len)
    if kind == "ternary":
        return name, Ternary(decode_value(f.ternary.value), decode_value(f.ternary.mask))
    raise ValueError(f"table {table.name}: {kind} matches are not supported")


def decode_entity(msg: p4runtime_pb2.Entity, p4info: P4Info) -> Entity:
    """The entity a message describes, in canonical form (so it compares equal to canonical(plan))."""
    kind = msg.WhichOneof("entity")
    if kind == "table_entry":
        te = msg.table_entry
        table = p4info.table.by_id(te.table_id)
        order = {f.id: i for i, f in enumerate(table.match_fields)}
        matches = sorted(te.match, key=lambda f: order.get(f.field_id, len(order)))
        entry = TableEntry(
            table=table.name,
            match=tuple(_decode_match(f, table) for f in matches),
            priority=te.priority,
            is_default=te.is_default_action,
        )
        which = te.action.WhichOneof("type")
        if which == "action":
            name, params = _decode_action(te.action.action, p4info)
            return replace(entry, action=name, params=params)
        if which == "action_profile_member_id":
            return replace(entry, member_id=te.action.action_profile_member_id)
        if which == "action_profile_group_id":
            return replace(entry, group_id=te.action.action_profile_group_id)
        raise ValueError(f"table {table.name}: entry without a supported action ({which})")
    if kind == "action_profile_member":
        m = msg.action_profile_member
        name, params = _decode_action(m.action, p4info)
        return ActionProfileMember(p4info.action_profile.by_id(m.action_profile_id).name, m.member_id, name, params)
    if kind == "action_profile_group":
        g = msg.action_profile_group
        return ActionProfileGroup(
            p4info.action_profile.by_id(g.action_profile_id).name,
            g.group_id,
            tuple(sorted({m.member_id for m in g.members})),
            g.max_size,
        )
    raise ValueError(f"unsupported entity kind {kind}")


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
