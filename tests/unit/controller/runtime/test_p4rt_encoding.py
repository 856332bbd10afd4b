"""SwitchConnection message encoding against a recording servicer: arbitration, writes, errors, reads."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import grpc
import pytest
from google.protobuf import text_format

from controller.plan.entries import ActionProfileMember, Exact, Lpm, TableEntry
from controller.runtime.p4info import P4Info
from controller.runtime.proto import p4runtime_pb2, code_pb2
from controller.runtime.p4rt import (
    NotPrimaryError,
    P4RuntimeError,
    PacketIn,
    PipelineMismatchError,
    SwitchConnection,
    WriteError,
    _update_errors,
    election_int,
)
from controller.plan.delta import Update, UpdateType
from tests.unit.p4rt_servicer import RecordingServicer, serve, socket_dir

from tests.unit.conftest import MINI



@pytest.fixture
def servicer() -> RecordingServicer:
    return RecordingServicer()


@pytest.fixture
def address(tmp_path: Path, servicer: RecordingServicer) -> Iterator[str]:
    with serve(socket_dir(tmp_path), servicer) as addr:
        yield addr


@pytest.fixture
def conn(address: str, p4info: P4Info) -> Iterator[SwitchConnection]:
    with SwitchConnection("s1", address, device_id=3, election_id=(0, 10), p4info=p4info, timeout=5) as c:
        yield c


def _route(i: int) -> TableEntry:
    return TableEntry("routes_v6", (("dst_addr", Lpm(f"fcbb:bb00:{i:x}::", 48)),), "routing.drop")


def test_election_id_forms() -> None:
    assert election_int(7) == 7
    assert election_int((1, 2)) == (1 << 64) + 2


def test_address_must_be_host_port_or_unix() -> None:
    with pytest.raises(ValueError, match="address 'switch1' is neither host:port nor unix:/path"):
        SwitchConnection("s1", "switch1")


def test_arbitration_sent_and_primary(conn: SwitchConnection, servicer: RecordingServicer) -> None:
    assert conn.is_primary
    (arbitration,) = servicer.arbitrations
    assert arbitration == text_format.Parse("device_id: 3 election_id { low: 10 }", p4runtime_pb2.MasterArbitrationUpdate())


def test_backup_cannot_write(address: str, p4info: P4Info, servicer: RecordingServicer) -> None:
    servicer.primary_election_id = 20
    with SwitchConnection("s1", address, device_id=3, election_id=10, p4info=p4info, timeout=5) as backup:
        assert not backup.is_primary
        with pytest.raises(NotPrimaryError) as err:
            backup.write([(UpdateType.INSERT, _route(1))])
    assert str(err.value) == f"not primary for device 3 on {address} (election id 10 < 20)"
    assert servicer.writes == []


def test_switch_permission_denied_is_not_primary(conn: SwitchConnection, servicer: RecordingServicer) -> None:
    servicer.primary_election_id = 99  # someone else took over; we have not heard yet
    with pytest.raises(NotPrimaryError, match=r"not primary for device 3 on unix:.* \(election id 10, not the primary's\)"):
        conn.write([("INSERT", _route(1))])
    assert len(servicer.writes) == 1


def test_no_server_fails_at_once_not_after_the_timeout() -> None:
    """A refused address fails on the first connection attempt: the message says so (waiting out the
    timeout would say 'within 600s')."""
    for address in ("unix:/nonexistent/p4rt.sock", f"127.0.0.1:{_free_port()}"):
        c = SwitchConnection("s9", address, timeout=600)
        with pytest.raises(P4RuntimeError, match=rf"^s9: no P4Runtime server at {address}: the connection failed "
                                                 r"at once \(refused or unreachable\)$"):
            c.connect()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_write_batches_and_exact_request(conn: SwitchConnection, servicer: RecordingServicer) -> None:
    written = conn.write([Update(UpdateType.INSERT, _route(i)) for i in range(1, 6)], batch_size=2)
    assert written == 5
    assert [len(w.updates) for w in servicer.writes] == [2, 2, 1]
    assert all(w.device_id == 3 and (w.election_id.high, w.election_id.low) == (0, 10) for w in servicer.writes)
    assert servicer.writes[0].updates[1] == text_format.Parse(
        r"""type: INSERT entity { table_entry { table_id: 33554433
              match { field_id: 1 lpm { value: "\xfc\xbb\xbb\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" prefix_len: 48 } }
              action { action { action_id: 16777219 } } } }""",
        p4runtime_pb2.Update(),
    )


def test_entities_checked_before_anything_is_sent(conn: SwitchConnection, servicer: RecordingServicer) -> None:
    bad = TableEntry("host_port", (("ingress_port", Exact(512)),), "NoAction")
    with pytest.raises(ValueError, match="match field ingress_port: value 512 does not fit in 9 bits"):
        conn.write([("INSERT", _route(1)), ("INSERT", bad)])
    assert servicer.writes == []


def test_write_error_per_update(conn: SwitchConnection, servicer: RecordingServicer) -> None:
    def fail(update: p4runtime_pb2.Update) -> tuple[int, str] | None:
        m = update.entity.action_profile_member
        return (code_pb2.RESOURCE_EXHAUSTED, "action profile full") if m.member_id == 2 else None

    servicer.fail = fail
    members = [ActionProfileMember("spray_selector", i, "via_spine", (("spine_usid", i), ("path_index", i))) for i in (1, 2, 3)]
    conn.write([("INSERT", members[0])])
    with pytest.raises(WriteError) as err:
        conn.write([("INSERT", m) for m in members] + [("INSERT", _route(1))], batch_size=3)
    e = err.value
    assert (e.switch, e.attempted, e.written) == ("s1", 3, 0)
    assert [(f.update.entity.member_id, f.code, f.message) for f in e.failures] == [
        (1, "ALREADY_EXISTS", "Match entry exists, use MODIFY if you wish to change action"),
        (2, "RESOURCE_EXHAUSTED", "action profile full"),
    ]
    assert str(e) == (
        "s1: 2 of 3 updates failed: "
        "INSERT spray_selector member 1: ALREADY_EXISTS Match entry exists, use MODIFY if you wish to change action; "
        "INSERT spray_selector member 2: RESOURCE_EXHAUSTED action profile full"
    )
    assert len(servicer.writes) == 2  # the batch with the route was not sent after the failure


class _RpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple:
        return ()


def test_write_error_without_details_fails_every_update() -> None:
    updates = [Update(UpdateType.DELETE, _route(1)), Update(UpdateType.DELETE, _route(2))]
    errors = _update_errors(_RpcError(grpc.StatusCode.INVALID_ARGUMENT, "bad batch"), updates)
    assert [(e.update, e.code, e.message) for e in errors] == [(u, "INVALID_ARGUMENT", "bad batch") for u in updates]
    assert str(errors[0]) == "DELETE routes_v6 dst_addr=fcbb:bb00:1::/48: INVALID_ARGUMENT bad batch"


def test_write_error_summary_is_one_line_and_truncated(conn: SwitchConnection, servicer: RecordingServicer) -> None:
    servicer.fail = lambda u: (code_pb2.INVALID_ARGUMENT, "no")
    with pytest.raises(WriteError) as err:
        conn.write([("INSERT", _route(i)) for i in range(1, 6)])
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("s1: 5 of 5 updates failed: INSERT routes_v6 dst_addr=")
    assert text.endswith("; (+2 more)")


def test_pipeline_set_get_ensure(conn: SwitchConnection, servicer: RecordingServicer, tmp_path: Path) -> None:
    bmv2_json = tmp_path / "mini.json"
    bmv2_json.write_text('{"program": "mini"}')
    assert conn.get_pipeline_p4info() is None
    assert conn.ensure_pipeline(MINI, bmv2_json) is True
    (request,) = servicer.set_pipelines
    assert request.action == p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
    assert (request.device_id, request.election_id.low) == (3, 10)
    assert request.config.p4_device_config == b'{"program": "mini"}'
    assert request.config.p4info == P4Info.load(MINI).message
    conn.write([("INSERT", _route(1))])
    assert conn.ensure_pipeline(MINI, bmv2_json) is False  # same P4Info: kept, tables not reset
    assert len(servicer.set_pipelines) == 1 and len(servicer.stored) == 1
    conn.check_pipeline()


def test_check_pipeline_refuses_other_p4info(conn: SwitchConnection, servicer: RecordingServicer) -> None:
    with pytest.raises(PipelineMismatchError, match="device 3 on unix:.* has no pipeline"):
        conn.check_pipeline()
    other = P4Info.load(MINI).message
    other.tables[0].size = 2048
    servicer.config = p4runtime_pb2.ForwardingPipelineConfig(p4info=other)
    with pytest.raises(PipelineMismatchError, match=r"^s1: the device's P4Info does not match ours: "
                                                    r"table IngressPipe.routing.routes_v6 \(id 0x2000001\) differs$"):
        conn.check_pipeline()


def test_read_decodes_to_canonical(conn: SwitchConnection, servicer: RecordingServicer) -> None:
    member = ActionProfileMember("spray_selector", 1, "via_spine", (("path_index", 0), ("spine_usid", 0xE001)))
    conn.write([("INSERT", member), ("INSERT", _route(1))])
    assert conn.read_entries("routes_v6") == [
        TableEntry("IngressPipe.routing.routes_v6", (("dst_addr", Lpm(0xFCBBBB00000100000000000000000000, 48)),),
                   "IngressPipe.routing.drop")
    ]
    assert conn.read_members("spray_selector") == [
        ActionProfileMember("IngressPipe.headend.spray_selector", 1, "IngressPipe.headend.via_spine",
                            (("spine_usid", 0xE001), ("path_index", 0)))
    ]
    assert conn.read_groups("spray_selector") == []
    assert text_format.MessageToString(servicer.reads[0], as_one_line=True) == (
        "device_id: 3 entities { table_entry { table_id: 33554433 } }"
    )


def test_read_all_requests(conn: SwitchConnection, servicer: RecordingServicer) -> None:
    conn.read_all(default_tables=["routes_v6"])
    (request,) = servicer.reads
    assert [text_format.MessageToString(e, as_one_line=True) for e in request.entities] == [
        "table_entry { table_id: 33554433 }",
        "table_entry { table_id: 33554434 }",
        "table_entry { table_id: 33554435 }",
        "table_entry { table_id: 33554436 }",
        "action_profile_member { action_profile_id: 285212673 }",
        "action_profile_group { action_profile_id: 285212673 }",
        "table_entry { table_id: 33554433 is_default_action: true }",
    ]


def test_read_counter(conn: SwitchConnection, servicer: RecordingServicer) -> None:
    for index, packets in ((4, 7), (1, 3)):
        entry = p4runtime_pb2.CounterEntry(counter_id=302006273)
        entry.index.index, entry.data.packet_count = index, packets
        servicer.counters.append(entry)
    values = conn.read_counter("drop_reasons")
    assert [(v.counter, v.index, v.packets, v.bytes) for v in values] == [
        ("IngressPipe.drop_reasons", 1, 3, 0),
        ("IngressPipe.drop_reasons", 4, 7, 0),
    ]
    assert [v.packets for v in conn.read_counter("drop_reasons", 4)] == [7]
    assert servicer.reads[-1].entities[0].counter_entry.index.index == 4


def test_packet_out_and_in(conn: SwitchConnection, servicer: RecordingServicer) -> None:
    conn.packet_out(b"\x00" * 14, egress_port=5)
    servicer.send_packet_in(b"payload", {1: b"\x01\x02"})
    assert list(conn.packets_in(timeout=0.5)) == [PacketIn(b"payload", (("ingress_port", 258),))]
    assert servicer.packets_out == [
        text_format.Parse(r'payload: "\000\000\000\000\000\000\000\000\000\000\000\000\000\000" '
                          r'metadata { metadata_id: 1 value: "\005" }', p4runtime_pb2.PacketOut())
    ]


def test_losing_primary_mid_session(
    conn: SwitchConnection, address: str, p4info: P4Info, servicer: RecordingServicer
) -> None:
    assert conn.connect() is True  # already connected: no second arbitration
    assert len(servicer.arbitrations) == 1
    with SwitchConnection("s1-other", address, device_id=3, election_id=(1, 0), p4info=p4info, timeout=5) as other:
        assert other.is_primary
        deadline = time.monotonic() + 5
        while conn.is_primary and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not conn.is_primary
        with pytest.raises(NotPrimaryError) as err:
            conn.write([("INSERT", _route(1))])
        assert str(err.value) == f"not primary for device 3 on {address} (election id 10 < {1 << 64})"
        other.write([("INSERT", _route(1))])


def test_stream_closed_by_server(conn: SwitchConnection, servicer: RecordingServicer, address: str) -> None:
    for out in list(servicer._streams):
        out.put(None)  # the servicer ends the StreamChannel call
    deadline = time.monotonic() + 5
    while conn.is_primary and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(P4RuntimeError, match=f"^s1: stream to {address} closed: the server ended the stream$"):
        conn.write([("INSERT", _route(1))])
    assert servicer.writes == []
