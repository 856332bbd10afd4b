"""A running lab: Mininet with a Bmv2Switch per switch of a Topology, hosts addressed from the SID
plan, pipelines pushed and the plan installed through controller.ops; and its teardown.

    lab = Lab(default_topology(), "/tmp/srv6-fabric-lab").up()    # or: with Lab(...) as lab:
    lab.traffic()                     # every host pair, every plane: a TrafficReport
    lab.link_down("p0-t0-0", "p0-t1-1"); lab.install(failures)     # what failover builds on
    lab.down()

A lab writes everything under its directory: `topology.yaml` (what fabricctl --topology reads;
its failure state `.fabric-state.json` lands next to it), `lab-state.json` (PIDs, interfaces,
timings: what `Lab.attach` and `cleanup` read), the switches' logs, pcaps with `pcap=True`.
Every process a lab starts carries SRV6_FABRIC_LAB=<lab dir> in its environment, so `cleanup`
finds them even without the state file, and touches nothing else.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from controller import ops
from controller import limits
from controller.safefile import UnsafeFile, read_text, write_atomic
from controller.statefile import parse_json
from controller.failover import Failure, FailoverError, failure_to_json, save_state
from controller.statelock import state_lock
from controller.fabric_client import FabricClient
from controller.ops import Outcome
from controller.p4info import P4Info
from controller.plan import plan as make_plan
from mininet_labs.faults import active as active_faults, clear_remains as clear_fault_remains
from controller.routes import Fabric, Options
from controller.service import handoff
from controller.tls import TlsConfig
from controller.toolchain import Artifacts, find_binary
from controller.topology import Topology, build, load, to_dict
from mininet_labs import traffic as tr
from mininet_labs._mininet import missing as mininet_missing
from mininet_labs.bmv2proc import ServerTls
from mininet_labs.pki import PkiError, make_pki

DEFAULT_DIR = Path("/tmp/srv6-fabric-lab")
STATE_NAME = "lab-state.json"
TOPOLOGY_NAME = "topology.yaml"
CONFIG_NAME = "lab-config.json"
ENV_MARK = "SRV6_FABRIC_LAB"
FORMAT = "srv6-fabric-lab/1"
CUT_MTU = 68  # a cut port's MTU: below every fabric frame


class LabError(RuntimeError):
    """The lab could not be brought up, reached or taken down; one line (plus detail lines)."""


def default_topology(planes: int = 2, t1: int = 2, t0: int = 2, hosts: int = 2, *, grpc_base_port: int = 50001,
                     name: str = "lab") -> Topology:
    """A regular fabric with switches on 127.0.0.1:grpc_base_port.. (default 2 x 2 x 2 x 2)."""
    return build(planes, t1, t0, hosts, name=name, grpc_base_port=grpc_base_port)


MAX_LAB_SWITCHES = 128  # bmv2 processes one machine runs as a lab (each ~50 MB and a thread per port)


def size_problem(model: Topology) -> str | None:
    """Why a topology is too large to run as a lab on one machine, or None."""
    n = len(model.switches)
    if n > MAX_LAB_SWITCHES:
        return f"a lab of {n} switches: at most {MAX_LAB_SWITCHES} bmv2 switches run on one machine"
    return None


def prerequisites() -> str | None:
    """None when a lab can run here, else what is missing (root, Mininet, simple_switch_grpc)."""
    if os.geteuid() != 0:
        return "a lab needs root (network namespaces, veths)"
    why = mininet_missing()
    if why:
        return why
    if find_binary("simple_switch_grpc") is None:
        return "simple_switch_grpc not found (PATH, $SIMPLE_SWITCH_GRPC or $P4_TOOLCHAIN_BIN)"
    return None


# --- state ----------------------------------------------------------------------------------

@dataclass
class LabState:
    """What a lab made, as written to lab-state.json."""

    lab_dir: str
    topology: str
    program: str
    tag: str
    pid: int  # the process holding the Mininet object
    phase: str = "starting"  # starting | ready | failed | stopping
    error: str | None = None
    switches: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> pid, device_id, grpc, log, intfs
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> pid, nics
    intfs: list[str] = field(default_factory=list)  # root-namespace interfaces (switch ports)
    timings: dict[str, float] = field(default_factory=dict)
    format: str = FORMAT

    def write(self, path: Path) -> None:
        """Write the state whole (controller.safefile); never over a file that is not a lab state."""
        try:
            write_atomic(path, json.dumps(asdict(self), indent=1) + "\n", what="lab state", ours=LabState.read)
        except OSError as e:
            raise LabError(f"cannot write lab state {path}: {e.strerror or e}") from None

    @classmethod
    def read(cls, path: Path) -> LabState:
        """The state in `path`; LabError (one line) for a file that is not a lab state of ours."""
        try:
            doc = parse_json(read_text(path, limits.MAX_LAB_STATE_BYTES, "lab state"))
        except UnsafeFile as e:
            raise LabError(str(e)) from None
        except RecursionError:
            raise LabError(f"cannot read lab state {path}: nested too deeply") from None
        except (OSError, ValueError) as e:
            raise LabError(f"cannot read lab state {path}: {getattr(e, 'strerror', None) or e}") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise LabError(f"{path} is not a lab state (no \"format\": \"{FORMAT}\")")
        try:
            state = cls(**doc)
        except TypeError as e:
            raise LabError(f"lab state {path} is malformed: {e}") from None
        problem = state.problem()
        if problem:
            raise LabError(f"lab state {path} is malformed: {problem}")
        return state

    def problem(self) -> str | None:
        """What in a state read from a file has the wrong type (None if all is well)."""
        for key, kind in (("lab_dir", str), ("topology", str), ("program", str), ("tag", str), ("phase", str),
                          ("switches", dict), ("hosts", dict), ("intfs", list), ("timings", dict)):
            if not isinstance(getattr(self, key), kind):
                return f"{key} is {limits.type_name(getattr(self, key))}, expected {kind.__name__}"
        if not isinstance(self.pid, int) or isinstance(self.pid, bool) or self.pid < 1:
            return f"pid {self.pid!r} is not a process id"
        if not all(isinstance(i, str) for i in self.intfs):
            return "intfs holds a non-string"
        for name, h in self.hosts.items():
            if not isinstance(h, dict) or not isinstance(h.get("pid"), int) or not isinstance(h.get("nics", []), list):
                return f"host {name!r} is not {{pid, nics}}"
        for name, sw in self.switches.items():
            if not isinstance(sw, dict):
                return f"switch {name!r} is not a mapping"
        return None


def write_lab_file(lab_dir: Path, name: str, text: str) -> None:
    """Write one of the lab's own files in its directory: an existing one is replaced only in a
    lab's directory (one holding a lab state or lab config) or when it holds this text already,
    never in someone else's directory."""
    def ours(path: Path) -> None:
        mine = (lab_dir / STATE_NAME).exists() or (lab_dir / CONFIG_NAME).exists()
        if not mine and read_text(path, limits.MAX_TOPOLOGY_BYTES, f"lab {name}") != text:
            raise LabError(f"{path} exists and {lab_dir} is not a lab directory (no {STATE_NAME}): refusing to "
                           "overwrite it; choose another --dir")
    try:
        write_atomic(lab_dir / name, text, what=f"lab {name}", ours=ours)
    except OSError as e:
        raise LabError(str(e) if isinstance(e, UnsafeFile) else f"cannot write {lab_dir / name}: {e.strerror or e}") from None


# --- hosts ----------------------------------------------------------------------------------

@dataclass
class LabHost:
    """A lab host: its shell's PID (its network namespace) and NICs; commands run in its namespace."""

    name: str
    pid: int
    nics: tuple[tr.HostNic, ...]
    lab_dir: str
    node: Any = None  # the Mininet Host, in the process that runs the lab (None when attached)

    def argv(self, argv: Sequence[str]) -> list[str]:
        return ["mnexec", "-a", str(self.pid), *argv]

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start a command in this host's namespace (Popen keyword arguments pass through); it
        carries the lab's mark, so cleanup stops it with the lab."""
        kwargs["env"] = {**(kwargs.get("env") or os.environ), ENV_MARK: self.lab_dir}
        return subprocess.Popen(self.argv(argv), **kwargs)

    def run(self, argv: Sequence[str], check: bool = True, timeout: float | None = 60) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(self.argv(argv), capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, ENV_MARK: self.lab_dir})
        if check and proc.returncode != 0:
            raise LabError(f"{self.name}: {' '.join(argv)}: exit {proc.returncode}: "
                           f"{(proc.stderr or proc.stdout).strip()[-500:]}")
        return proc

    def nic(self, plane: int) -> tr.HostNic:
        for n in self.nics:
            if n.plane == plane:
                return n
        raise LabError(f"{self.name} has no NIC in plane {plane} (planes: {', '.join(str(n.plane) for n in self.nics)})")


def host_script(nics: Iterable[tr.HostNic]) -> str:
    """Shell commands that give a host its plane addresses: IPv6 on, DAD off, the address without an
    on-link prefix route, and the plane's prefix via a fake gateway whose neighbour entry is the T0's
    MAC (the switch never answers ND); the same for IPv4 with a static ARP entry."""
    lines = ["sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0",
             "sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0"]
    for n in nics:
        i = n.intf
        lines += [
            f"sysctl -qw net.ipv6.conf.{i}.disable_ipv6=0 net.ipv6.conf.{i}.accept_dad=0 "
            f"net.ipv6.conf.{i}.dad_transmits=0 net.ipv6.conf.{i}.router_solicitations=0 net.ipv6.conf.{i}.accept_ra=0 "
            f"net.ipv6.conf.{i}.keep_addr_on_down=1",  # a NIC taken down and up (cross-plane) keeps answering ND
            f"ip link set {i} address {n.mac} up",
            f"ip -6 addr replace {n.v6}/64 dev {i} nodad noprefixroute",
            f"ip -6 neigh replace {tr.GATEWAY_V6} lladdr {n.gateway_mac} dev {i} nud permanent",
            f"ip -6 route replace {n.v6_prefix} via {tr.GATEWAY_V6} dev {i}",
            f"ip addr replace {n.v4}/32 dev {i}",
            f"ip neigh replace {tr.GATEWAY_V4} lladdr {n.gateway_mac} dev {i} nud permanent",
            f"ip route replace {n.v4_prefix} via {tr.GATEWAY_V4} dev {i} onlink",
            f"ethtool -K {i} tx off rx off tso off gso off gro off >/dev/null 2>&1 || true",
        ]
    return "\n".join(lines)


# --- traffic results ------------------------------------------------------------------------

@dataclass
class FailoverResult:
    """A failure-set change applied to a lab: the new set, the switches reconciled, their outcomes,
    and how long recording and reconciling took."""

    failures: list[Failure]
    touched: list[str]
    outcomes: dict[str, Outcome]  # empty when a running controller applied the change
    seconds: float
    via: str | None = None  # the running controller (`fabricctl run`) that applied it: "pid N, election id M"

    def to_json(self) -> dict[str, Any]:
        return {"failures": [failure_to_json(f) for f in self.failures], "touched": self.touched,
                "seconds": self.seconds, "via_controller": self.via,
                "changed": {n: len(o.delta) if o.delta is not None else None for n, o in self.outcomes.items()}}


@dataclass
class PairPlane:
    """Packets from one host to another in one plane: sent, and received with a good ICRC."""

    src: str
    dst: str
    plane: int
    sent: int
    received: int


@dataclass
class TrafficReport:
    """Every sender's and receiver's result of one run, and per (src, dst, plane) totals."""

    sent: dict[str, tr.SendResult]
    received: dict[str, tr.RecvResult]
    seconds: float

    def pairs(self) -> list[PairPlane]:
        out: dict[tuple[str, str, int], PairPlane] = {}
        for src, s in self.sent.items():
            for q in s.qps:
                for plane, n in q.per_plane.items():
                    out.setdefault((src, q.dst, plane), PairPlane(src, q.dst, plane, 0, 0)).sent += n
        for dst, r in self.received.items():
            for q in r.qps:
                for plane, n in q.per_plane.items():
                    out.setdefault((q.sender, dst, plane), PairPlane(q.sender, dst, plane, 0, 0)).received += n
        return [out[k] for k in sorted(out)]

    def totals(self) -> dict[str, int]:
        return {"sent": sum(s.sent for s in self.sent.values()), **tr.summarize(self.received.values())}

    def problems(self) -> list[str]:
        """One line per pair and plane that lost packets, and per QP with duplicates, bad ICRCs or strays."""
        out = [f"{p.src} -> {p.dst} plane {p.plane}: {p.received} of {p.sent} received"
               for p in self.pairs() if p.received != p.sent]
        for dst, r in self.received.items():
            for q in r.qps:
                bad = {k: getattr(q, k) for k in ("duplicated", "icrc_bad", "wrong_plane") if getattr(q, k)}
                if bad:
                    out.append(f"{q.sender} -> {dst} qp {q.qp:#x}: " + ", ".join(f"{k} {v}" for k, v in bad.items()))
        return out

    @property
    def ok(self) -> bool:
        return not self.problems()

    def to_json(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "ok": self.ok, "totals": self.totals(), "problems": self.problems(),
                "pairs": [asdict(p) for p in self.pairs()],
                "sent": {h: s.to_json() for h, s in self.sent.items()},
                "received": {h: r.to_json() for h, r in self.received.items()}}


class TrafficRun:
    """Senders and receivers started by Lab.start_traffic: `wait()` for the report; meanwhile the
    lab can fail links, and `tell_dead_planes` tells senders started with rehome to leave planes."""

    def __init__(self, lab: Lab, run: Path, timeout: float) -> None:
        self.lab, self.dir, self.timeout = lab, run, timeout
        self.senders: dict[str, subprocess.Popen[Any]] = {}
        self.receivers: dict[str, subprocess.Popen[Any]] = {}
        self.started_ns = 0  # CLOCK_MONOTONIC when the first sender was started
        self.report: TrafficReport | None = None

    def dead_planes_file(self, host: str) -> Path:
        return self.dir / f"dead-planes-{host}"

    def tell_dead_planes(self, host: str, planes: Iterable[int]) -> None:
        """Tell a sender (started with rehome) which planes to leave; an empty set brings it back."""
        write_atomic(self.dead_planes_file(host), " ".join(map(str, sorted(planes))) + "\n")

    def running(self) -> bool:
        return any(p.poll() is None for p in self.senders.values())

    def wait(self) -> TrafficReport:
        if self.report is not None:
            return self.report
        run = self.dir
        try:
            wait_senders_receivers(self.senders, self.receivers, run, self.timeout)
        finally:
            self.kill()
        sent = {s: tr.SendResult.from_json(json.loads((run / f"send-{s}.json").read_text())) for s in self.senders}
        got = {d: tr.RecvResult.from_json(json.loads((run / f"recv-{d}.json").read_text())) for d in self.receivers}
        seconds = round((time.monotonic_ns() - self.started_ns) / 1e9, 3) if self.started_ns else 0.0
        self.report = TrafficReport(sent, got, seconds)
        (run / "report.json").write_text(json.dumps(self.report.to_json(), indent=1) + "\n")
        return self.report

    def kill(self) -> None:
        for p in (*self.senders.values(), *self.receivers.values()):
            if p.poll() is None:
                p.kill()
                p.wait()


def wait_senders_receivers(senders: Mapping[str, subprocess.Popen[Any]], receivers: Mapping[str, subprocess.Popen[Any]],
                           run: Path, timeout: float, what: str = "") -> None:
    """Wait for the senders, then the receivers (they stop by themselves once all came; stragglers get a
    moment, then SIGTERM); LabError naming the first that failed, with the end of its stderr file."""
    for src, p in senders.items():
        if p.wait(timeout=timeout) != 0:
            raise LabError(f"{what}sender on {src} failed: {_tail(run / f'send-{src}.err')}")
    grace = time.monotonic() + 3.0
    for dst, p in receivers.items():
        try:
            p.wait(timeout=max(0.1, grace - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=10)
        if p.returncode != 0:
            raise LabError(f"{what}receiver on {dst} failed: {_tail(run / f'recv-{dst}.err')}")


# --- the lab --------------------------------------------------------------------------------

class Lab:
    """One lab of a Topology under `lab_dir`. `up()` runs it in this process (Mininet object in
    `net`); `Lab.attach(lab_dir)` reaches one another process runs (no `net`, everything else)."""

    def __init__(self, model: Topology, lab_dir: str | Path = DEFAULT_DIR, *, program: str = "srv6_spray",
                 tag: str = "", pcap: bool = False, log_level: str = "warn", election_id: int = 1,
                 timeout: float = 10.0, tls: bool = False) -> None:
        self.model = model
        self.tls = tls  # up(): the switches with mutual TLS, certificates made in DIR/tls
        self._server_tls: ServerTls | None = None
        self.dir = Path(lab_dir).resolve()
        self.program = program
        self.tag = tag
        self.pcap = pcap
        self.log_level = log_level
        self.election_id = election_id
        self.timeout = timeout
        self.net: Any = None
        self.options: Options | None = None  # hash mode and pins of the plan install/fail/restore use
        self.state = LabState(str(self.dir), str(self.topology_path), program, tag, os.getpid())
        self._hosts: dict[str, LabHost] = {}
        self._mtus: dict[str, int] = {}  # MTUs of cut ports, to mend them
        self._p4infos: dict[str, P4Info] = {}  # per program, read once

    # --- files -------------------------------------------------------------------------------
    @property
    def topology_path(self) -> Path:
        return self.dir / TOPOLOGY_NAME

    @property
    def state_path(self) -> Path:
        return self.dir / STATE_NAME

    @property
    def failure_state_path(self) -> Path:
        """Where fabricctl --topology <lab>/topology.yaml keeps the failure set."""
        return self.dir / ops.STATE_NAME

    # --- up / down ---------------------------------------------------------------------------
    def up(self, install: bool = True) -> Lab:
        """Start everything; on any error tear down what was made, then raise LabError."""
        why = prerequisites()
        if why:
            raise LabError(why)
        from mininet_labs.topo import check

        problems = check(self.model, self.tag)
        if problems:
            raise LabError(f"the topology cannot run as a lab: {problems[0]}" +
                           (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""))
        if self.state_path.exists():
            old = LabState.read(self.state_path)
            if _alive(old.pid) and old.pid != os.getpid():
                raise LabError(f"a lab already runs in {self.dir} (pid {old.pid}); 'fabricctl lab down --dir {self.dir}'")
            cleanup(self.dir)  # the remains of a crashed lab
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "traffic").mkdir(exist_ok=True)
        self._settle_tls()
        write_lab_file(self.dir, TOPOLOGY_NAME, yaml.safe_dump(to_dict(self.model), sort_keys=False))
        t0 = time.monotonic()
        self.state.phase, self.state.error = "starting", None
        self.state.write(self.state_path)
        try:
            self._start_mininet()
            self.state.timings["switches_s"] = round(time.monotonic() - t0, 2)
            t1 = time.monotonic()
            self._configure_hosts()
            self.state.timings["hosts_s"] = round(time.monotonic() - t1, 2)
            self.state.write(self.state_path)
            if install:
                t2 = time.monotonic()
                outcomes = self.install(push="missing")
                bad = [o for o in outcomes.values() if not o.ok]
                if bad:
                    raise LabError(f"installing the plan failed on {len(bad)} switches: {bad[0].error}")
                self.state.timings["install_s"] = round(time.monotonic() - t2, 2)
            self.state.timings["up_s"] = round(time.monotonic() - t0, 2)
            self.state.phase = "ready"
            self.state.write(self.state_path)
        except BaseException as e:
            self.state.phase, self.state.error = "failed", f"{type(e).__name__}: {e}"
            self.down()
            if isinstance(e, Exception) and not isinstance(e, LabError):
                raise LabError(f"lab up failed: {type(e).__name__}: {e}") from e
            raise
        return self

    def _settle_tls(self) -> None:
        """With `tls`, a fresh CA, switch and client certificate in DIR/tls: every switch starts with
        mutual TLS and the lab's topology names the client's files; without, plaintext (a topology's
        own tls: settings are for its real switches, not for the lab's)."""
        client = None
        if self.tls:
            try:
                pki = make_pki(self.dir / "tls")
            except PkiError as e:
                raise LabError(str(e)) from None
            self._server_tls = ServerTls(pki.server_cert, pki.server_key, client_ca=pki.ca)
            client = TlsConfig(pki.ca, pki.client_cert, pki.client_key)
        self.model = ops.replace_tls(self.model, lambda s: client)

    def _start_mininet(self) -> None:
        from mininet_labs.topo import FabricTopo, all_intfs  # imports Mininet (also Debian's)

        from mininet.link import Link
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import Host

        setLogLevel(os.environ.get("SRV6_LAB_MININET_LOG", "output"))  # "output": what the CLI prints, no chatter
        pcap_dir = self.dir / "pcap" if self.pcap else None
        client_tls = self.model.switches[0].tls if self.model.switches else None
        topo = FabricTopo(self.model, tag=self.tag, lab_dir=self.dir, pcap_dir=pcap_dir, log_level=self.log_level,
                          server_tls=self._server_tls, client_tls=client_tls)
        self.state.intfs = all_intfs(self.model, self.tag)
        self.net = Mininet(topo=topo, host=Host, link=Link, controller=None, autoSetMacs=False, build=False,
                           waitConnected=False)
        # Host shells and switches inherit the mark that cleanup finds them by; this process must not keep it.
        saved = _mark(self.dir)
        try:
            self.net.build()
        except BaseException:
            _unmark(saved)
            raise
        self.state.hosts = {h.name: {"pid": h.pid, "nics": []} for h in self.net.hosts}
        self.state.switches = {s.name: {"pid": None, "shell_pid": s.pid, "device_id": s.device_id,
                                        "grpc": s.grpc_addr, "log": str(s.log_path)} for s in self.net.switches}
        self.state.write(self.state_path)
        try:
            self.net.start()
        finally:  # record the switch PIDs even when one did not come up, for cleanup
            _unmark(saved)
            for s in self.net.switches:
                self.state.switches[s.name].update(pid=s.switch_pid, argv=s.command(), out=str(s.out_path))
            self.state.write(self.state_path)

    def _configure_hosts(self) -> None:
        procs = []
        for node in self.net.hosts:
            host = LabHost(node.name, node.pid, tr.host_nics(self.model, node.name), str(self.dir), node)
            self._hosts[host.name] = host
            self.state.hosts[host.name] = {"pid": host.pid, "nics": [asdict(n) for n in host.nics]}
            procs.append((host, host.popen(["sh", "-ec", host_script(host.nics)], stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True)))
        for host, proc in procs:
            out, _ = proc.communicate(timeout=60)
            if proc.returncode != 0:
                raise LabError(f"configuring {host.name} failed: {out.strip()[-500:]}")

    def down(self) -> CleanupReport:
        """Stop the lab (Mininet's stop when this process runs it) and remove whatever is left."""
        if self.net is not None:
            self.state.phase = "stopping"
            if self.state_path.exists():
                self.state.write(self.state_path)
            try:
                self.net.stop()
            except Exception:  # cleanup below removes what Mininet did not
                pass
            self.net = None
        self._hosts = {}
        return cleanup(self.dir, self.model, self.tag, signal_owner=self.state.pid != os.getpid())

    def __enter__(self) -> Lab:
        return self.up() if self.net is None else self

    def __exit__(self, *exc: object) -> None:
        self.down()

    @classmethod
    def attach(cls, lab_dir: str | Path = DEFAULT_DIR) -> Lab:
        """The lab another process runs in lab_dir (LabError when there is none or it failed)."""
        path = Path(lab_dir).resolve() / STATE_NAME
        if not path.exists():
            raise LabError(f"no lab in {Path(lab_dir).resolve()} (no {STATE_NAME}); 'fabricctl lab up' starts one")
        state = LabState.read(path)
        try:
            model = load(state.topology)
        except (OSError, ValueError) as e:  # TopologyError, YamlError, UnsafeFile: one line each
            raise LabError(f"cannot read the lab's topology {state.topology}: {' '.join(str(e).split())}") from None
        lab = cls(model, state.lab_dir, program=state.program, tag=state.tag)
        lab.state = state
        for name, h in state.hosts.items():
            lab._hosts[name] = LabHost(name, h["pid"], tuple(tr.HostNic(**n) for n in h["nics"]), state.lab_dir)
        return lab

    # --- reaching it ---------------------------------------------------------------------------
    @property
    def hosts(self) -> list[str]:
        return sorted(self.model.hosts, key=_natural)

    def host(self, name: str) -> LabHost:
        try:
            return self._hosts[name]
        except KeyError:
            raise LabError(f"unknown host '{name}' (hosts: {', '.join(self.hosts)})") from None

    def switch(self, name: str) -> Any:
        """The Mininet Bmv2Switch (only in the process running the lab)."""
        if self.net is None:
            raise LabError("the Mininet object lives in the process that ran 'lab up'")
        return self.net.get(name)

    def client(self, election_id: int | None = None, connect: bool = True) -> FabricClient:
        """A FabricClient with a connection to every switch, each with the program's P4Info; unless
        told not to, connected and checked to run that pipeline. Close it (or use `with`) before
        `install`: two sessions with one election id conflict."""
        how = (lambda c, p4info: (c.connect(), c.check_pipeline(p4info))) if connect else None
        return self._switches(election_id or self.election_id, how, "use")

    def reader(self) -> FabricClient:
        """A FabricClient that only reads (no stream, no election id: `install` and `fail` go on meanwhile),
        each switch checked once to run the program. Cheap to read through for as long as it is open, where
        `client()` pays a session and a pipeline check each time; close it (or use `with`)."""
        return self._switches(self.election_id, lambda c, p4info: (c.connect_reader(), c.check_pipeline(p4info)),
                              "read")

    def _switches(self, election_id: int, how: Callable[[Any, P4Info], object] | None, verb: str) -> FabricClient:
        """A FabricClient over every switch with the program's P4Info, each opened by `how` in parallel
        (None: left closed); LabError 'cannot <verb> the switches' naming those that failed."""
        p4info = self.p4info()
        conns = [ops.connection(s, election_id, self.timeout) for s in self.model.switches]
        for conn in conns:
            conn.p4info = p4info
        client = FabricClient(conns)
        if how is not None:
            result = client.run(lambda c: how(c, p4info))
            if not result.ok:
                client.close_all()
                raise LabError(f"cannot {verb} the switches: {result.summary()}")
        return client

    def p4info(self) -> P4Info:
        """The current program's P4Info (read once per program)."""
        if self.program not in self._p4infos:
            self._p4infos[self.program] = P4Info.load(Artifacts.of(self.program).p4info)
        return self._p4infos[self.program]

    def failures(self) -> frozenset[Failure]:
        """The failure set fabricctl keeps for this lab (empty when none is recorded)."""
        return ops.load_failures(self.model, self.failure_state_path)

    def install(self, failures: Iterable[Failure] | None = None, *, push: ops.Push = "missing",
                dry_run: bool = False) -> dict[str, Outcome]:
        """Reconcile every switch (but those recorded down) to the plan under `failures` (default:
        the lab's recorded failure set), pushing the pipeline where a switch has none."""
        failures = self.failures() if failures is None else frozenset(failures)
        down = ops.down_switches(failures)
        names = [s.name for s in self.model.switches if s.name not in down]
        return self._sync(ops.fabric(self.model, self.program, failures, self.options), names,  # type: ignore[arg-type]
                          push=push, dry_run=dry_run)

    def _sync(self, fabric: Fabric, names: Sequence[str], *, push: ops.Push, dry_run: bool = False
              ) -> dict[str, Outcome]:
        """Reconcile the named switches to the plan of `fabric` (ops.encode, then ops.sync)."""
        artifacts, p4info = Artifacts.of(self.program), self.p4info()
        encoded = ops.encode(make_plan(fabric), names, p4info, str(artifacts.p4info))
        return ops.sync(self.model, encoded, artifacts, p4info, election_id=self.election_id, timeout=self.timeout,
                        dry_run=dry_run, push=push)

    def set_failures(self, failures: Iterable[Failure]) -> FailoverResult:
        """What `fabricctl fail/restore` does, on this lab: record the failure set in the lab's state
        file, then reconcile the switches whose plan changes (none recorded down). While a `fabricctl
        run` with a higher election id than the lab's is primary on that file, it is the one that
        writes: the change is recorded and this waits (up to the lab's timeout) for the controller's
        word, as the command does (`via` names the controller; LabError if it did not apply it)."""
        t0 = time.monotonic()
        outcomes: dict[str, Outcome] = {}
        passed: handoff.Handoff | None = None
        with state_lock(self.failure_state_path):  # the rule of fabricctl fail/restore: record, then apply
            old = self.failures()
            change = ops.failure_change(self.model, self.program, old, failures, self.options)  # type: ignore[arg-type]
            controller = handoff.running(self.failure_state_path)
            if controller is not None and self.election_id > controller.election_id:
                controller = None  # the lab writes itself, deposing the controller there (a higher id wins)
            try:
                save_state(self.failure_state_path, change.new)
            except FailoverError as e:
                raise LabError(str(e)) from None
            if controller is not None and change.new != old:
                passed = handoff.Handoff(self.failure_state_path, controller, time.monotonic_ns(), change.new - old,
                                         old - change.new, lambda f: ops.describe_failure(self.model, f))
            elif change.touched:
                outcomes = self._sync(change.fabric, change.touched, push="never")
        if passed is not None:  # outside the lock: the controller takes it to read the record
            out = passed.wait(self.timeout)
            if not out.ok:
                raise LabError(out.error)
        result = FailoverResult(sorted(change.new, key=str), change.touched, outcomes, round(time.monotonic() - t0, 4),
                                str(passed.controller) if passed is not None else None)
        bad = [o for o in outcomes.values() if not o.ok]
        if bad:
            raise LabError(f"reconciling after the failure change failed on {len(bad)} switches: {bad[0].error}")
        return result

    def fail(self, failure: Failure) -> FailoverResult:
        return self.set_failures(self.failures() | {failure})

    def restore(self, failure: Failure | None = None) -> FailoverResult:
        """Remove one failure from the record (None: all) and reconcile what it touches."""
        return self.set_failures(frozenset() if failure is None else self.failures() - {failure})

    # --- switch faults -------------------------------------------------------------------------
    def _switch_state(self, name: str) -> dict[str, Any]:
        if name not in self.state.switches:
            raise LabError(f"unknown switch '{name}' (switches: {', '.join(sorted(self.state.switches, key=_natural))})")
        return self.state.switches[name]

    def kill_switch(self, name: str) -> int | None:
        """SIGKILL a switch's simple_switch_grpc (a crash: no goodbye on its streams); the lab state
        then records no PID for it. The PID killed, or None when it was not running."""
        sw = self._switch_state(name)
        pid = sw.get("pid")
        if pid and _alive(pid) and f"{ENV_MARK}={self.dir}".encode() in _environ(pid):
            os.kill(pid, signal.SIGKILL)
            end = time.monotonic() + 5
            while _alive(pid) and time.monotonic() < end:
                time.sleep(0.01)
        else:
            pid = None
        sw["pid"] = None
        self.state.write(self.state_path)
        return pid

    def restart_switch(self, name: str, timeout: float = 30.0) -> int:
        """Start a switch again with the command line the lab started it with (no pipeline, empty
        tables: the controller pushes both); kills it first if it still runs. Its new PID."""
        from mininet_labs.bmv2proc import SwitchStartError, wait_grpc_ready

        sw = self._switch_state(name)
        argv = sw.get("argv")
        if not argv:
            raise LabError(f"{name}: the lab did not record its command line (a lab started before restart-switch existed)")
        self.kill_switch(name)
        out = Path(sw.get("out") or self.dir / f"{name}.out")
        with open(out, "ab") as f:
            f.write(("$ " + " ".join(argv) + "  # restart-switch\n").encode())
            f.flush()
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                    start_new_session=True, env={**os.environ, ENV_MARK: str(self.dir)})
        sw["pid"] = proc.pid
        self.state.write(self.state_path)
        try:
            wait_grpc_ready(sw["grpc"], proc, time.monotonic() + timeout, name, (out, Path(sw["log"])))
        except SwitchStartError as e:
            raise LabError(str(e)) from None
        return proc.pid

    # --- links ---------------------------------------------------------------------------------
    def link_down(self, a: str, b: str) -> tuple[str, str]:
        """Take the T0-T1 link down at both ends (the interfaces; the controller is not told)."""
        return self._set_link(a, b, "down")

    def link_up(self, a: str, b: str) -> tuple[str, str]:
        return self._set_link(a, b, "up")

    def _set_link(self, a: str, b: str, how: str) -> tuple[str, str]:
        from mininet_labs.topo import link_ends

        ends = link_ends(self.model, a, b, self.tag)
        for end in ends:
            self._ip_link(end.intf, how)
        return ends[0].intf, ends[1].intf

    def switch_intfs(self, name: str) -> list[str]:
        """Every root-namespace interface of a switch (its host ports, uplinks and downlinks)."""
        from mininet_labs.topo import port_intf

        s = self.model.switch(name)
        return [port_intf(s, p, self.tag) for p in (*s.host_ports, *s.uplinks, *s.downlinks)]

    def host_nic(self, host: str, plane: int, how: str) -> str:
        """Set a host's NIC in a plane up or down inside its namespace (its leaf port loses carrier)."""
        intf = self.host(host).nic(plane).intf
        self.host(host).run(["ip", "link", "set", intf, how])
        return intf

    def cut(self, intfs: Iterable[str]) -> list[str]:
        """Cut switch ports without taking them down: the MTU drops to 68, so every frame the fabric
        carries is dropped at both ends (the sender's packet socket refuses it, the veth drops it on
        the way in). `ip link set down` on a port is no lab failure: bmv2 (built without
        WITH_PCAP_FIX) then blocks its one receive thread in libpcap on that port and the whole
        switch stops forwarding until a frame arrives there. `mend` puts the MTU back."""
        done = []
        for intf in intfs:
            self._mtus.setdefault(intf, int(Path("/sys/class/net", intf, "mtu").read_text()))
            self._ip_link(intf, "mtu", str(CUT_MTU))
            done.append(intf)
        return done

    def mend(self, intfs: Iterable[str]) -> list[str]:
        """Put a cut port's MTU back. An MTU below 1280 made the kernel drop the port's IPv6 state
        with its disable_ipv6=1, and the restore brings IPv6 back on: turn it off again, or the
        switch would take the port's own ND and MLD as traffic."""
        done = []
        for intf in intfs:
            self._ip_link(intf, "mtu", str(self._mtus.pop(intf, 1500)))
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{intf}.disable_ipv6=1"], capture_output=True)
            done.append(intf)
        return done

    def cut_link(self, a: str, b: str) -> list[str]:
        """Cut a T0-T1 link at both ends (see `cut`); the controller is not told."""
        from mininet_labs.topo import link_ends

        return self.cut(e.intf for e in link_ends(self.model, a, b, self.tag))

    def mend_link(self, a: str, b: str) -> list[str]:
        from mininet_labs.topo import link_ends

        return self.mend(e.intf for e in link_ends(self.model, a, b, self.tag))

    @staticmethod
    def _ip_link(intf: str, *args: str) -> None:
        proc = subprocess.run(["ip", "link", "set", intf, *args], capture_output=True, text=True)
        if proc.returncode != 0:
            raise LabError(f"ip link set {intf} {' '.join(args)}: {proc.stderr.strip()}")

    # --- traffic -------------------------------------------------------------------------------
    def traffic(self, pairs: Sequence[tuple[str, str]] | None = None, **kwargs: Any) -> TrafficReport:
        """Send RoCEv2 from each pair's source to its destination (default: every ordered pair of
        hosts) with one sender process per source and one receiver per destination, in the hosts'
        namespaces; returns what each sent and received. Keywords as `start_traffic`."""
        return self.start_traffic(pairs, **kwargs).wait()

    def start_traffic(self, pairs: Sequence[tuple[str, str]] | None = None, *, qps: int = 4, messages: int = 8,
                      message_size: int = 1024, mtu: int = 1024, verb: tr.Verb = "send",
                      plane_mode: tr.PlaneMode = "packet", planes: Sequence[int] | None = None, rate: float = 1000.0,
                      start_psn: int = 0, sport: int | None = None, ipv4: bool | None = None,
                      qp_base: int | Mapping[str, int] = 0x100, rehome: bool = False, timeline_ms: float = 0.0,
                      start_delay: float = 0.0, timeout: float = 120.0) -> TrafficRun:
        """Start the senders and receivers of `traffic` and return while they run (TrafficRun.wait()
        collects the report). `ipv4` defaults to what the program routes (eecmp_qp_hash: IPv4);
        `qp_base` may differ per sender; `rehome` lets senders move QPs off a plane whose NIC lost
        carrier or that TrafficRun.tell_dead_planes names; `timeline_ms` bins receptions per plane;
        `start_delay` > 0: every sender starts sending that long after this call (TrafficRun.started_ns),
        whenever its process came up, so a schedule can be kept."""
        pairs = list(pairs) if pairs is not None else [(a, b) for a in self.hosts for b in self.hosts if a != b]
        for a, b in pairs:
            self.host(a), self.host(b)
            if a == b:
                raise LabError(f"a pair needs two hosts, got {a} -> {b}")
        ipv4 = self.program == "eecmp_qp_hash" if ipv4 is None else ipv4
        run = self.dir / "traffic" / time.strftime("%Y%m%d-%H%M%S") / str(time.monotonic_ns())
        run.mkdir(parents=True)
        dests: dict[str, list[str]] = {}
        for a, b in pairs:
            dests.setdefault(a, []).append(b)
        per_dest = messages * tr.SendSpec("", "", [], message_size=message_size, mtu=mtu).packets_per_message()
        expect: dict[str, int] = {}
        for a, b in pairs:
            expect[b] = expect.get(b, 0) + per_dest
        py = [sys.executable, "-m", "mininet_labs.traffic"]
        topo = str(self.topology_path)
        env = _with_repo_path(os.environ)
        handle = TrafficRun(self, run, timeout)
        try:
            for dst, n in expect.items():
                with open(run / f"recv-{dst}.err", "w") as err:
                    handle.receivers[dst] = self.host(dst).popen(
                        [*py, "recv", "--topology", topo, "--host", dst, "--expect", str(n), "--timeout", str(timeout),
                         "--ready-file", str(run / f"{dst}.ready"), "--out", str(run / f"recv-{dst}.json"),
                         "--timeline-ms", str(timeline_ms)],
                        env=env, stdout=subprocess.DEVNULL, stderr=err)
            _wait_files([run / f"{d}.ready" for d in handle.receivers], handle.receivers, 30.0)
            handle.started_ns = time.monotonic_ns() + int(start_delay * 1e9)
            for src, to in dests.items():
                base = qp_base if isinstance(qp_base, int) else qp_base.get(src, 0x100)
                argv = [*py, "send", "--topology", topo, "--host", src, "--qps", str(qps), "--messages", str(messages),
                        "--message-size", str(message_size), "--mtu", str(mtu), "--verb", verb,
                        "--plane-mode", plane_mode, "--rate", str(rate), "--start-psn", str(start_psn),
                        "--qp-base", str(base), "--out", str(run / f"send-{src}.json")]
                for d in to:
                    argv += ["--to", d]
                if planes is not None:
                    argv += ["--planes", ",".join(map(str, planes))]
                if sport is not None:
                    argv += ["--sport", str(sport)]
                if ipv4:
                    argv.append("--ipv4")
                if rehome:
                    argv += ["--rehome", "--dead-planes-file", str(handle.dead_planes_file(src))]
                if start_delay > 0:
                    argv += ["--start-at-ns", str(handle.started_ns)]
                with open(run / f"send-{src}.err", "w") as err:
                    handle.senders[src] = self.host(src).popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
        except BaseException:
            handle.kill()
            raise
        return handle

    # --- status / CLI --------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """Processes and interfaces of the lab as they are now (no switch is contacted)."""
        st = self.state
        return {"lab_dir": st.lab_dir, "topology": st.topology, "program": st.program, "phase": st.phase,
                "error": st.error, "pid": st.pid, "pid_alive": _alive(st.pid), "timings": st.timings,
                "switches": {n: {**s, "alive": bool(s.get("pid")) and _alive(s["pid"])} for n, s in st.switches.items()},
                "hosts": {n: {"pid": h["pid"], "alive": _alive(h["pid"]),
                              "nics": [f"{x['intf']} {x['v6']} plane {x['plane']}" for x in h["nics"]]}
                          for n, h in st.hosts.items()},
                "intfs_present": sum(1 for i in st.intfs if _intf_exists(i)), "intfs": len(st.intfs),
                "faults": [f.describe() for f in active_faults(self.dir)]}

    def cli(self) -> None:
        """The Mininet CLI on this lab (only in the process running it)."""
        from mininet.cli import CLI

        if self.net is None:
            raise LabError("the Mininet CLI needs the process that ran 'lab up' (use 'lab up --cli')")
        CLI(self.net)


# --- cleanup --------------------------------------------------------------------------------

@dataclass
class CleanupReport:
    """What cleanup did, and anything of the lab's it found still there afterwards."""

    killed: list[int] = field(default_factory=list)
    deleted_intfs: list[str] = field(default_factory=list)
    leftover_pids: list[int] = field(default_factory=list)
    leftover_intfs: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.leftover_pids and not self.leftover_intfs


def marked_pids(lab_dir: str | Path) -> list[int]:
    """PIDs of every process whose environment carries SRV6_FABRIC_LAB=<lab_dir> (ours, not this one)."""
    mark = f"{ENV_MARK}={Path(lab_dir).resolve()}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if mark in env.split(b"\0") and _alive(int(entry.name)):
            out.append(int(entry.name))
    return sorted(out)


def cleanup(lab_dir: str | Path = DEFAULT_DIR, model: Topology | None = None, tag: str | None = None, *,
            signal_owner: bool = True, wait: float = 20.0) -> CleanupReport:
    """Remove every process and interface a lab in lab_dir made, also after a crash.

    With the state file: ask the process holding the lab to stop (SIGTERM) and wait for it, then
    kill what remains of the PIDs it recorded. Without it, or in addition: every process marked
    with SRV6_FABRIC_LAB=<lab_dir> (host shells, so their namespaces and veths go too; switches;
    commands in hosts), and the root-namespace interfaces of the topology's switch ports (from the
    state, or the lab's topology.yaml with the tag). Nothing else is touched. Logs stay."""
    from mininet_labs.bmv2proc import stop_process  # not mininet_labs.switch: cleaning up needs no Mininet

    lab_dir = Path(lab_dir).resolve()
    report = CleanupReport()
    clear_fault_remains(lab_dir)  # thaw frozen switches (SIGTERM waits on a stopped process), drop nft tables
    state_path = lab_dir / STATE_NAME
    state = LabState.read(state_path) if state_path.exists() else None
    if state is not None and signal_owner and state.pid != os.getpid() and _alive(state.pid) \
            and ENV_MARK.encode() in _environ(state.pid):
        os.kill(state.pid, signal.SIGTERM)
        end = time.monotonic() + wait
        while _alive(state.pid) and time.monotonic() < end:
            time.sleep(0.1)
        if _alive(state.pid):
            os.kill(state.pid, signal.SIGKILL)
        report.killed.append(state.pid)
    for pid in marked_pids(lab_dir):
        stop_process(pid, grace=2.0)
        report.killed.append(pid)
    intfs: list[str] = []
    if state is not None:
        intfs = state.intfs
    else:
        if model is None and (lab_dir / TOPOLOGY_NAME).exists():
            try:
                model = load(lab_dir / TOPOLOGY_NAME)
            except (OSError, ValueError) as e:  # not a topology of ours: its interfaces are not known
                raise LabError(f"cannot read the lab's topology {lab_dir / TOPOLOGY_NAME}: {e}") from None
        if model is not None:
            try:
                from mininet_labs.topo import all_intfs
            except ImportError:  # no Mininet (any more): no lab interfaces can exist to remove
                all_intfs = None
            intfs = [] if all_intfs is None else all_intfs(model, tag or "")
    for intf in intfs:
        if _intf_exists(intf):
            subprocess.run(["ip", "link", "del", intf], capture_output=True)
            report.deleted_intfs.append(intf)
    report.leftover_pids = marked_pids(lab_dir)
    report.leftover_intfs = [i for i in intfs if _intf_exists(i)]
    if report.clean:
        state_path.unlink(missing_ok=True)
    return report


# --- helpers --------------------------------------------------------------------------------

def _mark(lab_dir: Path) -> str | None:
    saved = os.environ.get(ENV_MARK)
    os.environ[ENV_MARK] = str(lab_dir)
    return saved


def _unmark(saved: str | None) -> None:
    if saved is None:
        os.environ.pop(ENV_MARK, None)
    else:
        os.environ[ENV_MARK] = saved


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def _intf_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def _with_repo_path(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with this repository first on PYTHONPATH, for `python3 -m mininet_labs...` in child processes."""
    repo = str(Path(__file__).resolve().parents[1])
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [repo, env.get("PYTHONPATH")]))}


def _natural(name: str) -> tuple[Any, ...]:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _tail(path: Path, chars: int = 600) -> str:
    try:
        return " | ".join(path.read_text(errors="replace")[-chars:].strip().splitlines()[-4:]) or "(no output)"
    except OSError:
        return "(no output)"


def _wait_files(paths: Sequence[Path], procs: Mapping[str, subprocess.Popen[Any]], timeout: float) -> None:
    end = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise LabError(f"receiver on {name} exited ({proc.returncode}) before listening")
        if time.monotonic() > end:
            raise LabError(f"receivers not listening after {timeout:.0f}s")
        time.sleep(0.02)


# --- the headless lab process ----------------------------------------------------------------

def serve(lab_dir: Path) -> int:
    """Run the lab configured in lab_dir until SIGTERM/SIGINT (what `fabricctl lab up` starts)."""
    config = json.loads((lab_dir / CONFIG_NAME).read_text())
    lab = Lab(load(lab_dir / TOPOLOGY_NAME), lab_dir, program=config["program"], tag=config["tag"],
              pcap=config["pcap"], log_level=config["log_level"], election_id=config["election_id"],
              timeout=config["timeout"], tls=config.get("tls", False))
    stop = {"now": False}

    def on_signal(signum: int, _frame: Any) -> None:
        stop["now"] = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        lab.up(install=config["install"])
    except KeyboardInterrupt:
        return 1
    except LabError as e:
        print(f"error: {e}", file=sys.stderr)
        lab.state.write(lab.state_path)  # phase failed, with the error, for 'lab up' to report
        return 1
    try:
        while not stop["now"]:
            signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        lab.down()
    return 0


def start_headless(model: Topology, lab_dir: str | Path = DEFAULT_DIR, *, program: str = "srv6_spray", tag: str = "",
                   pcap: bool = False, log_level: str = "warn", election_id: int = 1, timeout: float = 10.0,
                   install: bool = True, wait: float = 300.0, tls: bool = False) -> Lab:
    """Start a lab in a background process (it outlives this one) and wait until it is ready;
    the attached Lab, or LabError with the background process's error."""
    lab_dir = Path(lab_dir).resolve()
    why = prerequisites()
    if why:
        raise LabError(why)
    state_path = lab_dir / STATE_NAME
    if state_path.exists():
        old = LabState.read(state_path)
        if _alive(old.pid):
            raise LabError(f"a lab already runs in {lab_dir} (pid {old.pid}); 'fabricctl lab down --dir {lab_dir}'")
        cleanup(lab_dir)
    lab_dir.mkdir(parents=True, exist_ok=True)
    write_lab_file(lab_dir, TOPOLOGY_NAME, yaml.safe_dump(to_dict(model), sort_keys=False))
    write_lab_file(lab_dir, CONFIG_NAME, json.dumps({
        "program": program, "tag": tag, "pcap": pcap, "log_level": log_level, "election_id": election_id,
        "timeout": timeout, "install": install, "tls": tls}) + "\n")
    env = _with_repo_path({**os.environ, ENV_MARK: str(lab_dir)})
    with open(lab_dir / "lab.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mininet_labs.lab", "serve", str(lab_dir)], env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    end = time.monotonic() + wait
    while True:
        state = LabState.read(state_path) if state_path.exists() else None
        if state is not None and state.pid == proc.pid and state.phase == "ready":
            return Lab.attach(lab_dir)
        if proc.poll() is not None:
            error = state.error if state is not None and state.pid == proc.pid and state.error else _tail(lab_dir / "lab.log")
            cleanup(lab_dir)
            raise LabError(f"lab up failed: {error}")
        if time.monotonic() > end:
            cleanup(lab_dir)
            raise LabError(f"lab not ready after {wait:.0f}s (log: {lab_dir / 'lab.log'})")
        time.sleep(0.1)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        sys.exit(serve(Path(sys.argv[2])))
    print("usage: python3 -m mininet_labs.lab serve LAB_DIR  (use 'fabricctl lab up')", file=sys.stderr)
    sys.exit(2)
