"""The etcd store: the record, the leader's view and the event stream of one fabric under one prefix.

    /srv6-fabric/<fabric>/failures         the state document (statefile.to_text: export gives the
                                           bytes a state file holds), changed only by transactions
                                           that compare the key's mod_revision with the one read
    /srv6-fabric/<fabric>/denylist         the fabric-wide denylist (controller.model.denylist), fenced the same way
    /srv6-fabric/<fabric>/leader           the leader's key, under its lease (leader.py)
    /srv6-fabric/<fabric>/view             the leader's published view, under the same lease
    /srv6-fabric/<fabric>/events/<t>-<id>  one event per key, JSON

etcd3gw speaks etcd's v3 HTTP gateway to one endpoint; EtcdClient tries the URL's endpoints in turn
and turns "nobody answers" and "no quorum" (a linearizable request that times out) into
StoreUnavailable, one line.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import requests
from etcd3gw import exceptions as etcd_errors
from etcd3gw.client import Etcd3Client

from controller.state import statefile
from controller.model.failures import Failure
from controller.state.store import Conflict, Deposed, EtcdTls, EtcdUrl, Record, Store, StoreError, StoreUnavailable, Unreachable
from controller.state.statefile import OPERATOR, Origin
from controller.model.topology import Topology
from controller.model.denylist import Denylist, DenylistError, from_text as denylist_from_text, to_text as denylist_to_text

ROOT = "/srv6-fabric/"
log = logging.getLogger("controller.state")
T = TypeVar("T")


def b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def range_end(prefix: str) -> str:
    """The end of the key range holding every key that starts with `prefix`."""
    raw = bytearray(prefix.encode())
    raw[-1] += 1
    return bytes(raw).decode()


class TlsSession(requests.Session):
    """HTTPS with the CA file and client certificate of an etcd+https URL. requests lets REQUESTS_CA_BUNDLE
    and CURL_CA_BUNDLE override a session's CA file; here the one given stays (no CA given: the system's)."""

    def __init__(self, tls: EtcdTls) -> None:
        super().__init__()
        if tls.ca is not None:
            self.verify = tls.ca
        if tls.cert is not None and tls.key is not None:
            self.cert = (tls.cert, tls.key)

    def merge_environment_settings(self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any) -> Any:
        out = super().merge_environment_settings(url, proxies, stream, verify, cert)
        if verify is None and isinstance(self.verify, str):
            out["verify"] = self.verify
        return out


class EtcdClient:
    """The cluster's endpoints, one etcd3gw client each; a call goes to the last one that answered,
    then the others. `timeout` bounds each HTTP request (a member without quorum answers a
    linearizable request only after etcd's own request timeout: we do not wait that long)."""

    def __init__(self, url: EtcdUrl, timeout: float = 2.0) -> None:
        self.url = url
        tls = url.tls
        self.clients = [Etcd3Client(host=h, port=p, timeout=timeout, api_path="/v3/",
                                    **({"protocol": "https", "session": TlsSession(tls)} if tls is not None else {}))
                        for h, p in url.endpoints]
        self._current = 0
        self._lock = threading.Lock()

    def call(self, fn: Callable[[Etcd3Client], T]) -> T:
        """fn on the endpoints in turn until one answers; StoreUnavailable (one line) if none does."""
        why: list[str] = []
        n = len(self.clients)
        start = self._current
        for k in range(n):
            i = (start + k) % n
            c = self.clients[i]
            try:
                out = fn(c)
            except (etcd_errors.ConnectionFailedError, etcd_errors.ConnectionTimeoutError) as e:
                why.append(f"{c.host}:{c.port} {_short(e)}")
                continue
            except etcd_errors.Etcd3Exception as e:  # an answer: a server-side error (e.g. no leader)
                text = _short(e)
                if any(s in text for s in ("no leader", "timed out", "timeout", "not capable", "unavailable")):
                    why.append(f"{c.host}:{c.port} {text}")
                    continue
                raise StoreError(f"{self.url}: {text}") from None
            self._current = i
            return out
        reached = [w for w in why if "refused" not in w and "Failed to establish" not in w and "TLS" not in w
                   and "closed the connection" not in w]  # a member we cannot talk to is not one that answers
        if not reached:
            raise Unreachable(f"{self.url}: no member answers ({why[0]})")
        raise StoreUnavailable(f"{self.url}: no quorum: {len(reached)} of {n} members reachable, none commits "
                               f"({reached[0]})")

    def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self.call(lambda c: c.post(c.get_url(path), json=payload))

    def txn(self, payload: dict[str, Any]) -> dict[str, Any]:
        return self.call(lambda c: c.transaction(payload))  # type: ignore[return-value]

    def get(self, key: str, **fields: Any) -> list[dict[str, Any]]:
        """The key-values of a range request (values decoded to str), [] if none."""
        result = self.post("/kv/range", {"key": b64(key), **fields})
        out = []
        for kv in result.get("kvs", []):
            kv = dict(kv)
            kv["key"] = base64.b64decode(kv["key"]).decode()
            kv["value"] = base64.b64decode(kv.get("value", "")).decode()
            out.append(kv)
        return out

    def get_prefix(self, prefix: str, **fields: Any) -> list[dict[str, Any]]:
        return self.get(prefix, range_end=b64(range_end(prefix)), **fields)

    def put(self, key: str, value: str, lease: int = 0) -> int:
        result = self.post("/kv/put", {"key": b64(key), "value": b64(value), **({"lease": lease} if lease else {})})
        return int(result["header"]["revision"])


def _create_revision(txn: dict[str, Any]) -> int:
    """The create revision a transaction's one range response read (0: no such key)."""
    for response in txn.get("responses") or []:
        kvs = (response.get("response_range") or {}).get("kvs") or []
        if kvs:
            return int(kvs[0].get("create_revision", 0))
    return 0


def _short(e: BaseException) -> str:
    text = getattr(e, "detail_text", None) or str(e) or type(e).__name__
    try:
        doc = json.loads(text)
        text = doc.get("error") or doc.get("message") or text
    except (ValueError, TypeError, AttributeError):
        pass
    text = " ".join(str(text).split())
    if "Connection refused" in text:
        return "connection refused"
    tls = _tls_failure(text)
    if tls:
        return tls
    if "timed out" in text.lower() and "Read timed out" in text:
        return "timed out"
    return text[:120]


def _tls_failure(text: str) -> str:
    """A TLS handshake's failure in one line with what to give ('' if `text` is not one)."""
    if "CERTIFICATE_VERIFY_FAILED" in text:
        why = text.split("certificate verify failed:", 1)[-1].split("(_ssl", 1)[0].strip(" ')")
        return f"TLS: its certificate is not trusted ({why}; give the CA that signed it: ?ca=FILE)"
    if "WRONG_VERSION_NUMBER" in text or "wrong version number" in text:
        return "TLS: it does not speak TLS (a plain member: use etcd://)"
    # A member that wants a client certificate it trusts ends the handshake: in TLS 1.3 the client's side of the
    # handshake is done before the member judges the certificate, so what the client sees depends on timing: the
    # member's alert (certificate required: none given; bad certificate or unknown CA: one it does not trust) or
    # only the connection's end.
    if "SSLEOFError" in text or "EOF occurred" in text or any(
            a in text for a in ("alert certificate required", "alert bad certificate", "alert unknown ca")):
        return ("TLS: it ended the handshake (it wants a client certificate signed by its trusted CA: "
                "?cert=FILE&key=FILE)")
    if "SSLError" in text:
        return "TLS: " + text.split("SSLError(", 1)[1].rstrip(")")[:100]
    if "RemoteDisconnected" in text:
        return "it closed the connection without an answer (a TLS member? use etcd+https://)"
    return ""


class EtcdStore(Store):
    """The fabric `fabric`'s keys in the etcd cluster at `url`."""

    def __init__(self, url: EtcdUrl, fabric: str, timeout: float = 2.0) -> None:
        self.url = url
        self.fabric = fabric
        self.client = EtcdClient(url, timeout=min(timeout, 2.0))
        self.prefix = f"{ROOT}{fabric}/"
        self.where = f"{url} (fabric {fabric})"
        # set by a leader (leader.py): saves then also compare the leader key's create revision with its win's
        self.leader_revision: int | None = None

    def __str__(self) -> str:
        return f"{self.url}{self.prefix}"

    def key(self, name: str) -> str:
        return self.prefix + name

    # --- the record ------------------------------------------------------------------------------
    def _read(self) -> tuple[str | None, int]:
        kvs = self.client.get(self.key("failures"))
        if not kvs:
            return None, 0
        return kvs[0]["value"], int(kvs[0]["mod_revision"])

    def load_rev(self) -> tuple[Record, int]:
        text, rev = self._read()
        if text is None:
            return {}, 0
        try:
            return statefile.origins_from_text(text), rev
        except statefile.StateFileError as e:
            raise StoreError(f"{self.where}: {e}") from None

    def load_stale(self) -> Record:
        """The record as a member that answers last committed it (serializable: no quorum needed)."""
        kvs = self.client.get(self.key("failures"), serializable=True)
        if not kvs:
            return {}
        try:
            return statefile.origins_from_text(kvs[0]["value"])
        except statefile.StateFileError as e:
            raise StoreError(f"{self.where}: {e}") from None

    def save(self, failures: Iterable[Failure], origins: Mapping[Failure, Origin] | None = None,
             expect: int | None = None) -> int:
        failures = set(failures)
        given = dict(origins or {})
        text_now, rev = self._read()
        if expect is not None and rev != expect:
            raise Conflict(f"{self.where}: the record changed (revision {expect} -> {rev}) since it was read")
        if any(f not in given for f in failures):
            now = statefile.origins_from_text(text_now) if text_now else {}
            given = {f: given.get(f, now.get(f, OPERATOR)) for f in failures}
        text = statefile.to_text(failures, given)
        key = b64(self.key("failures"))
        compare = [{"key": key, "result": "EQUAL", "target": "MOD", "mod_revision": rev}]
        leader = b64(self.key("leader"))
        if self.leader_revision is not None:  # etcd itself refuses a deposed leader's save, whatever its clock says
            compare.append({"key": leader, "result": "EQUAL", "target": "CREATE",
                            "create_revision": self.leader_revision})
        result = self.client.txn({
            "compare": compare,
            "success": [{"request_put": {"key": key, "value": b64(text)}}],
            "failure": [{"request_range": {"key": leader}}] if self.leader_revision is not None else []})
        if not result.get("succeeded"):
            if self.leader_revision is not None:
                held_by = _create_revision(result)
                if held_by != self.leader_revision:
                    raise Deposed(f"{self.where}: not saved: this controller no longer leads (the leader key's "
                                  f"create revision is {held_by or 'none'}, its win was {self.leader_revision})")
            raise Conflict(f"{self.where}: the record changed since revision {rev} was read")
        return int(result["header"]["revision"])

    def export_text(self) -> str | None:
        """The record as a state file holds it (None: nothing recorded)."""
        return self._read()[0]

    def load_denylist(self) -> tuple[Denylist, int]:
        kvs = self.client.get(self.key("denylist"))
        if not kvs:
            return Denylist(), 0
        try:
            return denylist_from_text(kvs[0]["value"]), int(kvs[0]["mod_revision"])
        except DenylistError as e:
            raise StoreError(f"{self.where}: denylist: {e}") from None

    def save_denylist(self, dl: Denylist, expect: int | None = None) -> int:
        """As save, for the denylist key: its revision compared, and a leader's key fenced the same way."""
        rev = self.load_denylist()[1]
        if expect is not None and rev != expect:
            raise Conflict(f"{self.where}: the denylist changed (revision {expect} -> {rev}) since it was read")
        key, leader = b64(self.key("denylist")), b64(self.key("leader"))
        compare = [{"key": key, "result": "EQUAL", "target": "MOD", "mod_revision": rev}]
        if self.leader_revision is not None:
            compare.append({"key": leader, "result": "EQUAL", "target": "CREATE",
                            "create_revision": self.leader_revision})
        result = self.client.txn({
            "compare": compare, "success": [{"request_put": {"key": key, "value": b64(denylist_to_text(dl))}}],
            "failure": [{"request_range": {"key": leader}}] if self.leader_revision is not None else []})
        if not result.get("succeeded"):
            if self.leader_revision is not None and _create_revision(result) != self.leader_revision:
                raise Deposed(f"{self.where}: denylist not saved: this controller no longer leads")
            raise Conflict(f"{self.where}: the denylist changed since revision {rev} was read")
        return int(result["header"]["revision"])

    # --- view, events, health --------------------------------------------------------------------
    def read_view(self) -> dict[str, Any] | None:
        kvs = self.client.get(self.key("view"))
        if not kvs:
            return None
        try:
            doc = json.loads(kvs[0]["value"])
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def publish_view(self, doc: dict[str, Any], lease: int) -> None:
        """The leader's view, under its lease (it goes when the leader does)."""
        self.client.put(self.key("view"), json.dumps(doc, default=str), lease=lease)

    def last_known(self, topo: Topology) -> tuple[Record, str | None]:
        """Without a quorum: the record as a member that answers last committed it, and why it cannot change."""
        try:
            return self.recorded(topo), None
        except Unreachable:
            raise
        except StoreUnavailable as e:
            problem = (f"{e}; the record cannot change and the leader holds the tables as they are until a quorum "
                       "returns")
            return self.checked(topo, self.load_stale()), problem

    def events_where(self) -> str:
        return f"{self}events/"

    def events_since(self, after: int | None, limit: int = 100, page: int = 1000
                     ) -> tuple[list[tuple[int, dict[str, Any]]], int]:
        """Cursors are etcd revisions: each event's create revision; after the last page, the revision the
        range was read at (every event created later has a higher one)."""
        prefix = self.key("events/")
        fields: dict[str, Any] = {"key": b64(prefix), "range_end": b64(range_end(prefix)), "sort_target": 2}  # CREATE
        if after is None:  # the last `limit`: newest first, then turned round
            fields.update(sort_order=2, limit=limit)
        else:
            fields.update(sort_order=1, limit=page, min_create_revision=after + 1)
        result = self.client.post("/kv/range", fields)
        kvs = result.get("kvs", [])
        if after is None:
            kvs.reverse()
        out = []
        for kv in kvs:
            try:
                doc = json.loads(base64.b64decode(kv.get("value", "")))
            except ValueError:
                doc = None
            if isinstance(doc, dict):
                out.append((int(kv["create_revision"]), doc))
        full = after is not None and len(kvs) == page  # more may follow: go on from the last one read
        cursor = int(kvs[-1]["create_revision"]) if full else int(result["header"]["revision"])
        return out, cursor

    def health(self) -> str | None:
        try:
            self._read()
        except StoreUnavailable as e:
            return f"{e}; the record cannot change and the leader holds the tables as they are until it returns"
        return None

    def close(self) -> None:
        for c in self.client.clients:
            c.session.close()


KEEP_EVENTS = 100_000  # events kept in etcd per fabric: older ones are deleted (etcd's space is a quota: 2 GB)
TRIM_EVERY = 1_000  # a sink trims after this many of its own events


class EventSink:
    """Puts a controller's events into the store from a thread of its own: emit never waits for etcd;
    while etcd cannot take them, up to `backlog` wait and older ones are dropped (counted); one etcd
    refuses (too large, no space) is dropped at once, counted in `refused` and logged, and the next goes
    on. Every `trim_every` events it deletes all but the newest `keep` of the fabric's events (keys sort by time), so a long-running
    fabric does not fill etcd's space quota (what the state file's event log leaves to the operator)."""

    def __init__(self, store: EtcdStore, backlog: int = 2048, *, keep: int = KEEP_EVENTS,
                 trim_every: int = TRIM_EVERY) -> None:
        if keep < 1 or trim_every < 1:
            raise ValueError("keep and trim_every must be at least 1")
        self.store = store
        self.keep, self.trim_every = keep, trim_every
        self.dropped = 0  # while etcd could not take them, the backlog was full
        self.refused = 0  # etcd refused them (a permanent error: too large, no space)
        self.refused_why = ""  # the last refusal, one line
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(backlog)
        self._id = f"{socket.gethostname()}-{os.getpid()}"
        self._n = 0
        self._thread = threading.Thread(target=self._run, name="event-sink", daemon=True)
        self._thread.start()

    def __call__(self, event: dict[str, Any]) -> None:
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            self._n += 1
            key = self.store.key(f"events/{time.time_ns():020d}-{self._id}-{self._n}")
            while True:
                try:
                    self.store.client.put(key, json.dumps(event, default=str))
                    break
                except StoreUnavailable:  # no member, no quorum: it passes; the event waits
                    time.sleep(0.5)
                except StoreError as e:  # etcd answered no (too large, no space, ...): the same event never goes
                    self._refuse(event, e)
                    break
            if self._n % self.trim_every == 0:
                try:
                    self.trim()
                except StoreError:
                    pass  # the next round trims what this one could not

    def _refuse(self, event: dict[str, Any], error: StoreError) -> None:
        self.refused += 1
        self.refused_why = f"event {event.get('kind', '?')} not stored, dropped: {error}"
        log.warning("%s", self.refused_why)

    def trim(self) -> int:
        """Delete the fabric's events older than the newest `keep`; how many went."""
        prefix = self.store.key("events/")
        newest = self.store.client.post("/kv/range", {"key": b64(prefix), "range_end": b64(range_end(prefix)),
                                                      "sort_order": 2, "sort_target": 0, "limit": self.keep,
                                                      "keys_only": True}).get("kvs", [])
        if len(newest) < self.keep:
            return 0
        oldest_kept = base64.b64decode(newest[-1]["key"])
        gone = self.store.client.post("/kv/deleterange", {"key": b64(prefix), "range_end": b64(oldest_kept)})
        return int(gone.get("deleted", 0))

    def close(self, timeout: float = 2.0) -> None:
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)
