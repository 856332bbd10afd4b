"""The store of the fabric's record (failures with their origin), the controller's view and its events.

Two backends: the local state file (the default, one machine, nothing to start: filestore.FileStore)
and etcd (`--store etcd://HOST:PORT[,HOST:PORT...]` or FABRIC_STORE: etcdstore.EtcdStore), which
keeps everything under one prefix per fabric so controllers and commands on several machines share
it. A change is read-compute-save: `load_rev` returns the record and the revision it was read at,
`save(..., expect=rev)` writes only if nothing changed since (Conflict otherwise; the caller reads
again and recomputes), so concurrent writers never lose or resurrect a failure.
"""

from __future__ import annotations

import contextlib
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from controller.failover import health
from controller.model.failures import Failure, FailoverError
from controller.state.statefile import Origin
from controller.model.topology import Topology
from controller.model.denylist import Denylist

Record = dict[Failure, Origin]
DEFAULT_ETCD_PORT = 2379
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:(\d{1,5}))?$")


class StoreError(ValueError):
    """The record cannot be read or written (one line: what, where, why)."""


class StoreUnavailable(StoreError):
    """The store does not answer, or answers without a quorum: nothing can be changed now."""


class Unreachable(StoreUnavailable):
    """No member of the store answers at all (a wrong address, or every member down)."""


class Conflict(StoreError):
    """Another writer changed the record since it was read: read again and recompute."""


class Deposed(StoreError):
    """A leader's save refused because the leader key is no longer its own (its lease expired, another
    leads): nothing was saved, and reading again does not help."""


@dataclass(frozen=True)
class EtcdTls:
    """TLS to etcd: the CA file that signed the members' certificates (None: the system's), and a client
    certificate and its key (both or neither; etcd with --client-cert-auth needs them)."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None


@dataclass(frozen=True)
class EtcdUrl:
    """`etcd://HOST:PORT[,HOST:PORT...]`, or `etcd+https://...?ca=FILE&cert=FILE&key=FILE`: the cluster's
    client endpoints, tried in turn, and the TLS files (None: plain HTTP)."""

    endpoints: tuple[tuple[str, int], ...]
    tls: EtcdTls | None = None

    def __str__(self) -> str:
        return ("etcd+https://" if self.tls else "etcd://") + ",".join(f"{h}:{p}" for h, p in self.endpoints)


TLS_KEYS = ("ca", "cert", "key")


def _tls(url: str, query: str) -> EtcdTls:
    """The ?ca=&cert=&key= of an etcd+https URL, each a readable file (StoreError naming the first that is not)."""
    files: dict[str, str] = {}
    for part in filter(None, query.split("&")):
        name, sep, value = part.partition("=")
        value = unquote(value)
        if name not in TLS_KEYS or not sep or not value:
            raise StoreError(f"store {url!r}: {part!r}: expected ca=FILE, cert=FILE or key=FILE")
        if not os.path.isfile(value) or not os.access(value, os.R_OK):
            raise StoreError(f"store {url!r}: {name} file {value!r} is not a readable file")
        files[name] = value
    if ("cert" in files) != ("key" in files):
        raise StoreError(f"store {url!r}: cert and key go together (the client certificate and its key)")
    return EtcdTls(**files)


def parse_url(url: str) -> EtcdUrl:
    """An etcd store URL; StoreError (one line) if it is not etcd://HOST[:PORT][,HOST[:PORT]...] or
    etcd+https://HOST[:PORT][,...][?ca=FILE&cert=FILE&key=FILE]."""
    text = url.strip()
    scheme = next((s for s in ("etcd://", "etcd+https://") if text.startswith(s)), None)
    if scheme is None:
        raise StoreError(f"store {url!r}: expected etcd://HOST:PORT[,HOST:PORT...] or etcd+https://HOST:PORT[,...]"
                         "?ca=FILE&cert=FILE&key=FILE (the state file is the default)")
    rest, _, query = text[len(scheme):].partition("?")
    rest = rest.rstrip("/")
    if query and scheme == "etcd://":
        raise StoreError(f"store {url!r}: ?{query}: ca, cert and key are for etcd+https://")
    endpoints = []
    for part in rest.split(","):
        m = _HOST.match(part.strip())
        if m is None:
            raise StoreError(f"store {url!r}: {part.strip()!r} is not HOST:PORT")
        port = int(m.group(3) or DEFAULT_ETCD_PORT)
        if not 1 <= port <= 65535:
            raise StoreError(f"store {url!r}: port {port} is not 1..65535")
        endpoints.append((m.group(1).strip("[]"), port))
    return EtcdUrl(tuple(endpoints), _tls(url, query) if scheme == "etcd+https://" else None)


class Store(ABC):
    """The record, view and events of one fabric. `where` names it in every message."""

    where: str

    # --- the record --------------------------------------------------------------------------
    @abstractmethod
    def load_rev(self) -> tuple[Record, int]:
        """The record and the revision it was read at (0: nothing recorded yet; the file: always 0,
        its lock orders the writers)."""

    @abstractmethod
    def save(self, failures: Iterable[Failure], origins: Mapping[Failure, Origin] | None = None,
             expect: int | None = None) -> int:
        """Write the failure set (origins as statefile.save gives them) if the record is still at
        revision `expect` (None: unconditionally); the new revision. Conflict if it moved on."""

    @contextlib.contextmanager
    def locked(self, timeout: float) -> Iterator[None]:
        """Held around a read-compute-save-apply (the file: its flock; etcd: nothing, the
        transaction's revision compare does it)."""
        yield

    def load(self) -> Record:
        return self.load_rev()[0]

    def recorded_rev(self, topo: Topology) -> tuple[Record, int]:
        """The record checked against the topology (StoreError naming the store otherwise)."""
        record, rev = self.load_rev()
        return self.checked(topo, record), rev

    def checked(self, topo: Topology, record: Record) -> Record:
        """`record` if every failure in it names what the topology has (StoreError naming the store otherwise)."""
        try:
            health(topo, record)
        except FailoverError as e:
            raise StoreError(f"{self.where}: {e} ('fabricctl restore all' clears it)") from None
        return record

    def recorded(self, topo: Topology) -> Record:
        return self.recorded_rev(topo)[0]

    def known_rev(self, topo: Topology) -> tuple[frozenset[Failure], list[Failure], int]:
        """The recorded failures that name what the topology has, those that do not (what `restore
        all` drops), and the revision read."""
        record, rev = self.load_rev()
        known, dropped = [], []
        for f in sorted(record, key=str):
            try:
                health(topo, [f])
            except FailoverError:
                dropped.append(f)
            else:
                known.append(f)
        return frozenset(known), dropped, rev

    # --- the controller's view and events ---------------------------------------------------
    @abstractmethod
    def read_view(self) -> dict[str, Any] | None:
        """The running controller's view (None: none runs)."""

    def last_known(self, topo: Topology) -> tuple[Record, str | None]:
        """The record checked against the topology, and why the store cannot take changes now (None: it
        can). A store without a quorum gives what a member last committed, with the reason; StoreError
        when nothing can be read."""
        return self.recorded(topo), None

    @abstractmethod
    def events_since(self, after: int | None, limit: int = 100) -> tuple[list[tuple[int, dict[str, Any]]], int]:
        """The controllers' events after cursor `after` (None: the last `limit`), oldest first, each with
        the cursor after it, and the cursor to go on from (cursors are ints that only grow)."""

    @abstractmethod
    def events_where(self) -> str:
        """Where the events are read (a cursor holds only for the same place)."""

    def change_token(self) -> Hashable | None:
        """Something that changes whenever the record or the view may have (None: unknown, read again)."""
        return None

    def health(self) -> str | None:
        """Why the store cannot take changes now, in one line (None: it can)."""
        return None

    def close(self) -> None:
        """Release connections (nothing for the file)."""

    # --- the fabric-wide denylist (controller.model.denylist, beside the failures) ---------------
    @abstractmethod
    def load_denylist(self) -> tuple[Denylist, int]:
        """The recorded denylist and the revision it was read at (as load_rev)."""

    @abstractmethod
    def save_denylist(self, dl: Denylist, expect: int | None = None) -> int:
        """Write the denylist if it is still at revision `expect` (as save: Conflict if it moved on)."""

