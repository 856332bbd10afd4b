"""One long-lived P4Runtime session per switch: connect with backoff, arbitration, pipeline, mastership watch."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from controller.runtime.p4info import P4Info, pipeline_differences
from controller.runtime.p4rt import P4RuntimeError, SwitchConnection
from controller.programs.toolchain import Artifacts
from controller.model.topology import Switch


class Role(str, Enum):
    DOWN = "down"  # no session (connecting, or the switch is gone)
    BACKUP = "backup"  # connected, another controller is primary
    PRIMARY = "primary"  # connected, primary, pipeline ours, plan installed


@dataclass(frozen=True)
class Backoff:
    """Reconnect delays: first, doubling up to most."""

    first: float = 0.05
    most: float = 1.0

    def delays(self) -> "Callable[[int], float]":
        return lambda attempt: min(self.most, self.first * (2 ** attempt))


# Called from the session's thread: (session, event kind, fields). `on_primary` must bring the switch
# to the plan (it runs before the session reports PRIMARY); an exception there drops the session.
Notify = Callable[["Session", str, dict], None]


@dataclass(eq=False)
class Session:
    """Keeps `conn` open to one switch until stop(): reconnects with backoff when the stream breaks,
    pushes our pipeline when the device has none or another, and calls `on_primary` whenever it
    becomes primary (first connect, reconnect, takeover from another controller)."""

    switch: Switch
    election_id: int
    artifacts: Artifacts
    p4info: P4Info
    on_primary: Callable[["Session"], None]
    notify: Notify
    timeout: float = 2.0
    backoff: Backoff = field(default_factory=Backoff)
    fence: Callable[[], str | None] | None = None  # the leader's fence (etcd leadership): checked before every write
    conn: SwitchConnection = field(init=False)
    role: Role = field(default=Role.DOWN, init=False)
    reconnects: int = field(default=0, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.conn = SwitchConnection(self.switch.name, self.switch.grpc_addr, self.switch.device_id, self.election_id,
                                     timeout=self.timeout, pipeline_timeout=60.0, fence=self.fence)

    @property
    def name(self) -> str:
        return self.switch.name

    @property
    def ready(self) -> bool:
        """Primary, with our pipeline and the plan: writes and probes may use `conn`."""
        return self.role is Role.PRIMARY and self.conn.stream_error is None and self.conn.is_primary

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"session-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.conn.close()

    def _run(self) -> None:
        attempt = 0
        delay = self.backoff.delays()
        while not self._stop.is_set():
            try:
                self._connect()
            except P4RuntimeError as e:
                self.conn.close()
                if self.role is not Role.DOWN or attempt == 0:
                    self.notify(self, "switch_unreachable", {"error": str(e), "attempt": attempt})
                self.role = Role.DOWN
                self._stop.wait(delay(attempt))
                attempt += 1
                continue
            attempt = 0
            self._hold()
            if self._stop.is_set():
                break
            self.role = Role.DOWN
            self.reconnects += 1
            self.notify(self, "stream_broken", {"error": self.conn.stream_error or "closed"})
            self.conn.close()

    def _connect(self) -> None:
        t0 = time.monotonic()
        primary = self.conn.connect(timeout=self.timeout)
        self.notify(self, "connected", {"primary": primary, "election_id": self.election_id,
                                        "ms": round((time.monotonic() - t0) * 1000, 1)})
        if primary:
            self._become_primary()
        else:
            self.conn.p4info = self.p4info
            self.role = Role.BACKUP
            self.notify(self, "mastership", {"role": "backup"})

    def _become_primary(self) -> None:
        t0 = time.monotonic()
        theirs = self.conn.get_pipeline_p4info()
        pushed = theirs is None or bool(pipeline_differences(self.p4info, theirs))
        if pushed:
            self.conn.set_pipeline(self.artifacts, p4info=self.p4info)
        else:
            self.conn.p4info = self.p4info
        try:
            self.on_primary(self)
        except P4RuntimeError:
            raise
        except Exception as e:  # a bug or a refused write: report it, retry through a reconnect
            raise P4RuntimeError(f"{self.name}: installing the plan failed: {type(e).__name__}: {e}") from e
        self.role = Role.PRIMARY
        self.notify(self, "mastership", {"role": "primary", "pipeline": "pushed" if pushed else "kept",
                                         "ms": round((time.monotonic() - t0) * 1000, 1)})

    def _hold(self) -> None:
        """Watch the open session until its stream breaks (or stop): follow mastership changes."""
        while not self._stop.wait(0.02):
            if self.conn.stream_error is not None:
                return
            primary = self.conn.is_primary
            if primary and self.role is Role.BACKUP:
                try:
                    self._become_primary()
                except P4RuntimeError as e:
                    self.notify(self, "takeover_failed", {"error": str(e)})
                    return
            elif not primary and self.role is Role.PRIMARY:
                self.role = Role.BACKUP
                self.notify(self, "mastership", {"role": "backup", "deposed": True})
