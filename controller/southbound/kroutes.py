"""A switch's plan as Linux routes: what a leaf or spine of the kernel data plane holds, from the same Fabric as its P4 entities.

The same static paths (`routes.Path`: one per plane, source leaf, spine, destination leaf) and the
same uSID carriers the P4 leaves write (block | spine uN | destination leaf uN | End.DT6):

    leaf  <dst leaf hosts>/64   multipath: per live spine, encap seg6 mode encap.red segs <carrier> via that uplink
          <spine uN>/48         via the spine (the carrier's first locator: encapsulated packets are routed again)
          <own uN>/48           seg6local End flavors next-csid lblen 32 nflen 16
          <own uN|DT6>/64       seg6local End.DT6 table main
          <own uN|DX6 k>/64     seg6local End.DX6 nh6 <host k>      (per host port that is up)
          <host k>/128          dev <host port>
          <block>/32            blackhole (an unknown uSID is dropped, not routed)
    spine <own uN>/48           seg6local End flavors next-csid lblen 32 nflen 16
          <leaf uN>/48          via the leaf, per live downlink
          <block>/32            blackhole

A failure pulls exactly what it pulls from the P4 plan: the nexthops through a dead link or spine
leave the multipath routes, routes to a dead uN go, an unreachable destination has no route.
Interfaces are named `eth<port>` after the topology's port numbers; a neighbour is reached at the
EUI-64 link-local address of its MAC (the lab pins it as a permanent neighbour: no ND in the fabric).
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.plan.delta import Changes
from controller.routes import Fabric, Path
from controller.model.sids import BLOCK_LEN, LOCAL_SID_LEN, UN_LEN, V6_LEAF_LEN, fmt_v6
from controller.model.topology import Switch

CSID_BLOCK_BITS, CSID_NODE_BITS = 32, 16  # F3216: lblen 32, nflen 16
MAIN_TABLE = 254


class KernelPlanError(ValueError):
    """Options the kernel data plane cannot carry out (one line naming what)."""


@dataclass(frozen=True, slots=True, order=True)
class Nexthop:
    """One nexthop: out of `dev` to `gateway`, encapsulating towards `carrier` first when it has one."""

    dev: str
    gateway: str | None = None
    carrier: str | None = None  # encap seg6 mode encap.red segs <carrier>

    def text(self) -> str:
        enc = f"encap seg6 mode encap.red segs {self.carrier} " if self.carrier else ""
        return enc + (f"via {self.gateway} " if self.gateway else "") + f"dev {self.dev}"


@dataclass(frozen=True, slots=True, order=True)
class Behaviour:
    """A seg6local behaviour: End (with the next-csid flavor), End.DT6 (table), End.DX6 (nh6)."""

    action: str
    table: int | None = None
    nh6: str | None = None
    next_csid: tuple[int, int] | None = None

    def text(self) -> str:
        out = f"encap seg6local action {self.action}"
        if self.next_csid:
            out += f" flavors next-csid lblen {self.next_csid[0]} nflen {self.next_csid[1]}"
        if self.table is not None:
            out += f" table {'main' if self.table == MAIN_TABLE else self.table}"
        if self.nh6:
            out += f" nh6 {self.nh6}"
        return out


@dataclass(frozen=True, slots=True, order=True)
class Route:
    """One IPv6 route of a switch, keyed by its prefix: nexthops, a seg6local behaviour, or blackhole."""

    prefix: str  # "fd00:0:1::/64"
    nexthops: tuple[Nexthop, ...] = ()
    local: Behaviour | None = None
    blackhole: bool = False
    dev: str | None = None  # a seg6local route's device (not lo: IPv6 makes a route via lo a reject route)

    def text(self) -> str:
        """As `ip -6 route` would take it."""
        if self.blackhole:
            return f"blackhole {self.prefix}"
        if self.local is not None:
            return f"{self.prefix} {self.local.text()} dev {self.dev}"
        if len(self.nexthops) == 1:
            return f"{self.prefix} {self.nexthops[0].text()}"
        return f"{self.prefix} " + " ".join(f"nexthop {h.text()}" for h in self.nexthops)


def intf(port: int) -> str:
    """A switch port's interface name in the switch's namespace."""
    return f"eth{port}"


def link_local(mac: str) -> str:
    """The EUI-64 link-local address of a MAC (RFC 4291 appendix A)."""
    b = bytes.fromhex(mac.replace(":", ""))
    eui = bytes([b[0] ^ 0x02]) + b[1:3] + b"\xff\xfe" + b[3:]
    return fmt_v6(0xFE80 << 112 | int.from_bytes(eui, "big"))


END = Behaviour("End", next_csid=(CSID_BLOCK_BITS, CSID_NODE_BITS))


def check_options(f: Fabric) -> None:
    """KernelPlanError for what the plan asks and Linux routes cannot do (docs/kernel.md has the table)."""
    o = f.options
    if o.program != "srv6_spray":
        raise KernelPlanError(f"the kernel data plane runs srv6_spray's plan, not {o.program} (E-ECMP on the BTH QP "
                              "needs the P4 switch)")
    if o.pins:
        raise KernelPlanError("pinned paths (pins) match the BTH destination QP: the kernel data plane cannot; "
                              "it spreads QPs by the RoCEv2 UDP source port")
    if o.ecn_qdepth or o.trim_qdepth:
        raise KernelPlanError("ECN marking and trimming thresholds are P4 egress features: the kernel data plane has "
                              "neither")


LOCAL_DEV = "sr0"  # every switch namespace's device for its seg6local routes: a veth pair of its own, always up


def local_dev(sw: Switch) -> str:
    """The device a switch's seg6local routes hang off: `sr0`, which no fault takes down. Not a fabric port: IPv6
    removes a device's routes when it goes down, so End, End.DT6 and End.DX6 on an uplink would leave with it (and
    not lo: IPv6 makes a route via lo a reject route)."""
    return LOCAL_DEV


def switch_routes(f: Fabric, sw: Switch) -> list[Route]:
    """Every route the switch should hold under the fabric's health, sorted by prefix."""
    check_options(f)
    out = leaf_routes(f, sw) if sw.role == "t0" else spine_routes(f, sw)
    return sorted(out)


def _prefix(value: int, length: int) -> str:
    return f"{fmt_v6(value)}/{length}"


def leaf_routes(f: Fabric, leaf: Switch) -> list[Route]:
    p, i, sids, topo, h = leaf.plane, leaf.index, f.sids, f.topo, f.health
    spines = topo.t1s(p)
    un = sids.t0_usid(p, i)
    dev = local_dev(leaf)
    out = [Route(_prefix(sids.block_prefix, BLOCK_LEN), blackhole=True),
           Route(_prefix(sids.un_prefix(un), UN_LEN), local=END, dev=dev),
           Route(_prefix(sids.local_sid(un, sids.dt6_usid(p)), LOCAL_SID_LEN), local=Behaviour("End.DT6", table=MAIN_TABLE),
                 dev=dev)]
    live = f.live(p, i)
    for j in sorted(live):
        out.append(Route(_prefix(sids.un_prefix(sids.t1_usid(p, j)), UN_LEN),
                         (Nexthop(intf(leaf.uplinks[j]), link_local(spines[j].mac)),)))
    if (p, i) not in h.leaves:
        for k, port in enumerate(leaf.host_ports):
            if not h.slot_up(p, i, k):
                continue
            host = fmt_v6(sids.host_v6(p, i, k))
            out.append(Route(_prefix(sids.local_sid(un, sids.dx6_usid(p, k)), LOCAL_SID_LEN),
                             local=Behaviour("End.DX6", nh6=host), dev=dev))
            out.append(Route(f"{host}/128", (Nexthop(intf(port)),)))
    if live:
        for d in range(len(topo.t0s(p))):
            both = f.path_spines(p, i, d) if d != i else frozenset()
            if not both:
                continue
            hops = tuple(sorted(Nexthop(intf(leaf.uplinks[j]), link_local(spines[j].mac),
                                        fmt_v6(Path(p, i, j, d).carrier(sids))) for j in both))
            out.append(Route(_prefix(sids.leaf_v6(p, d), V6_LEAF_LEN), hops))
    return out


def spine_routes(f: Fabric, spine: Switch) -> list[Route]:
    p, j, sids, topo, h = spine.plane, spine.index, f.sids, f.topo, f.health
    out = [Route(_prefix(sids.block_prefix, BLOCK_LEN), blackhole=True),
           Route(_prefix(sids.un_prefix(sids.t1_usid(p, j)), UN_LEN), local=END, dev=local_dev(spine))]
    if (p, j) in h.spines:
        return out
    leaves = topo.t0s(p)
    for i, port in enumerate(spine.downlinks):
        if h.link_up(p, i, j):
            out.append(Route(_prefix(sids.un_prefix(sids.t0_usid(p, i)), UN_LEN),
                             (Nexthop(intf(port), link_local(leaves[i].mac)),)))
    return out


@dataclass(frozen=True, slots=True)
class RouteDelta(Changes[Route]):
    """What differs between a switch's plan and what it holds (routes keyed by prefix)."""


def diff(want: list[Route], have: list[Route]) -> RouteDelta:
    """The inserts, replacements and deletes that turn `have` into `want`."""
    w = {r.prefix: r for r in want}
    g = {r.prefix: r for r in have}
    return RouteDelta(tuple(sorted(r for k, r in w.items() if k not in g)),
                      tuple(sorted(r for k, r in w.items() if k in g and g[k] != r)),
                      tuple(sorted(r for k, r in g.items() if k not in w)))


def pulled_nexthops(old: list[Route], new: list[Route]) -> dict[str, tuple[Nexthop, ...]]:
    """Per prefix, the nexthops (segments) the old routes had and the new ones lack: what a failure pulls."""
    n = {r.prefix: set(r.nexthops) for r in new}
    return {r.prefix: tuple(sorted(set(r.nexthops) - n.get(r.prefix, set())))
            for r in old if set(r.nexthops) - n.get(r.prefix, set())}
