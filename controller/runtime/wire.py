"""P4Runtime write requests encoded straight to protobuf wire bytes, for SwitchConnection.write.

Kept because it is faster than protobuf's own messages on its C core (upb, protobuf 6.33.6),
measured by bench/install_rate.py in one run (10,000 entries into one simple_switch_grpc in batches
of 500, 5 runs per case taking turns, 2 cores shared with other jobs, load 4-5):

    case                                   median s   entries/s (min-max)
    SwitchConnection.write, this module    0.170      58,800 (39,500-63,000)
    the same requests as protobuf messages 0.218      46,000 (40,900-54,100)   ratio 0.78
    encoding alone (checks included)       0.087 wire against 0.106 messages

(an earlier run, 3 runs per case at load 3.4-4: 0.179 s against 0.212 s, ratio 0.85). Since then a
table entry in the form the planner writes (match fields and params all given, in P4Info order)
is checked and written in one pass (_fast_entry), without canonical()'s copy of the entity:
encoding alone 0.033-0.039 s for the same 10,000 (messages: 0.105-0.122 s), and the message
client's rate 0.52-0.70 of this module's over five runs (docs/shell.md has them). Every other entity goes
through codec.canonical() first, and so does every entry the fast path would refuse, so each is
checked, and each error raised, exactly as the message encoder does. It writes the bytes of exactly
the messages that codec.encode_entity would build (same fields, same order, proto3 defaults left
out), for the few message types a write uses; tests/unit/controller/runtime/test_wire.py and
test_wire_fast.py hold it to protobuf's bytes. Field numbers come from the generated descriptors at
import time, never typed in here.
"""

from __future__ import annotations

import socket
from typing import Iterable

from google.protobuf.descriptor import FieldDescriptor

from controller.runtime.codec import _MAC, canonical, derived, int_bytes, scalar, to_int
from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Entity, Exact, Lpm, TableEntry, Ternary
from controller.runtime.p4info import P4Info
from controller.runtime.proto import p4runtime_pb2

# --- primitives ------------------------------------------------------------------------------

_VARINT_TYPES = {
    FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_BOOL, FieldDescriptor.TYPE_ENUM,
}
_LEN_TYPES = {FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_BYTES}
_SMALL = [bytes((i,)) for i in range(128)]
_UINT64 = (0, (1 << 64) - 1)


def varint(number: int) -> bytes:
    """A protobuf varint; a negative number as its 64-bit two's complement (int32/int64 fields)."""
    if 0 <= number < 128:
        return _SMALL[number]
    if number < 0:
        number += 1 << 64
    out = bytearray()
    while number > 0x7F:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def _tag(message: type, name: str) -> bytes:
    """The key bytes of field `name` of a generated message class, from its descriptor."""
    field = message.DESCRIPTOR.fields_by_name[name]
    if field.type in _VARINT_TYPES:
        wire_type = 0
    elif field.type in _LEN_TYPES:
        wire_type = 2
    else:  # not a type this encoder writes: fail at import, not with wrong bytes
        raise TypeError(f"{message.DESCRIPTOR.full_name}.{name}: field type {field.type} not supported")
    return varint(field.number << 3 | wire_type)


def _ld(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field (sub-message or bytes)."""
    n = len(payload)
    return tag + (_SMALL[n] if n < 128 else varint(n)) + payload


pb = p4runtime_pb2
_WR_DEVICE_ID = _tag(pb.WriteRequest, "device_id")
_WR_ELECTION_ID = _tag(pb.WriteRequest, "election_id")
_WR_UPDATES = _tag(pb.WriteRequest, "updates")
_U128_HIGH = _tag(pb.Uint128, "high")
_U128_LOW = _tag(pb.Uint128, "low")
_UPDATE_TYPE = _tag(pb.Update, "type")
_UPDATE_ENTITY = _tag(pb.Update, "entity")
_ENTITY_TABLE_ENTRY = _tag(pb.Entity, "table_entry")
_ENTITY_MEMBER = _tag(pb.Entity, "action_profile_member")
_ENTITY_GROUP = _tag(pb.Entity, "action_profile_group")
_TE_TABLE_ID = _tag(pb.TableEntry, "table_id")
_TE_MATCH = _tag(pb.TableEntry, "match")
_TE_ACTION = _tag(pb.TableEntry, "action")
_TE_PRIORITY = _tag(pb.TableEntry, "priority")
_TE_IS_DEFAULT = _tag(pb.TableEntry, "is_default_action") + varint(1)
_FM_FIELD_ID = _tag(pb.FieldMatch, "field_id")
_FM_EXACT = _tag(pb.FieldMatch, "exact")
_FM_LPM = _tag(pb.FieldMatch, "lpm")
_FM_TERNARY = _tag(pb.FieldMatch, "ternary")
_EXACT_VALUE = _tag(pb.FieldMatch.Exact, "value")
_LPM_VALUE = _tag(pb.FieldMatch.LPM, "value")
_LPM_PREFIX_LEN = _tag(pb.FieldMatch.LPM, "prefix_len")
_TERNARY_VALUE = _tag(pb.FieldMatch.Ternary, "value")
_TERNARY_MASK = _tag(pb.FieldMatch.Ternary, "mask")
_TA_ACTION = _tag(pb.TableAction, "action")
_TA_MEMBER_ID = _tag(pb.TableAction, "action_profile_member_id")
_TA_GROUP_ID = _tag(pb.TableAction, "action_profile_group_id")
_ACTION_ID = _tag(pb.Action, "action_id")
_ACTION_PARAMS = _tag(pb.Action, "params")
_PARAM_ID = _tag(pb.Action.Param, "param_id")
_PARAM_VALUE = _tag(pb.Action.Param, "value")
_APM_PROFILE_ID = _tag(pb.ActionProfileMember, "action_profile_id")
_APM_MEMBER_ID = _tag(pb.ActionProfileMember, "member_id")
_APM_ACTION = _tag(pb.ActionProfileMember, "action")
_APG_PROFILE_ID = _tag(pb.ActionProfileGroup, "action_profile_id")
_APG_GROUP_ID = _tag(pb.ActionProfileGroup, "group_id")
_APG_MEMBERS = _tag(pb.ActionProfileGroup, "members")
_APG_MAX_SIZE = _tag(pb.ActionProfileGroup, "max_size")
_MEMBER_ID = _tag(pb.ActionProfileGroup.Member, "member_id")
_MEMBER_WEIGHT_1 = _tag(pb.ActionProfileGroup.Member, "weight") + varint(1)
_MEMBER_WATCH_PORT = _tag(pb.ActionProfileGroup.Member, "watch_port")
_UPDATE_TYPES = {name: _UPDATE_TYPE + varint(pb.Update.Type.Value(name)) for name in ("INSERT", "MODIFY", "DELETE")}
del pb


def _uint(tag: bytes, number: int) -> bytes:
    """A proto3 scalar field: left out when zero, as protobuf does."""
    return tag + varint(number) if number else b""


# --- per-P4Info prefixes ---------------------------------------------------------------------

class _Schema:
    """The id fields of one P4Info's tables, match fields, actions, params and profiles, as bytes.

    Keyed by the full names canonical() returns; built on first use of each name.
    """

    def __init__(self) -> None:
        self.tables: dict[str, tuple[bytes, dict[str, bytes]]] = {}
        self.actions: dict[str, tuple[bytes, dict[str, bytes]]] = {}
        self.profiles: dict[str, int] = {}
        self.recipes: dict[tuple[str, str | None], _Recipe | None] = {}  # see _fast_entry

    def table(self, p4info: P4Info, name: str) -> tuple[bytes, dict[str, bytes]]:
        hit = self.tables.get(name)
        if hit is None:
            t = p4info.table(name)
            hit = self.tables[name] = (_uint(_TE_TABLE_ID, t.id), {f.name: _uint(_FM_FIELD_ID, f.id) for f in t.match_fields})
        return hit

    def action(self, p4info: P4Info, name: str) -> tuple[bytes, dict[str, bytes]]:
        hit = self.actions.get(name)
        if hit is None:
            a = p4info.action(name)
            hit = self.actions[name] = (_uint(_ACTION_ID, a.id), {p.name: _uint(_PARAM_ID, p.id) for p in a.params})
        return hit

    def profile(self, p4info: P4Info, name: str) -> int:
        hit = self.profiles.get(name)
        if hit is None:
            hit = self.profiles[name] = p4info.action_profile(name).id
        return hit


# --- the fast path: a table entry in the form the planner writes ------------------------------
#
# codec.canonical() builds a canonical copy of every entity (dicts of its fields, new matches, a
# new TableEntry) before anything is encoded: most of the encoding time. An entry in the form the
# planner writes (match fields and params all given, in P4Info order, a direct action or a member
# or group id) needs none of that: _fast_entry checks exactly what canonical() checks for it and
# writes its bytes in the same pass. Anything else, and anything it would refuse, it leaves
# (returns None) to canonical(), so every other form is read, and every error raised, as before.

_INT32_MAX = (1 << 31) - 1
_UINT32_LIMIT = 1 << 32
_AF_INET6 = socket.AF_INET6
_inet_pton = socket.inet_pton
_MAC_MATCH = _MAC.match


class _Recipe:
    """What the fast path needs for one (table, action) name pair as entities give them.

    fields/params: (name, match class, bit limit, bits, cache) per match field / param in P4Info
    order; cache maps a value's byte length (and an LPM's prefix length) to the bytes around the value.
    """

    __slots__ = ("table_head", "fields", "action_head", "params", "needs_priority", "profile")

    def __init__(self, schema: _Schema, p4info: P4Info, table_name: str, action_name: str | None) -> None:
        from controller.runtime.codec import _Lookups  # the lookups canonical() uses (same checks)
        lookups = derived(p4info, _Lookups)
        table, _ = lookups.table(p4info, table_name)  # raises for an unknown table: no recipe
        self.table_head, field_ids = schema.table(p4info, table.name)
        kinds = {"EXACT": Exact, "LPM": Lpm, "TERNARY": Ternary}
        if any(f.match_type not in kinds or f.bitwidth < 1 for f in table.match_fields):
            raise LookupError("a match kind or width the fast path leaves to canonical()")
        self.fields = tuple((f.name, kinds[f.match_type], 1 << f.bitwidth, f.bitwidth, field_ids[f.name], {})
                            for f in table.match_fields)
        self.needs_priority = table.needs_priority
        self.profile = bool(table.implementation_id)
        self.action_head, self.params = b"", ()
        if action_name is not None:
            if self.profile:
                raise LookupError("a table of an action profile takes no action")
            action = lookups.table_action(p4info, table, action_name, False)  # raises when refused
            if any(p.bitwidth < 1 for p in action.params):
                raise LookupError("a param width the fast path leaves to canonical()")
            self.action_head, param_ids = schema.action(p4info, action.name)
            self.params = tuple((p.name, None, 1 << p.bitwidth, p.bitwidth, param_ids[p.name], {}) for p in action.params)
        elif not self.profile:
            raise LookupError("a table without an action profile takes an action")


def _recipe(schema: _Schema, p4info: P4Info, table: str, action: str | None) -> _Recipe | None:
    key = (table, action)
    try:
        return schema.recipes[key]
    except KeyError:
        pass
    try:
        made: _Recipe | None = _Recipe(schema, p4info, table, action)
    except (LookupError, ValueError, TypeError):  # canonical() says why, every time
        made = None
    schema.recipes[key] = made
    return made


def _number(value: object, bits: int) -> int:
    """A field value given as text, as an int, as codec.to_int reads it (raises as it does)."""
    if type(value) is not str:
        raise TypeError  # bools, bytes and the rest: canonical()'s reading and errors
    if bits == 128:
        try:  # text inet_pton takes is no MAC and has no blanks: to_int would read it the same way
            return int.from_bytes(_inet_pton(_AF_INET6, value), "big")
        except (OSError, ValueError):
            pass
    elif bits == 48 and _MAC_MATCH(value):  # what to_int does with a MAC (no blanks: it matched unstripped)
        return int(value.replace(":", ""), 16)
    return to_int(value)


def _fast_entry(e: TableEntry, schema: _Schema, p4info: P4Info) -> bytes | None:
    """The Entity bytes of a table entry in the planner's form, checked as canonical() checks it; None
    for any other form, and for anything canonical() would refuse (it raises then)."""
    if e.is_default is not False or type(e.table) is not str:
        return None
    action_name = e.action
    if action_name is not None and (type(action_name) is not str or e.member_id is not None or e.group_id is not None):
        return None
    recipe = schema.recipes.get((e.table, action_name), _recipe)
    if recipe is _recipe:
        recipe = _recipe(schema, p4info, e.table, action_name)
    if recipe is None:
        return None
    fields = recipe.fields
    body = recipe.table_head
    try:
        match = e.match
        if len(match) != len(fields):
            return None
        for (name, m), (fname, kind, limit, bits, fid, cache) in zip(match, fields):
            if name != fname or type(m) is not kind:
                return None
            n = m.value
            if type(n) is not int:
                n = _number(n, bits)
            if not 0 <= n < limit:
                return None
            size = (n.bit_length() + 7) >> 3 or 1
            if kind is Exact:
                head = cache.get(size)
                if head is None:
                    head = cache[size] = _ld(_TE_MATCH, fid + _ld(_FM_EXACT, _ld(_EXACT_VALUE, bytes(size))))[:-size]
                body += head + n.to_bytes(size, "big")
            elif kind is Lpm:
                plen = m.prefix_len
                if type(plen) is not int or not 0 < plen <= bits or n & ((1 << (bits - plen)) - 1):
                    return None  # /0 is left out of the message: canonical() does that
                key = (size, plen)
                head = cache.get(key)
                if head is None:
                    tail = _uint(_LPM_PREFIX_LEN, plen)
                    whole = _ld(_TE_MATCH, fid + _ld(_FM_LPM, _ld(_LPM_VALUE, bytes(size)) + tail))
                    head = cache[key] = (whole[: len(whole) - size - len(tail)], tail)
                body += head[0] + n.to_bytes(size, "big") + head[1]
            else:
                mask = m.mask
                if type(mask) is not int:
                    mask = _number(mask, bits)
                if not 0 < mask < limit or n & ~mask:
                    return None  # a zero mask is left out of the message: canonical() does that
                body += _ld(_TE_MATCH, fid + _ld(_FM_TERNARY, _ld(_TERNARY_VALUE, int_bytes(n))
                                                + _ld(_TERNARY_MASK, int_bytes(mask))))
        if action_name is not None:
            params = e.params
            if len(params) != len(recipe.params):
                return None
            action = recipe.action_head
            for (name, n), (pname, _, limit, bits, pid, cache) in zip(params, recipe.params):
                if name != pname:
                    return None
                if type(n) is not int:
                    n = _number(n, bits)
                if not 0 <= n < limit:
                    return None
                size = (n.bit_length() + 7) >> 3 or 1
                head = cache.get(size)
                if head is None:
                    head = cache[size] = _ld(_ACTION_PARAMS, pid + _ld(_PARAM_VALUE, bytes(size)))[:-size]
                action += head + n.to_bytes(size, "big")
            size = len(action)
            action = _TA_ACTION + (_SMALL[size] if size < 128 else varint(size)) + action
        else:
            if e.params:
                return None
            member_id, group_id = e.member_id, e.group_id
            if member_id is not None and group_id is None and type(member_id) is int and 0 <= member_id < _UINT32_LIMIT:
                action = _TA_MEMBER_ID + varint(member_id)
            elif group_id is not None and member_id is None and type(group_id) is int and 0 <= group_id < _UINT32_LIMIT:
                action = _TA_GROUP_ID + varint(group_id)
            else:
                return None
    except (ValueError, TypeError):  # a value to_int cannot read: canonical() raises its error
        return None
    size = len(action)
    body += _TE_ACTION + (_SMALL[size] if size < 128 else varint(size)) + action
    priority = e.priority
    if type(priority) is not int:
        return None
    if recipe.needs_priority:
        if not 0 < priority <= _INT32_MAX:
            return None
        body += _TE_PRIORITY + varint(priority)
    elif priority:
        return None
    size = len(body)
    return _ENTITY_TABLE_ENTRY + (_SMALL[size] if size < 128 else varint(size)) + body


# --- entities --------------------------------------------------------------------------------

def _action(schema: _Schema, p4info: P4Info, name: str, params: tuple[tuple[str, int], ...]) -> bytes:
    head, param_ids = schema.action(p4info, name)
    return head + b"".join([_ld(_ACTION_PARAMS, param_ids[p] + _ld(_PARAM_VALUE, int_bytes(v))) for p, v in params])


def _table_entry(e: TableEntry, schema: _Schema, p4info: P4Info) -> bytes:
    head, field_ids = schema.table(p4info, e.table)
    parts = [head]
    for name, m in e.match:
        if type(m) is Exact:
            body = _ld(_FM_EXACT, _ld(_EXACT_VALUE, int_bytes(m.value)))
        elif type(m) is Lpm:
            body = _ld(_FM_LPM, _ld(_LPM_VALUE, int_bytes(m.value)) + _uint(_LPM_PREFIX_LEN, m.prefix_len))
        else:
            body = _ld(_FM_TERNARY, _ld(_TERNARY_VALUE, int_bytes(m.value)) + _ld(_TERNARY_MASK, int_bytes(m.mask)))
        parts.append(_ld(_TE_MATCH, field_ids[name] + body))
    if e.action is not None:
        action = _ld(_TA_ACTION, _action(schema, p4info, e.action, e.params))
    elif e.member_id is not None:  # a oneof member: written even when 0
        action = _TA_MEMBER_ID + varint(e.member_id)
    else:
        action = _TA_GROUP_ID + varint(e.group_id)
    parts.append(_ld(_TE_ACTION, action))
    if e.priority:
        parts.append(_TE_PRIORITY + varint(e.priority))
    if e.is_default:
        parts.append(_TE_IS_DEFAULT)
    return _ld(_ENTITY_TABLE_ENTRY, b"".join(parts))


def _member(m: ActionProfileMember, schema: _Schema, p4info: P4Info) -> bytes:
    body = (
        _uint(_APM_PROFILE_ID, schema.profile(p4info, m.profile))
        + _uint(_APM_MEMBER_ID, m.member_id)
        + _ld(_APM_ACTION, _action(schema, p4info, m.action, m.params))
    )
    return _ld(_ENTITY_MEMBER, body)


def _group(g: ActionProfileGroup, schema: _Schema, p4info: P4Info) -> bytes:
    parts = [_uint(_APG_PROFILE_ID, schema.profile(p4info, g.profile)), _uint(_APG_GROUP_ID, g.group_id)]
    watch = dict(g.watch_ports)
    parts += [_ld(_APG_MEMBERS, _uint(_MEMBER_ID, m) + _MEMBER_WEIGHT_1
                  + (_ld(_MEMBER_WATCH_PORT, int_bytes(watch[m])) if m in watch else b""))
              for m in g.members]
    parts.append(_uint(_APG_MAX_SIZE, g.max_size))
    return _ld(_ENTITY_GROUP, b"".join(parts))


def entity_bytes(entity: Entity, p4info: P4Info) -> bytes:
    """The wire bytes of codec.encode_entity(entity, p4info) (canonicalised, hence checked, first)."""
    schema = derived(p4info, _Schema)
    if type(entity) is TableEntry:
        data = _fast_entry(entity, schema, p4info)
        if data is not None:
            return data
    return _checked_entity_bytes(entity, schema, p4info)


def _checked_entity_bytes(entity: Entity, schema: _Schema, p4info: P4Info) -> bytes:
    """entity_bytes by way of codec.canonical(): every form an entity may take, and every error it raises."""
    entity = canonical(entity, p4info)
    if isinstance(entity, TableEntry):
        return _table_entry(entity, schema, p4info)
    if isinstance(entity, ActionProfileMember):
        return _member(entity, schema, p4info)
    return _group(entity, schema, p4info)


def update_bytes(kind: str, entity: Entity, p4info: P4Info) -> bytes:
    """The wire bytes of Update(type=kind, entity=encode_entity(entity)); kind is INSERT, MODIFY or DELETE."""
    return _UPDATE_TYPES[kind] + _ld(_UPDATE_ENTITY, entity_bytes(entity, p4info))


def updates_bytes(updates: Iterable[tuple[str, Entity]], p4info: P4Info) -> list[bytes]:
    """update_bytes() of every (kind, entity), in order: each entity checked (raising as update_bytes
    does) before the next is looked at. A kind may be an UpdateType (a str enum: it looks up as its name)."""
    schema = derived(p4info, _Schema)
    types, entity_tag, small, fast = _UPDATE_TYPES, _UPDATE_ENTITY, _SMALL, _fast_entry
    out = []
    for kind, entity in updates:
        data = fast(entity, schema, p4info) if type(entity) is TableEntry else None
        if data is None:
            data = _checked_entity_bytes(entity, schema, p4info)
        n = len(data)
        out.append(types[kind] + entity_tag + (small[n] if n < 128 else varint(n)) + data)
    return out


def write_request(device_id: int, election_id: int, updates: Iterable[bytes]) -> bytes:
    """The wire bytes of WriteRequest(device_id, election_id (128-bit), updates) from update_bytes() results."""
    device_id = scalar(device_id, _UINT64, "device_id")
    election_id = scalar(election_id, (0, (1 << 128) - 1), "election_id")
    election = _uint(_U128_HIGH, election_id >> 64) + _uint(_U128_LOW, election_id & _UINT64[1])
    parts = [_uint(_WR_DEVICE_ID, device_id) + _ld(_WR_ELECTION_ID, election)]
    tag, small = _WR_UPDATES, _SMALL
    for u in updates:
        n = len(u)
        parts += (tag + (small[n] if n < 128 else varint(n)), u)
    return b"".join(parts)
