"""Port status as a failure signal, without switches: the datagram format, the listener, and the
prober failing exactly the directions through a port that lost carrier."""

from __future__ import annotations

from tests.paths import UNIT_DATA

from pathlib import Path

from controller.service.detect import Change, Thresholds
from controller.service.portstatus import PortStatus, PortStatusListener, parse, send
from controller.service.prober import Prober
from controller.model.topology import load

DATA = UNIT_DATA


def test_datagrams_round_trip_and_anything_else_is_refused():
    st = PortStatus("p0-t0-0", 4, False, 123)
    assert parse(st.to_bytes()) == st
    for bad in (b"", b"{", b'{"switch": "a", "port": "4", "up": false}', b'{"switch": "a", "port": 4}',
                b'{"switch": 1, "port": 4, "up": false}', b'{"switch": "a", "port": true, "up": false}', b"[]"):
        assert parse(bad) is None, bad


def test_the_listener_hands_over_what_a_source_sends(tmp_path: Path):
    import queue

    got: queue.Queue = queue.Queue()
    path = tmp_path / "carrier.sock"
    listener = PortStatusListener(path, got.put)
    listener.start()
    try:
        assert send(path, PortStatus("p0-t0-0", 4, False, 7))
        with __import__("socket").socket(__import__("socket").AF_UNIX, __import__("socket").SOCK_DGRAM) as s:
            s.sendto(b"not json", str(path))
        assert send(path, PortStatus("p0-t0-0", 4, True))
        assert got.get(timeout=10) == PortStatus("p0-t0-0", 4, False, 7)
        assert got.get(timeout=10) == PortStatus("p0-t0-0", 4, True, 0)
        assert listener.refused == 1
    finally:
        listener.stop()
    assert not path.exists()
    assert send(path, PortStatus("p0-t0-0", 4, False)) is False  # nobody listens: said, not raised


def test_a_lost_carrier_fails_both_directions_of_that_link_at_once_and_only_those():
    topo = load(DATA / "two_plane_lab.yaml")
    changes: list[tuple[str, Change]] = []
    p = Prober(topo, {}, Thresholds(fail_after=3, restore_after=5), period=0.02, timeout=0.08,
               on_change=lambda s, c: changes.append((s.d.label, c)), hosts=True)
    failed = p.carrier("p0-t0-0", 4, up=False)  # p0-t0-0's uplink to p0-t1-1
    assert sorted(changes) == [("p0-t0-0:4->p0-t1-1:1", Change.DOWN), ("p0-t1-1:1->p0-t0-0:4", Change.DOWN)]
    assert {s.d.label for s in failed} == {label for label, _ in changes}
    assert all("carrier lost on p0-t0-0:4" in s.detector.reason for s in failed)
    assert p.carrier("p0-t1-1", 1, up=False) == []  # the far end's report of the same loss: already down
    assert p.carrier("p0-t0-0", 4, up=True) == []  # back: the probes restore it, not the carrier
    assert len(changes) == 2
    host = p.carrier("p0-t0-0", 1, up=False)  # a host port: its NIC's direction
    assert [s.d.host for s in host] == ["h0"]
