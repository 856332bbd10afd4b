"""controller.runtime.wire: write requests as wire bytes equal to the messages codec.encode_entity builds.

Entities are generated at random (seeded, so a failure repeats) for every table, action, profile
and match kind of the committed P4Infos (p4/build), and of each with its default actions made
settable (the compiled programs all declare const defaults), so default entries are covered too.
"""

from __future__ import annotations

import ipaddress
import random
from pathlib import Path
from typing import Iterator

import pytest

from controller.runtime import wire
from controller.runtime.codec import encode_entity
from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Entity, Exact, Lpm, TableEntry, Ternary
from controller.runtime.p4info import P4Info, TableInfo, UnknownNameError
from controller.runtime.p4rt import SwitchConnection
from controller.runtime.proto import p4runtime_pb2, p4info_pb2, code_pb2
from tests.unit.p4rt_servicer import RecordingServicer, serve, socket_dir
from tests.paths import REPO
from tests.require import needs

BUILD = REPO / "p4" / "build"
COMPILED = sorted(BUILD.glob("*.p4info.txtpb"))
KINDS = ("INSERT", "MODIFY", "DELETE")


def _settable_defaults(p4info: P4Info) -> P4Info:
    msg = p4info_pb2.P4Info()
    msg.CopyFrom(p4info.message)
    for t in msg.tables:
        t.const_default_action_id = 0
    return P4Info(msg)


def _programs() -> list[tuple[str, P4Info]]:
    out = []
    for path in COMPILED:
        compiled = P4Info.load(path)
        out += [(path.name, compiled), (f"{path.name} (defaults settable)", _settable_defaults(compiled))]
    return out


PROGRAMS = _programs()
needs_build = needs("p4-build", bool(COMPILED), f"no compiled P4Info in {BUILD}")


# --- random entities -------------------------------------------------------------------------

def _number(rng: random.Random, bits: int) -> int:
    """Edge values (0, 1, all ones) as often as random ones of every length."""
    pick = rng.randrange(6)
    if pick == 0:
        return 0
    if pick == 1:
        return 1
    if pick == 2:
        return (1 << bits) - 1
    return rng.getrandbits(rng.randint(1, bits))


def _notation(rng: random.Random, value: int, bits: int) -> int | str:
    """The value as the user may write it: int, decimal, hex, or its address/MAC notation."""
    pick = rng.randrange(5)
    if pick == 1:
        return str(value)
    if pick == 2:
        return hex(value)
    if pick >= 3 and bits == 128:
        if value >> 32 == 0xFFFF and pick == 4:
            return f"::ffff:{ipaddress.IPv4Address(value & 0xFFFFFFFF)}"
        return ipaddress.IPv6Address(value).exploded if pick == 4 else str(ipaddress.IPv6Address(value))
    if pick >= 3 and bits == 32:
        return str(ipaddress.IPv4Address(value))
    if pick >= 3 and bits == 48:
        return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))
    return value


def _value(rng: random.Random, bits: int) -> int | str:
    value = _number(rng, bits)
    if bits == 128 and rng.randrange(8) == 0:
        value = 0xFFFF << 32 | rng.getrandbits(32)  # an IPv4-mapped address
    return _notation(rng, value, bits)


def _name(rng: random.Random, info) -> str:
    return rng.choice([info.name, info.alias or info.name])


def _params(rng: random.Random, p4info: P4Info, action_id: int) -> tuple[tuple[str, int | str], ...]:
    params = [(p.name, _value(rng, p.bitwidth)) for p in p4info.action.by_id(action_id).params]
    rng.shuffle(params)
    return tuple(params)


def _match(rng: random.Random, table: TableInfo) -> tuple:
    match = []
    for f in table.match_fields:
        bits = f.bitwidth
        if f.match_type == "EXACT":
            match.append((f.name, Exact(_value(rng, bits))))
        elif f.match_type == "LPM":
            prefix = rng.choice([0, bits, rng.randint(0, bits)])
            value = _number(rng, bits) & ~((1 << (bits - prefix)) - 1)
            if prefix or rng.randrange(2):  # a /0 may be given (it is then left out) or not
                match.append((f.name, Lpm(_notation(rng, value, bits), prefix)))
        elif f.match_type == "TERNARY":
            mask = _number(rng, bits)
            if mask or rng.randrange(2):
                match.append((f.name, Ternary(_notation(rng, _number(rng, bits) & mask, bits), _notation(rng, mask, bits))))
    rng.shuffle(match)
    return tuple(match)


def _entry(rng: random.Random, p4info: P4Info, table: TableInfo) -> TableEntry:
    priority = rng.choice([1, 2, rng.randint(1, (1 << 31) - 1)]) if table.needs_priority else 0
    entry = TableEntry(_name(rng, table), _match(rng, table), priority=priority)
    if table.implementation_id:
        ident = rng.choice([0, 1, (1 << 32) - 1, rng.getrandbits(32)])
        return TableEntry(entry.table, entry.match, member_id=ident, priority=priority) if rng.randrange(2) else (
            TableEntry(entry.table, entry.match, group_id=ident, priority=priority))
    action_id = rng.choice([i for i in table.action_ids if i not in table.default_only_ids])
    action = p4info.action.by_id(action_id)
    return TableEntry(entry.table, entry.match, _name(rng, action), _params(rng, p4info, action_id), priority=priority)


def _default_entry(rng: random.Random, p4info: P4Info, table: TableInfo) -> TableEntry:
    action_id = rng.choice([i for i in table.action_ids if i not in table.table_only_ids])
    return TableEntry(_name(rng, table), (), _name(rng, p4info.action.by_id(action_id)),
                      _params(rng, p4info, action_id), is_default=True)


def _member(rng: random.Random, p4info: P4Info, profile) -> ActionProfileMember:
    tables = [p4info.table.by_id(t) for t in profile.table_ids]
    allowed = [a.id for a in p4info.actions if all(a.id in t.action_ids and a.id not in t.default_only_ids for t in tables)]
    action_id = rng.choice(allowed)
    return ActionProfileMember(_name(rng, profile), rng.choice([0, 1, rng.getrandbits(32)]),
                               _name(rng, p4info.action.by_id(action_id)), _params(rng, p4info, action_id))


def _group(rng: random.Random, profile) -> ActionProfileGroup:
    size = rng.choice([0, 1, rng.randint(0, min(profile.max_group_size or 64, 64))])
    members = tuple(rng.choice([0, 1, rng.getrandbits(32), rng.randint(1, 8)]) for _ in range(size))  # repeats too
    watched = [m for m in dict.fromkeys(members) if rng.randrange(2)]  # some members watch a port, some not
    return ActionProfileGroup(_name(rng, profile), rng.choice([0, rng.getrandbits(32)]), members,
                              rng.choice([0, size, rng.randint(0, (1 << 31) - 1)]),
                              tuple((m, rng.choice([1, 255, 256, rng.randint(1, (1 << 31) - 1)])) for m in watched))


def random_entities(rng: random.Random, p4info: P4Info, count: int) -> Iterator[Entity]:
    """`count` valid entities of every kind the P4Info allows, in random order of kind."""
    makers = []
    for t in p4info.tables:
        if t.is_const:
            continue
        makers.append(lambda t=t: _entry(rng, p4info, t))
        if not t.implementation_id and not t.const_default_action_id:
            makers.append(lambda t=t: _default_entry(rng, p4info, t))
    for profile in p4info.action_profiles:
        makers.append(lambda p=profile: _member(rng, p4info, p))
        if profile.with_selector:
            makers.append(lambda p=profile: _group(rng, p))
    for _ in range(count):
        yield rng.choice(makers)()


def _message_update(kind: str, entity: Entity, p4info: P4Info) -> p4runtime_pb2.Update:
    return p4runtime_pb2.Update(type=p4runtime_pb2.Update.Type.Value(kind), entity=encode_entity(entity, p4info))


def _message_request(device_id: int, election: int, updates: list[p4runtime_pb2.Update]) -> p4runtime_pb2.WriteRequest:
    return p4runtime_pb2.WriteRequest(
        device_id=device_id,
        election_id=p4runtime_pb2.Uint128(high=election >> 64, low=election & ((1 << 64) - 1)),
        updates=updates,
    )


# --- equal to the message encoder ------------------------------------------------------------

@needs_build
@pytest.mark.parametrize(("program", "p4info"), PROGRAMS, ids=[name for name, _ in PROGRAMS])
def test_update_bytes_equal_the_message_encoders(program: str, p4info: P4Info) -> None:
    rng = random.Random(f"update {program}")
    seen = set()
    for entity in random_entities(rng, p4info, 600):
        kind = rng.choice(KINDS)
        expected = _message_update(kind, entity, p4info)
        data = wire.update_bytes(kind, entity, p4info)
        assert p4runtime_pb2.Update.FromString(data) == expected, entity
        # the same bytes protobuf writes: also no field written twice (parsing would hide that)
        assert data == expected.SerializeToString(), entity
        seen.add(_category(entity))
    assert seen == _categories(p4info)


def _category(entity: Entity) -> str:
    if isinstance(entity, TableEntry):
        if entity.is_default:
            return "default entry"
        return "member entry" if entity.member_id is not None else "group entry" if entity.group_id is not None else "entry"
    return "member" if isinstance(entity, ActionProfileMember) else "group"


def _categories(p4info: P4Info) -> set[str]:
    """What random_entities makes for this P4Info."""
    out = set()
    for t in p4info.tables:
        out |= {"member entry", "group entry"} if t.implementation_id else {"entry"}
        if not t.implementation_id and not t.const_default_action_id:
            out.add("default entry")
    for profile in p4info.action_profiles:
        out |= {"member", "group"} if profile.with_selector else {"member"}
    return out


@needs_build
@pytest.mark.parametrize(("program", "p4info"), PROGRAMS, ids=[name for name, _ in PROGRAMS])
def test_write_request_bytes_equal_the_message_request(program: str, p4info: P4Info) -> None:
    rng = random.Random(f"request {program}")
    for device_id, election in ((0, 1), (1, 0), (3, (7 << 64) | 10), ((1 << 64) - 1, (1 << 128) - 1)):
        entities = list(random_entities(rng, p4info, rng.randint(0, 40)))
        kinds = [rng.choice(KINDS) for _ in entities]
        data = wire.write_request(device_id, election, [wire.update_bytes(k, e, p4info) for k, e in zip(kinds, entities)])
        expected = _message_request(device_id, election, [_message_update(k, e, p4info) for k, e in zip(kinds, entities)])
        assert p4runtime_pb2.WriteRequest.FromString(data) == expected
        assert data == expected.SerializeToString()


def test_request_ids_are_range_checked() -> None:
    with pytest.raises(ValueError, match="device_id: -1 outside"):
        wire.write_request(-1, 1, [])
    with pytest.raises(ValueError, match="election_id"):
        wire.write_request(1, 1 << 128, [])


def test_varint_as_protobuf_writes_it() -> None:
    for n in (1, 127, 128, 300, (1 << 31) - 1, -1, -(1 << 31)):  # int32, negative ones as 10 bytes
        assert p4runtime_pb2.TableEntry(priority=n).SerializeToString() == wire._TE_PRIORITY + wire.varint(n)
    for n in (1, 1 << 32, (1 << 64) - 1):  # uint64
        assert p4runtime_pb2.WriteRequest(device_id=n).SerializeToString() == wire._WR_DEVICE_ID + wire.varint(n)


# --- what the switch receives ----------------------------------------------------------------

class _AcceptingServicer(RecordingServicer):
    """Accepts every update (random updates need not make sense as a sequence)."""

    def _apply(self, update: p4runtime_pb2.Update) -> tuple[int, str]:
        return code_pb2.OK, ""


@needs_build
@pytest.mark.parametrize(("program", "p4info"), PROGRAMS, ids=[name for name, _ in PROGRAMS])
def test_switch_receives_the_message_encoders_requests(program: str, p4info: P4Info, tmp_path: Path) -> None:
    rng = random.Random(f"servicer {program}")
    updates = [(rng.choice(KINDS), e) for e in random_entities(rng, p4info, 250)]
    batch_size = rng.choice([1, 7, 100, 500])
    servicer = _AcceptingServicer()
    with serve(socket_dir(tmp_path), servicer) as address:
        with SwitchConnection("s1", address, device_id=5, election_id=(2, 9), p4info=p4info, timeout=5) as conn:
            assert conn.write(updates, batch_size=batch_size) == len(updates)
    messages = [_message_update(k, e, p4info) for k, e in updates]
    election = (2 << 64) | 9
    assert servicer.writes == [
        _message_request(5, election, messages[i : i + batch_size]) for i in range(0, len(messages), batch_size)
    ]


# --- errors: the same as the message encoder's, before anything is sent ---------------------

_BAD = [
    TableEntry("routes_v6", (("dst_addr", Lpm("fcbb:bb00:1::1", 48)),), "routing.drop"),  # bits beyond prefix
    TableEntry("routes_v6", (("dst_addr", Lpm("::", 129)),), "routing.drop"),
    TableEntry("routes_v6", (("dst_addr", Exact(0)),), "routing.drop"),
    TableEntry("routes_v6", (("dst", Lpm(0, 0)),), "routing.drop"),
    TableEntry("routes_v6", (), "set_next_hop", (("port", 1), ("smac", 0))),  # missing dmac
    TableEntry("routes_v6", (), "set_next_hop", (("port", 512), ("smac", 0), ("dmac", 0))),
    TableEntry("routes_v6", (), "set_next_hop", (("port", 1), ("smac", 0), ("dmac", 0), ("vlan", 1))),
    TableEntry("routes_v6", (), "set_next_hop", (("port", 1), ("port", 1), ("smac", 0), ("dmac", 0))),
    TableEntry("routes_v6", (), "set_next_hop", (("port", 1), ("smac", "02:00:00:00:00:01:02"), ("dmac", 0))),
    TableEntry("routes_v6", (), "NoAction"),  # not an action of the table
    TableEntry("routes_v6", (), "routing.drop", priority=3),
    TableEntry("routes_v6", (), member_id=1),
    TableEntry("routes_v6", action="routing.drop", is_default=True),  # const default action
    TableEntry("host_port", (("ingress_port", Exact(512)),), "NoAction"),
    TableEntry("host_port", (), "set_headend", (("src_addr", "::1"), ("usid_block", 1))),  # missing exact field
    TableEntry("punt", (("ether_type", Ternary(0x8801, 0xFF00)),), "send_to_cpu", priority=1),
    TableEntry("punt", (("ether_type", Ternary(0x88CC, 0xFFFF)),), "send_to_cpu"),  # no priority
    TableEntry("punt", (("ether_type", Ternary(0x88CC, 0xFFFF)),), "send_to_cpu", priority=1 << 31),
    TableEntry("punt", (("ether_type", Ternary(0x88CC, 0xFFFF)),), "send_to_cpu", priority="1"),
    TableEntry("spray_paths", (("dst_addr", Lpm(0, 0)),), "via_spine", (("spine_usid", 1), ("path_index", 1))),
    TableEntry("spray_paths", (), member_id=1 << 32),
    TableEntry("spray_paths", (), group_id=-1),
    TableEntry("spray_paths", (), member_id=1, group_id=2),
    TableEntry("nowhere", (), "NoAction"),
    TableEntry("routes_v6", (), "routing.drop", is_default="yes"),
    ActionProfileMember("spray_selector", 1, "routing.set_next_hop", (("port", 1), ("smac", 0), ("dmac", 0))),
    ActionProfileMember("spray_selector", 1 << 32, "via_spine", (("spine_usid", 1), ("path_index", 1))),
    ActionProfileMember("spray_selector", 1, "via_spine", (("spine_usid", 1 << 16), ("path_index", 1))),
    ActionProfileGroup("spray_selector", 1, tuple(range(513))),
    ActionProfileGroup("spray_selector", 1, (1, -2)),
    ActionProfileGroup("spray_selector", "1", (1,)),
    ActionProfileGroup("spray_selector", 1, (1,), max_size=1 << 31),
]


def _srv6_spray() -> P4Info:
    path = BUILD / "srv6_spray.p4info.txtpb"
    return P4Info.load(path)


@pytest.mark.parametrize("bad", _BAD, ids=range(len(_BAD)))
def test_wire_refuses_what_the_message_encoder_refuses(bad: Entity) -> None:
    p4info = _srv6_spray()
    with pytest.raises((ValueError, TypeError, UnknownNameError)) as by_message:
        encode_entity(bad, p4info)
    with pytest.raises(type(by_message.value)) as by_wire:
        wire.update_bytes("INSERT", bad, p4info)
    assert str(by_wire.value) == str(by_message.value)


def test_nothing_is_sent_when_one_entity_is_refused(tmp_path: Path) -> None:
    p4info = _srv6_spray()
    good = list(random_entities(random.Random("good"), p4info, 20))
    servicer = _AcceptingServicer()
    with serve(socket_dir(tmp_path), servicer) as address:
        with SwitchConnection("s1", address, device_id=1, election_id=1, p4info=p4info, timeout=5) as conn:
            for i, bad in enumerate(_BAD):
                updates = [("INSERT", e) for e in good[:i % 20]] + [("MODIFY", bad)] + [("INSERT", e) for e in good[i % 20:]]
                with pytest.raises((ValueError, TypeError, UnknownNameError)):
                    conn.write(updates, batch_size=1)
            assert servicer.writes == []
            assert conn.write([("INSERT", e) for e in good], batch_size=8) == 20
    assert [len(w.updates) for w in servicer.writes] == [8, 8, 4]
