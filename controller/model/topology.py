"""Multi-plane two-tier Clos topology: planes of T1 spines and T0 leaves, hosts with one NIC per plane."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import re

if TYPE_CHECKING:  # imported by `graph` when asked for: `fabricctl run` never builds it (networkx: ~4 MB)
    import networkx as nx

from controller.model import congestion, limits

from controller.model import tlsconfig as tlsconf

Role = Literal["t0", "t1"]

_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_NETNS = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")  # a file name under /run/netns, as `ip netns add` makes it
CPU_PORT = 255
MAX_PORT = 510  # bmv2 ports are bit<9>; 511 is its drop port


class TopologyError(ValueError):
    """A topology that does not make a valid fabric; `problems` lists every one, one line each."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems: list[str] = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True, slots=True)
class Switch:
    """One switch. Port tuples are indexed by position: T0 `host_ports[k]` faces host slot k and
    `uplinks[j]` faces T1 j of its plane; T1 `downlinks[i]` faces T0 i of its plane."""

    name: str
    role: Role
    plane: int
    index: int
    device_id: int
    grpc_addr: str
    mac: str
    host_ports: tuple[int, ...] = ()
    host_names: tuple[str, ...] = ()
    host_macs: tuple[str, ...] | None = None  # None: derived with host_mac()
    uplinks: tuple[int, ...] = ()
    downlinks: tuple[int, ...] = ()
    tls: tlsconf.TlsConfig | None = None  # None: plaintext P4Runtime
    netns: str | None = None  # a Linux network namespace: the kernel data plane, programmed over netlink; None: P4Runtime


@dataclass(frozen=True, slots=True)
class Nic:
    """A host's port in one plane: the T0 it hangs off and its slot (position) there."""

    plane: int
    t0: int
    slot: int


def switch_name(plane: int, role: Role, index: int) -> str:
    """The default name of a switch, e.g. p0-t0-3."""
    return f"p{plane}-{role}-{index}"


def switch_mac(plane: int, role: Role, index: int) -> str:
    """Deterministic switch MAC: 02:5f:<plane>:<0 t0 | 1 t1>:<index hi>:<index lo>."""
    return f"02:5f:{plane:02x}:{0 if role == 't0' else 1:02x}:{index >> 8 & 0xFF:02x}:{index & 0xFF:02x}"


def host_mac(plane: int, t0: int, slot: int) -> str:
    """Deterministic host NIC MAC: 02:48:<plane<<4 | t0>>8>:<t0 lo>:<slot hi>:<slot lo>."""
    return host_mac_prefix(plane, t0) + host_mac_suffix(slot)


def host_mac_prefix(plane: int, t0: int) -> str:
    """The first four octets (and colon) of the derived MACs of a leaf's host NICs."""
    return f"02:48:{(plane << 4 | t0 >> 8) & 0xFF:02x}:{t0 & 0xFF:02x}:"


def host_mac_suffix(slot: int) -> str:
    """The last two octets of a derived host NIC MAC."""
    return f"{slot >> 8 & 0xFF:02x}:{slot & 0xFF:02x}"


def data_ports(count: int, max_port: int = MAX_PORT, cpu_port: int | None = CPU_PORT) -> tuple[int, ...]:
    """The first `count` data ports from 1, skipping the CPU port (may run past max_port)."""
    ports: list[int] = []
    port = 1
    while len(ports) < count:
        if port != cpu_port:
            ports.append(port)
        port += 1
    return tuple(ports)


@dataclass(frozen=True)
class Topology:
    """A validated fabric. Lookups by name or by (plane, index) are O(1); the networkx graph is
    built only when asked for (`graph`), the planner works on the port tuples."""

    name: str
    planes: int
    switches: tuple[Switch, ...]
    max_port: int = MAX_PORT
    cpu_port: int | None = CPU_PORT
    usid_block: str | None = None  # the file's uSID block ("fcbb:bb00::/32"); None: the default
    host_source_routing: bool = False  # endpoint mode: leaves transit SRv6 their hosts write themselves
    watch_ports: bool = False  # leaf uplink group members watch their ports (switch-local failover, docs/faults.md)
    congestion: congestion.Thresholds = congestion.Thresholds()  # the file's `congestion:` (ECN, trimming)
    _by_name: dict[str, Switch] = field(default_factory=dict, repr=False, compare=False)
    _t0: tuple[tuple[Switch, ...], ...] = field(default=(), repr=False, compare=False)
    _t1: tuple[tuple[Switch, ...], ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_name.update((s.name, s) for s in self.switches)
        t0 = tuple(tuple(sorted((s for s in self.switches if s.plane == p and s.role == "t0"), key=_index))
                   for p in range(self.planes))
        t1 = tuple(tuple(sorted((s for s in self.switches if s.plane == p and s.role == "t1"), key=_index))
                   for p in range(self.planes))
        object.__setattr__(self, "_t0", t0)
        object.__setattr__(self, "_t1", t1)

    def switch(self, name: str) -> Switch:
        return self._by_name[name]

    def has_switch(self, name: str) -> bool:
        return name in self._by_name

    def t0s(self, plane: int) -> tuple[Switch, ...]:
        """The leaves of a plane, by index."""
        return self._t0[plane]

    def t1s(self, plane: int) -> tuple[Switch, ...]:
        """The spines of a plane, by index."""
        return self._t1[plane]

    def t0(self, plane: int, index: int) -> Switch:
        return self._t0[plane][index]

    def t1(self, plane: int, index: int) -> Switch:
        return self._t1[plane][index]

    def host_mac(self, leaf: Switch, slot: int) -> str:
        """The MAC of the host NIC on a leaf's host slot (given, or derived)."""
        if leaf.host_macs is not None:
            return leaf.host_macs[slot]
        return host_mac(leaf.plane, leaf.index, slot)

    @cached_property
    def hosts(self) -> dict[str, tuple[Nic, ...]]:
        """Host name -> its NICs, by plane."""
        nics: dict[str, list[Nic]] = {}
        for plane in range(self.planes):
            for leaf in self._t0[plane]:
                for slot, host in enumerate(leaf.host_names):
                    nics.setdefault(host, []).append(Nic(plane, leaf.index, slot))
        return {h: tuple(sorted(n, key=lambda nic: nic.plane)) for h, n in nics.items()}

    @cached_property
    def graph(self) -> nx.Graph:
        """Switches and hosts as nodes (role, plane, index); links as edges with `ports` {node: port}."""
        import networkx as nx

        g = nx.Graph()
        for s in self.switches:
            g.add_node(s.name, role=s.role, plane=s.plane, index=s.index)
        for plane in range(self.planes):
            spines = self._t1[plane]
            for leaf in self._t0[plane]:
                for j, port in enumerate(leaf.uplinks):
                    spine = spines[j]
                    g.add_edge(leaf.name, spine.name, plane=plane,
                               ports={leaf.name: port, spine.name: spine.downlinks[leaf.index]})
                for slot, host in enumerate(leaf.host_names):
                    g.add_node(host, role="host")
                    g.add_edge(leaf.name, host, plane=plane, ports={leaf.name: leaf.host_ports[slot]})
        return g


def netns_problem(value: Any) -> str | None:
    """Why `value` is not a network namespace name (1-255 letters, digits, '.', '_', '-'; not '.' or '..'), or None."""
    if not isinstance(value, str):
        return f"expected a network namespace name (a string), got {limits.type_name(value)}"
    if not _NETNS.match(value) or value in (".", ".."):
        return (f"{value[:80]!r} is not a network namespace name (1-255 letters, digits, '.', '_' or '-', "
                "as 'ip netns list' shows them)")
    return None


def _index(s: Switch) -> int:
    return s.index


def build(planes: int, t1_per_plane: int, t0_per_plane: int, hosts_per_t0: int, *,
          name: str = "fabric", max_port: int = MAX_PORT, cpu_port: int | None = CPU_PORT,
          grpc_host: str = "127.0.0.1", grpc_base_port: int = 50001) -> Topology:
    """A regular fabric: host slot k on T0 port k+1.., uplinks after them, T1 downlink i on its
    (i+1)th data port; host n sits on T0 n // hosts_per_t0 in every plane. Identical port tuples
    are shared between switches, so a full MRC fabric costs a few MB."""
    problems: list[str] = []
    for label, value in (("planes", planes), ("t1_per_plane", t1_per_plane),
                         ("t0_per_plane", t0_per_plane)):
        if value < 1:
            problems.append(f"{label} must be at least 1, got {value}")
    if hosts_per_t0 < 0:
        problems.append(f"hosts_per_t0 must not be negative, got {hosts_per_t0}")
    t0_ports = data_ports(hosts_per_t0 + t1_per_plane, max_port, cpu_port)
    t1_ports = data_ports(t0_per_plane, max_port, cpu_port)
    for role, ports in (("t0", t0_ports), ("t1", t1_ports)):
        if ports and ports[-1] > max_port:
            problems.append(f"a {role} needs {len(ports)} data ports: port {ports[-1]} is beyond "
                            f"max_port {max_port} (the CPU port {cpu_port} is skipped)")
    if problems:
        raise TopologyError(problems)
    host_ports, uplinks = t0_ports[:hosts_per_t0], t0_ports[hosts_per_t0:]
    host_names = [tuple(f"h{i * hosts_per_t0 + k}" for k in range(hosts_per_t0)) for i in range(t0_per_plane)]
    switches: list[Switch] = []
    for plane in range(planes):
        counts: tuple[tuple[Role, int], ...] = (("t1", t1_per_plane), ("t0", t0_per_plane))
        for role, count in counts:
            for index in range(count):
                dev = len(switches) + 1
                switches.append(Switch(
                    name=switch_name(plane, role, index), role=role, plane=plane, index=index,
                    device_id=dev, grpc_addr=f"{grpc_host}:{grpc_base_port + dev - 1}",
                    mac=switch_mac(plane, role, index),
                    host_ports=host_ports if role == "t0" else (),
                    host_names=host_names[index] if role == "t0" else (),
                    uplinks=uplinks if role == "t0" else (),
                    downlinks=t1_ports if role == "t1" else ()))
    return Topology(name=name, planes=planes, switches=tuple(switches), max_port=max_port, cpu_port=cpu_port)


def load(path: str | Path) -> Topology:
    """Read and validate a topology YAML file (format: docs/sid-plan.md, examples/two_plane_lab.yaml);
    size-capped, streamed record by record through libyaml and parsed strictly (controller.model.yamlload)."""
    from controller.model.yamlload import load_file

    doc = load_file(path, limits.MAX_TOPOLOGY_BYTES, "topology")
    if doc is not None and not isinstance(doc, dict):
        raise TopologyError(["expected a mapping with a 'switches' list"])
    return from_dict(doc or {}, Path(path).parent)


def load_yaml(stream: Any) -> Any:
    """yaml.safe_load's result for a topology document, through libyaml record by record and
    strictly (controller.model.yamlload: duplicate keys, deep nesting and alias bombs refused)."""
    from controller.model.yamlload import load

    return load(stream)


def from_dict(doc: Mapping[str, Any], base: Path | None = None) -> Topology:
    """Validate a topology document; raise TopologyError listing every problem found. `base`: the
    directory relative TLS file paths are resolved against (the topology file's)."""
    return _Loader(doc, base).topology()


def to_dict(topo: Topology) -> dict[str, Any]:
    """The YAML/JSON document form of a topology (what from_dict reads)."""
    out: list[dict[str, Any]] = []
    for s in topo.switches:
        d: dict[str, Any] = {"name": s.name, "role": s.role, "plane": s.plane, "index": s.index,
                             "device_id": s.device_id, "grpc": s.grpc_addr, "mac": s.mac}
        if s.tls is not None:
            d["tls"] = tlsconf.to_doc(s.tls)
        if s.netns is not None:
            d["netns"] = s.netns
        if s.role == "t0":
            d["hosts"] = {h: {"port": p, "mac": topo.host_mac(s, k)}
                          for k, (h, p) in enumerate(zip(s.host_names, s.host_ports))}
            d["uplinks"] = {topo.t1(s.plane, j).name: p for j, p in enumerate(s.uplinks)}
        else:
            d["downlinks"] = {topo.t0(s.plane, i).name: p for i, p in enumerate(s.downlinks)}
        out.append(d)
    doc: dict[str, Any] = {"name": topo.name, "max_port": topo.max_port, "cpu_port": topo.cpu_port}
    if topo.usid_block is not None:
        doc["usid_block"] = topo.usid_block
    if topo.host_source_routing:
        doc["host_source_routing"] = True
    if topo.watch_ports:
        doc["watch_ports"] = True
    if topo.congestion.on:
        doc[congestion.KEY] = congestion.to_dict(topo.congestion)
    return {**doc, "switches": out}


class _Loader:
    """One pass over a topology document that gathers all problems before failing."""

    def __init__(self, doc: Mapping[str, Any], base: Path | None = None) -> None:
        self.doc = doc
        self.base = base
        self.problems: list[str] = []
        self.rejected: set[str] = set()  # named switches already reported as invalid
        self.max_port = self._int("max_port", doc.get("max_port", MAX_PORT), 1, limits.MAX_DATA_PORT, MAX_PORT)
        cpu = doc.get("cpu_port", CPU_PORT)
        self.cpu_port: int | None = None if cpu is None else self._int("cpu_port", cpu, 1, limits.MAX_PORT_NUMBER,
                                                                        CPU_PORT)
        for key in ("name", "usid_block"):
            value = doc.get(key)
            if value is not None and (not isinstance(value, str) or not value.isprintable() or len(value) > 256):
                self.problems.append(f"{key}: expected a printable string, got {limits.type_name(value)}")

    def _int(self, field: str, value: Any, low: int, high: int, fallback: int) -> int:
        problem = limits.int_problem(value, low, high)
        if problem:
            self.problems.append(f"{field}: {problem}")
            return fallback
        return value

    def _record_problems(self, name: str, rec: Mapping[str, Any]) -> list[str]:
        """Types and bounds of one switch record, checked before anything is built from it."""
        out: list[str] = []
        role = rec.get("role")
        checks: list[tuple[str, Any, int, int]] = [("plane", rec.get("plane"), 0, limits.MAX_PLANES - 1)]
        if "index" in rec:
            top = limits.MAX_LEAVES if role == "t0" else limits.MAX_SPINES
            checks.append(("index", rec["index"], 0, top - 1))
        if "device_id" in rec:
            checks.append(("device_id", rec["device_id"], 0, limits.MAX_DEVICE_ID))
        for field, value, low, high in checks:
            problem = limits.int_problem(value, low, high)
            if problem:
                out.append(f"switch {name}: {field}: {problem}")
        if "grpc" in rec:
            problem = limits.address_problem(rec["grpc"])
            if problem:
                out.append(f"switch {name}: grpc: {problem}")
        if "netns" in rec:
            problem = netns_problem(rec["netns"])
            if problem:
                out.append(f"switch {name}: netns: {problem}")
        for key in ("hosts", "uplinks", "downlinks"):
            value = rec.get(key)
            if value is not None and not isinstance(value, dict):
                out.append(f"switch {name}: {key}: expected a mapping, got {limits.type_name(value)}")
            elif value:
                for peer in value:
                    problem = limits.name_problem(peer)
                    if problem:
                        out.append(f"switch {name}: {key}: {problem}")
                if key == "hosts" and len(value) > limits.MAX_HOSTS_PER_LEAF:
                    out.append(f"switch {name}: {len(value)} hosts: a leaf holds at most {limits.MAX_HOSTS_PER_LEAF} "
                               "(the End.DX6 range of the SID plan)")
        return out

    def topology(self) -> Topology:
        raw = self._switch_records()
        switches = self._resolve(raw)
        host_sr = self.doc.get("host_source_routing", False)
        if not isinstance(host_sr, bool):
            self.problems.append(f"host_source_routing must be true or false, got {host_sr!r}")
        watch = self.doc.get("watch_ports", False)
        if not isinstance(watch, bool):
            self.problems.append(f"watch_ports must be true or false, got {watch!r}")
        thresholds, problems = congestion.parse(self.doc.get(congestion.KEY))
        self.problems += problems
        if self.problems:
            raise TopologyError(self.problems)
        planes = 1 + max((s.plane for s in switches), default=-1)
        block = self.doc.get("usid_block")
        return Topology(name=str(self.doc.get("name") or "fabric"), planes=planes, switches=tuple(switches),
                        max_port=self.max_port, cpu_port=self.cpu_port,
                        usid_block=None if block is None else str(block), host_source_routing=host_sr, watch_ports=watch,
                        congestion=thresholds)

    def _switch_records(self) -> dict[str, dict[str, Any]]:
        records: dict[str, dict[str, Any]] = {}
        parsed, problems = tlsconf.parse(self.doc.get("tls"), "topology", self.base)
        self.problems += problems
        fabric_tls = parsed if isinstance(parsed, tlsconf.TlsConfig) else None
        for n, rec in enumerate(self.doc.get("switches") or []):
            if "name" not in rec:
                self.problems.append(f"switch #{n} has no name")
                continue
            name = rec["name"]
            problem = limits.name_problem(name)
            if problem:
                self.problems.append(f"switch #{n}: name: {problem}")
                continue
            bad = self._record_problems(name, rec)
            if bad:
                self.problems += bad
                self.rejected.add(name)
                continue
            if name in records:
                self.problems.append(f"duplicate switch name '{name}'")
                continue
            role = rec.get("role")
            if role not in ("t0", "t1"):
                self.problems.append(f"switch {name} has role {role!r}, expected 't0' or 't1'")
                self.rejected.add(name)
                continue
            plane = rec.get("plane")
            if not isinstance(plane, int) or plane < 0:
                self.problems.append(f"switch {name} has plane {plane!r}, expected an integer >= 0")
                self.rejected.add(name)
                continue
            for mac in [rec.get("mac"), *(h.get("mac") for h in (rec.get("hosts") or {}).values()
                                          if isinstance(h, dict))]:
                if mac is not None and not (isinstance(mac, str) and _MAC.match(mac)):
                    self.problems.append(f"MAC {mac!r} of {name} is not a quoted xx:xx:xx:xx:xx:xx string")
            own_tls, problems = tlsconf.parse(rec.get("tls"), f"switch {name}", self.base)
            self.problems += problems
            records[name] = dict(rec, _order=n, _tls=tlsconf.resolve(fabric_tls, own_tls))
        return records

    def _resolve(self, raw: dict[str, dict[str, Any]]) -> list[Switch]:
        index = self._indices(raw)
        self._unique(raw, "device_id", lambda n, r: r.get("device_id", r["_order"] + 1), "device id")
        self._unique(raw, "grpc", lambda n, r: r.get("grpc", f"127.0.0.1:{50001 + r['_order']}"), "gRPC address")
        self._unique({n: r for n, r in raw.items() if "netns" in r}, "netns", lambda n, r: r["netns"], "network namespace")
        used: dict[tuple[str, int], str] = {}  # (switch, port) -> what it faces
        links: dict[tuple[str, str], dict[str, int]] = {}
        host_nics: dict[str, dict[int, list[str]]] = {}
        for name, rec in raw.items():
            if rec["role"] == "t0":
                peers, role = rec.get("uplinks") or {}, "t1"
            else:
                if rec.get("hosts"):
                    self.problems.append(f"{name} is a t1 and has hosts")
                peers, role = rec.get("downlinks") or {}, "t0"
            for peer, port in peers.items():
                peer = str(peer)
                port = self._port(name, port)
                if port is None:
                    continue
                self._use_port(used, name, port, peer)
                if peer not in raw:
                    if peer not in self.rejected:
                        self.problems.append(f"{name} links to unknown switch '{peer}'")
                elif raw[peer]["role"] != role:
                    self.problems.append(f"link {name} -- {peer} joins two {rec['role']} switches")
                elif raw[peer]["plane"] != rec["plane"]:
                    a, b = (name, peer) if rec["role"] == "t0" else (peer, name)
                    pa, pb = raw[a]["plane"], raw[b]["plane"]
                    key = (a, b)
                    if key not in links:
                        self.problems.append(f"link {a} -- {b} crosses planes {pa} and {pb}")
                    links.setdefault(key, {})[name] = port
                else:
                    key = (name, peer) if rec["role"] == "t0" else (peer, name)
                    links.setdefault(key, {})[name] = port
            if rec["role"] == "t0":
                for host, port in self._host_items(name, rec):
                    if port is not None:
                        self._use_port(used, name, port, host)
                    host_nics.setdefault(host, {}).setdefault(rec["plane"], []).append(f"{name} port {port}")
        self._check_links(raw, links)
        self._check_hosts(raw, host_nics)
        if self.problems:
            return []
        return self._switches(raw, index, links)

    def _indices(self, raw: dict[str, dict[str, Any]]) -> dict[str, int]:
        index: dict[str, int] = {}
        seen: dict[tuple[int, str, int], str] = {}
        counters: dict[tuple[int, str], int] = {}
        for name, rec in raw.items():
            group = (rec["plane"], rec["role"])
            i = rec.get("index", counters.get(group, 0))
            counters[group] = max(counters.get(group, 0), i + 1)
            if (group + (i,)) in seen:
                self.problems.append(f"{rec['role']} index {i} in plane {rec['plane']} used by "
                                     f"{seen[group + (i,)]} and {name}")
            seen[group + (i,)] = name
            index[name] = i
        for (plane, role), n in counters.items():
            missing = sorted(set(range(n)) - {i for (p, r, i) in seen if (p, r) == (plane, role)})
            if missing:
                self.problems.append(f"plane {plane} has no {role} with index {', '.join(map(str, missing))}")
        planes = sorted({rec["plane"] for rec in raw.values()})
        for plane in range(1 + max(planes, default=-1)):
            for role in ("t0", "t1"):
                if (plane, role) not in counters:
                    self.problems.append(f"plane {plane} has no {role} switch")
        return index

    def _unique(self, raw: dict[str, dict[str, Any]], key: str, get: Any, label: str) -> None:
        seen: dict[Any, str] = {}
        for name, rec in raw.items():
            value = get(name, rec)
            if value in seen:
                self.problems.append(f"{label} {value} used by {seen[value]} and {name}")
            seen[value] = name

    def _host_items(self, name: str, rec: dict[str, Any]) -> Iterator[tuple[str, int | None]]:
        for host, spec in (rec.get("hosts") or {}).items():
            yield str(host), self._port(name, spec.get("port") if isinstance(spec, dict) else spec)

    def _port(self, name: str, port: Any) -> int | None:
        if not isinstance(port, int) or isinstance(port, bool):
            self.problems.append(f"port {str(port)[:40]!r} of {name} is not an integer "
                                 f"(got {limits.type_name(port)})")
            return None
        if port == self.cpu_port:
            self.problems.append(f"port {port} of {name} is the CPU port")
            return None
        if not 1 <= port <= self.max_port:
            self.problems.append(f"port {port} of {name} out of range 1..{self.max_port}")
            return None
        return port

    def _use_port(self, used: dict[tuple[str, int], str], name: str, port: int, peer: str) -> None:
        if (name, port) in used:
            self.problems.append(f"port {port} of {name} used twice (to {used[name, port]} and {peer})")
        else:
            used[name, port] = peer

    def _check_links(self, raw: dict[str, dict[str, Any]], links: dict[tuple[str, str], dict[str, int]]) -> None:
        for (a, b), ends in links.items():
            for end in (a, b):
                if end not in ends and raw[a]["plane"] == raw[b]["plane"]:
                    self.problems.append(f"link {a} -- {b} has no port on {end}")
        for a, ra in raw.items():
            if ra["role"] != "t0":
                continue
            for b, rb in raw.items():
                if rb["role"] == "t1" and rb["plane"] == ra["plane"] and (a, b) not in links:
                    self.problems.append(f"{a} has no link to {b}")

    def _check_hosts(self, raw: dict[str, dict[str, Any]], host_nics: dict[str, dict[int, list[str]]]) -> None:
        planes = sorted({rec["plane"] for rec in raw.values()})
        for host, by_plane in host_nics.items():
            for plane in planes:
                where = by_plane.get(plane, [])
                if not where:
                    self.problems.append(f"host {host} has no NIC in plane {plane}")
                elif len(where) > 1:
                    self.problems.append(f"host {host} has {len(where)} NICs in plane {plane} ({', '.join(where)})")

    def _switches(self, raw: dict[str, dict[str, Any]], index: dict[str, int],
                  links: dict[tuple[str, str], dict[str, int]]) -> list[Switch]:
        by_pos = {(rec["plane"], rec["role"], index[n]): n for n, rec in raw.items()}
        out: list[Switch] = []
        for name, rec in raw.items():
            plane, role, i = rec["plane"], rec["role"], index[name]
            kw: dict[str, Any] = {}
            if role == "t0":
                hosts = list((rec.get("hosts") or {}).items())
                kw["host_names"] = tuple(str(h) for h, _ in hosts)
                kw["host_ports"] = tuple(s["port"] if isinstance(s, dict) else s for _, s in hosts)
                macs = tuple(s.get("mac") if isinstance(s, dict) else None for _, s in hosts)
                if any(macs):
                    kw["host_macs"] = tuple(m or host_mac(plane, i, k) for k, m in enumerate(macs))
                n_t1 = sum(1 for (p, r, _) in by_pos if p == plane and r == "t1")
                kw["uplinks"] = tuple(links[name, by_pos[plane, "t1", j]][name] for j in range(n_t1))
            else:
                n_t0 = sum(1 for (p, r, _) in by_pos if p == plane and r == "t0")
                kw["downlinks"] = tuple(links[by_pos[plane, "t0", k], name][name] for k in range(n_t0))
            out.append(Switch(name=name, role=role, plane=plane, index=i,
                              device_id=int(rec.get("device_id", rec["_order"] + 1)),
                              grpc_addr=str(rec.get("grpc", f"127.0.0.1:{50001 + rec['_order']}")),
                              mac=str(rec.get("mac") or switch_mac(plane, role, i)), tls=rec["_tls"],
                              netns=rec.get("netns"), **kw))
        return out
