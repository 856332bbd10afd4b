"""controller.runtime.wire's fast path: entries in the planner's form are checked and written in one
pass, to exactly protobuf's bytes; everything it would refuse goes to codec.canonical() (same errors).

test_wire.py shuffles match fields and params, so most of its entries take canonical()'s path;
these entries are in P4Info order, as the planner writes them, so they take the fast one.
"""

from __future__ import annotations

import random

import pytest

from controller.plan.entries import ActionProfileMember, Exact, Lpm, TableEntry, Ternary
from controller.runtime import wire
from controller.runtime.codec import derived, encode_entity
from controller.runtime.p4info import P4Info, TableInfo, UnknownNameError
from controller.runtime.proto import p4runtime_pb2
from tests.unit.controller.runtime.test_wire import (BUILD, PROGRAMS, _name, _notation, _number, _value,
                                                     needs_build)


def _fast(entity: TableEntry, p4info: P4Info) -> bytes | None:
    return wire._fast_entry(entity, derived(p4info, wire._Schema), p4info)


def _planner_entry(rng: random.Random, p4info: P4Info, table: TableInfo) -> TableEntry:
    """A valid entry with every match field and param given, in P4Info order (LPM /1 or more, masks not 0)."""
    match = []
    for f in table.match_fields:
        bits = f.bitwidth
        if f.match_type == "EXACT":
            match.append((f.name, Exact(_value(rng, bits))))
        elif f.match_type == "LPM":
            prefix = rng.choice([1, bits, rng.randint(1, bits)])
            match.append((f.name, Lpm(_notation(rng, _number(rng, bits) & ~((1 << (bits - prefix)) - 1), bits), prefix)))
        else:
            mask = _number(rng, bits) or 1
            match.append((f.name, Ternary(_notation(rng, _number(rng, bits) & mask, bits), _notation(rng, mask, bits))))
    priority = rng.choice([1, (1 << 31) - 1, rng.randint(1, (1 << 31) - 1)]) if table.needs_priority else 0
    if table.implementation_id:
        ident = rng.choice([0, 1, (1 << 32) - 1, rng.getrandbits(32)])
        kind = rng.choice(["member_id", "group_id"])
        return TableEntry(_name(rng, table), tuple(match), priority=priority, **{kind: ident})
    action = p4info.action.by_id(rng.choice([i for i in table.action_ids if i not in table.default_only_ids]))
    params = tuple((p.name, _value(rng, p.bitwidth)) for p in action.params)
    return TableEntry(_name(rng, table), tuple(match), _name(rng, action), params, priority=priority)


@needs_build
@pytest.mark.parametrize(("program", "p4info"), PROGRAMS, ids=[name for name, _ in PROGRAMS])
def test_planner_form_takes_the_fast_path_to_protobufs_bytes(program: str, p4info: P4Info) -> None:
    rng = random.Random(f"fast {program}")
    tables = [t for t in p4info.tables if not t.is_const]
    entries = [_planner_entry(rng, p4info, rng.choice(tables)) for _ in range(600)]
    for entry in entries:
        expected = encode_entity(entry, p4info).SerializeToString()
        assert _fast(entry, p4info) == expected, entry
        assert wire.entity_bytes(entry, p4info) == expected, entry
    kinds = [rng.choice(["INSERT", "MODIFY", "DELETE"]) for _ in entries]
    assert wire.updates_bytes(zip(kinds, entries), p4info) == [
        p4runtime_pb2.Update(type=p4runtime_pb2.Update.Type.Value(k), entity=encode_entity(e, p4info)).SerializeToString()
        for k, e in zip(kinds, entries)]


# In the planner's form (so the fast path looks at each), but refused: it must leave them to canonical().
_HEADEND = (("host_addr", "::2"), ("usid_block", 1), ("src_addr", "::1"), ("headend", 1))


def _host_port(value: object, params: tuple = _HEADEND, **kw: object) -> TableEntry:
    return TableEntry("host_policy", (("ingress_port", Exact(value)),), "sr_boundary", params, **kw)


def _punt(ether_type: Ternary, **kw: object) -> TableEntry:
    return TableEntry("punt", (("ether_type", ether_type), ("ingress_port", Ternary(1, 1)), ("ipv6_dst", Ternary(0, 1))),
                      "send_to_cpu", **kw)


def _route(params: tuple) -> TableEntry:
    return TableEntry("routes_v6", (("dst_addr", Lpm("fd00::1", 128)),), "set_next_hop", params)


_REFUSED = [
    _host_port(512),  # 9 bits
    _host_port(-1),
    _host_port(True),
    _host_port("0x200"),
    _host_port("-3"),
    _host_port("port one"),
    _host_port(b"\x02\x00"),  # bytes: canonical() reads them, and finds them too wide
    TableEntry("host_policy", (("ingress_port", Lpm(1, 9)),), "sr_boundary", _HEADEND),  # not an LPM field
    _host_port(1, (("host_addr", "::2"), ("usid_block", 1 << 32), ("src_addr", "::1"), ("headend", 1))),
    _host_port(1, (("host_addr", "::2"), ("usid_block", 1), ("src_addr", "::1"), ("headend", 2))),  # 1 bit
    _host_port(1, (("host_addr", "::2"), ("usid_block", 1), ("src_addr", "::1::"), ("headend", 1))),
    _host_port(1, (("host_addr", "::2"), ("usid_block", 1), ("headend", 1))),  # src_addr missing
    _host_port(1, priority=1),
    _host_port(1, member_id=1),
    _host_port(1, group_id=0),
    _host_port(1, priority="0"),
    _host_port(1, priority=True),
    _host_port(1, is_default="no"),
    TableEntry("routes_v6", (("dst_addr", Lpm("fcbb:bb00:1::1", 48)),), "routing.drop"),  # bits beyond prefix
    TableEntry("routes_v6", (("dst_addr", Lpm("fcbb::", 129)),), "routing.drop"),
    TableEntry("routes_v6", (("dst_addr", Lpm("fcbb::", -1)),), "routing.drop"),
    TableEntry("routes_v6", (("dst_addr", Lpm(1 << 128, 128)),), "routing.drop"),
    TableEntry("routes_v6", (("dst_addr", Exact("fd00::1")),), "routing.drop"),
    _route((("port", 1), ("smac", "02:00:00:00:00:01:02"), ("dmac", 0))),
    _route((("port", 1), ("smac", "fd00::1"), ("dmac", 0))),  # 128 bits into 48
    _route((("port", 1), ("smac", 0), ("dmac", 0), ("dmac", 0))),
    _route((("port", 1), ("smac", 0), ("dmac", 0), ("vlan", 0))),
    _route((("port", 1), ("smac", 0), ("dmac", "02:00:00:00:00:01"), ("port", 2))),
    _punt(Ternary(0x88CC, 0xFF00), priority=1),  # value outside mask
    _punt(Ternary(0x88CC, 0xFFFF)),  # no priority
    _punt(Ternary(0x88CC, 0xFFFF), priority=1 << 31),
    _punt(Ternary(0x88CC, 1 << 16), priority=1),
    _punt(Ternary(-1, 0xFFFF), priority=1),
    TableEntry("spray_paths", (("dst_addr", Lpm("fd00::", 64)),), member_id=1 << 32),
    TableEntry("spray_paths", (("dst_addr", Lpm("fd00::", 64)),), group_id=-1),
    TableEntry("spray_paths", (("dst_addr", Lpm("fd00::", 64)),), member_id="1"),
    TableEntry("spray_paths", (("dst_addr", Lpm("fd00::", 64)),), member_id=1, group_id=2),
    TableEntry("spray_paths", (("dst_addr", Lpm("fd00::", 64)),), group_id=1, params=(("spine_usid", 1),)),
    TableEntry("host_policy", None, "sr_boundary", _HEADEND),  # not a tuple of matches
    TableEntry("host_policy", (("ingress_port", Exact(1)),), "sr_boundary", None),
    TableEntry("host_policy", (("ingress_port",),), "sr_boundary", _HEADEND),
]
# Refused for their (table, action) pair: the fast path has no recipe for them at all.
_NO_RECIPE = [
    TableEntry("spray_paths", (("dst_addr", Lpm("fd00::", 64)),), "via_spine", (("spine_usid", 1), ("path_index", 1))),
    TableEntry("host_policy", (("ingress_port", Exact(1)),), "no_such_action"),
    TableEntry("host_policy", (("ingress_port", Exact(1)),), "NoAction"),  # not an entry action of host_policy
    TableEntry("nowhere", (("ingress_port", Exact(1)),), "NoAction"),
]


def _srv6_spray() -> P4Info:
    return P4Info.load(BUILD / "srv6_spray.p4info.txtpb")


@needs_build
@pytest.mark.parametrize("bad", _REFUSED + _NO_RECIPE, ids=range(len(_REFUSED + _NO_RECIPE)))
def test_what_canonical_refuses_the_fast_path_leaves_to_it(bad: TableEntry) -> None:
    p4info = _srv6_spray()
    schema = derived(p4info, wire._Schema)
    assert (wire._recipe(schema, p4info, bad.table, bad.action) is None) == any(bad is e for e in _NO_RECIPE)
    assert _fast(bad, p4info) is None
    with pytest.raises((ValueError, TypeError, UnknownNameError)) as by_message:
        encode_entity(bad, p4info)
    with pytest.raises(type(by_message.value)) as by_wire:
        wire.updates_bytes([("INSERT", bad)], p4info)
    assert str(by_wire.value) == str(by_message.value)


# Valid, in other forms: canonical() reads them (or the fast path does, as canonical() would) to the same bytes.
_OTHER_FORMS = [
    TableEntry("routes_v6", (("dst_addr", Lpm(" fd00::1 ", 128)),), "routing.drop"),  # blanks around an address
    TableEntry("routes_v6", (("dst_addr", Lpm(b"\xfd" + bytes(15), 8)),), "routing.drop"),  # bytes
    TableEntry("routes_v6", (("dst_addr", Lpm("::", 0)),), "routing.drop"),  # /0: left out
    TableEntry("routes_v6", (), "routing.drop"),
    _route((("dmac", 1), ("port", 1), ("smac", 0))),  # params out of order
    _route((("port", "0x1ff"), ("smac", " 02:aa:00:00:00:01"), ("dmac", "10"))),  # hex, blanks, decimal
    _host_port(1, priority=-4),  # allowed in a table without priorities, and written
    _host_port(1, is_default=0),
    _host_port(b"\x01"),  # bytes
    _punt(Ternary(0, 0), priority=1),  # mask 0: left out
    TableEntry("IngressPipe.routing.routes_v6", (("dst_addr", Lpm("FD00::1", 128)),), "IngressPipe.routing.drop"),
]


@needs_build
@pytest.mark.parametrize("entry", _OTHER_FORMS, ids=range(len(_OTHER_FORMS)))
def test_other_forms_give_protobufs_bytes(entry: TableEntry) -> None:
    p4info = _srv6_spray()
    assert wire.entity_bytes(entry, p4info) == encode_entity(entry, p4info).SerializeToString()


@needs_build
def test_one_refused_entity_stops_the_batch_with_its_error() -> None:
    p4info = _srv6_spray()
    good = TableEntry("routes_v6", (("dst_addr", Lpm("fd00::1", 128)),), "routing.drop")
    member = ActionProfileMember("spray_selector", 1, "via_spine", (("spine_usid", 1 << 16), ("path_index", 1)))
    with pytest.raises(ValueError, match="spine_usid: value 65536 does not fit in 16 bits"):
        wire.updates_bytes([("INSERT", good), ("INSERT", member), ("INSERT", good)], p4info)
