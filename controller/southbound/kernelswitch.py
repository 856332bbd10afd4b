"""The netlink implementation of the service's per-switch seam (controller.southbound.base.SwitchHandle): a switch of
the kernel data plane is a network namespace; its plan is Linux routes (netlink.py), its liveness call a netlink
request answered there, its link probes UDP datagrams between the link's ends' link-local addresses (linkprobe.py),
its carrier the namespace's link events (linkwatch.py).

What the kernel cannot carry it names in `cannot`: the service refuses those options by these names.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

from controller.model.topology import Switch, Topology
from controller.periodic import Periodic
from controller.routes import Fabric
from controller.southbound.base import HostAnswer, PlanChange, ProbeError, ProbeIn, SwitchSync
from controller.southbound.kroutes import Route, RouteDelta, diff, link_local, switch_routes
from controller.southbound.linkprobe import ProbeId, ProbeSocket, decode, encode
from controller.southbound.linkwatch import LinkWatch
from controller.southbound.netlink import NetlinkSwitch

ARM_GRACE_NS = 10_000_000_000  # a new lab's link-local addresses are tentative (DAD) for a second or two
RETRY_S = 1.0  # a failed install is tried again this often


def peers_of(topo: Topology, sw: Switch) -> dict[int, str]:
    """Each fabric port of `sw` -> the link-local address of the port facing it (a T0's uplinks[j] faces T1 j; a
    T1's downlinks[i] faces T0 i)."""
    if sw.role == "t0":
        return {port: link_local(spine.mac) for port, spine in zip(sw.uplinks, topo.t1s(sw.plane))}
    return {port: link_local(leaf.mac) for port, leaf in zip(sw.downlinks, topo.t0s(sw.plane))}


class KernelSwitch:
    """One namespace held by the service: its routes kept at the plan, its probe socket bound (at construction: a
    second controller probing this switch fails here, LinkProbeError), its liveness asked over netlink."""

    kind = "netlink"
    arbitrated = False  # a namespace takes routes from anyone: one controller at a time is the service's lease
    host_probes = False
    port_counters = False
    arm_grace_ns = ARM_GRACE_NS
    cannot: ClassVar[dict[str, str]] = {
        "carrier_events": "its ports' carrier comes from the namespace's own link events",
        "counters_every": "it has no P4 counters to read",
        "port_evidence": "it has no P4 port counters to weigh a loss against",
        "host_probes": "it cannot punt a host's Neighbor Advertisement to the controller",
        "host_every": "it cannot punt a host's Neighbor Advertisement to the controller",
    }

    def __init__(self, sw: Switch, peers: dict[int, str], nonce: int,
                 on_primary: Callable[[KernelSwitch], None], notify: Callable[[KernelSwitch, str, dict[str, Any]], None],
                 timeout: float = 2.0) -> None:
        assert sw.netns is not None, sw.name
        self.switch, self.netns, self.peers, self.nonce = sw, sw.netns, peers, nonce
        self.on_primary, self.notify, self.timeout = on_primary, notify, timeout
        self.reconnects = 0
        self.strays = 0  # datagrams that were not this run's probes
        self.sock = ProbeSocket(sw)
        self._conn: NetlinkSwitch | None = None
        self._conn_lock = threading.Lock()
        self._ready = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def name(self) -> str:
        return self.switch.name

    @property
    def ready(self) -> bool:
        return self._ready

    @property
    def role_name(self) -> str:
        return "primary" if self._ready else "down"

    # --- life -----------------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"switch-{self.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                self.on_primary(self)
            except Exception as e:  # a refused route, a namespace gone: said, and tried again
                self.notify(self, "install_failed", {"error": str(e) or type(e).__name__})
                self._stop.wait(RETRY_S)
                continue
            self._ready = True
            self.notify(self, "mastership", {"role": "primary", "ms": round((time.monotonic() - t0) * 1000, 1)})
            return

    def stop(self) -> None:
        self._stop.set()
        self._ready = False
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.sock.close()
        with self._conn_lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _call(self, fn: Callable[[NetlinkSwitch], Any]) -> Any:
        """fn on the namespace's netlink socket (opened when first needed; closed after an error)."""
        with self._conn_lock:
            if self._conn is None:
                self._conn = NetlinkSwitch(self.name, self.netns, self.timeout)
            try:
                return fn(self._conn)
            except BaseException:
                self._conn.close()
                self._conn = None
                raise

    # --- routes ---------------------------------------------------------------------------------------
    def reconcile(self, fabric: Fabric, timeout: float) -> SwitchSync:
        want = switch_routes(fabric, self.switch)

        def sync(conn: NetlinkSwitch) -> RouteDelta:
            delta = diff(want, conn.read())
            if delta:
                conn.write(delta)
            return delta

        d = self._call(sync)
        return SwitchSync(self.name, len(d.inserts), len(d.modifies), len(d.deletes))

    def plan_delta(self, change: PlanChange) -> list[Route] | None:
        """The switch's routes under the new fabric when they differ from the old's. Written by reading back (see
        write_delta): the kernel itself drops the routes out of a port that loses carrier, so a blind delta from the
        old plan would be refused (ESRCH) for routes already gone."""
        want = switch_routes(change.new, self.switch)
        return want if diff(want, switch_routes(change.old, self.switch)) else None

    def write_delta(self, delta: list[Route], timeout: float) -> int:
        def sync(conn: NetlinkSwitch) -> int:
            d = diff(delta, conn.read())
            if d:
                conn.write(d)
            return len(d.inserts) + len(d.modifies) + len(d.deletes)

        return int(self._call(sync))

    def ping(self, timeout: float) -> None:
        self._call(lambda conn: conn.ping())

    # --- probes ---------------------------------------------------------------------------------------
    def send_probe(self, port: int, link_id: int, direction: int, seq: int, sent_ns: int, target: int = 0) -> None:
        if target:
            raise ProbeError(f"{self.name}: no host probes on the kernel data plane")
        err = self.sock.send(port, self.peers[port], encode(ProbeId(self.nonce, link_id, direction, seq, sent_ns)))
        if err is not None:
            raise ProbeError(f"{self.name} port {port}: {err}")

    def probes_in(self) -> list[ProbeIn | HostAnswer]:
        out: list[ProbeIn | HostAnswer] = []
        for a in self.sock.read():
            p = decode(a.payload)
            if p is None or p.nonce != self.nonce:
                self.strays += 1
                continue
            out.append(ProbeIn(a.port, p.link_id, p.direction, p.seq, p.sent_ns, a.received_ns))
        return out

    def port_count(self, port: int, tx: bool, timeout: float) -> int:
        raise LookupError(f"{self.name}: no port counters on the kernel data plane")

    def read_counters(self, timeout: float) -> None:
        return None


class KernelCarrier:
    """The carrier of every port of the kernel switches, from their namespaces' link events, on a thread of its own:
    `report(switch, port, up, seen monotonic ns)` per change, and at start for every port already without carrier."""

    def __init__(self, topo: Topology, report: Callable[[str, int, bool, int], None],
                 on_error: Callable[[str], None] | None = None) -> None:
        self.watch = LinkWatch(topo)  # LinkWatchError (one line) for a namespace it cannot watch
        self.report, self.on_error = report, on_error
        # OSError, ValueError: a socket closed under the poll at stop, or the namespace gone
        self._loop = Periodic("carrier", self._poll, ends_on=(OSError, ValueError), on_end=self._ended)

    def start(self) -> None:
        now = time.monotonic_ns()
        for (switch, port), up in sorted(self.watch.carrier.items()):
            if not up:
                self.report(switch, port, False, now)
        self._loop.start()

    def _poll(self) -> None:
        changes = self.watch.poll(0.2)
        seen = time.monotonic_ns()
        for c in changes:
            self.report(c.switch, c.port, c.up, seen)

    def _ended(self, e: BaseException) -> None:
        if self.on_error is not None:
            self.on_error(f"carrier watch ended: {e}")

    def stop(self) -> None:
        self._loop.stop()
        self.watch.close()
