"""`fabricctl run --store etcd://...`: campaign for the fabric's leadership, lead with the election id
of the win, stop writing before the lease can lapse, and campaign again when leadership is lost."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from controller.service.runner import Config, FabricService
from controller.state.etcdstore import EtcdStore, EventSink
from controller.state.leader import Leadership
from controller.state.store import StoreError

Say = Callable[[str], None]
# (config with the leader's election id, fence, publish, event sink) -> the service to run while leading
MakeService = Callable[[Config, Callable[[], "str | None"], Callable[[dict[str, Any]], None],
                        Callable[[dict[str, Any]], None]], FabricService]


def hilo(election_id: int) -> str:
    """An election id as HIGH,LOW (how --election-id and p4runtime-shell take it)."""
    return f"{election_id >> 64},{election_id & ((1 << 64) - 1)}"


def run_led(make: MakeService, config: Config, store: EtcdStore, ttl: int, stop: threading.Event,
            duration: float, say: Say) -> None:
    """Campaign, lead, lose, campaign again, until `stop` (or `duration` seconds)."""
    sink = EventSink(store)
    ended = threading.Event()
    if duration > 0:
        timer = threading.Timer(duration, stop.set)
        timer.daemon = True
        timer.start()
    leadership = Leadership(store, ttl, emit=lambda kind, **f: sink({"t": round(time.time(), 6), "kind": kind, **f,
                                                                        **leadership.identity}))

    def waiting(holder: dict[str, Any] | None, why: str) -> None:
        if why:
            say(f"campaigning: {why}")
        elif holder is not None:
            say(f"campaigning: {holder.get('host')} pid {holder.get('pid')} leads (election id "
                f"{hilo(holder['create_revision'] << 64)}); standing by")

    try:
        while not stop.is_set():
            if not leadership.campaign(stop, on_wait=waiting):
                break
            eid = leadership.election_id
            say(f"leader: election id {hilo(eid)} (create revision {leadership.create_revision}, lease "
                f"{leadership.lease:x}, TTL {leadership.granted_ttl} s; writes stop {leadership.guard:g} s before "
                "an unrenewed lease can expire)")
            leader = {"election_id": hilo(eid), "create_revision": leadership.create_revision,
                      "lease": f"{leadership.lease:x}", "ttl": leadership.granted_ttl, **leadership.identity}

            def publish(view: dict[str, Any], lease: int = leadership.lease) -> None:
                store.publish_view({**view, "leader": leader}, lease)

            service = make(dataclasses.replace(config, election_id=eid), leadership.fence, publish, sink)
            service.start()
            held: str | None = None
            while not stop.wait(0.02) and not leadership.lost.is_set():
                why = leadership.fence()
                if (why is None) != (held is None):  # say each change of state once
                    say(f"writes stopped: {why}" if why else "writes resumed: lease renewed")
                held = why
            if leadership.lost.is_set():
                if held is None:
                    say(f"writes stopped: {leadership.fence()}")
                say(f"leadership lost: {leadership.lost_why}; no switch written since the fence closed; stopping "
                    "and campaigning again")
            service.stop()
            if not leadership.lost.is_set():
                leadership.resign()
                break
            leadership = Leadership(store, ttl, emit=leadership.emit, identity=leadership.identity)
    except StoreError as e:
        say(f"store: {e}")
        raise
    finally:
        ended.set()
        sink.close()
