"""Bmv2Nodes: a lab's switches as simple_switch_grpc processes under Mininet (mininet_labs.bmv2switch, bmv2proc),
hosts as Mininet hosts, switch ports as root-namespace veths named `<tag><switch>-eth<port>` (mininet_labs.topo).

Mininet's object lives in the process that ran `start`, so a lab of these nodes needs a holder process
(`holder`: mininet_labs.headless runs it in the background). Pipelines and plans go over P4Runtime (controller.southbound.p4runtime).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from controller import topofile
from controller.runtime import encoding
from controller.southbound import p4runtime
from controller.southbound.base import Outcome, Push
from controller.model.topology import Topology
from controller.programs.toolchain import Artifacts
from controller.plan.fabricplan import plan as make_plan
from controller.routes import Fabric
from controller.model.tlsconfig import TlsConfig
from mininet_labs.bmv2proc import ServerTls
from mininet_labs.labhost import LabHost, host_script
from mininet_labs.labstate import (CUT_MTU, ENV_MARK, LabError, LabState, MAX_LAB_SWITCHES, intf_exists, natural,
                                  prerequisites)
from mininet_labs.nodes import Port, Unsupported
from mininet_labs.pki import PkiError, make_pki
from mininet_labs.processes import alive, environ, mark, unmark
from mininet_labs.traffic import HostNic


class Bmv2Nodes:
    """The bmv2 data plane's nodes (options: pcaps per port, bmv2's log level, mutual TLS on P4Runtime)."""

    dataplane = "bmv2"
    removes = "interfaces"  # what remove() removes
    holder = True
    lacks: tuple[str, ...] = ()

    def __init__(self, *, pcap: bool = False, log_level: str = "warn", tls: bool = False) -> None:
        self.pcap, self.log_level, self.tls = pcap, log_level, tls
        self.net: Any = None  # Mininet, in the process that ran start()
        self._server_tls: ServerTls | None = None
        self._mtus: dict[str, int] = {}  # MTUs of cut ports, to mend them

    def options(self) -> dict[str, Any]:
        return {"pcap": self.pcap, "log_level": self.log_level, "tls": self.tls}

    # --- lifecycle ---------------------------------------------------------------------------------
    def why_not(self) -> str | None:
        return prerequisites()

    def size_problem(self, model: Topology) -> str | None:
        n = len(model.switches)
        if n > MAX_LAB_SWITCHES:
            return f"a lab of {n} switches: at most {MAX_LAB_SWITCHES} bmv2 switches run on one machine"
        return None

    def check(self, model: Topology, tag: str, program: str) -> None:
        from mininet_labs.topo import check

        problems = check(model, tag)
        if problems:
            raise LabError(f"the topology cannot run as a lab: {problems[0]}" +
                           (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""))

    def placed(self, model: Topology, lab_dir: Path, tag: str) -> Topology:
        return model

    def prepare(self, model: Topology, lab_dir: Path) -> Topology:
        """With `tls`, a fresh CA, switch and client certificate in DIR/tls: every switch starts with mutual TLS and
        the lab's topology names the client's files; without, plaintext (a topology's own tls: settings are for its
        real switches, not for the lab's)."""
        client = None
        if self.tls:
            try:
                pki = make_pki(lab_dir / "tls")
            except PkiError as e:
                raise LabError(str(e)) from None
            self._server_tls = ServerTls(pki.server_cert, pki.server_key, client_ca=pki.ca)
            client = TlsConfig(pki.ca, pki.client_cert, pki.client_key)
        return topofile.replace_tls(model, lambda s: client)

    def running(self, state: LabState) -> bool:
        return alive(state.pid) and state.pid != os.getpid()

    def start(self, model: Topology, lab_dir: Path, tag: str, state: LabState,
              save: Callable[[], None]) -> list[LabHost]:
        from mininet_labs.fabrictopo import FabricTopo  # imports Mininet (also Debian's)
        from mininet_labs.topo import all_intfs

        from mininet.link import Link
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import Host

        from mininet_labs import traffic as tr

        setLogLevel(os.environ.get("SRV6_LAB_MININET_LOG", "output"))  # "output": what the CLI prints, no chatter
        pcap_dir = lab_dir / "pcap" if self.pcap else None
        client_tls = model.switches[0].tls if model.switches else None
        topo = FabricTopo(model, tag=tag, lab_dir=lab_dir, pcap_dir=pcap_dir, log_level=self.log_level,
                          server_tls=self._server_tls, client_tls=client_tls)
        state.intfs = all_intfs(model, tag)
        self.net = Mininet(topo=topo, host=Host, link=Link, controller=None, autoSetMacs=False, build=False,
                           waitConnected=False)
        # Host shells and switches inherit the mark that cleanup finds them by; this process must not keep it.
        saved = mark(lab_dir)
        try:
            self.net.build()
        except BaseException:
            unmark(saved)
            raise
        state.hosts = {h.name: {"pid": h.pid, "nics": []} for h in self.net.hosts}
        state.switches = {s.name: {"pid": None, "shell_pid": s.pid, "device_id": s.device_id,
                                   "grpc": s.grpc_addr, "log": str(s.log_path)} for s in self.net.switches}
        save()
        try:
            self.net.start()
        finally:  # record the switch PIDs even when one did not come up, for cleanup
            unmark(saved)
            for s in self.net.switches:
                state.switches[s.name].update(pid=s.switch_pid, argv=s.command(), out=str(s.out_path))
            save()
        return [LabHost(n.name, n.pid, tr.host_nics(model, n.name), str(lab_dir), n) for n in self.net.hosts]

    def host_script(self, nics: Sequence[HostNic]) -> str:
        return host_script(nics)

    def stop(self) -> None:
        if self.net is not None:
            try:
                self.net.stop()
            except Exception:  # cleanup removes what Mininet did not
                pass
            self.net = None

    def remove(self, lab_dir: Path, state: LabState | None, model: Topology | None,
               tag: str) -> tuple[list[str], list[str]]:
        intfs: list[str] = []
        if state is not None:
            intfs = state.intfs
        elif model is not None:
            try:
                from mininet_labs.topo import all_intfs
            except ImportError:  # no Mininet (any more): no lab interfaces can exist to remove
                all_intfs = None  # type: ignore[assignment]
            intfs = [] if all_intfs is None else all_intfs(model, tag)
        removed = []
        for intf in intfs:
            if intf_exists(intf):
                subprocess.run(["ip", "link", "del", intf], capture_output=True)
                removed.append(intf)
        return removed, [i for i in intfs if intf_exists(i)]

    def host(self, name: str, doc: dict[str, Any], lab_dir: str) -> LabHost:
        from mininet_labs import traffic as tr

        return LabHost(name, doc["pid"], tuple(tr.HostNic(**n) for n in doc["nics"]), lab_dir)

    # --- the southbound ----------------------------------------------------------------------------
    def sync(self, model: Topology, fabric: Fabric, names: Sequence[str], *, program: str,
             p4info: Callable[[], Any], election_id: int, timeout: float, push: Push,
             dry_run: bool) -> dict[str, Outcome]:
        """The plan of `fabric` encoded for the program (encoding.encode), then p4runtime.sync on the named switches."""
        artifacts, info = Artifacts.of(program), p4info()
        encoded = encoding.encode(make_plan(fabric), names, info, str(artifacts.p4info))
        return p4runtime.sync(model, encoded, artifacts, info, election_id=election_id, timeout=timeout,
                        dry_run=dry_run, push=push)

    def routes(self, model: Topology, name: str) -> list[Any]:
        raise Unsupported(self.dataplane, "routes to read (its state is P4 tables: 'fabricctl status')")

    def counters(self, model: Topology, name: str) -> dict[str, dict[str, int]]:
        raise Unsupported(self.dataplane, "kernel link counters (its counters are P4 counters, read over P4Runtime)")

    def drops(self, model: Topology, name: str) -> dict[str, int]:
        raise Unsupported(self.dataplane, "nftables boundary (its drops are P4 counters, read over P4Runtime)")

    def carrier(self, model: Topology, tag: str) -> Any:
        """A PortWatch on the root-namespace switch ports."""
        from mininet_labs.carrier import PortWatch

        return PortWatch(model, tag)

    def require(self, what: str) -> None:
        if what == "Mininet CLI" and self.net is None:
            raise LabError("the Mininet CLI needs the process that ran 'lab up' (use 'lab up --cli')")

    # --- wiring ------------------------------------------------------------------------------------
    def link_ports(self, model: Topology, state: LabState, a: str, b: str) -> list[Port]:
        from mininet_labs.topo import LabTopologyError, link_ends

        try:
            return [Port(e.switch, e.intf) for e in link_ends(model, a, b, state.tag)]
        except LabTopologyError as e:
            raise LabError(str(e)) from None

    def switch_ports(self, model: Topology, state: LabState, name: str) -> list[Port]:
        from mininet_labs.topo import port_intf

        s = model.switch(name)
        return [Port(name, port_intf(s, p, state.tag)) for p in (*s.host_ports, *s.uplinks, *s.downlinks)]

    def cut(self, ports: Iterable[Port]) -> list[str]:
        """The ports' MTU to 68, so every frame the fabric carries is dropped at both ends (the sender's packet
        socket refuses it, the veth drops it on the way in). `ip link set down` on a port is no lab failure: bmv2
        (built without WITH_PCAP_FIX) then blocks its one receive thread in libpcap on that port and the whole
        switch stops forwarding until a frame arrives there. `mend` puts the MTU back."""
        done = []
        for p in ports:
            self._mtus.setdefault(p.intf, int(Path("/sys/class/net", p.intf, "mtu").read_text()))
            _ip_link(p.intf, "mtu", str(CUT_MTU))
            done.append(p.intf)
        return done

    def mend(self, ports: Iterable[Port]) -> list[str]:
        """A cut port's MTU back. An MTU below 1280 made the kernel drop the port's IPv6 state with its
        disable_ipv6=1, and the restore brings IPv6 back on: turn it off again, or the switch would take the port's
        own ND and MLD as traffic."""
        done = []
        for p in ports:
            _ip_link(p.intf, "mtu", str(self._mtus.pop(p.intf, 1500)))
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{p.intf}.disable_ipv6=1"], capture_output=True)
            done.append(p.intf)
        return done

    def set_link(self, ports: Iterable[Port], how: str) -> None:
        for p in ports:
            _ip_link(p.intf, how)

    # --- switch processes --------------------------------------------------------------------------
    def kill_switch(self, state: LabState, lab_dir: Path, name: str) -> int | None:
        """SIGKILL a switch's simple_switch_grpc (no goodbye on its streams); the state then records no PID."""
        sw = _switch_state(state, name)
        pid = sw.get("pid")
        if pid and alive(pid) and f"{ENV_MARK}={lab_dir}".encode() in environ(pid):
            os.kill(pid, signal.SIGKILL)
            end = time.monotonic() + 5
            while alive(pid) and time.monotonic() < end:
                time.sleep(0.01)
        else:
            pid = None
        sw["pid"] = None
        return pid

    def restart_switch(self, state: LabState, lab_dir: Path, name: str, timeout: float) -> int:
        """The switch started again with the command line the lab started it with (no pipeline, empty tables:
        the controller pushes both); its new PID, recorded in `state`."""
        from mininet_labs.bmv2proc import SwitchStartError, wait_grpc_ready

        sw = _switch_state(state, name)
        argv = sw.get("argv")
        if not argv:
            raise LabError(f"{name}: the lab did not record its command line (a lab started before restart-switch existed)")
        self.kill_switch(state, lab_dir, name)
        out = Path(sw.get("out") or lab_dir / f"{name}.out")
        with open(out, "ab") as f:
            f.write(("$ " + " ".join(argv) + "  # restart-switch\n").encode())
            f.flush()
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                    start_new_session=True, env={**os.environ, ENV_MARK: str(lab_dir)})
        sw["pid"] = proc.pid
        try:
            wait_grpc_ready(sw["grpc"], proc, time.monotonic() + timeout, name, (out, Path(sw["log"])))
        except SwitchStartError as e:
            raise LabError(str(e)) from None
        return proc.pid

    # --- status ------------------------------------------------------------------------------------
    def node_status(self, state: LabState) -> dict[str, Any]:
        return {"pid_alive": alive(state.pid),
                "switches": {n: {**s, "alive": bool(s.get("pid")) and alive(s["pid"])} for n, s in state.switches.items()},
                "hosts": {n: {"pid": h["pid"], "alive": alive(h["pid"]),
                              "nics": [f"{x['intf']} {x['v6']} plane {x['plane']}" for x in h["nics"]]}
                          for n, h in state.hosts.items()},
                "intfs_present": sum(1 for i in state.intfs if intf_exists(i)), "intfs": len(state.intfs)}

    def summary(self, doc: dict[str, Any]) -> str:
        return (f"pid {doc['pid']} {'alive' if doc['pid_alive'] else 'gone'}, "
                f"{doc['intfs_present']}/{doc['intfs']} switch ports present")

    @staticmethod
    def where(name: str, doc: dict[str, Any]) -> str:
        """How `lab status` names a node: its PID (and a switch's gRPC address and device id)."""
        return f"pid {doc.get('pid')}" + (f", {doc['grpc']} device {doc['device_id']}" if "grpc" in doc else "")


def _switch_state(state: LabState, name: str) -> dict[str, Any]:
    if name not in state.switches:
        raise LabError(f"unknown switch '{name}' (switches: {', '.join(sorted(state.switches, key=natural))})")
    return state.switches[name]


def _ip_link(intf: str, *args: str) -> None:
    proc = subprocess.run(["ip", "link", "set", intf, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise LabError(f"ip link set {intf} {' '.join(args)}: {proc.stderr.strip()}")

