"""SwitchConnection.write with (kind, entity) pairs as given: every kind checked before anything is encoded
or sent (UpdateType's error), Updates built only for a batch logged or refused, the written count of a
refused batch, against a recording servicer."""

from __future__ import annotations

import logging

import pytest

from controller.plan.delta import Update, UpdateType
from controller.runtime.p4rt import SwitchConnection, WriteError
from controller.runtime.proto import code_pb2, p4runtime_pb2
from controller.plan.entries import Exact, TableEntry
from tests.unit.controller.runtime.test_p4rt_encoding import _route, address, conn, servicer  # noqa: F401 (fixtures)
from tests.unit.p4rt_servicer import RecordingServicer


@pytest.mark.parametrize("kind", ["UPSERT", "insert", None, ["INSERT"], 1])
def test_a_kind_that_names_no_update_type_is_refused_before_anything(
        conn: SwitchConnection, servicer: RecordingServicer, kind: object) -> None:
    bad_entity = TableEntry("host_port", (("ingress_port", Exact(512)),), "NoAction")  # refused too, but later
    with pytest.raises(ValueError) as expected:
        UpdateType(kind)
    with pytest.raises(ValueError) as by_write:
        conn.write([("INSERT", bad_entity), ("DELETE", _route(1)), (kind, _route(2))])
    assert str(by_write.value) == str(expected.value)
    assert servicer.writes == []


def test_kinds_as_names_and_as_update_types(conn: SwitchConnection, servicer: RecordingServicer) -> None:
    updates = [("INSERT", _route(1)), Update(UpdateType.INSERT, _route(2)), (UpdateType.MODIFY, _route(1)),
               ("MODIFY", _route(2)), Update(UpdateType.DELETE, _route(1)), ("DELETE", _route(2))]
    assert conn.write(updates, batch_size=4) == 6
    sent = [u.type for w in servicer.writes for u in w.updates]
    assert sent == [p4runtime_pb2.Update.INSERT] * 2 + [p4runtime_pb2.Update.MODIFY] * 2 + [p4runtime_pb2.Update.DELETE] * 2
    assert [len(w.updates) for w in servicer.writes] == [4, 2]


def test_a_refused_second_batch_counts_the_first_as_written(conn: SwitchConnection, servicer: RecordingServicer) -> None:
    def fail(update: p4runtime_pb2.Update) -> tuple[int, str] | None:
        return (code_pb2.NOT_FOUND, "no such entry") if update.type == p4runtime_pb2.Update.DELETE else None

    servicer.fail = fail
    with pytest.raises(WriteError) as err:
        conn.write([("INSERT", _route(1)), ("INSERT", _route(2)), ("INSERT", _route(3)), ("DELETE", _route(9))],
                   batch_size=3)
    e = err.value
    assert (e.attempted, e.written) == (1, 3)
    assert [(f.update, f.code, f.message) for f in e.failures] == [
        (Update(UpdateType.DELETE, _route(9)), "NOT_FOUND", "no such entry")]
    assert str(e) == "s1: 1 of 1 updates failed: DELETE routes_v6 dst_addr=fcbb:bb00:9::/48: NOT_FOUND no such entry"


def test_batches_logged_from_plain_pairs(conn: SwitchConnection, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="controller.runtime.p4rt"):
        conn.write([("INSERT", _route(1)), (UpdateType.INSERT, _route(2)), ("DELETE", _route(1))], batch_size=2)
    lines = [r.getMessage() for r in caplog.records if r.name == "controller.runtime.p4rt"]
    assert lines == [
        f"s1 ({conn.address}, device 3): write batch 1/2: 2 insert, 0 modify, 0 delete",
        "s1:   insert routes_v6 dst_addr=fcbb:bb00:1::/48",
        "s1:   insert routes_v6 dst_addr=fcbb:bb00:2::/48",
        f"s1 ({conn.address}, device 3): write batch 2/2: 0 insert, 0 modify, 1 delete",
        "s1:   delete routes_v6 dst_addr=fcbb:bb00:1::/48",
    ]
