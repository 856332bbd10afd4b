"""One long-lived P4Runtime session per switch: connect with backoff, arbitration, pipeline, mastership watch; the
P4Runtime implementation of the service's per-switch seam (controller.southbound.base.SwitchHandle): reconcile and
deltas as P4 entities, liveness as the Capabilities call, probes as packet-out/packet-in, port counters."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from typing import Any, ClassVar

from controller.plan.fabricplan import plan as make_plan
from controller.plan.probes import Probe, advertised_target, neighbor_solicitation, parse_probe, probe_frame
from controller.routes import DEFAULT_RESETS, Fabric
from controller.runtime.codec import canonical
from controller.runtime.p4info import P4Info, pipeline_differences
from controller.runtime.p4rt import P4RuntimeError, SwitchConnection
from controller.runtime.reconcile import apply
from controller.plan.delta import Delta, ordered_updates
from controller.southbound.base import HostAnswer, PlanChange, ProbeError, ProbeIn, SwitchSync
from controller.programs.toolchain import Artifacts
from controller.model.topology import Switch


TX_COUNTER = "FabricEgress.port_tx"  # counted in egress, before the port takes (or refuses) the frame
RX_COUNTER = "IngressPipe.port_rx"
DROPS_COUNTER = "IngressPipe.drop_reasons"


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

    kind = "p4runtime"
    arbitrated = True  # election ids: of several controllers, the switch takes writes from the highest's
    host_probes = True
    port_counters = True
    arm_grace_ns = 0  # a probe's packet-out needs the plan installed, which readiness already says
    cannot: ClassVar[dict[str, str]] = {}  # it carries every option of the service

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

    @property
    def role_name(self) -> str:
        return self.role.value

    # --- the seam: what the service asks of a P4Runtime switch ----------------------------------------
    def reconcile(self, fabric: Fabric, timeout: float) -> SwitchSync:
        """Read back, write the difference; with the program's resets, as `fabricctl install`: thresholds a switch
        holds that the plan does not set go back to the program's default."""
        d = apply(self.conn, make_plan(fabric)[self.name], resets=DEFAULT_RESETS)
        return SwitchSync(self.name, len(d.inserts), len(d.modifies), len(d.deletes))

    def plan_delta(self, change: PlanChange) -> tuple[list[list[Any]], int] | None:
        d: Delta | None = change.p4_deltas().get(self.name)
        if not d:
            return None
        c = lambda xs: tuple(canonical(e, self.p4info) for e in xs)  # noqa: E731
        d = Delta(c(d.inserts), c(d.modifies), c(d.deletes), c(d.unwatch),
                  tuple(c(stage) for stage in d.rewatch))
        return [list(b) for b in ordered_updates(d)], len(change.p4_deltas()[self.name])

    def write_delta(self, delta: tuple[list[list[Any]], int], timeout: float) -> int:
        """Every batch within one deadline for all of them."""
        batches, count = delta
        end = time.monotonic() + timeout
        for b in batches:
            left = end - time.monotonic()
            if left <= 0:
                raise P4RuntimeError(f"{self.name}: Write failed: DEADLINE_EXCEEDED (the delta's deadline passed)")
            self.conn.write(b, timeout=left)
        return count

    def ping(self, timeout: float) -> None:
        self.conn.capabilities(timeout)

    def send_probe(self, port: int, link_id: int, direction: int, seq: int, sent_ns: int, target: int = 0) -> None:
        frame = neighbor_solicitation(target, seq) if target else probe_frame(Probe(link_id, direction, seq, sent_ns))
        try:
            self.conn.packet_out(frame, egress_port=port, _pad=0)
        except P4RuntimeError as e:
            raise ProbeError(str(e)) from None

    def probes_in(self) -> list[ProbeIn | HostAnswer]:
        out: list[ProbeIn | HostAnswer] = []
        try:
            packets = list(self.conn.packets_in(timeout=0))
        except P4RuntimeError as e:
            raise ProbeError(str(e)) from None
        for packet in packets:
            port = dict(packet.metadata).get("ingress_port")
            now = packet.received_ns or time.monotonic_ns()
            if not isinstance(port, int):
                continue
            probe = parse_probe(packet.payload)
            if probe is not None:
                out.append(ProbeIn(port, probe.link, probe.direction, probe.seq, probe.sent_ns, now))
                continue
            na = advertised_target(packet.payload)
            if na is not None:
                out.append(HostAnswer(port, na[0], na[1], now))
        return out

    def port_count(self, port: int, tx: bool, timeout: float) -> int:
        return self.conn.read_counter(TX_COUNTER if tx else RX_COUNTER, port, timeout)[0].packets

    def read_counters(self, timeout: float) -> tuple[Any, Any, Any]:
        """(port rx, port tx, drop reasons) cells, each read with what is left of `timeout`."""
        end = time.monotonic() + timeout
        return tuple(self.conn.read_counter(n, None, max(0.001, end - time.monotonic()))  # type: ignore[return-value]
                     for n in (RX_COUNTER, TX_COUNTER, DROPS_COUNTER))

    # --- life -------------------------------------------------------------------------------------------
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
