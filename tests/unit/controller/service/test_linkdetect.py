"""The kernel data plane's link probes judged without sockets or clocks: outcomes in sequence order to each direction's
detector, the links they fail with their evidence, and the probe payload on the wire."""

from __future__ import annotations

from controller.failover import LinkDown, SwitchDown
from controller.model.topology import load
from controller.service.detect import Change, Thresholds
from controller.service.linkdetect import LinkJudge, PathState, probe_paths
from controller.southbound.kroutes import link_local
from controller.southbound.linkprobe import PAYLOAD_LEN, ProbeId, decode, encode
from tests.paths import LAB_YAML

MS = 1_000_000
T = Thresholds(fail_after=3, restore_after=4, window=100, gray_loss=0.1, max_damping=2)
LINK = LinkDown("p0-t0-0", "p0-t1-1")


def _judge(**kw: int) -> LinkJudge:
    return LinkJudge(probe_paths(load(LAB_YAML)), T, timeout_ns=80 * MS, **kw)


def _state(j: LinkJudge, link: LinkDown, direction: int) -> PathState:
    return next(s for s in j.states if s.path.link == link and s.path.direction == direction)


def _round(j: LinkJudge, now_ns: int, lost: set[tuple[LinkDown, int]] = frozenset()) -> list[tuple[PathState, Change]]:
    """Every direction sends at `now_ns`; all but `lost` arrive; then a judge 100 ms later (a probe lost in a round is
    judged in the next: only once a probe sent after it arrived)."""
    for s in j.states:
        seq = j.sent(s, now_ns)
        if (s.path.link, s.path.direction) not in lost:
            assert j.arrived(s.path.link_id, s.path.direction, seq)
    return j.judge(now_ns + 100 * MS)


def test_both_directions_of_every_link_from_its_ports_to_the_far_link_local_address() -> None:
    topo = load(LAB_YAML)
    paths = probe_paths(topo)
    assert len(paths) == 2 * 8
    leaf, spine = topo.switch("p0-t0-0"), topo.switch("p0-t1-1")
    there, back = (p for p in paths if p.link == LINK)
    assert (there.src, there.src_port, there.dst, there.dst_port) == (leaf.name, leaf.uplinks[1], spine.name,
                                                                     spine.downlinks[0])
    assert there.dst_addr == link_local(spine.mac) and back.dst_addr == link_local(leaf.mac)
    assert (back.src, back.src_port, back.dst, back.dst_port, back.direction) == (spine.name, spine.downlinks[0],
                                                                                  leaf.name, leaf.uplinks[1], 1)
    assert there.link_id == back.link_id and len({p.link_id for p in paths}) == 8


def test_k_lost_in_one_direction_fail_exactly_that_link_and_m_back_restore_it() -> None:
    j = _judge()
    assert _round(j, 0) == []  # arms every direction
    gone = {(LINK, 1)}  # the spine's port towards the leaf drops (one way)
    assert _round(j, 50 * MS, gone) == [] and _round(j, 100 * MS, gone) == [] and _round(j, 150 * MS, gone) == []
    changes = _round(j, 200 * MS)  # the third loss judged, then this round's probe: back (1 of M)
    assert [(s.path.link, s.path.direction, c) for s, c in changes] == [(LINK, 1, Change.DOWN)]
    assert j.failures() == {LINK: "3 consecutive probes lost (p0-t1-1:1 -> p0-t0-0:4)"}
    for i in range(2):
        assert _round(j, (250 + 50 * i) * MS) == []
    assert j.failures() == {LINK: "3 consecutive probes lost (p0-t1-1:1 -> p0-t0-0:4)"}
    assert [(s.path.link, c) for s, c in _round(j, 350 * MS)] == [(LINK, Change.UP)]
    assert j.failures() == {} and j.restored()[LINK] == "4 consecutive probes arrived"
    assert _state(j, LINK, 1).lost == 3 and _state(j, LINK, 0).lost == 0


def test_a_gray_link_fails_on_its_loss_ratio() -> None:
    j = LinkJudge(probe_paths(load(LAB_YAML)), Thresholds(fail_after=5, window=20, gray_loss=0.25), 80 * MS)
    _round(j, 0)
    downs = []
    for i in range(1, 40):  # every third probe lost on one direction: never 5 in a row
        downs += _round(j, i * 50 * MS, {(LINK, 0)} if i % 3 == 0 else set())
    assert [(s.path.link, s.path.direction) for s, _ in downs] == [(LINK, 0)]
    # judged on the loss of round 21 (the window full): rounds 2-21 hold the losses of rounds 3, 6, ..., 21
    assert j.failures() == {LINK: "7 of the last 20 probes lost (p0-t0-0:4 -> p0-t1-1:1)"}


def test_a_probe_is_lost_only_once_a_later_one_arrived_somewhere_or_the_hard_timeout_passed() -> None:
    j = _judge()
    _round(j, 0)
    for s in j.states:  # nothing arrives: the controller (or the machine) stalled, not the links
        j.sent(s, 50 * MS)
    assert j.judge(500 * MS) == [] and all(len(s.outstanding) == 1 for s in j.states)
    assert all(s.lost == 0 for s in j.states)
    j.judge(50 * MS + 1000 * MS)  # the hard timeout: judged lost
    assert all(s.lost == 1 and not s.outstanding for s in j.states)


def test_outcomes_go_in_sequence_order_and_a_late_arrival_is_counted_not_judged() -> None:
    j = _judge()
    _round(j, 0)
    s = _state(j, LINK, 0)
    first, second = j.sent(s, 50 * MS), j.sent(s, 100 * MS)
    assert j.arrived(s.path.link_id, 0, second)
    assert j.judge(120 * MS) == [] and first in s.outstanding  # the older one waits for its deadline
    other = _state(j, LINK, 1)
    j.arrived(other.path.link_id, 1, j.sent(other, 110 * MS))  # progress: a probe sent after `first` arrived
    j.judge(140 * MS)
    assert s.lost == 1 and not s.outstanding
    assert not j.arrived(s.path.link_id, 0, first) and s.late == 1
    assert not j.arrived(99, 0, 1) and j.strays == 1


def test_losses_before_a_direction_is_armed_and_unsent_probes_are_not_judged() -> None:
    j = _judge(arm_grace_ns=1000 * MS)
    s = _state(j, LINK, 0)
    for i in range(10):  # the far address still tentative: nothing arrives, losses not counted
        _round(j, i * 50 * MS, {(LINK, 0)})
    assert s.detector.up and s.lost == 0 and s.unarmed == 9  # the tenth is judged in the next round
    seq = j.sent(s, 600 * MS)
    j.unsent(s, seq)  # the socket refused it (EADDRNOTAVAIL, the port down)
    assert seq not in s.outstanding and s.unsent == 1
    for i in range(12, 40):  # past the grace: losses count
        _round(j, i * 50 * MS, {(LINK, 0)})
    assert not s.detector.up and j.failures() == {LINK: "3 consecutive probes lost (p0-t0-0:4 -> p0-t1-1:1)"}


def test_carrier_lost_takes_the_link_down_at_once_and_its_probes_restore_it() -> None:
    j = _judge()
    _round(j, 0)
    assert [(s.path.direction, c) for s, c in j.force_down({LINK}, "carrier lost")] == [(0, Change.DOWN),
                                                                                         (1, Change.DOWN)]
    assert j.force_down({LINK}, "carrier lost") == []  # already down
    assert j.failures() == {LINK: "carrier lost (p0-t0-0:4 -> p0-t1-1:1)"}
    for i in range(1, 4):
        _round(j, i * 50 * MS)
    assert j.failures() == {LINK: "carrier lost (p0-t0-0:4 -> p0-t1-1:1)"}
    _round(j, 200 * MS)
    assert j.failures() == {}


def test_seeded_links_stay_down_until_m_probes_come_back() -> None:
    j = _judge()
    j.seed_down({LINK})
    assert j.failures() == {LINK: "recorded failed when the controller started (p0-t0-0:4 -> p0-t1-1:1)"}
    for i in range(3):
        _round(j, i * 50 * MS)
    assert LINK in j.failures()
    _round(j, 150 * MS)
    assert j.failures() == {}


def test_the_probe_payload_round_trips_and_anything_else_is_not_a_probe() -> None:
    p = ProbeId(0xDEADBEEF, 7, 1, 123456, 30_000_000_000_123)
    data = encode(p)
    assert len(data) == PAYLOAD_LEN == 28
    assert decode(data) == p
    assert decode(b"XXXX" + data[4:]) is None
    assert decode(data[:-1]) is None and decode(data + b"\0") is None


def _fail_ways(j: LinkJudge, ways: set[tuple[LinkDown, int]]) -> None:
    _round(j, 0)
    for i in range(1, 5):
        _round(j, i * 50 * MS, ways)


def test_a_switch_all_of_whose_links_are_down_is_recorded_as_the_switch_not_its_links() -> None:
    j = _judge()
    spine_links = [LinkDown("p1-t0-0", "p1-t1-0"), LinkDown("p1-t0-1", "p1-t1-0")]
    _fail_ways(j, {(ln, 1) for ln in spine_links} | {(LINK, 0)})  # the spine's way out of both links; one other link
    assert j.failures() == {SwitchDown("p1-t1-0"): "every probe through it lost (2 links)",
                            LINK: "3 consecutive probes lost (p0-t0-0:4 -> p0-t1-1:1)"}
    assert SwitchDown("p1-t1-0") not in j.restored() and LINK not in j.restored()
    for i in range(5, 9):
        _round(j, i * 50 * MS)
    assert j.failures() == {}
    assert j.restored()[SwitchDown("p1-t1-0")] == "its probes back"
    assert j.restored()[LINK] == "4 consecutive probes arrived"


def test_a_leaf_with_every_uplink_down_is_down_but_a_plane_with_every_link_down_only_loses_links() -> None:
    j = _judge()
    leaf_links = {LinkDown("p0-t0-1", "p0-t1-0"), LinkDown("p0-t0-1", "p0-t1-1")}
    _fail_ways(j, {(ln, 0) for ln in leaf_links})
    assert set(j.failures()) == {SwitchDown("p0-t0-1")}
    j = _judge()
    plane1 = {s.path.link for s in j.states if s.path.link.t0.startswith("p1-")}
    _fail_ways(j, {(ln, 0) for ln in plane1})  # no switch of the plane has a neighbour alive: which one failed?
    assert set(j.failures()) == plane1


def test_a_switch_the_detector_recorded_starts_with_every_link_down() -> None:
    j = _judge()
    j.seed_down({SwitchDown("p0-t1-0")})
    assert set(j.failures()) == {SwitchDown("p0-t1-0")}
