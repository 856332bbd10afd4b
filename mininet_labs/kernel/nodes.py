"""NetnsNodes: a lab's switches as Linux SRv6 routers in named network namespaces, programmed from the plan through
the netlink southbound (controller.southbound.netlink); hosts in namespaces of their own. No bmv2, no Mininet.

No process holds such a lab: the namespaces persist until `down`, the lab state names them (`sf-<name>-<node>`,
<name> the lab's tag or its directory's name). What the kernel cannot do (docs/kernel.md) raises Unsupported.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from controller import exitcodes, planning
from controller.southbound.base import Outcome, Push
from controller.model.topology import Topology
from controller.routes import Fabric
from controller.southbound.kroutes import LOCAL_DEV, intf, link_local
from mininet_labs import traffic as tr
from mininet_labs.kernel import boundary, netns
from mininet_labs.labhost import LabHost, host_script
from mininet_labs.labstate import LabError, LabState
from mininet_labs.nodes import Port, Unsupported
from mininet_labs.topo import wires
from mininet_labs.frames import host_intf

MTU = 9000  # fabric and host links: room for the outer IPv6 header on any RoCEv2 MTU
SWITCH_SYSCTLS = ("net.ipv6.conf.all.forwarding=1", "net.ipv6.conf.default.forwarding=1",
                  "net.ipv6.fib_multipath_hash_policy=1",  # L4: the RoCEv2 UDP source port spreads QPs
                  "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
                  "net.ipv6.conf.all.seg6_enabled=1", "net.ipv6.conf.default.seg6_enabled=1",
                  "net.ipv6.conf.default.router_solicitations=0", "net.ipv6.conf.default.accept_ra=0")
# the seg6local routes' device (kroutes.local_dev): a veth pair inside the switch, up whatever its ports do
LOCAL_DEV_LINES = (f"link add {LOCAL_DEV} type veth peer name {LOCAL_DEV}p", f"link set {LOCAL_DEV}p up",
                   f"link set {LOCAL_DEV} up")
DOCS = "docs/kernel.md: what it cannot do"
MAX_SWITCHES = 512  # namespaces of switches one machine runs as a kernel lab (measured: 1383 exhaust 2 GB of routes)
CUT_TABLE = "srv6_fabric_cut_{dev}"  # nftables table (family inet) of a cut port in its namespace


def size_problem(model: Topology) -> str | None:
    """Why a topology is too large to run as a kernel lab on one machine, or None."""
    n = len(model.switches)
    if n > MAX_SWITCHES:
        return f"a lab of {n} switches: at most {MAX_SWITCHES} switches run as a kernel lab on one machine"
    return None


def prerequisites() -> str | None:
    """None when a kernel lab can run here, else what is missing (root, ip, the kernel's SRv6)."""
    if os.geteuid() != 0:
        return "a kernel lab needs root (network namespaces)"
    for binary in ("ip", "sysctl", "nft"):
        if not any(Path(d, binary).exists() for d in os.environ.get("PATH", "/usr/sbin:/usr/bin").split(os.pathsep)
                   + ["/usr/sbin", "/sbin"]):
            return f"{binary} not found (Debian: iproute2, procps, nftables)"
    if not Path("/proc/sys/net/ipv6/seg6_flowlabel").exists():
        return "this kernel has no SRv6 (CONFIG_IPV6_SEG6_LWTUNNEL: /proc/sys/net/ipv6/seg6_flowlabel missing)"
    return None


def in_namespaces(model: Topology, lab: str) -> Topology:
    """The topology with every switch in the lab's namespace for it (`netns:`, the kernel data plane)."""
    switches = tuple(dataclasses.replace(s, netns=netns.ns_name(lab, s.name)) for s in model.switches)
    return dataclasses.replace(model, switches=switches, _by_name={}, _t0=(), _t1=())


@dataclasses.dataclass
class NetnsHost(LabHost):
    """A lab host in a named namespace: commands run through `ip netns exec`."""

    netns: str = ""

    def argv(self, argv: Sequence[str]) -> list[str]:
        return netns.exec_argv(self.netns, argv)


class NetnsNodes:
    """The kernel data plane's nodes; `name` prefixes the lab's namespaces (default: the lab's tag, else its
    directory's name).
    The bmv2 options (pcap, tls, the Mininet CLI) are refused by name."""

    dataplane = "kernel"
    removes = "namespaces"  # what remove() removes
    holder = False
    lacks: tuple[str, ...] = ("per-packet spraying in the switch", "E-ECMP on the BTH QP (eecmp_qp_hash)", "pinned QPs",
                              "ECN marking and trimming", "P4 drop and path counters",
                              "P4Runtime (shell, kill-switch, balance)")

    def __init__(self, *, name: str | None = None, pcap: bool = False, tls: bool = False, cli: bool = False) -> None:
        asked = [opt for opt, on in (("--pcap", pcap), ("--tls", tls), ("--cli", cli)) if on]
        if asked:
            raise LabError(f"{asked[0]} needs the bmv2 data plane: the kernel data plane has no bmv2 process "
                           "(docs/kernel.md); use --dataplane bmv2 where simple_switch_grpc is installed")
        self.name = None if name is None else _lab_name(name)

    def _name(self, lab_dir: Path, tag: str) -> str:
        return self.name or _lab_name(tag or lab_dir.name)

    def options(self) -> dict[str, Any]:
        return {"name": self.name}

    # --- lifecycle ---------------------------------------------------------------------------------
    def why_not(self) -> str | None:
        return prerequisites()

    def size_problem(self, model: Topology) -> str | None:
        return size_problem(model)

    def check(self, model: Topology, tag: str, program: str) -> None:
        if program != "srv6_spray":
            raise Unsupported(self.dataplane, f"{program} pipeline: it runs srv6_spray's plan (E-ECMP on the BTH QP "
                              "needs the P4 switch)", DOCS)

    def placed(self, model: Topology, lab_dir: Path, tag: str) -> Topology:
        # each switch's record names its namespace (topology `netns:`): fabricctl on the lab's topology.yaml
        # programs it over netlink (controller.southbound.fleet)
        return in_namespaces(model, self._name(lab_dir, tag))

    def prepare(self, model: Topology, lab_dir: Path) -> Topology:
        return model

    def running(self, state: LabState) -> bool:
        return state.phase == "ready" and any((netns.NETNS_DIR / n).exists() for n in state.namespaces.values())

    def start(self, model: Topology, lab_dir: Path, tag: str, state: LabState,
              save: Callable[[], None]) -> list[LabHost]:
        name = self._name(lab_dir, tag)
        nodes = [s.name for s in model.switches] + sorted(model.hosts)
        namespaces = {n: netns.ns_name(name, n) for n in nodes}
        taken = [n for n in namespaces.values() if (netns.NETNS_DIR / n).exists()]
        if taken:
            raise LabError(f"namespace {taken[0]} exists already (another lab named {name}?); "
                           "choose another --tag or --dir")
        state.namespaces = namespaces
        state.switches = {s.name: {"netns": namespaces[s.name]} for s in model.switches}
        hosts = [NetnsHost(h, 0, tr.host_nics(model, h), str(lab_dir), None, namespaces[h]) for h in sorted(model.hosts)]
        state.hosts = {h.name: {"pid": 0, "netns": h.netns, "nics": [dataclasses.asdict(n) for n in h.nics]}
                       for h in hosts}
        save()
        try:
            netns.create(namespaces.values())
            netns.make_veths(self._veths(model, namespaces))
            scripts, rules = self._switch_scripts(model, namespaces)
            netns.run_scripts(scripts, nft=rules)
        except netns.NetnsError as e:
            raise LabError(f"kernel lab up failed: {e}") from None
        return list(hosts)

    @staticmethod
    def _veths(model: Topology, ns: dict[str, str]) -> list[netns.Veth]:
        out = []
        for w in wires(model):
            peer = host_intf(w.host, w.plane) if w.host is not None else intf(w.b_port)
            out.append(netns.Veth(ns[w.a], intf(w.a_port), ns[w.b], peer))
        return out

    @staticmethod
    def _switch_scripts(model: Topology, ns: dict[str, str]) -> tuple[dict[str, tuple[Sequence[str], str]],
                                                                      dict[str, str]]:
        """Per switch namespace: sysctls and an `ip -batch` text (MACs, MTUs, links up, permanent neighbours: no
        ND in the fabric), and the SR-domain boundary's nft rules at each leaf's host ports (boundary.py)."""
        sids = planning.sid_plan(model)
        scripts: dict[str, tuple[Sequence[str], str]] = {}
        rules: dict[str, str] = {}
        for p in range(model.planes):
            spines, leaves = model.t1s(p), model.t0s(p)
            for leaf in leaves:
                lines = ["link set lo up", *LOCAL_DEV_LINES]
                for port in (*leaf.host_ports, *leaf.uplinks):
                    lines.append(f"link set {intf(port)} address {leaf.mac} mtu {MTU} up")
                for k, port in enumerate(leaf.host_ports):
                    lines.append(f"neigh replace {sids.host_v6_text(p, leaf.index, k)} lladdr "
                                 f"{model.host_mac(leaf, k)} dev {intf(port)} nud permanent")
                for j, port in enumerate(leaf.uplinks):
                    lines.append(f"neigh replace {link_local(spines[j].mac)} lladdr {spines[j].mac} "
                                 f"dev {intf(port)} nud permanent")
                un = sids.t0_usid(p, leaf.index)
                lines.append(f"sr tunsrc set {sids.local_sid_text(un, sids.dt6_usid(p))}")
                firsts = ([sids.t1_usid(p, s.index) for s in spines] + [un]) if model.host_source_routing else []
                rules[ns[leaf.name]] = boundary.ruleset(
                    [boundary.HostPort(intf(port), sids.host_v6_text(p, leaf.index, k))
                     for k, port in enumerate(leaf.host_ports) if k < len(leaf.host_names)], sids, first_usids=firsts)
                scripts[ns[leaf.name]] = (SWITCH_SYSCTLS, "\n".join(lines) + "\n")
            for spine in spines:
                lines = ["link set lo up", *LOCAL_DEV_LINES]
                for i, port in enumerate(spine.downlinks):
                    lines.append(f"link set {intf(port)} address {spine.mac} mtu {MTU} up")
                    lines.append(f"neigh replace {link_local(leaves[i].mac)} lladdr {leaves[i].mac} "
                                 f"dev {intf(port)} nud permanent")
                scripts[ns[spine.name]] = (SWITCH_SYSCTLS, "\n".join(lines) + "\n")
        return scripts, rules

    def host_script(self, nics: Sequence[tr.HostNic]) -> str:
        return ("ip link set lo up\n" + host_script(nics) + "\n" +
                "\n".join(f"ip link set {n.intf} mtu {MTU}" for n in nics))

    def stop(self) -> None:
        pass

    def remove(self, lab_dir: Path, state: LabState | None, model: Topology | None,
               tag: str) -> tuple[list[str], list[str]]:
        """The lab's namespaces (their veths go with them): only those the state names, all with the lab's prefix."""
        names = list(state.namespaces.values()) if state is not None else []
        try:
            removed = netns.remove(names)
        except netns.NetnsError as e:
            raise LabError(str(e)) from None
        return removed, [n for n in names if (netns.NETNS_DIR / n).exists()]

    def host(self, name: str, doc: dict[str, Any], lab_dir: str) -> LabHost:
        return NetnsHost(name, 0, tuple(tr.HostNic(**n) for n in doc["nics"]), lab_dir, None, doc["netns"])

    # --- the southbound ----------------------------------------------------------------------------
    def sync(self, model: Topology, fabric: Fabric, names: Sequence[str], *, program: str,
             p4info: Callable[[], Any], election_id: int, timeout: float, push: Push,
             dry_run: bool) -> dict[str, Outcome]:
        """Each named switch to its routes under `fabric` over netlink (the switch's record names its namespace)."""
        southbound = self.southbound(model, timeout)
        out: dict[str, Outcome] = {}
        for name in names:
            sync = southbound.install(fabric, model.switch(name), dry_run=dry_run)
            out[name] = (Outcome(name, sync.detail["delta"]) if sync.ok
                         else Outcome(name, error=sync.error, code=exitcodes.SWITCH_ERROR))
        return out

    @staticmethod
    def southbound(model: Topology, timeout: float = 10.0) -> Any:
        """The netlink southbound over the lab's switches (controller.southbound.netlink)."""
        from controller.southbound.netlink import NetlinkSouthbound

        return NetlinkSouthbound(lambda n: str(model.switch(n).netns), timeout)

    def routes(self, model: Topology, name: str) -> list[Any]:
        """The routes a switch holds now (kroutes.Route), as read back over netlink."""
        with self.southbound(model).open(model.switch(name)) as conn:
            return conn.read()

    @staticmethod
    def counters(model: Topology, name: str) -> dict[str, dict[str, int]]:
        """Per interface of a switch, packets sent and received (the kernel's link statistics)."""
        from pyroute2 import IPRoute

        with IPRoute(netns=model.switch(name).netns, flags=0) as ipr:
            out = {}
            for link in ipr.get_links():
                st = link.get_attr("IFLA_STATS64") or {}
                out[link.get_attr("IFLA_IFNAME")] = {"tx_packets": st.get("tx_packets", 0),
                                                      "rx_packets": st.get("rx_packets", 0)}
            return out

    @staticmethod
    def drops(model: Topology, name: str) -> dict[str, int]:
        """Packets a leaf's SR-domain boundary dropped, per reason (boundary.REASONS); {} for a spine."""
        return boundary.drops(netns.exec_argv(str(model.switch(name).netns), []))

    def carrier(self, model: Topology, tag: str) -> Any:
        """A LinkWatch on every switch namespace (controller.southbound.linkwatch)."""
        from controller.southbound.linkwatch import LinkWatch, LinkWatchError

        try:
            return LinkWatch(model)
        except LinkWatchError as e:
            raise LabError(str(e)) from None

    def require(self, what: str) -> None:
        why = {"P4Runtime": "its switches are programmed over netlink",
               "Mininet CLI": "its nodes are namespaces: 'ip netns exec sf-<lab>-<node> ...'"}.get(what, "")
        raise Unsupported(self.dataplane, what + (f" ({why})" if why else ""), DOCS)

    # --- wiring ------------------------------------------------------------------------------------
    def link_ports(self, model: Topology, state: LabState, a: str, b: str) -> list[Port]:
        from mininet_labs.topo import LabTopologyError, link_ends

        try:
            ends = link_ends(model, a, b)
        except LabTopologyError as e:
            raise LabError(str(e)) from None
        return [Port(e.switch, intf(e.port), model.switch(e.switch).netns) for e in ends]

    def switch_ports(self, model: Topology, state: LabState, name: str) -> list[Port]:
        s = model.switch(name)
        return [Port(name, intf(p), s.netns) for p in (*s.host_ports, *s.uplinks, *s.downlinks)]

    def cut(self, ports: Iterable[Port]) -> list[str]:
        """Drop every frame through the ports (nftables in each namespace), interfaces and routes untouched."""
        done = []
        for p in ports:
            rules = (f"table inet {CUT_TABLE.format(dev=p.intf)} {{\n chain forward {{\n  type filter hook forward "
                     f'priority 0;\n  iifname "{p.intf}" drop\n  oifname "{p.intf}" drop\n }}\n}}\n')
            proc = subprocess.run(netns.exec_argv(_ns(p), ["nft", "-f", "-"]), input=rules, capture_output=True,
                                  text=True)
            if proc.returncode != 0:
                raise LabError(f"cutting {p.netns}:{p.intf}: {proc.stderr.strip()}")
            done.append(f"{p.netns}:{p.intf}")
        return done

    def mend(self, ports: Iterable[Port]) -> list[str]:
        done = []
        for p in ports:
            subprocess.run(netns.exec_argv(_ns(p), ["nft", "delete", "table", "inet", CUT_TABLE.format(dev=p.intf)]),
                           capture_output=True)
            done.append(f"{p.netns}:{p.intf}")
        return done

    def set_link(self, ports: Iterable[Port], how: str) -> None:
        for p in ports:
            proc = subprocess.run(netns.exec_argv(_ns(p), ["ip", "link", "set", p.intf, how]), capture_output=True,
                                  text=True)
            if proc.returncode != 0:
                raise LabError(f"ip link set {p.intf} {how} in {p.netns}: {proc.stderr.strip()}")

    def kill_switch(self, state: LabState, lab_dir: Path, name: str) -> int | None:
        raise Unsupported(self.dataplane, "switch processes to kill (a switch is a namespace)", DOCS)

    def restart_switch(self, state: LabState, lab_dir: Path, name: str, timeout: float) -> int:
        raise Unsupported(self.dataplane, "switch processes to restart (a switch is a namespace)", DOCS)

    # --- status ------------------------------------------------------------------------------------
    def node_status(self, state: LabState) -> dict[str, Any]:
        present = {n: (netns.NETNS_DIR / ns).exists() for n, ns in state.namespaces.items()}
        return {"switches": {n: {"netns": s["netns"], "alive": present.get(n, False)} for n, s in state.switches.items()},
                "hosts": {n: {"netns": h["netns"], "alive": present.get(n, False),
                              "nics": [f"{x['intf']} {x['v6']} plane {x['plane']}" for x in h["nics"]]}
                          for n, h in state.hosts.items()},
                "namespaces_present": sum(present.values()), "namespaces": len(present)}

    def summary(self, doc: dict[str, Any]) -> str:
        return f"{doc['namespaces_present']}/{doc['namespaces']} namespaces present"

    @staticmethod
    def where(name: str, doc: dict[str, Any]) -> str:
        return str(doc.get("netns"))


def _lab_name(name: str) -> str:
    try:
        return netns.check_lab_name(name)
    except netns.NetnsError as e:
        raise LabError(str(e)) from None


def _ns(port: Port) -> str:
    assert port.netns is not None, port
    return port.netns
