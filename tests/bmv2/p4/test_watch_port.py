"""Watch ports on a real simple_switch_grpc: groups read back with them, and PI's watch-port enforcement
leaving out the member whose port lost its carrier (bmv2's port monitor, no controller write), then using
it again once the carrier is back."""

from __future__ import annotations

import time
from collections import Counter
from typing import Callable

from scapy.layers.inet6 import IPv6

from controller.plan.entries import ActionProfileGroup, TableEntry
from controller.plan.delta import diff
from controller.runtime.codec import canonical
from mininet_labs import netns
from mininet_labs.roce import roce_v4, roce_v6
from tests.bmv2.p4.test_eecmp import PROFILE as ECMP_PROFILE, QP, UPLINKS, ecmp_entries, v4
from tests.bmv2.p4.test_srv6_spray import (DST_DT6, DST_HOST, DST_LEAF, HOST, SPINE_A, SPINE_B, SRC_HOST, UP_A,
                                           UP_B, carrier, headend_entries, outer, spray_hash)

SPRAY_PROFILE = "IngressPipe.headend.spray_selector"
# bmv2 polls its ports' operstate every 200 ms (src/bm_sim/port_monitor.cpp); the test waits for what
# the traffic shows, up to this long, and asserts nothing about the time itself
NOTICE_WITHIN = 15.0
# bmv2's port monitor starts with the switch's first pipeline and takes every port as down until its first
# poll: a carrier lost before that poll is never reported (while PI, asking the port directly when the group
# was written, has it up). A cut the traffic does not show within this long is given back and made again.
RECUT_AFTER = 3.0


def watched(entities: list, ports: dict[int, int]) -> list:
    """`entities` with their group's members watching `ports` (member id -> port)."""
    return [ActionProfileGroup(e.profile, e.group_id, e.members, e.max_size, tuple(ports.items()))
            if isinstance(e, ActionProfileGroup) else e for e in entities]


def carrier_down(device, port: int, down: bool) -> None:
    """The switch's own end of a port administratively down (or up): its carrier goes, as `lab fault` does."""
    netns.run("ip", "link", "set", f"sw{port}", "down" if down else "up", ns=device.switch.ns)


def wait_until(batch: Callable[[], Counter], done: Callable[[Counter], bool], within: float = NOTICE_WITHIN,
               must: bool = True) -> Counter | None:
    """Send batches until one satisfies `done` (what bmv2 noticed shows in the traffic); past `within`: fail
    (`must`), else None."""
    deadline = time.monotonic() + within
    while True:
        got = batch()
        if done(got):
            return got
        if time.monotonic() >= deadline:
            assert not must, f"the switch never showed it in {within:g} s: last batch {got}"
            return None


def cut_until_noticed(device, port: int, batch: Callable[[], Counter], done: Callable[[Counter], bool]) -> Counter:
    """The port's carrier cut until the traffic shows the switch noticed: a cut its port monitor missed (made
    before its first poll) is given back and made again, up to NOTICE_WITHIN in all."""
    deadline = time.monotonic() + NOTICE_WITHIN
    while True:
        carrier_down(device, port, True)
        got = wait_until(batch, done, within=RECUT_AFTER, must=False)
        if got is not None:
            return got
        assert time.monotonic() < deadline, f"the switch never showed port {port}'s lost carrier in {NOTICE_WITHIN} s"
        carrier_down(device, port, False)
        back = time.monotonic() + RECUT_AFTER  # traffic while its monitor polls it up (every 200 ms), then cut again
        while time.monotonic() < back:
            batch()


def test_groups_are_read_back_with_their_watch_ports(spray, ecmp):
    spray_entities = watched(headend_entries(mode=1, spines={SPINE_A: UP_A, SPINE_B: UP_B}), {1: UP_A, 2: UP_B})
    spray.install(*spray_entities)
    ecmp_entities = watched(ecmp_entries(v4("10.1.0.0", 16), mode=QP), dict(enumerate(UPLINKS, 1)))
    ecmp.install(*ecmp_entities)
    for device, profile, entities in ((spray, SPRAY_PROFILE, spray_entities), (ecmp, ECMP_PROFILE, ecmp_entities)):
        p4info = device.conn.require_p4info()
        (written,) = [canonical(e, p4info) for e in entities if isinstance(e, ActionProfileGroup)]
        assert written.watch_ports
        (read,) = device.conn.read_groups(profile)
        # as written, each member with its own port (PI with patches/pi-watch-port.patch): no change
        assert read == written
        assert not diff([written], [read])


def _batch(device, packets: list) -> Callable[[], Counter]:
    """Send `packets` in; the ports they came out of, and 'lost' for those that did not come out."""
    def batch() -> Counter:
        for pkt in packets:
            device.switch.send(HOST, bytes(pkt))
        got = device.switch.receive(timeout=2.0, count=len(packets))
        out = Counter(port for port, _ in got)
        if len(got) < len(packets):
            out["lost"] = len(packets) - len(got)
        return out
    return batch


def test_ecmp_member_on_a_lost_carrier_is_left_out_by_the_switch_and_used_again(ecmp):
    ecmp.install(*watched(ecmp_entries(v4("10.1.0.0", 16), mode=QP), dict(enumerate(UPLINKS, 1))))
    batch, dead = _batch(ecmp, [roce_v4("10.0.0.1", "10.1.2.3", qp=qp, psn=0) for qp in range(1, 33)]), UPLINKS[1]
    before = batch()
    assert set(before) == set(UPLINKS)  # 32 QPs over all four uplinks
    written = ecmp.conn.read_groups(ECMP_PROFILE)
    try:
        cut_until_noticed(ecmp, dead, batch, lambda got: dead not in got and "lost" not in got)
        # every packet of every QP over the three uplinks left; the group as written (a member is
        # deactivated by the switch, not removed: a controller's read-back sees no change)
        after = batch()
        assert sum(after.values()) == 32 and dead not in after and set(after) == set(UPLINKS) - {dead}
        assert ecmp.conn.read_groups(ECMP_PROFILE) == written
        member = UPLINKS.index(dead) + 1
        counted = ecmp.conn.read_counter("IngressPipe.ecmp.member_packets", member)[0].packets
        batch()
        assert ecmp.conn.read_counter("IngressPipe.ecmp.member_packets", member)[0].packets == counted
    finally:
        carrier_down(ecmp, dead, False)
    # back in use: the same QPs on the same uplinks as before the fault
    wait_until(batch, lambda got: got == before)
    assert ecmp.conn.read_groups(ECMP_PROFILE) == written


def test_spray_member_on_a_lost_carrier_is_left_out_by_the_switch_and_used_again(spray):
    spray.install(*watched(headend_entries(mode=1, spines={SPINE_A: UP_A, SPINE_B: UP_B}), {1: UP_A, 2: UP_B}))
    sent = [roce_v6(SRC_HOST, DST_HOST, qp=qp, psn=0) for qp in range(1, 17)]
    batch = _batch(spray, sent)

    before = batch()
    assert set(before) == {UP_A, UP_B}
    try:
        cut_until_noticed(spray, UP_A, batch, lambda got: UP_A not in got and "lost" not in got)
        # each packet exactly as the path via spine B carries it, counted on that path alone
        paths = [spray.counter("IngressPipe.headend.path_packets", i).packets for i in (1, 2)]
        for pkt in sent:
            spray.switch.send(HOST, bytes(pkt))
        got = spray.switch.receive(timeout=30.0, count=len(sent))  # a bound only: it returns once all came
        assert got == [(UP_B, bytes(outer(carrier(SPINE_B, DST_LEAF, DST_DT6), bytes(pkt[IPv6]), UP_B,
                                          fl=spray_hash(pkt[IPv6], 1)))) for pkt in sent]
        assert [spray.counter("IngressPipe.headend.path_packets", i).packets for i in (1, 2)] == [
            paths[0], paths[1] + len(sent)]
    finally:
        carrier_down(spray, UP_A, False)
    wait_until(batch, lambda got: got == before)


def test_groups_installed_without_watch_ports_are_given_them_by_a_reconcile(ecmp):
    """A fabric installed before watch ports: one MODIFY gives the group's active members their watch ports
    (stock PI refused it; patches/pi-watch-port.patch); then the switch enforces them."""
    from controller.runtime.reconcile import apply

    unwatched = ecmp_entries(v4("10.1.0.0", 16), mode=QP)
    ecmp.install(*unwatched)
    planned = watched(unwatched, dict(enumerate(UPLINKS, 1)))
    delta = apply(ecmp.conn, planned, pi_workarounds=False)
    assert not delta.rewatch and [type(e) for e in delta.modifies] == [ActionProfileGroup]
    assert not apply(ecmp.conn, planned, pi_workarounds=False)  # nothing left to write: the group as planned
    batch, dead = _batch(ecmp, [roce_v4("10.0.0.1", "10.1.2.3", qp=qp, psn=0) for qp in range(1, 33)]), UPLINKS[2]
    before = batch()
    assert set(before) == set(UPLINKS)
    try:
        cut_until_noticed(ecmp, dead, batch, lambda got: dead not in got and "lost" not in got)
    finally:
        carrier_down(ecmp, dead, False)
    wait_until(batch, lambda got: got == before)
