"""controller.analysis.bmv2hash and fabricload: the programs' hash as bmv2 computes it, and each scheme's
link loads on small fabrics against hand-computed placements of the bytes."""

from __future__ import annotations

import ipaddress
import struct
import zlib

import numpy as np
import pytest

from controller.analysis import bmv2hash
from controller.analysis.fabricload import Fabric, Failed, LoadError, draw, iteration, per_qp, step_loads, variants
from controller.workload import Rates, Workload, grid, ideal_time


def test_crc32_is_the_standard_crc32() -> None:
    # the CRC-32 check value (reflected 0x04C11DB7, init and xorout 0xFFFFFFFF), and zlib on random rows
    assert int(bmv2hash.crc32_rows(np.frombuffer(b"123456789", dtype=np.uint8)[None, :])[0]) == 0xCBF43926
    rows = np.random.default_rng(5).integers(0, 256, (200, 43), dtype=np.uint8)
    assert bmv2hash.crc32_rows(rows).tolist() == [zlib.crc32(bytes(r)) for r in rows]


def _mapped(v4: str) -> bytes:
    return bytes(10) + b"\xff\xff" + ipaddress.IPv4Address(v4).packed


def test_eecmp_hash_serializes_the_fields_as_the_program_lists_them() -> None:
    # eecmp_qp_hash.p4: {l3_src, l3_dst, l3_proto, l4_src_port, l4_dst_port[, bth.dest_qp]}, crc32, low 16 bits
    src, dst = int(ipaddress.IPv4Address("10.0.0.1")), int(ipaddress.IPv4Address("10.0.2.1"))
    five = _mapped("10.0.0.1") + _mapped("10.0.2.1") + struct.pack("!BHH", 17, 0xC100, 4791)
    got = bmv2hash.eecmp(np.array([src]), np.array([dst]), 0xC100, None)
    assert got.tolist() == [zlib.crc32(five) & 0xFFFF]
    got = bmv2hash.eecmp(np.array([src]), np.array([dst]), 0xC100, np.array([0x100]))
    assert got.tolist() == [zlib.crc32(five + (0x100).to_bytes(3, "big")) & 0xFFFF]


def test_spray_hash_matches_the_bmv2_test_formula() -> None:
    # tests/bmv2/p4/test_srv6_spray.py checks simple_switch's flow label against this formula
    s, d = ipaddress.IPv6Address("fd00:0:0:11::1"), ipaddress.IPv6Address("fd00:0:0:12::1")
    data = s.packed + d.packed + bytes([17]) + struct.pack("!HH", 49152, 4791) + (0x12).to_bytes(3, "big") + \
        (7).to_bytes(3, "big")
    si, di = int(s), int(d)
    got = bmv2hash.spray((si >> 64, si & (2**64 - 1)), (di >> 64, di & (2**64 - 1)), 49152, 1,
                         np.array([0x12]), np.array([7]))
    assert got.tolist() == [zlib.crc32(data) & 0xFFFF]


# 1 plane, 2 spines, 2 leaves of 1 host; links at half the host rate: two ranks' ring AllReduce needs both uplinks
SLOW = Fabric(1, 2, 2, 1, host_bps=100e9, link_bps=50e9)
TWO = Workload("allreduce", 1000)


def _loads(scheme: str, fabric: Fabric = SLOW, workload: Workload = TWO, failed: Failed | None = None, n: int = 2):
    pl = grid(fabric.planes, fabric.leaves, fabric.hosts_per_leaf, "packed", n)
    (v,) = variants(workload, pl, fabric, per_qp(scheme))  # type: ignore[arg-type]
    return v, step_loads(v, scheme, fabric, failed or Failed.healthy(fabric))  # type: ignore[arg-type]


def test_ecmp_puts_each_flow_on_the_spine_its_hash_picks() -> None:
    v, ld = _loads("ecmp")
    # h0 (leaf 0) -> h1 (leaf 1): 10.0.0.1 -> 10.0.2.1, sport 0xC000 | 0x100, one 500-byte chunk per step
    five = _mapped("10.0.0.1") + _mapped("10.0.2.1") + struct.pack("!BHH", 17, 0xC100, 4791)
    spine = (zlib.crc32(five) & 0xFFFF) % 2
    expect = np.zeros((2, 2))
    expect[0, spine] = 500
    assert ld.up[0].tolist() == expect[0].tolist() and ld.host_up.tolist() == [[500, 500]]


def test_pinning_takes_the_destination_slot_and_skips_a_dead_uplink() -> None:
    _, ld = _loads("pin")
    assert ld.up.tolist() == [[500, 0], [500, 0]] and ld.down.tolist() == [[500, 0], [500, 0]]
    failed = Failed.healthy(SLOW)
    failed.alive[0, 0, 0] = False  # leaf 0 - spine 0: both directions' groups lose member 0
    _, ld = _loads("pin", failed=failed)
    assert ld.up.tolist() == [[0, 500], [0, 500]]
    failed.alive[0, 0, 1] = False
    assert _loads("pin", failed=failed)[1].cut


@pytest.mark.parametrize("scheme", ["leaf_spray", "host_spray", "ethereal"])
def test_splitting_schemes_use_both_uplinks(scheme: str) -> None:
    _, ld = _loads(scheme)
    assert ld.up.tolist() == [[250, 250], [250, 250]] and ld.down.tolist() == [[250, 250], [250, 250]]


def test_slowdown_of_pinning_against_spraying_by_hand() -> None:
    pl = grid(1, 2, 1, "packed", 2)
    ideal = ideal_time(TWO, pl, 2, Rates(SLOW.host_bps, SLOW.link_bps))
    assert ideal == pytest.approx(2 * 500 * 8 / 100e9)  # two steps, 500 B, host- and leaf-bound alike
    pin = iteration(variants(TWO, pl, SLOW, True), "pin", SLOW, Failed.healthy(SLOW)).time
    spray = iteration(variants(TWO, pl, SLOW, True), "leaf_spray", SLOW, Failed.healthy(SLOW)).time
    assert (pin / ideal, spray / ideal) == (pytest.approx(2.0), pytest.approx(1.0))


def test_split_over_two_planes_uses_both_nics_round_robin_one_per_message() -> None:
    fab = Fabric(2, 1, 2, 1)
    split = _loads("eecmp", fab, Workload("allreduce", 1000, qps=2, strategy="split"))[1]
    assert split.host_up.tolist() == [[250, 250], [250, 250]]
    pl = grid(2, 2, 1, "packed", 2)
    vs = variants(Workload("allreduce", 1000, qps=2), pl, fab, True)
    assert [(v.plane.tolist(), v.repeat) for v in vs] == [([0, 0], 1), ([1, 1], 1)]  # message 0 on QP 0, 1 on QP 1


def test_ethereal_gives_each_flow_of_a_leaf_its_own_path() -> None:
    fab = Fabric(1, 2, 2, 2)  # two hosts a leaf: spread ring of 4 has two cross-leaf flows per leaf
    pl = grid(1, 2, 2, "spread", 4)
    (v,) = variants(Workload("allgather", 4000), pl, fab, False)
    ld = step_loads(v, "ethereal", fab, Failed.healthy(fab))
    assert ld.up.tolist() == [[1000, 1000], [1000, 1000]] and ld.down.tolist() == [[1000, 1000], [1000, 1000]]


def test_failure_draws_are_seeded_and_shaped() -> None:
    fab = Fabric(2, 4, 8, 2)
    a = draw(fab, np.random.default_rng(3), "link", 5, np.array([1, 2]))
    b = draw(fab, np.random.default_rng(3), "link", 5, np.array([1, 2]))
    assert a.links == b.links and len(set(a.links)) == 5 and {leaf for _, leaf, _ in a.links} <= {1, 2}
    assert int((~a.alive).sum()) == 5
    t = draw(fab, np.random.default_rng(3), "t1", 2)
    assert int((~t.alive).sum()) == 2 * 8 and all(not t.alive[p, :, j].any() for p, j in t.spines)
    with pytest.raises(LoadError, match="3 T1 failures: the fabric has 2 T1 switches"):
        draw(Fabric(1, 2, 2, 1), np.random.default_rng(1), "t1", 3)


def test_ethereal_splits_finer_when_a_failure_leaves_paths_the_flows_do_not_divide() -> None:
    from controller.analysis.fabricload import _parts

    # 16 flows over 127 paths: 8 parts put two on some path (2/8 of a flow), 31 at most 4/31, 127 exactly 16/127
    assert _parts(np.array([16, 256, 2, 1, 16]), np.array([127, 2048, 3, 5, 128])).tolist() == [127, 8, 3, 5, 8]
    fab = Fabric(1, 4, 2, 2)
    failed = Failed.healthy(fab)
    failed.alive[0, 0, 3] = False  # leaf 0 - spine 3
    (v,) = variants(Workload("allgather", 4000), grid(1, 2, 2, "spread", 4), fab, False)
    ld = step_loads(v, "ethereal", fab, failed)
    # each leaf's two 1000-byte flows in three parts on the three live spines: two parts a spine
    assert ld.up.ravel().tolist() == pytest.approx(([2000 / 3] * 3 + [0]) * 2)
    assert ld.host_up.tolist() == [[1000] * 4]
