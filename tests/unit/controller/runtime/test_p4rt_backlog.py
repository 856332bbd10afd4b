"""A stream that does not drain refuses packet-outs past its backlog: one error line, memory bounded."""

from __future__ import annotations

import pytest

from controller.runtime.p4info import P4Info
from controller.runtime.p4rt import P4RuntimeError, SwitchConnection
from controller.programs.toolchain import Artifacts


def test_packet_outs_past_the_backlog_are_refused_and_counted() -> None:
    conn = SwitchConnection("s1", "127.0.0.1:1", p4info=P4Info.load(Artifacts.of("srv6_spray").p4info), packet_backlog=8)
    conn._stub = object()  # type: ignore[assignment]  # "connected" with no stream taking the queue: nothing drains it
    for _ in range(8):
        conn.packet_out(b"\x00" * 64, egress_port=3, _pad=0)
    with pytest.raises(P4RuntimeError) as e:
        conn.packet_out(b"\x00" * 64, egress_port=3, _pad=0)
    assert str(e.value) == "s1: 8 packet-outs already queued on the stream to 127.0.0.1:1; this one is not sent"
    assert (conn._requests.qsize(), conn.packets_refused) == (8, 1)
