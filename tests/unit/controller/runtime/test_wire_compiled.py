"""controller.runtime.wire's encoders compiled per (table, action): protobuf's bytes for values of every
length (nested lengths of more than one byte too), MAC and address text read as codec.to_int reads it,
one encoder per pair and P4Info, and canonical()'s errors for what they leave to it."""

from __future__ import annotations

import random

import pytest
from google.protobuf import text_format

from controller.plan.entries import Exact, Lpm, TableEntry, Ternary
from controller.runtime import wire
from controller.runtime.codec import derived, encode_entity
from controller.runtime.p4info import P4Info
from controller.runtime.proto import p4info_pb2
from tests.unit.controller.runtime.test_wire import BUILD, needs_build

# Widths whose values, and the messages around them, are 128 bytes or more: lengths of two varint bytes.
_WIDE = """
tables { preamble { id: 1 name: "wide" alias: "wide" }
  match_fields { id: 1 name: "key" bitwidth: 1100 match_type: EXACT }
  match_fields { id: 2 name: "prefix" bitwidth: 1030 match_type: LPM }
  match_fields { id: 3 name: "bits" bitwidth: 1050 match_type: TERNARY }
  action_refs { id: 10 } size: 16 }
actions { preamble { id: 10 name: "set" alias: "set" }
  params { id: 1 name: "big" bitwidth: 2000 }
  params { id: 2 name: "small" bitwidth: 8 } }
"""


def _wide() -> P4Info:
    return P4Info(text_format.Parse(_WIDE, p4info_pb2.P4Info()))


def _fast(entry: TableEntry, p4info: P4Info) -> bytes | None:
    return wire._fast_entry(entry, derived(p4info, wire._Schema), p4info)


def _wide_entry(rng: random.Random) -> TableEntry:
    prefix = rng.choice([1, 7, 1029, 1030, rng.randint(1, 1030)])
    mask = rng.getrandbits(rng.randint(1, 1050)) or 1
    return TableEntry("wide", (
        ("key", Exact(rng.choice([0, 1, (1 << 1100) - 1, rng.getrandbits(rng.randint(1, 1100))]))),
        ("prefix", Lpm(rng.getrandbits(1030) & ~((1 << (1030 - prefix)) - 1), prefix)),
        ("bits", Ternary(rng.getrandbits(1050) & mask, mask)),
    ), "set", (("big", rng.getrandbits(rng.randint(1, 2000))), ("small", rng.getrandbits(8))),
        priority=rng.choice([1, 127, 128, 300, (1 << 31) - 1]))


def test_wide_values_give_protobufs_bytes() -> None:
    p4info = _wide()
    rng = random.Random("wide")
    for _ in range(300):
        entry = _wide_entry(rng)
        expected = encode_entity(entry, p4info).SerializeToString()
        assert _fast(entry, p4info) == expected, entry
    assert len(expected) > 300  # the entity's length, and its action's, take two varint bytes


def test_one_encoder_per_pair_and_p4info_one_compile_per_source() -> None:
    first, second = _wide(), _wide()
    encoder = wire._recipe(derived(first, wire._Schema), first, "wide", "set")
    assert encoder is not None
    assert wire._recipe(derived(first, wire._Schema), first, "wide", "set") is encoder
    other = wire._recipe(derived(second, wire._Schema), second, "wide", "set")
    assert other is not None and other is not encoder
    assert other.__code__ is encoder.__code__  # compiled once for both: the same source
    entry = _wide_entry(random.Random("shared"))
    assert other(entry) == encoder(entry) == encode_entity(entry, second).SerializeToString()


def _srv6_spray() -> P4Info:
    return P4Info.load(BUILD / "srv6_spray.p4info.txtpb")


def _route(smac: object, dst: object = "fd00::1") -> TableEntry:
    return TableEntry("routes_v6", (("dst_addr", Lpm(dst, 128)),), "set_next_hop",
                      (("port", 1), ("smac", smac), ("dmac", 2)))


# MAC-shaped text and its near misses: the compiled encoder reads a MAC itself (6 bytes from the 12 characters
# beside its colons), other text by codec.to_int; what canonical() refuses it leaves to canonical().
_MACS_READ = [
    ("02:aa:00:00:00:01", 0x02AA00000001), ("FF:ff:Ab:cD:00:09", 0xFFFFABCD0009), ("00:00:00:00:00:00", 0),
    ("02:aa:00:00:00:01\n", 0x02AA00000001),  # a MAC to to_int too (its pattern allows a newline at the end)
    (" 02:aa:00:00:00:01", 0x02AA00000001),  # to_int strips blanks
    ("0x2aa00000001", 0x02AA00000001), (str(0x02AA00000001), 0x02AA00000001),
]
_MACS_REFUSED = [
    "02:aa:00:00:0 :01",  # a blank where a hex digit belongs (fromhex skips blanks)
    "02:aa:00:00:  :01",  # two: fromhex would read 5 bytes
    "02:aa:00:00:0g:01",
    "02:aa:00:00:00::1",  # another colon: an IPv6 address, 128 bits into 48
    "ab:cd:ef:01:23::4",  # colons where a MAC has them, and an IPv6 address
    "02:aa:00:00:00:\uff101",  # a full-width digit: int() reads it, a MAC's pattern does not
    "0x:aa:00:00:00:01",
    "02-aa-00-00-00-01",
]


@needs_build
@pytest.mark.parametrize(("smac", "number"), _MACS_READ, ids=range(len(_MACS_READ)))
def test_mac_text_is_read_as_to_int_reads_it(smac: str, number: int) -> None:
    p4info = _srv6_spray()
    expected = encode_entity(_route(number), p4info).SerializeToString()
    assert _fast(_route(smac), p4info) == encode_entity(_route(smac), p4info).SerializeToString() == expected


@needs_build
@pytest.mark.parametrize("smac", _MACS_REFUSED, ids=range(len(_MACS_REFUSED)))
def test_mac_text_canonical_refuses_is_left_to_it(smac: str) -> None:
    p4info = _srv6_spray()
    entry = _route(smac)
    assert _fast(entry, p4info) is None
    with pytest.raises(ValueError) as by_message:
        encode_entity(entry, p4info)
    with pytest.raises(ValueError) as by_wire:
        wire.updates_bytes([("INSERT", entry)], p4info)
    assert str(by_wire.value) == str(by_message.value)


@needs_build
@pytest.mark.parametrize("dst", ["fd00::1", "FD00:0:0:0:0:0:0:1", "::ffff:10.0.0.1", "::", " fd00::1", "fd00::1%eth0",
                                 "fd00::1::", "1", "0x10", "10.0.0.1", b"\xfd" + bytes(15), True])
def test_address_text_as_to_int_reads_it(dst: object) -> None:
    p4info = _srv6_spray()
    entry = _route(3, dst)
    try:
        expected = encode_entity(entry, p4info).SerializeToString()
    except (ValueError, TypeError) as refused:
        assert _fast(entry, p4info) is None
        with pytest.raises(type(refused)) as by_wire:
            wire.updates_bytes([("INSERT", entry)], p4info)
        assert str(by_wire.value) == str(refused)
    else:
        assert wire.entity_bytes(entry, p4info) == expected
