"""Port status as the fast failure signal: a unix datagram socket on which a port-status source (the
lab's kernel link events, mininet_labs/carrier.py; a gNMI oper-status bridge on real switches) tells the
controller that a switch port lost or regained carrier, one JSON object per datagram:

    {"switch": "p0-t0-0", "port": 4, "up": false, "t_mono_ns": 123}

A carrier loss fails that port's link (or host port) at once, without waiting for K lost probes;
coming back is left to the probes (M in a row), as for any failure the detector recorded."""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from controller.periodic import Periodic

log = logging.getLogger("controller.service")


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


class NotASocket(OSError):
    """The listener's path holds something other than a socket (a file, a directory): it is left as it is."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(str(path))
        self.path, self.what = path, what

    def __str__(self) -> str:
        return f"{self.path} is {self.what}, not a socket: left as it is (give a free path)"


class SocketInUse(OSError):
    """Another listener is bound at the listener's path (a second controller on the same socket)."""

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.path = path

    def __str__(self) -> str:
        return f"{self.path}: another listener is bound there"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISREG(mode):
        return "a regular file"
    return "a special file"


def path_problem(path: Path) -> NotASocket | None:
    """Why a listener cannot take `path` without harm (something other than a socket is there), else None."""
    try:
        st = Path(path).lstat()
    except OSError:
        return None
    return None if stat.S_ISSOCK(st.st_mode) else NotASocket(Path(path), _kind(st.st_mode))


def _clear_stale(path: Path) -> None:
    """Remove a socket nobody listens on at `path` (one a stopped listener left); refuse anything else."""
    problem = path_problem(path)
    if problem is not None:
        raise problem
    if not path.exists():
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:  # nobody bound: stale
            path.unlink(missing_ok=True)
            return
        except FileNotFoundError:
            return
        except OSError:  # a socket of another type: someone's
            pass
    raise SocketInUse(path)


class PortStatusListener:
    """Binds the socket (replacing a stale one, refusing any other file), hands every valid datagram to
    `on_status` on its thread. If receiving fails, the thread ends and says why once: `on_error(why)`
    (default: a log line) and `error`."""

    def __init__(self, path: Path, on_status: Callable[[PortStatus], None],
                 on_error: Callable[[str], object] | None = None) -> None:
        self.path, self.on_status = Path(path), on_status
        self.on_error = on_error or (lambda why: log.error("%s", why))
        self.received = 0
        self.refused = 0
        self.error: str | None = None
        _clear_stale(self.path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self._sock.bind(str(self.path))
            st = self.path.lstat()
        except OSError:
            self._sock.close()
            raise
        self._bound = (st.st_dev, st.st_ino)  # the socket file this listener made: the only one stop() removes
        self._sock.settimeout(0.2)
        self._loop = Periodic("port-status", self._receive, ends_on=(OSError,), on_end=self._ended)

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()
        self._sock.close()
        try:
            st = self.path.lstat()
        except FileNotFoundError:
            return
        if (st.st_dev, st.st_ino) == self._bound:
            self.path.unlink(missing_ok=True)

    def _receive(self) -> None:
        """One datagram (or none within the socket's timeout); OSError ends the loop."""
        try:
            data = self._sock.recv(4096)
        except TimeoutError:
            return
        status = parse(data)
        if status is None:
            self.refused += 1
            return
        self.received += 1
        self.on_status(status)

    def _ended(self, e: BaseException) -> None:
        why = (e.strerror if isinstance(e, OSError) else None) or e
        self.error = f"carrier events on {self.path} stopped: {why}; the probes alone judge links"
        self.on_error(self.error)
