"""Arbitration on a real bmv2: an election id still held is refused, and free again once its stream ends."""

from __future__ import annotations

import pytest

from controller.runtime.p4rt import P4RuntimeError, SwitchConnection
from tests.bmv2.conftest import Device


def _conn(device: Device, election_id: int) -> SwitchConnection:
    return SwitchConnection("arb", device.switch.grpc_address, device_id=device.switch.device_id,
                            election_id=election_id, timeout=5.0)


def test_a_held_election_id_is_refused_and_reusable_right_after_its_stream_closes(spray_device: Device) -> None:
    holder = _conn(spray_device, 77)
    assert holder.connect() is True  # above the fixture's session (id 10): primary
    try:
        with pytest.raises(P4RuntimeError, match="Election id already exists"):
            _conn(spray_device, 77).connect(timeout=0.5)
    finally:
        holder.close()
    again = _conn(spray_device, 77)
    try:
        assert again.connect() is True  # closed a moment ago: the switch frees the id, connect waits for it
    finally:
        again.close()
