"""Leadership of a fabric's controllers on etcd, with fencing.

A candidate grants itself a lease (`ttl` seconds) and creates the leader key under it if the key is
absent (one transaction: compare create_revision == 0, put). The key's create revision is the
candidate's win: etcd's revisions only grow, so every later win has a higher one, and the
P4Runtime election id is that revision in its high 64 bits. A deposed leader whose stream is still
open then holds a lower election id than the new leader's, and the switches refuse its writes.

Inside the leader, writes stop before the lease can have expired: the lease is renewed every
ttl/6 s, and `fence()` allows writes only until `renewal sent + ttl - guard` (the lease cannot
expire before ttl after etcd took the renewal, which is after we sent it). A leader that cannot
renew (partitioned, no quorum) is fenced by its own clock; if the lease is gone or the key is no
longer its own, `lost` is set and the leader must stop.

The fence's clock is CLOCK_BOOTTIME: it goes on while the machine is suspended, as etcd's lease
clock does (CLOCK_MONOTONIC stops). A hypervisor's pause of the whole VM stops every clock of the
guest, so no local clock can fence that: there the store's save compares the leader key's create
revision in its transaction (etcd refuses a deposed leader's save whenever it arrives, so a save
RPC still in flight when the fence closes cannot land after the lease is gone), and the switches
refuse the deposed leader's lower election id.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controller.state.etcdstore import EtcdStore, b64
from controller.state.store import StoreError

Emit = Callable[..., object]


def boottime() -> float:
    """Seconds of a clock that counts time suspended (etcd's lease clock does not stop either)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def guard_of(ttl: int) -> float:
    """How long before a lease of `ttl` seconds could expire writes stop (a quarter of it, at least 0.5 s)."""
    return max(0.5, ttl / 4)


def write_deadline(sent: float, ttl: int) -> float:
    """Writes are allowed before this, for a grant or renewal sent at `sent` that etcd answered with `ttl`:
    etcd took it after we sent it, so the lease lives at least until sent + ttl."""
    return sent + ttl - guard_of(ttl)


def election_id_of(create_revision: int) -> int:
    """The P4Runtime election id a win at this create revision gives (the revision in the high 64 bits)."""
    return create_revision << 64


@dataclass
class Leadership:
    """Campaign for, hold and watch the leadership of `store`'s fabric."""

    store: EtcdStore
    ttl: int = 3
    emit: Emit = lambda *a, **k: None
    poll: float = 0.2
    identity: dict[str, Any] = field(default_factory=lambda: {"host": socket.gethostname(), "pid": os.getpid()})
    clock: Callable[[], float] = boottime
    lease: int = field(default=0, init=False)
    granted_ttl: int = field(default=0, init=False)
    create_revision: int = field(default=0, init=False)
    lost: threading.Event = field(default_factory=threading.Event, init=False)
    lost_why: str = field(default="", init=False)
    _deadline: float = field(default=0.0, init=False)  # on `clock`: writes allowed before this
    _unrenewed: str = field(default="", init=False)  # why the last renewal failed
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    @property
    def key(self) -> str:
        return self.store.key("leader")

    @property
    def election_id(self) -> int:
        return election_id_of(self.create_revision)

    @property
    def guard(self) -> float:
        """How long before the lease could expire writes stop (a quarter of the TTL, at least 0.5 s)."""
        return guard_of(self.granted_ttl)

    def holder(self) -> dict[str, Any] | None:
        """The leader key's value and create revision (None: no leader)."""
        kvs = self.store.client.get(self.key)
        if not kvs:
            return None
        try:
            doc = json.loads(kvs[0]["value"])
        except ValueError:
            doc = {}
        return {**(doc if isinstance(doc, dict) else {}), "create_revision": int(kvs[0]["create_revision"])}

    # --- campaign ------------------------------------------------------------------------------
    def try_once(self) -> bool:
        """One attempt: grant a lease and create the leader key under it if absent; True if won."""
        sent = self.clock()
        grant = self.store.client.post("/lease/grant", {"TTL": self.ttl, "ID": 0})
        lease, granted = int(grant["ID"]), int(grant["TTL"])
        key = b64(self.key)
        value = json.dumps({**self.identity, "lease": lease, "ttl": granted})
        result = self.store.client.txn({
            "compare": [{"key": key, "result": "EQUAL", "target": "CREATE", "create_revision": 0}],
            "success": [{"request_put": {"key": key, "value": b64(value), "lease": lease}}],
            "failure": []})
        if not result.get("succeeded"):
            self._revoke(lease)
            return False
        self.lease, self.granted_ttl = lease, granted
        self.create_revision = int(result["header"]["revision"])
        self.store.leader_revision = self.create_revision  # the store's saves compare it from now on
        self._deadline = write_deadline(sent, granted)
        self.lost.clear()
        self.lost_why = ""
        return True

    def campaign(self, stop: threading.Event, on_wait: Callable[[dict[str, Any] | None, str], None] | None = None
                 ) -> bool:
        """Block until this candidate leads (True; the renewal thread runs) or `stop` is set (False).
        on_wait(holder, why) is called when the leader changes or the store becomes unavailable."""
        last: Any = object()
        while not stop.is_set():
            try:
                holder = self.holder()
                if holder is None and self.try_once():
                    self._start_renewal()
                    self.emit("leader_elected", election_id=self.election_id, create_revision=self.create_revision,
                              lease=self.lease, ttl=self.granted_ttl)
                    return True
                now = (holder or {}).get("create_revision"), ""
            except StoreError as e:
                holder, now = None, (None, str(e))
            if now != last and on_wait is not None:
                on_wait(holder, now[1])
            last = now
            stop.wait(self.poll)
        return False

    # --- holding -------------------------------------------------------------------------------
    def fence(self) -> str | None:
        """None while this leader may write; else why not (one line)."""
        if self.lost.is_set():
            return f"leadership lost: {self.lost_why}"
        if self.create_revision == 0:
            return "not the leader"
        late = self.clock() - self._deadline
        if late >= 0:
            return (f"lease {self.lease:x} not renewed for {late + self.granted_ttl - self.guard:.1f} s "
                    f"({self._unrenewed or 'no answer yet'}): writes stop {self.guard:g} s before it can expire")
        return None

    def _start_renewal(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew_loop, name="lease-renewal", daemon=True)
        self._thread.start()

    def _renew_loop(self) -> None:
        every = max(0.1, self.granted_ttl / 6)
        while not self._stop.wait(every):
            if self.lost.is_set():
                return
            self.renew()

    def renew(self) -> None:
        """One renewal: extend the write deadline, or set `lost` if the lease or the key is gone."""
        sent = self.clock()
        try:
            result = self.store.client.post("/lease/keepalive", {"ID": self.lease})
            ttl = int(result.get("result", {}).get("TTL", -1))
            holder = self.holder() if ttl > 0 else None
        except StoreError as e:
            self._unrenewed = str(e)
            return
        if ttl <= 0:
            self._lose(f"lease {self.lease:x} expired")
        elif holder is None or holder.get("create_revision") != self.create_revision:
            self._lose(f"the leader key is another's now (create revision {holder and holder['create_revision']})")
        else:
            self._deadline = max(self._deadline, write_deadline(sent, ttl))
            self._unrenewed = ""

    def _lose(self, why: str) -> None:
        self.lost_why = why
        self.lost.set()
        self.emit("leadership_lost", election_id=self.election_id, why=why)

    def resign(self) -> None:
        """Stop renewing and revoke the lease (the leader key and view go at once)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.lease:
            self._revoke(self.lease)
        self.create_revision = 0

    def _revoke(self, lease: int, attempts: int = 3) -> bool:
        """Revoke `lease` (its keys go at once); True if it is gone. A member that fails the call is retried
        (the next leader would otherwise wait the lease's TTL); if none can, that is said (an event)."""
        why = ""
        for attempt in range(attempts):
            try:
                self.store.client.post("/kv/lease/revoke", {"ID": lease})
                return True
            except StoreError as e:
                if "lease not found" in str(e):  # expired already: gone
                    return True
                why = str(e)
            if attempt + 1 < attempts:
                time.sleep(0.2)
        ttl = self.granted_ttl or self.ttl
        self.emit("lease_revoke_failed", lease=f"{lease:x}", error=why,
                  consequence=f"the next leader waits until the lease expires (at most {ttl} s)")
        return False
