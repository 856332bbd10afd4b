"""The netlink southbound: a switch of the kernel data plane is a network namespace; its plan is Linux routes (kroutes), written and read back with pyroute2.

Our routes carry their own protocol number (`PROTO`), so reading back sees exactly what the
controller wrote (the kernel's own link-local and connected routes are left alone), and a switch is
in sync when those equal `kroutes.switch_routes` of the plan. Netlink requests go to the local kernel,
which answers or refuses at once; there is no remote to wait on, and no deadline is set on them (`timeout`
is kept for the interface; a hung kernel would hang the caller), except a refusal for want of per-CPU memory,
which `write` waits out for at most ENOMEM_WAIT_S (the kernel refills that memory by itself).
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink import NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_REPLACE, NLM_F_REQUEST
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl import RTM_DELROUTE, RTM_GETROUTE, RTM_NEWROUTE

from controller import exitcodes
from controller.southbound.base import DataPlaneError, Outcome, Progress, Push, SwitchSync
from controller.routes import Fabric
from controller.model.sids import fmt_v6
from controller.southbound import seg6nl
from controller.southbound.kroutes import (
    MAIN_TABLE,
    Behaviour,
    KernelPlanError,
    Nexthop,
    Route,
    RouteDelta,
    diff,
    pulled_nexthops,
    switch_routes,
)
from controller.model.topology import Switch

PROTO = 0x5F  # rtm_protocol of every route the controller writes (RTPROT_* below 0x5F... are the kernel's and daemons')
RTN_UNICAST, RTN_BLACKHOLE = 1, 6
BATCH = 32  # route messages per netlink send (one kernel skb)
# Each seg6 encap nexthop takes per-CPU memory the kernel allocates atomically (seg6_build_state: dst_cache_init
# GFP_ATOMIC, 40 bytes per CPU, one or two per nexthop by kernel version). An atomic per-CPU allocation only takes
# pages already populated, of which the kernel keeps a few (PCPU_EMPTY_POP_PAGES_HIGH: 4) and refills from a
# workqueue once short; a burst of encap routes (a leaf of a 16-leaf plane: 120 encap nexthops) can outrun that
# refill and get ENOMEM whatever RAM is free (docs/kernel.md).
ENOMEM_WAIT_S = 5.0  # longest wait for the refill, per write: a route still refused after it is a real refusal
ENOMEM_BACKOFF_S = (0.001, 0.1)  # first wait and cap between tries (doubling)


class NetlinkSwitchError(DataPlaneError):
    """A namespace that is not there, or a route the kernel refused (one line naming the switch)."""


class NetlinkSwitch:
    """One switch's namespace, opened for route reads and writes (close it, or use `with`)."""

    def __init__(self, name: str, netns: str, timeout: float = 10.0) -> None:
        self.name, self.netns, self.timeout = name, netns, timeout
        try:
            self.ipr = IPRoute(netns=netns, flags=0)  # flags 0: never create a namespace that is not there
        except OSError as e:
            raise NetlinkSwitchError(f"{name}: cannot open namespace {netns}: {e.strerror or e}") from None
        self.ipr.marshal.msg_map[RTM_NEWROUTE] = seg6nl.rtmsg  # decode RTA_ENCAP as bytes, parsed by seg6nl
        self._index: dict[str, int] = {}
        self._name: dict[int, str] = {}
        self.enomem_retries = 0  # route messages sent again after ENOMEM (write)
        for link in self._call(lambda: self.ipr.get_links()):
            self._index[link.get_attr("IFLA_IFNAME")] = link["index"]
            self._name[link["index"]] = link.get_attr("IFLA_IFNAME")

    def close(self) -> None:
        self.ipr.close()

    def __enter__(self) -> NetlinkSwitch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, fn: Callable[[], Any]) -> Any:
        """fn(); NetlinkSwitchError for a refusal or a socket error."""
        try:
            return fn()
        except NetlinkError as e:
            raise NetlinkSwitchError(f"{self.name}: the kernel refused: {e}") from None
        except (OSError, TimeoutError) as e:
            raise NetlinkSwitchError(f"{self.name}: netlink: {type(e).__name__}: {e}") from None

    def ping(self) -> None:
        """The liveness call: the namespace's loopback read over netlink (NetlinkSwitchError when it is gone)."""
        self._call(lambda: self.ipr.link("get", index=1))

    # --- reading ---------------------------------------------------------------------------------
    def read(self) -> list[Route]:
        """The routes the controller wrote (protocol PROTO, table main), as kroutes.Route."""
        q = seg6nl.rtmsg()
        q["family"] = socket.AF_INET6
        q["header"]["type"], q["header"]["flags"] = RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP
        out = []
        for msg in self._call(lambda: self.ipr.nlm_request_batch([q])):
            if msg.get("event") != "RTM_NEWROUTE" and msg["header"]["type"] != RTM_NEWROUTE:
                continue
            if msg["proto"] != PROTO or msg.get_attr("RTA_TABLE") != MAIN_TABLE:
                continue
            out.append(self._decode(msg))
        return sorted(out)

    def _decode(self, msg: Any) -> Route:
        dst = msg.get_attr("RTA_DST") or "::"
        prefix = f"{fmt_v6(int(ipaddress.IPv6Address(dst)))}/{msg['dst_len']}"
        if msg["type"] == RTN_BLACKHOLE:
            return Route(prefix, blackhole=True)
        if msg.get_attr("RTA_ENCAP_TYPE") == seg6nl.LWTUNNEL_ENCAP_SEG6_LOCAL:
            b = seg6nl.parse_seg6local(msg.get_attr("RTA_ENCAP"))
            nh6 = fmt_v6(int(ipaddress.IPv6Address(b.nh6))) if b.nh6 else None
            oif = msg.get_attr("RTA_OIF")
            return Route(prefix, local=Behaviour(b.action, b.table, nh6, b.next_csid), dev=self._name.get(oif, f"if{oif}"))
        hops = msg.get_attr("RTA_MULTIPATH")
        if hops:
            return Route(prefix, tuple(sorted(self._hop(h, h["oif"]) for h in hops)))
        return Route(prefix, (self._hop(msg, msg.get_attr("RTA_OIF")),))

    def _hop(self, m: Any, oif: int) -> Nexthop:
        carrier = None
        if m.get_attr("RTA_ENCAP_TYPE") == seg6nl.LWTUNNEL_ENCAP_SEG6:
            mode, segs = seg6nl.parse_seg6_encap(m.get_attr("RTA_ENCAP"))
            carrier = segs[0] if mode == "encap.red" and len(segs) == 1 else f"{mode}:{','.join(segs)}"
        gw = m.get_attr("RTA_GATEWAY")
        return Nexthop(self._name.get(oif, f"if{oif}"), fmt_v6(int(ipaddress.IPv6Address(gw))) if gw else None, carrier)

    # --- writing ---------------------------------------------------------------------------------
    def _ifindex(self, dev: str) -> int:
        try:
            return self._index[dev]
        except KeyError:
            raise NetlinkSwitchError(f"{self.name}: no interface {dev} in namespace {self.netns}") from None

    def _msg(self, route: Route, kind: int, flags: int) -> seg6nl.rtmsg:
        net = ipaddress.IPv6Network(route.prefix)
        m = seg6nl.rtmsg()
        m["family"], m["dst_len"], m["table"], m["proto"], m["scope"] = socket.AF_INET6, net.prefixlen, MAIN_TABLE, PROTO, 0
        m["type"] = RTN_BLACKHOLE if route.blackhole else RTN_UNICAST
        attrs: list[list[Any]] = [["RTA_DST", str(net.network_address)], ["RTA_TABLE", MAIN_TABLE]]
        if kind == RTM_NEWROUTE and route.local is not None:
            b = route.local
            attrs += [["RTA_OIF", self._ifindex(route.dev or "lo")], ["RTA_ENCAP_TYPE", seg6nl.LWTUNNEL_ENCAP_SEG6_LOCAL],
                      ["RTA_ENCAP", seg6nl.seg6local(b.action, table=b.table, nh6=b.nh6, next_csid=b.next_csid)]]
        elif kind == RTM_NEWROUTE and route.nexthops:
            hops = []
            for h in route.nexthops:
                a: list[list[Any]] = [["RTA_GATEWAY", h.gateway]] if h.gateway else []
                if h.carrier:
                    a += [["RTA_ENCAP_TYPE", seg6nl.LWTUNNEL_ENCAP_SEG6], ["RTA_ENCAP", seg6nl.seg6_encap([h.carrier])]]
                hops.append({"hops": 0, "flags": 0, "oif": self._ifindex(h.dev), "attrs": a})
            if len(hops) == 1 and not route.nexthops[0].carrier:
                attrs += [["RTA_OIF", hops[0]["oif"]], *hops[0]["attrs"]]
            else:
                attrs.append(["RTA_MULTIPATH", hops])
        m["attrs"] = attrs
        m["header"]["type"], m["header"]["flags"] = kind, flags
        return m

    def write(self, delta: RouteDelta) -> None:
        """Apply a delta: deletes first (a dead path leaves before anything new), then inserts and replacements."""
        msgs = [self._msg(r, RTM_DELROUTE, NLM_F_REQUEST | NLM_F_ACK) for r in delta.deletes]
        new = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE
        routes = [*delta.modifies, *delta.inserts]
        msgs += [self._msg(r, RTM_NEWROUTE, new) for r in routes]
        deadline: float | None = None
        for at in range(0, len(msgs), BATCH):
            chunk = msgs[at:at + BATCH]
            try:
                self.ipr.nlm_request_batch(chunk)
                continue
            except NetlinkError as e:
                if e.code != errno.ENOMEM:
                    raise NetlinkSwitchError(f"{self.name}: the kernel refused: {e}") from None
            except (OSError, TimeoutError) as e:
                raise NetlinkSwitchError(f"{self.name}: netlink: {type(e).__name__}: {e}") from None
            # ENOMEM (per-CPU memory, above): the kernel went on with the chunk's other messages, so which routes it
            # took is unknown; send its new routes again one at a time (a replace is idempotent, a delete would not
            # be, and deletes allocate nothing), each waiting for the refill
            first, end = (max(0, i - len(delta.deletes)) for i in (at, at + len(chunk)))  # the chunk's new routes
            again = routes[first:end]
            if not again:
                raise NetlinkSwitchError(f"{self.name}: the kernel refused a route delete: ENOMEM")
            deadline = deadline or time.monotonic() + ENOMEM_WAIT_S
            for route in again:
                self._send_waiting(route, new, deadline)

    def _send_waiting(self, route: Route, flags: int, deadline: float) -> None:
        """One new route, sent again while the kernel refuses it with ENOMEM, until `deadline`."""
        wait, tries = ENOMEM_BACKOFF_S[0], 0
        while True:
            try:
                self.ipr.nlm_request_batch([self._msg(route, RTM_NEWROUTE, flags)])  # fresh: pyroute2 encodes in place
                self.enomem_retries += tries
                return
            except NetlinkError as e:
                if e.code != errno.ENOMEM or time.monotonic() + wait > deadline:
                    more = f" (still after {tries} tries over {ENOMEM_WAIT_S:g} s)" if e.code == errno.ENOMEM else ""
                    raise NetlinkSwitchError(f"{self.name}: the kernel refused {route.prefix}: {e}{more}") from None
            except (OSError, TimeoutError) as e:
                raise NetlinkSwitchError(f"{self.name}: netlink: {type(e).__name__}: {e}") from None
            time.sleep(wait)
            wait, tries = min(wait * 2, ENOMEM_BACKOFF_S[1]), tries + 1


@dataclass
class NetlinkBatch:
    """Switches of the kernel data plane with their routes planned (`NetlinkSouthbound.prepare`); `run` reads each
    back and writes the difference, one namespace after another (each answers at once)."""

    southbound: NetlinkSouthbound
    names: list[str]
    switches: list[Switch]
    routes: dict[str, list[Route]]

    def run(self, *, dry_run: bool, push: Push = "never", progress: Progress | None = None
            ) -> dict[str, Outcome]:
        """`push` is P4Runtime's (a pipeline): a namespace has none, so it is ignored."""
        out: dict[str, Outcome] = {}
        for sw in self.switches:
            sync = self.southbound._sync(sw, lambda: self.routes[sw.name], dry_run)
            out[sw.name] = (Outcome(sw.name, sync.detail["delta"]) if sync.ok
                            else Outcome(sw.name, error=sync.error, code=exitcodes.SWITCH_ERROR))
            if progress is not None:
                progress(sw.name, out[sw.name], None)
        return out

    def text(self, item: Any) -> str:
        return item.text() if isinstance(item, Route) else str(item)

    def to_json(self, item: Any) -> Any:
        return {"route": self.text(item)}


class NetlinkSouthbound:
    """The kernel data plane's southbound: `netns_of(switch name)` names each switch's namespace."""

    kind = "netlink"

    def __init__(self, netns_of: Callable[[str], str], timeout: float = 10.0) -> None:
        self.netns_of, self.timeout = netns_of, timeout

    def open(self, sw: Switch) -> NetlinkSwitch:
        return NetlinkSwitch(sw.name, self.netns_of(sw.name), self.timeout)

    def _sync(self, sw: Switch, want: Callable[[], list[Route]], dry_run: bool,
              have: Iterable[Route] | None = None) -> SwitchSync:
        try:
            routes = want()
            with self.open(sw) as conn:
                found = conn.read() if have is None else list(have)
                delta = diff(routes, found)
                if delta and not dry_run:
                    conn.write(delta)
        except (NetlinkSwitchError, KernelPlanError) as e:
            return SwitchSync(sw.name, error=str(e) if str(e).startswith(sw.name) else f"{sw.name}: {e}")
        return SwitchSync(sw.name, len(delta.inserts), len(delta.modifies), len(delta.deletes),
                          detail={"delta": delta})

    def prepare(self, fabric: Fabric, switches: Sequence[Switch]) -> NetlinkBatch:
        """Each switch's routes under `fabric`; OpError naming the first switch whose plan the kernel cannot carry
        (kroutes.check_options: pins, ECN and trimming thresholds, another program)."""
        routes: dict[str, list[Route]] = {}
        for sw in switches:
            try:
                routes[sw.name] = switch_routes(fabric, sw)
            except KernelPlanError as e:
                raise exitcodes.OpError(f"{sw.name} is on the kernel data plane (namespace {self.netns_of(sw.name)}): {e}",
                                  exitcodes.BAD_INPUT) from None
        return NetlinkBatch(self, [s.name for s in switches], list(switches), routes)

    def install(self, fabric: Fabric, sw: Switch, *, dry_run: bool = False) -> SwitchSync:
        return self._sync(sw, lambda: switch_routes(fabric, sw), dry_run)

    def check(self, fabric: Fabric, sw: Switch) -> SwitchSync:
        return self.install(fabric, sw, dry_run=True)

    def apply_failure(self, old: Fabric, new: Fabric, sw: Switch) -> SwitchSync:
        before = switch_routes(old, sw)
        out = self._sync(sw, lambda: switch_routes(new, sw), False, have=before)
        if out.ok:
            out.detail["pulled"] = pulled_nexthops(before, switch_routes(new, sw))
        return out
