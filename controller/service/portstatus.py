"""Port status as the fast failure signal: a unix datagram socket on which a port-status source (the
lab's kernel link events, mininet_labs/carrier.py; a gNMI oper-status bridge on real switches) tells the
controller that a switch port lost or regained carrier, one JSON object per datagram:

    {"switch": "p0-t0-0", "port": 4, "up": false, "t_mono_ns": 123}

A carrier loss fails that port's link (or host port) at once, without waiting for K lost probes;
coming back is left to the probes (M in a row), as for any failure the detector recorded."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class PortStatus:
    """One port's carrier as its source saw it (`t_mono_ns`: its monotonic clock when it saw it, 0 unknown)."""

    switch: str
    port: int
    up: bool
    t_mono_ns: int = 0

    def to_bytes(self) -> bytes:
        return json.dumps({"switch": self.switch, "port": self.port, "up": self.up,
                           "t_mono_ns": self.t_mono_ns}).encode()


def parse(data: bytes) -> PortStatus | None:
    """A datagram as a PortStatus; None for anything else (it is dropped, never half-read)."""
    try:
        doc = json.loads(data)
        switch, port, up = doc["switch"], doc["port"], doc["up"]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(switch, str) or not isinstance(port, int) or isinstance(port, bool) or not isinstance(up, bool):
        return None
    t = doc.get("t_mono_ns", 0)
    return PortStatus(switch, port, up, t if isinstance(t, int) else 0)


def send(path: str | os.PathLike[str], status: PortStatus) -> bool:
    """Send one PortStatus to a listener's socket; False when nobody listens there."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        try:
            s.sendto(status.to_bytes(), str(path))
            return True
        except (FileNotFoundError, ConnectionRefusedError):
            return False


class PortStatusListener:
    """Binds the socket (replacing a stale one), hands every valid datagram to `on_status` on its thread."""

    def __init__(self, path: Path, on_status: Callable[[PortStatus], None]) -> None:
        self.path, self.on_status = Path(path), on_status
        self.received = 0
        self.refused = 0
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.path.unlink(missing_ok=True)
        self._sock.bind(str(self.path))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="port-status", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sock.close()
        self.path.unlink(missing_ok=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            status = parse(data)
            if status is None:
                self.refused += 1
                continue
            self.received += 1
            self.on_status(status)
