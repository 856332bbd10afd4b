"""The controller's events as JSON lines: one object per line with its time, kind and evidence."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO


class EventLog:
    """Appends events to a JSON-lines file (line-buffered, one write per event, safe across threads)."""

    def __init__(self, path: Path, sink: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.path = path
        self.sink = sink  # also gets every event (the etcd store's stream); must not block
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO = open(path, "a", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"t": round(time.time(), 6), "mono_ns": time.monotonic_ns(), "pid": os.getpid(), "kind": kind, **fields}
        line = json.dumps(event, sort_keys=False, default=str)
        with self._lock:
            self._file.write(line + "\n")
            self.counts[kind] = self.counts.get(kind, 0) + 1
        if self.sink is not None:
            self.sink(event)
        return event

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read(path: Path, follow: bool = False, poll: float = 0.2, stop: threading.Event | None = None
         ) -> Iterator[dict[str, Any]]:
    """The events of a file; with `follow`, keep waiting for new ones (like tail -f) until `stop` is set.
    A line that is not JSON (a torn last line while it is written) is held back until it is whole."""
    with open(path, encoding="utf-8") as f:
        pending = ""
        while True:
            chunk = f.readline()
            if chunk:
                pending += chunk
                if pending.endswith("\n"):
                    line, pending = pending.strip(), ""
                    if line:
                        try:
                            yield json.loads(line)
                        except ValueError:
                            continue
                continue
            if not follow or (stop is not None and stop.is_set()):
                return
            time.sleep(poll)
