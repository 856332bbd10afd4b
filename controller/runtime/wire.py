"""P4Runtime write requests encoded straight to protobuf wire bytes, for SwitchConnection.write.

Kept because it is still faster than protobuf's own messages on its C core (upb, protobuf 6.33.6),
measured by bench/install_rate.py in one run (10,000 entries into one simple_switch_grpc in batches
of 500, 5 runs per case taking turns, 2 cores shared with other jobs, load 4-5):

    case                                   median s   entries/s (min-max)
    SwitchConnection.write, this module    0.170      58,800 (39,500-63,000)
    the same requests as protobuf messages 0.218      46,000 (40,900-54,100)   ratio 0.78
    encoding alone (checks included)       0.087 wire against 0.106 messages

(an earlier run, 3 runs per case at load 3.4-4: 0.179 s against 0.212 s, ratio 0.85). Almost all of
either is codec.canonical(), the checks; what this module saves is building, copying and
serialising the messages. It writes the bytes of exactly the messages that codec.encode_entity
would build (same fields, same order, proto3 defaults left out), for the few message types a write
uses; tests/unit/test_wire.py holds it to protobuf's bytes. Every entity goes through
codec.canonical() first, so it is checked exactly as the message encoder checks it. Field numbers
come from the generated descriptors at import time, never typed in here.
"""

from __future__ import annotations

from typing import Iterable

from google.protobuf.descriptor import FieldDescriptor

from controller.runtime.codec import canonical, derived, int_bytes, scalar
from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Entity, Exact, Lpm, TableEntry
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
    entity = canonical(entity, p4info)
    schema = derived(p4info, _Schema)
    if isinstance(entity, TableEntry):
        return _table_entry(entity, schema, p4info)
    if isinstance(entity, ActionProfileMember):
        return _member(entity, schema, p4info)
    return _group(entity, schema, p4info)


def update_bytes(kind: str, entity: Entity, p4info: P4Info) -> bytes:
    """The wire bytes of Update(type=kind, entity=encode_entity(entity)); kind is INSERT, MODIFY or DELETE."""
    return _UPDATE_TYPES[kind] + _ld(_UPDATE_ENTITY, entity_bytes(entity, p4info))


def write_request(device_id: int, election_id: int, updates: Iterable[bytes]) -> bytes:
    """The wire bytes of WriteRequest(device_id, election_id (128-bit), updates) from update_bytes() results."""
    device_id = scalar(device_id, _UINT64, "device_id")
    election_id = scalar(election_id, (0, (1 << 128) - 1), "election_id")
    election = _uint(_U128_HIGH, election_id >> 64) + _uint(_U128_LOW, election_id & _UINT64[1])
    head = _uint(_WR_DEVICE_ID, device_id) + _ld(_WR_ELECTION_ID, election)
    return b"".join([head, *(_ld(_WR_UPDATES, u) for u in updates)])
