"""A traffic run ended when told: senders that send round their destinations stop between messages once the run's
stop file exists (their message count the bound), and receivers count what was sent, not the totals in the tags."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from controller.model.topology import build, to_dict
from mininet_labs import traffic as tr
from mininet_labs.frames import parse_roce
from mininet_labs.receiver import Gap, QpStats, RecvResult
from mininet_labs.trafficrun import TrafficRun, to_what_was_sent
from tests.paths import REPO


def sent_order(spec: tr.SendSpec, stop_after: int | None = None) -> list[tuple[str, int, int]]:
    """(destination, message, packet index) of every frame planned, told to stop before message `stop_after`."""
    asked = [0]

    def stop() -> bool:
        asked[0] += 1
        return stop_after is not None and asked[0] > stop_after

    out = []
    for _nic, frame, q in tr.plan_packets(spec, build(2, 2, 2, 2), stop=stop):
        parsed = parse_roce(frame)
        assert parsed is not None
        tag = tr.Tag.unpack(parsed[3])
        assert tag is not None
        out.append((q.dst, tag.msg, tag.index))
    return out


def test_interleaved_messages_go_round_the_destinations_and_a_stop_comes_between_messages() -> None:
    spec = tr.SendSpec("", "h0", ["h1", "h2", "h3"], qps=2, messages=4, message_size=2048, mtu=1024, interleave=True)
    assert sent_order(spec, stop_after=5) == [(d, m, i) for m, d in [(0, "h1"), (0, "h2"), (0, "h3"), (1, "h1"),
                                                                     (1, "h2")] for i in (0, 1)]
    assert len(sent_order(spec)) == 3 * 4 * 2  # never told: every message, round the destinations


def test_without_interleave_each_destination_gets_all_its_messages_in_turn() -> None:
    spec = tr.SendSpec("", "h0", ["h1", "h2"], qps=2, messages=3)
    assert sent_order(spec) == [("h1", 0, 0), ("h1", 1, 0), ("h1", 2, 0), ("h2", 0, 0), ("h2", 1, 0), ("h2", 2, 0)]


def test_a_sender_whose_stop_file_exists_sends_nothing_and_says_it_was_stopped(tmp_path: Path) -> None:
    topo = tmp_path / "topology.yaml"
    topo.write_text(yaml.safe_dump(to_dict(build(2, 2, 2, 2))))
    stop = tmp_path / "stop"
    stop.write_text("1\n")
    out = tmp_path / "send.json"
    proc = subprocess.run([sys.executable, "-m", "mininet_labs.traffic", "send", "--topology", str(topo), "--host",
                           "h0", "--to", "h3", "--messages", "1000", "--interleave", "--stop-file", str(stop),
                           "--out", str(out)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    result = tr.SendResult.from_json(json.loads(out.read_text()))
    assert (result.sent, result.qps, result.stopped) == (0, [], True)


def test_stop_writes_the_stop_file_once_with_the_time_it_was_told(tmp_path: Path) -> None:
    run = TrafficRun(None, tmp_path, 10.0)
    assert not run.stop_file.exists() and run.stopped_ns == 0
    run.stop()
    told = run.stopped_ns
    assert run.stop_file.read_text() == f"{told}\n"
    run.stop()
    assert run.stopped_ns == told and run.stop_file.read_text() == f"{told}\n"


def received(q: QpStats) -> RecvResult:
    return RecvResult("h3", q.received, 0, 0, 1.0, [q])


def sent(packets: int) -> dict[str, tr.SendResult]:
    return {"h0": tr.SendResult("h0", packets, 1.0, [tr.QpSent("h3", 7, 0, packets, packets)], stopped=True)}


def test_a_stopped_sender_s_unsent_packets_are_not_lost_but_its_lost_tail_is() -> None:
    # the tags said 100 packets; the sender was stopped after 12: 0-3 and 6-9 came, 4-5 and 10-11 were lost
    q = QpStats("h0", 7, expected=100, received=8, lost=92,
                gaps=[Gap(3, 6, 2, 30, 60, rx_ms=0.0), Gap(9, None, 90, 90)])
    r = received(q)
    to_what_was_sent("h3", r, sent(12))
    assert (q.expected, q.lost) == (12, 4)
    assert q.gaps == [Gap(3, 6, 2, 30, 60, rx_ms=0.0), Gap(9, None, 2, 90)]


def test_a_stopped_sender_whose_every_packet_came_lost_nothing() -> None:
    q = QpStats("h0", 7, expected=100, received=10, lost=90, gaps=[Gap(9, None, 90, 90)])
    to_what_was_sent("h3", received(q), sent(10))
    assert (q.expected, q.lost, q.gaps) == (10, 0, [])


def test_a_sender_that_sent_all_it_said_or_another_sender_s_qp_is_left_as_received() -> None:
    mine = QpStats("h0", 7, expected=10, received=8, lost=2, gaps=[Gap(7, None, 2, 70)])
    theirs = QpStats("h1", 7, expected=100, received=8, lost=92, gaps=[Gap(7, None, 92, 70)])
    to_what_was_sent("h3", RecvResult("h3", 16, 0, 0, 1.0, [mine, theirs]), sent(10))
    assert mine == QpStats("h0", 7, expected=10, received=8, lost=2, gaps=[Gap(7, None, 2, 70)])
    assert theirs == QpStats("h1", 7, expected=100, received=8, lost=92, gaps=[Gap(7, None, 92, 70)])
