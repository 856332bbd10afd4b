"""KernelLab: the fabric as Linux SRv6 routers in network namespaces, programmed from the plan through the netlink southbound.

    lab = KernelLab(default_topology(), "/tmp/kernel-lab").up()     # or: with KernelLab(...) as lab:
    lab.traffic()                                  # RoCEv2 between every host pair: a TrafficReport
    lab.fail(LinkDown("p0-t0-0", "p0-t1-1"))       # the plan's nexthops through it leave the routes
    lab.down()                                     # every namespace of the lab gone

It is a `mininet_labs.lab.Lab` whose switches are namespaces instead of bmv2 processes: traffic,
`fail`/`restore`/`set_failures` and `install` are the bmv2 lab's, only the southbound differs (`_sync`:
netlink routes, controller.southbound.netlink, instead of P4Runtime). No process keeps it running:
the namespaces persist until `down`, and `kernel-lab.json` in the lab directory names them.
What the kernel cannot do (docs/kernel.md) raises LabError saying so.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from controller.model import limits
from controller import ops
from controller.ops import Outcome
from controller.routes import Fabric
from controller.files.safefile import UnsafeFile, read_text, write_atomic
from controller.southbound.kroutes import LOCAL_DEV, intf, link_local
from controller.southbound.netlink import NetlinkSouthbound
from controller.state.statefile import parse_json
from controller.model.topology import Topology, load, to_dict
from mininet_labs import traffic as tr
from mininet_labs.kernel import boundary, netns
from mininet_labs.lab import (
    CONFIG_NAME,
    DEFAULT_DIR,
    TOPOLOGY_NAME,
    CleanupReport,
    Lab,
    LabError,
    LabHost,
    host_script,
    marked_pids,
    write_lab_file,
)

STATE_NAME = "kernel-lab.json"
FORMAT = "srv6-fabric-kernel-lab/1"
MTU = 9000  # fabric and host links: room for the outer IPv6 header on any RoCEv2 MTU
SWITCH_SYSCTLS = ("net.ipv6.conf.all.forwarding=1", "net.ipv6.conf.default.forwarding=1",
                  "net.ipv6.fib_multipath_hash_policy=1",  # L4: the RoCEv2 UDP source port spreads QPs
                  "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
                  "net.ipv6.conf.all.seg6_enabled=1", "net.ipv6.conf.default.seg6_enabled=1",
                  "net.ipv6.conf.default.router_solicitations=0", "net.ipv6.conf.default.accept_ra=0")
# the seg6local routes' device (kroutes.local_dev): a veth pair inside the switch, up whatever its ports do
LOCAL_DEV_LINES = (f"link add {LOCAL_DEV} type veth peer name {LOCAL_DEV}p", f"link set {LOCAL_DEV}p up",
                   f"link set {LOCAL_DEV} up")
UNSUPPORTED = "the kernel data plane has no {what} (docs/kernel.md: what it cannot do)"


MAX_SWITCHES = 512  # namespaces of switches one machine runs as a kernel lab (measured: 1383 exhaust 2 GB of routes)


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


@dataclass
class KernelLabState:
    """What a kernel lab made, as written to kernel-lab.json."""

    lab_dir: str
    topology: str
    name: str
    phase: str = "starting"  # starting | ready | failed
    error: str | None = None
    namespaces: dict[str, str] = field(default_factory=dict)  # switch or host -> namespace
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)  # host -> {netns, nics}
    timings: dict[str, float] = field(default_factory=dict)
    format: str = FORMAT

    def write(self, path: Path) -> None:
        try:
            write_atomic(path, json.dumps(asdict(self), indent=1) + "\n", what="kernel lab state",
                         ours=KernelLabState.read)
        except OSError as e:
            raise LabError(f"cannot write kernel lab state {path}: {e.strerror or e}") from None

    @classmethod
    def read(cls, path: Path) -> KernelLabState:
        try:
            doc = parse_json(read_text(path, limits.MAX_LAB_STATE_BYTES, "kernel lab state"))
        except UnsafeFile as e:
            raise LabError(str(e)) from None
        except (OSError, ValueError, RecursionError) as e:
            raise LabError(f"cannot read kernel lab state {path}: {getattr(e, 'strerror', None) or e}") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise LabError(f"{path} is not a kernel lab state (no \"format\": \"{FORMAT}\")")
        try:
            state = cls(**doc)
        except TypeError as e:
            raise LabError(f"kernel lab state {path} is malformed: {e}") from None
        if not isinstance(state.namespaces, dict) or not all(
                isinstance(v, str) and v.startswith(netns.PREFIX) for v in state.namespaces.values()):
            raise LabError(f"kernel lab state {path} is malformed: namespaces must be {netns.PREFIX}* names")
        return state


def in_namespaces(model: Topology, lab: str) -> Topology:
    """The topology with every switch in the lab's namespace for it (`netns:`, the kernel data plane)."""
    switches = tuple(dataclasses.replace(s, netns=netns.ns_name(lab, s.name)) for s in model.switches)
    return dataclasses.replace(model, switches=switches, _by_name={}, _t0=(), _t1=())


def is_kernel_lab(lab_dir: str | Path) -> bool:
    return (Path(lab_dir) / STATE_NAME).exists()


@dataclass
class NetnsHost(LabHost):
    """A lab host in a named namespace: commands run through `ip netns exec`."""

    netns: str = ""

    def argv(self, argv: Sequence[str]) -> list[str]:
        return netns.exec_argv(self.netns, argv)


class KernelLab(Lab):
    """A lab of a Topology on the kernel data plane under `lab_dir`; `name` prefixes its namespaces
    (default: the directory's name)."""

    dataplane = "kernel"

    def __init__(self, model: Topology, lab_dir: str | Path = DEFAULT_DIR, *, name: str | None = None,
                 program: str = "srv6_spray", timeout: float = 10.0) -> None:
        super().__init__(model, lab_dir, program=program, timeout=timeout)
        self.name = netns.check_lab_name(name or self.dir.name)
        # each switch's record names its namespace (topology `netns:`): fabricctl on the lab's topology.yaml
        # programs it over netlink (controller.southbound.fleet)
        self.model = in_namespaces(model, self.name)
        self.kstate = KernelLabState(str(self.dir), str(self.topology_path), self.name)
        self.southbound = NetlinkSouthbound(self.netns_of, timeout)

    @property
    def kernel_state_path(self) -> Path:
        return self.dir / STATE_NAME

    def netns_of(self, node: str) -> str:
        return self.kstate.namespaces.get(node) or netns.ns_name(self.name, node)

    # --- up / down -------------------------------------------------------------------------------
    def up(self, install: bool = True) -> KernelLab:
        why = prerequisites() or size_problem(self.model)
        if why:
            raise LabError(why)
        if self.program != "srv6_spray":
            raise LabError(UNSUPPORTED.format(what=f"{self.program} pipeline: it runs srv6_spray's plan (E-ECMP on the "
                                              "BTH QP needs the P4 switch)"))
        if self.kernel_state_path.exists():
            old = KernelLabState.read(self.kernel_state_path)
            if old.phase == "ready" and any((netns.NETNS_DIR / n).exists() for n in old.namespaces.values()):
                raise LabError(f"a kernel lab already runs in {self.dir}; 'fabricctl lab down --dir {self.dir}'")
            cleanup(self.dir)
        names = [s.name for s in self.model.switches] + sorted(self.model.hosts)
        self.kstate.namespaces = {n: netns.ns_name(self.name, n) for n in names}
        taken = [n for n in self.kstate.namespaces.values() if (netns.NETNS_DIR / n).exists()]
        if taken:
            raise LabError(f"namespace {taken[0]} exists already (another lab named {self.name}?); "
                           "choose another --tag or --dir")
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "traffic").mkdir(exist_ok=True)
        # lab-config.json marks the directory as a lab's (kept after down, as the bmv2 lab's): a later lab may
        # replace its topology.yaml
        write_lab_file(self.dir, CONFIG_NAME, json.dumps({"dataplane": "kernel", "name": self.name}) + "\n")
        write_lab_file(self.dir, TOPOLOGY_NAME, yaml.safe_dump(to_dict(self.model), sort_keys=False))
        t0 = time.monotonic()
        self.kstate.write(self.kernel_state_path)
        try:
            netns.create(self.kstate.namespaces.values())
            netns.make_veths(self._veths())
            self.kstate.timings["netns_s"] = round(time.monotonic() - t0, 2)
            t1 = time.monotonic()
            self._configure()
            self.kstate.timings["wiring_s"] = round(time.monotonic() - t1, 2)
            if install:
                t2 = time.monotonic()
                bad = [o for o in self.install().values() if not o.ok]
                if bad:
                    raise LabError(f"installing the plan failed on {len(bad)} switches: {bad[0].error}")
                self.kstate.timings["install_s"] = round(time.monotonic() - t2, 2)
            self.kstate.timings["up_s"] = round(time.monotonic() - t0, 2)
            self.kstate.phase = "ready"
            self.kstate.write(self.kernel_state_path)
        except BaseException as e:
            self.kstate.phase, self.kstate.error = "failed", f"{type(e).__name__}: {e}"
            self.down()
            if isinstance(e, (netns.NetnsError, OSError)):
                raise LabError(f"kernel lab up failed: {e}") from e
            raise
        return self

    def _veths(self) -> list[netns.Veth]:
        out = []
        ns = self.netns_of
        for p in range(self.model.planes):
            spines = self.model.t1s(p)
            for leaf in self.model.t0s(p):
                for k, port in enumerate(leaf.host_ports):
                    if k < len(leaf.host_names):
                        out.append(netns.Veth(ns(leaf.name), intf(port), ns(leaf.host_names[k]),
                                              tr.host_intf(leaf.host_names[k], p)))
                for j, port in enumerate(leaf.uplinks):
                    out.append(netns.Veth(ns(leaf.name), intf(port), ns(spines[j].name), intf(spines[j].downlinks[leaf.index])))
        return out

    def _configure(self) -> None:
        """MACs, MTUs, links up, permanent neighbours (no ND in the fabric) and sysctls in every switch;
        the bmv2 lab's host script in every host."""
        sids = ops.sid_plan(self.model)
        scripts: dict[str, tuple[Sequence[str], str]] = {}
        rules: dict[str, str] = {}  # the SR-domain boundary at each leaf's host ports (boundary.py)
        for p in range(self.model.planes):
            spines, leaves = self.model.t1s(p), self.model.t0s(p)
            for leaf in leaves:
                lines = ["link set lo up", *LOCAL_DEV_LINES]
                for port in (*leaf.host_ports, *leaf.uplinks):
                    lines.append(f"link set {intf(port)} address {leaf.mac} mtu {MTU} up")
                for k, port in enumerate(leaf.host_ports):
                    lines.append(f"neigh replace {sids.host_v6_text(p, leaf.index, k)} lladdr "
                                 f"{self.model.host_mac(leaf, k)} dev {intf(port)} nud permanent")
                for j, port in enumerate(leaf.uplinks):
                    lines.append(f"neigh replace {link_local(spines[j].mac)} lladdr {spines[j].mac} "
                                 f"dev {intf(port)} nud permanent")
                un = sids.t0_usid(p, leaf.index)
                lines.append(f"sr tunsrc set {sids.local_sid_text(un, sids.dt6_usid(p))}")
                firsts = ([sids.t1_usid(p, s.index) for s in spines] + [un]) if self.model.host_source_routing else []
                rules[self.netns_of(leaf.name)] = boundary.ruleset(
                    [boundary.HostPort(intf(port), sids.host_v6_text(p, leaf.index, k))
                     for k, port in enumerate(leaf.host_ports) if k < len(leaf.host_names)], sids, first_usids=firsts)
                scripts[self.netns_of(leaf.name)] = (SWITCH_SYSCTLS, "\n".join(lines) + "\n")
            for spine in spines:
                lines = ["link set lo up", *LOCAL_DEV_LINES]
                for i, port in enumerate(spine.downlinks):
                    lines.append(f"link set {intf(port)} address {spine.mac} mtu {MTU} up")
                    lines.append(f"neigh replace {link_local(leaves[i].mac)} lladdr {leaves[i].mac} "
                                 f"dev {intf(port)} nud permanent")
                scripts[self.netns_of(spine.name)] = (SWITCH_SYSCTLS, "\n".join(lines) + "\n")
        procs = []
        for host in sorted(self.model.hosts):
            nics = tr.host_nics(self.model, host)
            h = NetnsHost(host, 0, nics, str(self.dir), None, self.netns_of(host))
            self._hosts[host] = h
            self.kstate.hosts[host] = {"netns": h.netns, "nics": [asdict(n) for n in nics]}
            script = host_script(nics) + "\n" + "\n".join(f"ip link set {n.intf} mtu {MTU}" for n in nics)
            procs.append((h, h.popen(["sh", "-ec", "ip link set lo up\n" + script], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)))
        netns.run_scripts(scripts, nft=rules)
        for h, proc in procs:
            out, _ = proc.communicate(timeout=60)
            if proc.returncode != 0:
                raise LabError(f"configuring {h.name} failed: {out.strip()[-500:]}")

    def down(self) -> CleanupReport:
        self._hosts = {}
        return cleanup(self.dir, self.kstate)

    def __enter__(self) -> KernelLab:
        return self.up() if self.kstate.phase != "ready" else self

    @classmethod
    def attach(cls, lab_dir: str | Path = DEFAULT_DIR) -> KernelLab:
        path = Path(lab_dir).resolve() / STATE_NAME
        if not path.exists():
            raise LabError(f"no kernel lab in {Path(lab_dir).resolve()} (no {STATE_NAME}); 'fabricctl lab up' starts one")
        state = KernelLabState.read(path)
        try:
            model = load(state.topology)
        except (OSError, ValueError) as e:
            raise LabError(f"cannot read the lab's topology {state.topology}: {' '.join(str(e).split())}") from None
        lab = cls(model, state.lab_dir, name=state.name)
        lab.kstate = state
        for name, h in state.hosts.items():
            lab._hosts[name] = NetnsHost(name, 0, tuple(tr.HostNic(**n) for n in h["nics"]), state.lab_dir, None,
                                         h["netns"])
        return lab

    # --- the southbound --------------------------------------------------------------------------
    def _sync(self, fabric: Fabric, names: Sequence[str], *, push: ops.Push = "never", dry_run: bool = False
              ) -> dict[str, Outcome]:
        """Each named switch to its routes under `fabric` (read back, write the difference; dry: only find it)."""
        out: dict[str, Outcome] = {}
        for name in names:
            sync = self.southbound.install(fabric, self.model.switch(name), dry_run=dry_run)
            out[name] = (Outcome(name, sync.detail["delta"]) if sync.ok  # type: ignore[arg-type]
                         else Outcome(name, error=sync.error, code=ops.SWITCH_ERROR))
        return out

    def routes(self, name: str) -> list[Any]:
        """The routes a switch holds now (kroutes.Route), as read back over netlink."""
        with self.southbound.open(self.model.switch(name)) as conn:
            return conn.read()

    def counters(self, name: str) -> dict[str, dict[str, int]]:
        """Per interface of a switch, packets sent and received (the kernel's link statistics)."""
        from pyroute2 import IPRoute

        with IPRoute(netns=self.netns_of(name), flags=0) as ipr:
            out = {}
            for link in ipr.get_links():
                st = link.get_attr("IFLA_STATS64") or {}
                out[link.get_attr("IFLA_IFNAME")] = {"tx_packets": st.get("tx_packets", 0),
                                                      "rx_packets": st.get("rx_packets", 0)}
            return out

    def drops(self, name: str) -> dict[str, int]:
        """Packets a leaf's SR-domain boundary dropped, per reason (boundary.REASONS); {} for a spine."""
        return boundary.drops(netns.exec_argv(self.netns_of(name), []))

    def client(self, election_id: int | None = None, connect: bool = True) -> Any:
        raise LabError(UNSUPPORTED.format(what="P4Runtime (its switches are programmed over netlink)"))

    def reader(self) -> Any:
        return self.client()

    def p4info(self) -> Any:
        return self.client()

    def kill_switch(self, name: str) -> int | None:
        raise LabError(UNSUPPORTED.format(what="switch processes to kill (a switch is a namespace)"))

    def restart_switch(self, name: str, timeout: float = 30.0) -> int:
        return self.kill_switch(name)  # type: ignore[return-value]

    # --- faults ----------------------------------------------------------------------------------
    def _ends(self, a: str, b: str) -> list[tuple[str, str]]:
        """(namespace, interface) of both ends of a T0-T1 link."""
        link = ops.link(self.model, a, b)
        leaf, spine = self.model.switch(link.t0), self.model.switch(link.t1)
        if leaf.plane != spine.plane:
            raise LabError(f"no link {leaf.name} -- {spine.name}")
        return [(self.netns_of(leaf.name), intf(leaf.uplinks[spine.index])),
                (self.netns_of(spine.name), intf(spine.downlinks[leaf.index]))]

    def cut_link(self, a: str, b: str) -> list[str]:
        """Drop every frame through a T0-T1 link at both ends (nftables in each namespace), the interfaces and
        routes untouched: a fault the controller has to be told about, as on bmv2."""
        done = []
        for ns, dev in self._ends(a, b):
            rules = (f"table inet srv6_fabric_cut_{dev} {{\n chain forward {{\n  type filter hook forward priority 0;\n"
                     f'  iifname "{dev}" drop\n  oifname "{dev}" drop\n }}\n}}\n')
            proc = subprocess.run(netns.exec_argv(ns, ["nft", "-f", "-"]), input=rules, capture_output=True, text=True)
            if proc.returncode != 0:
                raise LabError(f"cutting {ns}:{dev}: {proc.stderr.strip()}")
            done.append(f"{ns}:{dev}")
        return done

    def mend_link(self, a: str, b: str) -> list[str]:
        done = []
        for ns, dev in self._ends(a, b):
            subprocess.run(netns.exec_argv(ns, ["nft", "delete", "table", "inet", f"srv6_fabric_cut_{dev}"]),
                           capture_output=True)
            done.append(f"{ns}:{dev}")
        return done

    def _set_link(self, a: str, b: str, how: str) -> tuple[str, str]:
        ends = self._ends(a, b)
        for ns, dev in ends:
            proc = subprocess.run(netns.exec_argv(ns, ["ip", "link", "set", dev, how]), capture_output=True, text=True)
            if proc.returncode != 0:
                raise LabError(f"ip link set {dev} {how} in {ns}: {proc.stderr.strip()}")
        return ends[0][1], ends[1][1]

    def cut(self, intfs: Iterable[str]) -> list[str]:
        raise LabError("on the kernel lab cut links by name: KernelLab.cut_link(t0, t1)")

    def mend(self, intfs: Iterable[str]) -> list[str]:
        raise LabError("on the kernel lab mend links by name: KernelLab.mend_link(t0, t1)")

    def switch_intfs(self, name: str) -> list[str]:
        s = self.model.switch(name)
        return [intf(p) for p in (*s.host_ports, *s.uplinks, *s.downlinks)]

    # --- status ----------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        st = self.kstate
        present = {n: (netns.NETNS_DIR / ns).exists() for n, ns in st.namespaces.items()}
        return {"lab_dir": st.lab_dir, "topology": st.topology, "dataplane": "kernel", "program": self.program,
                "phase": st.phase, "error": st.error, "name": st.name, "timings": st.timings,
                "switches": {s.name: {"netns": self.netns_of(s.name), "alive": present.get(s.name, False)}
                             for s in self.model.switches},
                "hosts": {n: {"netns": h["netns"], "alive": present.get(n, False),
                              "nics": [f"{x['intf']} {x['v6']} plane {x['plane']}" for x in h["nics"]]}
                          for n, h in st.hosts.items()},
                "namespaces_present": sum(present.values()), "namespaces": len(present)}


def cleanup(lab_dir: str | Path = DEFAULT_DIR, state: KernelLabState | None = None) -> CleanupReport:
    """Remove what a kernel lab in lab_dir made: processes carrying its mark (commands in its hosts), then its
    namespaces (their veths go with them). Only namespaces the state names, all with the lab's prefix."""
    lab_dir = Path(lab_dir).resolve()
    path = lab_dir / STATE_NAME
    if state is None and path.exists():
        state = KernelLabState.read(path)
    report = CleanupReport()
    from mininet_labs.bmv2proc import stop_process

    for pid in marked_pids(lab_dir):
        stop_process(pid, grace=2.0)
        report.killed.append(pid)
    names = list(state.namespaces.values()) if state is not None else []
    try:
        report.deleted_intfs = netns.remove(names)  # namespaces, reported where the bmv2 lab reports interfaces
    except netns.NetnsError as e:
        raise LabError(str(e)) from None
    report.leftover_pids = marked_pids(lab_dir)
    report.leftover_intfs = [n for n in names if (netns.NETNS_DIR / n).exists()]
    if report.clean:
        path.unlink(missing_ok=True)
    return report


