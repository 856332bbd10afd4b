"""The default store: the local state file under its flock, the view in the status file beside it, the events in
the running controller's events file.

Every call goes to the functions the CLI and the service used before the store existed
(statefile, statelock), so with this backend nothing a user types or reads changes.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Hashable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from controller import failover
from controller.model.failures import Failure
from controller.files.safefile import pid_alive
from controller.state.eventfile import EVENTS_NAME, backlog_offset, new_events
from controller.model.denylist import Denylist, DenylistError
from controller.state import denylistrec
from controller.state.store import Record, Store, StoreError
from controller.state.statefile import Origin
from controller.state.statelock import StateLocked, state_lock
from controller.model.failures import FailoverError

STATUS_NAME = ".fabric-service.json"  # controller.service.status publishes there


class FileStore(Store):
    """The state file at `path` (its lock orders the writers, so revisions are always 0). `events`: the events
    file to read (None: the one the running controller's view names, else fabric-events.jsonl beside)."""

    def __init__(self, path: str | Path, events: str | Path | None = None) -> None:
        self.path = Path(path)
        self.events = Path(events) if events is not None else None
        self.where = f"state file {self.path}"

    def __str__(self) -> str:
        return str(self.path)

    def load_rev(self) -> tuple[Record, int]:
        try:
            return failover.load_origins(self.path), 0
        except FailoverError as e:
            raise StoreError(str(e)) from None

    def save(self, failures: Iterable[Failure], origins: Mapping[Failure, Origin] | None = None,
             expect: int | None = None) -> int:
        try:
            failover.save_state(self.path, failures, origins)
        except FailoverError as e:
            raise StoreError(str(e)) from None
        return 0

    def load_denylist(self) -> tuple[Denylist, int]:
        try:
            return denylistrec.load_file(denylistrec.file_path(self.path)), 0
        except DenylistError as e:
            raise StoreError(str(e)) from None

    def save_denylist(self, dl: Denylist, expect: int | None = None) -> int:
        try:
            denylistrec.save_file(denylistrec.file_path(self.path), dl)
        except DenylistError as e:
            raise StoreError(str(e)) from None
        return 0

    @contextlib.contextmanager
    def locked(self, timeout: float) -> Iterator[None]:
        try:
            with state_lock(self.path, timeout):
                yield
        except StateLocked as e:
            raise StoreError(str(e)) from None

    def read_view(self) -> dict[str, Any] | None:
        """The status file of a live controller (as controller.service.status.read_status)."""
        try:
            doc = json.loads(self.path.with_name(STATUS_NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or not isinstance(doc.get("pid"), int) or not pid_alive(doc["pid"]):
            return None
        return doc

    def events_path(self) -> Path:
        """The events file: --events, else the running controller's (its view names it), else the default."""
        if self.events is not None:
            return self.events
        view = self.read_view()
        if view is not None and isinstance(view.get("events"), str):
            return Path(view["events"])
        return self.path.with_name(EVENTS_NAME)

    def events_where(self) -> str:
        return str(self.events_path())

    def events_since(self, after: int | None, limit: int = 100) -> tuple[list[tuple[int, dict[str, Any]]], int]:
        """Cursors are byte offsets in the events file (a file that shrank is read from its start)."""
        path = self.events_path()
        return new_events(path, backlog_offset(path, limit) if after is None else after)

    def change_token(self) -> Hashable:
        """(mtime_ns, size) of the state and status files, (0, -1) where absent."""
        out = []
        for p in (self.path, self.path.with_name(STATUS_NAME)):
            try:
                st = os.stat(p)
                out.append((st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((0, -1))
        return tuple(out)
