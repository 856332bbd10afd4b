"""controller.analysis: modelling the lab's collective runs exactly: the UDP source ports the lab's
senders write (the plane's leaf EV, or the QP's crc32 port on the kernel) and a randomly keyed hash in
place of bmv2's crc32 (Linux's multipath hash)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from controller.analysis.collective import Settings, analyze, check
from controller.analysis.design import parse_design
from controller.analysis.fabricload import LoadError, keyed_hash, lab_sport, scheme_hash, variants, with_hash_key, \
    with_sports
from controller.workload import Workload
from endpoint.collective.rank import qp_sport
from endpoint.wire import sport_of
from controller.plan.evs import LEAF_CHOICE, ev_id

LAB = parse_design("2x2x2x4")  # the bench's lab: 2 planes x 2 spines x 2 leaves x 4 hosts


def test_port_rules_are_the_lab_senders_ports() -> None:
    plane = np.array([0, 1, 0, 1])
    qpn = np.array([0x100, 0x101, 0x102, 0x103])
    # 'ev': the port of the plane's leaf EV, whatever the QP (endpoint.wire.sport_of of its id)
    assert lab_sport(plane, qpn, "ev").tolist() == [0xC3FF, 0xC7FF, 0xC3FF, 0xC7FF]
    assert lab_sport(plane, qpn, "ev").tolist() == [sport_of(ev_id(int(p), LEAF_CHOICE)) for p in plane]
    # 'qp-crc': the kernel lab's per-QP port, rank.qp_sport
    want = [0xC000 | (zlib.crc32(int(q).to_bytes(4, "big")) & 0x3FFF) for q in qpn]
    assert lab_sport(plane, qpn, "qp-crc").tolist() == want == [qp_sport(int(q)) for q in qpn]
    assert lab_sport(plane, qpn, "qp").tolist() == [0xC100, 0xC101, 0xC102, 0xC103]
    with pytest.raises(LoadError, match="UDP source port rule 'port' is not one of qp, ev, qp-crc"):
        lab_sport(plane, qpn, "port")


def test_one_port_per_host_pair_and_plane_puts_every_qp_of_a_pair_on_one_uplink() -> None:
    s = Settings(LAB, Workload("allreduce", 1 << 17, qps=8, strategy="split"), "h0,h4,h1,h5")
    p = check(s)
    (v,) = variants(s.workload, p, s.fabric(), True)
    for rule, distinct in (("ev", 1), ("qp", 4)):
        w = with_sports([v], rule)[0]
        spine = scheme_hash(w, "ecmp", s.fabric()) % 2
        for src, dst, plane in {(int(a), int(b), int(c)) for a, b, c in zip(w.src, w.dst, w.plane)}:
            rows = (w.src == src) & (w.dst == dst) & (w.plane == plane)
            assert len(set(w.sport[rows].tolist())) == distinct
            if rule == "ev":
                assert len(set(spine[rows].tolist())) == 1  # the 4 QPs of the pair in this plane: one uplink


def test_lab_ports_change_the_prediction_for_ecmp_only() -> None:
    base = Settings(LAB, Workload("allreduce", 1 << 17, qps=8, strategy="split"), "h0,h4,h1,h5",
                    schemes=("ecmp", "eecmp", "leaf_spray"))
    by_rule = {rule: {r.scheme: r.slowdown for r in analyze(Settings(**{**base.__dict__, "sport_rule": rule})).schemes}
               for rule in ("qp", "ev")}
    # bmv2's crc32 over the lab's IPv4 addresses: with the EV's port both leaves' two flows of a plane
    # hash onto one uplink; E-ECMP's destination QP spreads them
    assert by_rule["ev"] == pytest.approx({"ecmp": 2.0, "eecmp": 1.0, "leaf_spray": 1.0})
    assert by_rule["qp"]["leaf_spray"] == pytest.approx(1.0)


def test_keyed_hash_is_a_function_of_key_and_fields() -> None:
    rows = np.arange(20_000)
    a, b = keyed_hash(1, rows, rows * 3), keyed_hash(1, rows, rows * 3)
    assert a.tolist() == b.tolist() and int(a.min()) >= 0 and int(a.max()) < 1 << 31
    assert (keyed_hash(2, rows, rows * 3) != a).mean() > 0.99
    assert 0.48 < float((a % 2).mean()) < 0.52  # an even split of distinct flows over two members


def test_a_random_hash_gives_the_distribution_of_collisions() -> None:
    # 5-tuple ECMP with one port per host pair and plane: in each plane and direction the two crossing flows
    # collide unless the hash splits them (one chance in two), so the ring takes 1.00 only if all four avoid it
    s = Settings(LAB, Workload("allreduce", 1 << 17, qps=8, strategy="split"), "h0,h4,h1,h5", schemes=("ecmp",),
                 sport_rule="ev")
    xs = [analyze(Settings(**{**s.__dict__, "hash_key": k})).schemes[0].slowdown for k in range(160)]
    assert set(np.round(xs, 6)) == {1.0, 2.0}
    assert 3 <= sum(1 for x in xs if x < 1.5) <= 25  # 1/16 of 160 is 10
    p = check(s)
    (v,) = variants(s.workload, p, s.fabric(), True)
    keyed = with_hash_key(with_sports([v], "ev"), 7)[0]
    assert scheme_hash(keyed, "ecmp", s.fabric()).tolist() == \
        keyed_hash(7, keyed.src, keyed.dst, keyed.plane, keyed.sport).tolist()


def test_a_fixed_port_and_a_port_rule_exclude_each_other() -> None:
    s = Settings(LAB, Workload("allreduce", 1 << 17, qps=2, sport=49152), "spread", 4, sport_rule="ev")
    with pytest.raises(LoadError, match=r"^a fixed UDP source port \(49152\) and the port rule 'ev' exclude each other$"):
        check(s)


def test_a_dead_link_from_the_start_by_hand() -> None:
    # all-to-all over h0,h4,h1,h5, 2 QPs split: each rank sends one chunk (32 KiB) to each peer, two of
    # them across the leaves. Ideal: a host's 3 chunks over its 2 NIC ports, 1.5 chunks a port (leaf 0's 4
    # crossing chunks over 4 uplinks is 1 each). With plane 0's leaf 0 - spine 0 link dead:
    s = Settings(LAB, Workload("alltoall", 1 << 17, qps=2, strategy="split"), "spread", 4,
                 schemes=("host_spray", "leaf_spray"), dead_links=((0, 0, 0),))
    by = {r.scheme: r for r in analyze(s).schemes}
    # leaf spraying: QP 0 rides plane 0, so half of leaf 0's 4 crossing chunks take spine 1 alone: 2 chunks
    assert by["leaf_spray"].slowdown == pytest.approx(2 / 1.5)
    # host spraying: crossing bytes in proportion to live paths (plane 0 one, plane 1 two), the local
    # chunk half and half: h0's plane-1 port carries 2 x 2/3 + 1/2 chunks
    assert by["host_spray"].slowdown == pytest.approx((2 * 2 / 3 + 0.5) / 1.5)
    healthy = analyze(Settings(**{**s.__dict__, "dead_links": ()}))
    assert [r.slowdown for r in healthy.schemes] == pytest.approx([1.0, 1.0])
