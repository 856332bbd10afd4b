"""P4Runtime write requests encoded straight to protobuf wire bytes, for SwitchConnection.write.

Why it exists: it writes faster than protobuf's own messages, even on protobuf's C core (upb) --
bench/install_rate.py measures both; docs/shell.md ("Why the write path encodes its own bytes") has the
figures. A table entry in the form the planner writes (match fields and params all given, in P4Info
order) is checked and written in one pass (_fast_entry), by an encoder compiled once per (table, action)
and P4Info (_compile), without canonical()'s copy of the entity. Every other entity goes through
codec.canonical() first, and so does every entry the fast path would refuse, so each is checked, and
each error raised, exactly as the message encoder does.

It writes the bytes of exactly the messages codec.encode_entity would build (same fields, same order,
proto3 defaults left out), for the few message types a write uses; tests/unit/controller/runtime/
test_wire.py, test_wire_fast.py and test_wire_compiled.py hold it to protobuf's bytes. Field numbers come
from the generated descriptors at import time, never typed in here.
"""

from __future__ import annotations

import functools
import socket
from types import CodeType
from typing import Callable, Iterable

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from controller.runtime.codec import canonical, canonical_bytes, derived, int_bytes, scalar, to_int
from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Entity, Exact, Lpm, TableEntry, Ternary, Value
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


def _tag(message: type[Message], name: str) -> bytes:
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
_UPDATE_HEADS = {name: head + _UPDATE_ENTITY for name, head in _UPDATE_TYPES.items()}  # up to the entity's length
_WR_UPDATE_HEADS = tuple(_WR_UPDATES + _SMALL[n] for n in range(128))  # an update of n bytes, up to it
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
        self.recipes: dict[tuple[str, str | None], _Encoder | None] = {}  # see _fast_entry

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
# (returns None) to canonical(), so every other form is read, and every error raised, as canonical() does.
#
# The checks and bytes of one (table, action) pair are compiled once per P4Info into a function of
# their own (_compile: Python source for exactly that pair's fields and params, their names, kinds
# and widths as constants, the bytes around each value looked up by its length), so an entry costs
# no loop over fields and no per-field lookups.

_INT32_MAX = (1 << 31) - 1
_UINT32_LIMIT = 1 << 32
_KINDS = {"EXACT": Exact, "LPM": Lpm, "TERNARY": Ternary}
_Encoder = Callable[[TableEntry], "bytes | None"]


def _read(var: str, bits: int) -> list[str]:
    """Source turning `var`, a value that is not an int, into one as codec.to_int reads it (raising
    as it does), or leaving the entry to canonical() (bools, bytes and the rest: its reading, its errors)."""
    lines = [f"if type({var}) is not str: return None"]
    if bits == 128:  # text inet_pton takes is no MAC and has no blanks: to_int would read it the same way
        lines += [f"try: {var} = FROM_BYTES(PTON(AF_INET6, {var}), 'big')",
                  f"except (OSError, ValueError): {var} = TO_INT({var})"]
    elif bits == 48:  # a MAC as to_int reads it: 6 bytes from the 12 characters beside the colons are 12 hex digits
        lines += [f"if len({var}) == 17 and {var}[2::3] == ':::::':", f"    b = FROMHEX({var}.replace(':', ''))",
                  "    if len(b) != 6: return None  # not a MAC: canonical() reads it", f"    {var} = FROM_BYTES(b, 'big')",
                  f"else: {var} = TO_INT({var})"]
    else:
        lines.append(f"{var} = TO_INT({var})")
    return lines


def _value(var: str, bits: int) -> list[str]:
    """Source reading `var` as an unsigned value of `bits` bits, and its length in bytes (s_`var`)."""
    return [f"if type({var}) is not int:", *("    " + line for line in _read(var, bits)),
            f"if not 0 <= {var} < {1 << bits}: return None", f"s_{var} = ({var}.bit_length() + 7) >> 3 or 1"]


def _heads(bits: int, whole: Callable[[int], bytes], tail: bytes = b"") -> tuple[tuple, tuple]:
    """For each length n of a value (1 .. its field's bytes): the bytes before the value, and the whole
    piece's length; whole(n) is the piece with n zero bytes for the value, followed by `tail`."""
    heads: list = [None]
    lengths: list = [None]
    for n in range(1, (bits + 7) // 8 + 1):
        data = whole(n)
        heads.append(data[: len(data) - n - len(tail)])
        lengths.append(len(data))
    return tuple(heads), tuple(lengths)


def _sum(terms: list[int | str]) -> str:
    """Source adding up `terms` (numbers and expressions), the numbers added up here."""
    return " + ".join([*(t for t in terms if isinstance(t, str)), str(sum(t for t in terms if isinstance(t, int)))])


def _compile(schema: _Schema, p4info: P4Info, table_name: str, action_name: str | None) -> _Encoder:
    """The fast path's encoder for entries of table_name with action_name (None: a member or group id).

    Raises (LookupError, ValueError) for a pair canonical() refuses, or a form left to it (it has no encoder then).
    The entity's bytes are joined once: the lengths of its nested messages are summed from its pieces' lengths.
    """
    from controller.runtime.codec import _Lookups  # the lookups canonical() uses (same checks)
    lookups = derived(p4info, _Lookups)
    table, _ = lookups.table(p4info, table_name)  # raises for an unknown table
    table_head, field_ids = schema.table(p4info, table.name)
    if any(f.match_type not in _KINDS or f.bitwidth < 1 for f in table.match_fields):
        raise LookupError("a match kind or width the fast path leaves to canonical()")
    ns: dict[str, object] = {
        "EXACT": Exact, "LPM": Lpm, "TERNARY": Ternary, "FROM_BYTES": int.from_bytes, "PTON": socket.inet_pton,
        "AF_INET6": socket.AF_INET6, "FROMHEX": bytes.fromhex, "TO_INT": to_int, "SMALL": _SMALL, "VARINT": varint,
        "JOIN": b"".join, "TERNARY_BYTES": _ternary_bytes, "TH": table_head, "TE_ACTION": _TE_ACTION,
        "ENTITY": _ENTITY_TABLE_ENTRY, "TE_PRIORITY": _TE_PRIORITY, "TA_ACTION": _TA_ACTION,
        "TA_MEMBER_ID": _TA_MEMBER_ID, "TA_GROUP_ID": _TA_GROUP_ID,
    }
    fields = table.match_fields
    src = ["match = e.match", f"if len(match) != {len(fields)}: return None"]
    if fields:
        src.append(f"{''.join(f'(f{i}, m{i}), ' for i in range(len(fields)))}= match")
        src.append("if " + " or ".join(f"f{i} != {f.name!r} or type(m{i}) is not {f.match_type}"
                                        for i, f in enumerate(fields)) + ": return None")
    pieces: list[str] = ["TH"]
    sizes: list[int | str] = [len(table_head)]  # the TableEntry's, up to its action
    for i, f in enumerate(fields):
        v, fid, bits = f"v{i}", field_ids[f.name], f.bitwidth
        src += [f"{v} = m{i}.value", *_value(v, bits)]
        if f.match_type == "EXACT":
            def exact(n: int, fid: bytes = fid) -> bytes:
                return _ld(_TE_MATCH, fid + _ld(_FM_EXACT, _ld(_EXACT_VALUE, bytes(n))))
            ns[f"H{i}"], ns[f"N{i}"] = _heads(bits, exact)
            pieces += [f"H{i}[s_{v}]", f"{v}.to_bytes(s_{v}, 'big')"]
            sizes.append(f"N{i}[s_{v}]")
        elif f.match_type == "LPM":  # /0 is left out of the message: canonical() does that
            tails = [_uint(_LPM_PREFIX_LEN, p) for p in range(1, bits + 1)]
            def lpm(n: int, t: bytes, fid: bytes = fid) -> bytes:
                return _ld(_TE_MATCH, fid + _ld(_FM_LPM, _ld(_LPM_VALUE, bytes(n)) + t))
            by_tail = {len(t): _heads(bits, functools.partial(lpm, t=t), t) for t in {len(t): t for t in tails}.values()}
            ns[f"H{i}"], ns[f"N{i}"], ns[f"T{i}"] = (None, *(by_tail[len(t)][0] for t in tails)), (
                None, *(by_tail[len(t)][1] for t in tails)), (None, *tails)
            ns[f"K{i}"] = tuple((1 << (bits - p)) - 1 for p in range(bits + 1))  # the host bits of /p
            src += [f"p{i} = m{i}.prefix_len",
                    f"if type(p{i}) is not int or not 0 < p{i} <= {bits} or {v} & K{i}[p{i}]: return None"]
            pieces += [f"H{i}[p{i}][s_{v}]", f"{v}.to_bytes(s_{v}, 'big')", f"T{i}[p{i}]"]
            sizes.append(f"N{i}[p{i}][s_{v}]")
        else:  # a zero mask is left out of the message: canonical() does that
            ns[f"F{i}"] = fid
            src += [f"w{i} = m{i}.mask", *_value(f"w{i}", bits), f"if not w{i} or {v} & ~w{i}: return None",
                    f"t{i} = TERNARY_BYTES(F{i}, {v}, w{i})"]
            pieces.append(f"t{i}")
            sizes.append(f"len(t{i})")
    if action_name is not None:
        if table.implementation_id:
            raise LookupError("a table of an action profile takes no action")
        action = lookups.table_action(p4info, table, action_name, False)  # raises when refused
        if any(p.bitwidth < 1 for p in action.params):
            raise LookupError("a param width the fast path leaves to canonical()")
        ns["AH"], param_ids = schema.action(p4info, action.name)
        params = action.params
        src += ["params = e.params", f"if len(params) != {len(params)}: return None"]
        if params:
            src.append(f"{''.join(f'(q{j}, x{j}), ' for j in range(len(params)))}= params")
            src.append("if " + " or ".join(f"q{j} != {p.name!r}" for j, p in enumerate(params)) + ": return None")
        action_pieces: list[str] = ["AH"]
        action_sizes: list[int | str] = [len(ns["AH"])]  # type: ignore[arg-type]  # ns holds objects; "AH" is bytes
        for j, p in enumerate(params):
            pid = param_ids[p.name]
            def param(n: int, pid: bytes = pid) -> bytes:
                return _ld(_ACTION_PARAMS, pid + _ld(_PARAM_VALUE, bytes(n)))
            ns[f"G{j}"], ns[f"M{j}"] = _heads(p.bitwidth, param)
            src += _value(f"x{j}", p.bitwidth)
            action_pieces += [f"G{j}[s_x{j}]", f"x{j}.to_bytes(s_x{j}, 'big')"]
            action_sizes.append(f"M{j}[s_x{j}]")
        src += [f"n = {_sum(action_sizes)}", f"if n < 128: la = SMALL[n]; n += {len(_TA_ACTION) + 1}",
                f"else: la = VARINT(n); n += {len(_TA_ACTION)} + len(la)"]  # n: the TableAction's length
        action_pieces = ["TA_ACTION", "la", *action_pieces]
    elif not table.implementation_id:
        raise LookupError("a table without an action profile takes an action")
    else:
        src += ["if e.params: return None", "member_id = e.member_id", "group_id = e.group_id",
                f"if member_id is not None and group_id is None and type(member_id) is int and 0 <= member_id < {_UINT32_LIMIT}:",
                "    a = TA_MEMBER_ID + VARINT(member_id)",
                f"elif group_id is not None and member_id is None and type(group_id) is int and 0 <= group_id < {_UINT32_LIMIT}:",
                "    a = TA_GROUP_ID + VARINT(group_id)",
                "else: return None", "n = len(a)"]
        action_pieces = ["a"]
    src += [f"if n < 128: lt = SMALL[n]; n += {len(_TE_ACTION) + 1}",  # n: its field's, tag and length too
            f"else: lt = VARINT(n); n += {len(_TE_ACTION)} + len(lt)",
            "priority = e.priority", "if type(priority) is not int: return None"]
    pieces += ["TE_ACTION", "lt", *action_pieces]
    sizes.append("n")
    if table.needs_priority:
        src += [f"if not 0 < priority <= {_INT32_MAX}: return None", "pr = VARINT(priority)"]
        pieces += ["TE_PRIORITY", "pr"]
        sizes += [len(_TE_PRIORITY), "len(pr)"]
    else:
        src.append("if priority: return None")
    src += [f"n = {_sum(sizes)}", f"return JOIN(({', '.join(['ENTITY', '(SMALL[n] if n < 128 else VARINT(n))', *pieces])}))"]
    code = "\n".join(["def encode(e):", "  try:", *("    " + line for line in src),
                      "  except (ValueError, TypeError):  # what canonical() raises its own error for", "    return None"])
    exec(_code(code, f"<wire encoder for {table.name}, {action_name}>"), ns)
    return ns["encode"]  # type: ignore[return-value]  # the function exec() just defined from `code`


@functools.lru_cache(maxsize=1024)
def _code(source: str, filename: str) -> CodeType:
    """An encoder's source compiled (most of _compile's time): once for every P4Info of one program."""
    return compile(source, filename, "exec")


def _ternary_bytes(fid: bytes, value: int, mask: int) -> bytes:
    return _ld(_TE_MATCH, fid + _ld(_FM_TERNARY, _ld(_TERNARY_VALUE, int_bytes(value)) + _ld(_TERNARY_MASK, int_bytes(mask))))


def _recipe(schema: _Schema, p4info: P4Info, table: str, action: str | None) -> _Encoder | None:
    """The fast path's encoder for a (table, action) pair as entities name them; None if it has none."""
    key = (table, action)
    try:
        return schema.recipes[key]
    except KeyError:
        pass
    try:
        made: _Encoder | None = _compile(schema, p4info, table, action)
    except (LookupError, ValueError, TypeError):  # canonical() says why, every time
        made = None
    schema.recipes[key] = made
    return made


def _fast_entry(e: TableEntry, schema: _Schema, p4info: P4Info) -> bytes | None:
    """The Entity bytes of a table entry in the planner's form, checked as canonical() checks it; None
    for any other form, and for anything canonical() would refuse (it raises then)."""
    if e.is_default is not False or type(e.table) is not str:
        return None
    action_name = e.action
    if action_name is not None and (type(action_name) is not str or e.member_id is not None or e.group_id is not None):
        return None
    try:
        encode = schema.recipes[e.table, action_name]
    except KeyError:
        encode = _recipe(schema, p4info, e.table, action_name)
    return None if encode is None else encode(e)


# --- entities --------------------------------------------------------------------------------

def _action(schema: _Schema, p4info: P4Info, name: str, params: tuple[tuple[str, Value], ...]) -> bytes:
    head, param_ids = schema.action(p4info, name)
    return head + b"".join([_ld(_ACTION_PARAMS, param_ids[p] + _ld(_PARAM_VALUE, canonical_bytes(v))) for p, v in params])


def _table_entry(e: TableEntry, schema: _Schema, p4info: P4Info) -> bytes:
    head, field_ids = schema.table(p4info, e.table)
    parts = [head]
    for name, m in e.match:
        if isinstance(m, Exact):
            body = _ld(_FM_EXACT, _ld(_EXACT_VALUE, canonical_bytes(m.value)))
        elif isinstance(m, Lpm):
            body = _ld(_FM_LPM, _ld(_LPM_VALUE, canonical_bytes(m.value)) + _uint(_LPM_PREFIX_LEN, m.prefix_len))
        else:
            body = _ld(_FM_TERNARY, _ld(_TERNARY_VALUE, canonical_bytes(m.value)) + _ld(_TERNARY_MASK, canonical_bytes(m.mask)))
        parts.append(_ld(_TE_MATCH, field_ids[name] + body))
    if e.action is not None:
        action = _ld(_TA_ACTION, _action(schema, p4info, e.action, e.params))
    elif e.member_id is not None:  # a oneof member: written even when 0
        action = _TA_MEMBER_ID + varint(e.member_id)
    else:
        assert e.group_id is not None  # canonical(): an entry has an action, a member or a group
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
                  + (_ld(_MEMBER_WATCH_PORT, canonical_bytes(watch[m])) if m in watch else b""))
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
    small, fast = _SMALL, _fast_entry
    out: list[bytes] = []
    append = out.append
    last_kind, head = object(), b""  # an UpdateType hashes in Python: looked up once per run of one kind
    for kind, entity in updates:
        data = fast(entity, schema, p4info) if type(entity) is TableEntry else None
        if data is None:
            data = _checked_entity_bytes(entity, schema, p4info)
        if kind is not last_kind:
            head, last_kind = _UPDATE_HEADS[kind], kind
        n = len(data)
        append(head + (small[n] if n < 128 else varint(n)) + data)
    return out


def write_request(device_id: int, election_id: int, updates: Iterable[bytes]) -> bytes:
    """The wire bytes of WriteRequest(device_id, election_id (128-bit), updates) from update_bytes() results."""
    device_id = scalar(device_id, _UINT64, "device_id")
    election_id = scalar(election_id, (0, (1 << 128) - 1), "election_id")
    election = _uint(_U128_HIGH, election_id >> 64) + _uint(_U128_LOW, election_id & _UINT64[1])
    parts = [_uint(_WR_DEVICE_ID, device_id) + _ld(_WR_ELECTION_ID, election)]
    add, heads = parts.append, _WR_UPDATE_HEADS
    for u in updates:
        n = len(u)
        add(heads[n] if n < 128 else _WR_UPDATES + varint(n))
        add(u)
    return b"".join(parts)
