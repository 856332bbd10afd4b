"""Port status as a failure signal, without switches: the datagram format, the listener, and the
prober failing exactly the directions through a port that lost carrier."""

from __future__ import annotations

from tests.paths import UNIT_DATA

import os
import socket
import stat
from pathlib import Path

import pytest

from controller.service.detect import Change, Thresholds
from controller.service.portstatus import NotASocket, PortStatus, PortStatusListener, SocketInUse, parse, send
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


@pytest.mark.parametrize("what", ["a regular file", "a directory", "a FIFO"])
def test_the_listener_leaves_anything_but_a_socket_where_it_is(tmp_path: Path, what: str):
    path = tmp_path / "carrier.sock"
    if what == "a regular file":
        path.write_text("the operator's notes\n")
    elif what == "a directory":
        path.mkdir()
        (path / "inside").write_text("kept\n")
    else:
        os.mkfifo(path)
    with pytest.raises(NotASocket) as e:
        PortStatusListener(path, lambda s: None)
    assert str(e.value) == f"{path} is {what}, not a socket: left as it is (give a free path)"
    if what == "a regular file":
        assert path.read_text() == "the operator's notes\n"
    elif what == "a directory":
        assert (path / "inside").read_text() == "kept\n"
    else:
        assert stat.S_ISFIFO(path.lstat().st_mode)


def test_a_stale_socket_is_replaced_a_live_one_refused_and_stop_removes_only_its_own(tmp_path: Path):
    path = tmp_path / "carrier.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens: what a killed listener leaves
    listener = PortStatusListener(path, lambda s: None)
    with pytest.raises(SocketInUse) as e:
        PortStatusListener(path, lambda s: None)
    assert str(e.value) == f"{path}: another listener is bound there"
    path.unlink()
    path.write_text("put here after we bound\n")  # not ours: stop() must leave it
    listener.stop()
    assert path.read_text() == "put here after we bound\n"


def test_a_receive_error_ends_the_listener_with_a_word(tmp_path: Path):
    import errno
    import queue

    said: queue.Queue = queue.Queue()
    listener = PortStatusListener(tmp_path / "carrier.sock", lambda s: None, on_error=said.put)
    real = listener._sock

    class Broken:
        def recv(self, n: int) -> bytes:
            raise OSError(errno.EIO, "Input/output error")

        def close(self) -> None:
            real.close()

    listener._sock = Broken()  # type: ignore[assignment]
    listener.start()
    try:
        why = said.get(timeout=30)
    finally:
        listener.stop()
    assert why == (f"carrier events on {tmp_path / 'carrier.sock'} stopped: Input/output error; "
                   "the probes alone judge links")
    assert listener.error == why


def test_run_refuses_a_carrier_events_path_that_is_not_a_socket(tmp_path: Path):
    from click.testing import CliRunner

    from fabricctl.main import cli

    notes = tmp_path / "notes.txt"
    notes.write_text("keep me\n")
    r = CliRunner().invoke(cli, ["--topology", str(DATA / "two_plane_lab.yaml"), "--state", str(tmp_path / "s.json"),
                                 "run", "--carrier-events", str(notes), "--duration", "0.1"], prog_name="fabricctl")
    assert (r.exit_code, r.stderr) == (2, f"error: --carrier-events: {notes} is a regular file, not a socket: "
                                          "left as it is (give a free path)\n")
    assert notes.read_text() == "keep me\n"
    assert not (tmp_path / "fabric-events.jsonl").exists()  # nothing started
