"""The leader's fence without etcd: its arithmetic on a fake clock, the clock it reads, the store's
save compare, a revoke that fails, and an event etcd refuses for good."""

from __future__ import annotations

import queue
import time
from typing import Any

import pytest

from controller.state import etcdstore
from controller.state.etcdstore import EtcdStore, EventSink
from controller.state.leader import Leadership, boottime, guard_of, write_deadline
from controller.state.store import Deposed, StoreError, StoreUnavailable, parse_url


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Client:
    """What Leadership and EventSink ask of EtcdClient, answered from lists."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.answers: dict[str, list[Any]] = {}
        self.puts: list[tuple[str, str]] = []
        self.put_errors: dict[str, list[StoreError | None]] = {}  # by a word of the value: what its next puts raise

    def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        self.posts.append((path, payload))
        answer = self.answers[path].pop(0) if len(self.answers.get(path, [])) > 1 else self.answers[path][0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def txn(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"succeeded": True, "header": {"revision": 41}}

    def get(self, key: str, **fields: Any) -> list[dict[str, Any]]:
        return [{"key": key, "value": "{}", "create_revision": 41}]

    def put(self, key: str, value: str, lease: int = 0) -> int:
        for word, errors in self.put_errors.items():
            if word in value:
                error = errors.pop(0) if len(errors) > 1 else errors[0]  # the last one stays
                if error is not None:
                    raise error
        self.puts.append((key, value))
        return 1


def store_with(client: Client) -> EtcdStore:
    s = EtcdStore(parse_url("etcd://127.0.0.1:1"), "lab")
    s.client = client  # type: ignore[assignment]
    return s


def leader(clock: Clock, client: Client, events: list | None = None) -> Leadership:
    client.answers["/lease/grant"] = [{"ID": 0xab, "TTL": 3}]
    return Leadership(store_with(client), ttl=3, clock=clock,
                      emit=(lambda kind, **f: events.append((kind, f))) if events is not None else lambda *a, **k: None)


def test_the_fence_closes_a_guard_before_the_lease_could_expire_counted_from_when_the_request_was_sent():
    assert guard_of(3) == 0.75 and guard_of(1) == 0.5 and guard_of(20) == 5.0
    assert write_deadline(1000.0, 3) == 1002.25
    clock, client = Clock(), Client()
    lead = leader(clock, client)
    assert lead.try_once()
    assert lead.store.leader_revision == 41  # the store's saves compare the win from now on
    clock.now = 1002.2499
    assert lead.fence() is None
    clock.now = 1002.25
    assert lead.fence() == ("lease ab not renewed for 2.2 s (no answer yet): writes stop 0.75 s before it can "
                            "expire")
    # a renewal sent at 1002.0 (answered whenever): the deadline moves to 1002.0 + 3 - 0.75, not from the answer
    clock.now = 1002.0
    client.answers["/lease/keepalive"] = [{"result": {"TTL": 3}}]
    lead.renew()
    clock.now = 1004.2499
    assert lead.fence() is None
    clock.now = 1004.25
    assert lead.fence() is not None
    # a failed renewal moves nothing
    client.answers["/lease/keepalive"] = [StoreUnavailable("etcd://x: no quorum")]
    clock.now = 1003.0
    lead.renew()
    clock.now = 1004.25
    assert "no quorum" in lead.fence()  # type: ignore[operator]


def test_the_fence_reads_a_clock_that_counts_suspended_time():
    assert Leadership(store_with(Client())).clock is boottime
    # CLOCK_BOOTTIME is CLOCK_MONOTONIC plus the time suspended: never behind it
    assert boottime() >= time.monotonic() - 0.001


def test_a_failed_revoke_is_retried_and_then_said():
    events: list = []
    client = Client()
    lead = leader(Clock(), client, events)
    assert lead.try_once()
    client.answers["/kv/lease/revoke"] = [StoreUnavailable("etcd://x: no quorum")] * 3
    lead.resign()
    assert [p for p, _ in client.posts].count("/kv/lease/revoke") == 3
    assert events == [("lease_revoke_failed", {"lease": "ab", "error": "etcd://x: no quorum",
                                               "consequence": "the next leader waits until the lease expires "
                                                              "(at most 3 s)"})]
    client.answers["/kv/lease/revoke"] = [StoreUnavailable("etcd://x: no quorum"), {}]
    events.clear()
    lead.lease = 0xcd
    assert lead._revoke(0xcd) and events == []  # the second attempt went through
    client.answers["/kv/lease/revoke"] = [StoreError("etcd://x: etcdserver: requested lease not found")]
    assert lead._revoke(0xcd) and events == []  # expired already: gone


def test_a_deposed_leaders_save_is_one_line_not_a_conflict():
    client = Client()
    s = store_with(client)
    s.leader_revision = 41
    sent: list = []

    def txn(payload: dict[str, Any]) -> dict[str, Any]:
        sent.append(payload)
        return {"succeeded": False, "responses": [{"response_range": {"kvs": [{"create_revision": "57"}]}}]}

    client.txn = txn  # type: ignore[method-assign]
    client.get = lambda key, **f: []  # type: ignore[method-assign]
    with pytest.raises(Deposed) as e:
        s.save(set(), {})
    assert str(e.value) == ("etcd://127.0.0.1:1 (fabric lab): not saved: this controller no longer leads (the leader "
                            "key's create revision is 57, its win was 41)")
    leader_key = etcdstore.b64(s.key("leader"))
    assert {"key": leader_key, "result": "EQUAL", "target": "CREATE", "create_revision": 41} in sent[0]["compare"]


def test_an_event_etcd_refuses_for_good_is_dropped_and_the_next_goes_on():
    client = Client()
    client.put_errors = {"link_down": [StoreUnavailable("etcd://x: no quorum"), None],  # passes: retried
                         "huge": [StoreError("etcd://x: etcdserver: request is too large")]}  # never goes: dropped
    sink = EventSink(store_with(client))
    sink({"kind": "link_down", "n": 0})
    sink({"kind": "huge", "n": 1})
    sink({"kind": "link_up", "n": 2})
    sink.close(timeout=30)
    assert [v for _, v in client.puts] == ['{"kind": "link_down", "n": 0}', '{"kind": "link_up", "n": 2}']
    assert sink.refused == 1
    assert sink.refused_why == "event huge not stored, dropped: etcd://x: etcdserver: request is too large"
