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

import os
import signal
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from controller import ops
from controller.runtime.p4info import P4Info
from controller.routes import Options
from controller.runtime.tls import TlsConfig
from controller.model.topology import Topology, load, to_dict
from mininet_labs.faults import active as active_faults
from mininet_labs import traffic as tr
from mininet_labs.bmv2proc import ServerTls
from mininet_labs.pki import PkiError, make_pki
from mininet_labs.cleanup import CleanupReport, intf_exists, natural, cleanup
from mininet_labs.labfailover import FailoverMixin
from mininet_labs.labhost import LabHost, host_script
from mininet_labs.labstate import DEFAULT_DIR, ENV_MARK, LabError, LabState, STATE_NAME, TOPOLOGY_NAME, prerequisites, write_lab_file
from mininet_labs.labtraffic import TrafficMixin
from mininet_labs.labwiring import WiringMixin
from mininet_labs.processes import alive, environ, mark, unmark
from mininet_labs.cleanup import marked_pids  # noqa: F401  (re-exported: defined here before)
from mininet_labs.labfailover import FailoverResult  # noqa: F401  (re-exported: defined here before)
from mininet_labs.labstate import CONFIG_NAME, CUT_MTU, FORMAT, MAX_LAB_SWITCHES, default_topology, size_problem  # noqa: F401  (re-exported: defined here before)
from mininet_labs.trafficrun import PairPlane, TrafficReport, TrafficRun, wait_senders_receivers  # noqa: F401  (re-exported: defined here before)


class Lab(FailoverMixin, WiringMixin, TrafficMixin):
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
            if alive(old.pid) and old.pid != os.getpid():
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
        from mininet_labs.fabrictopo import FabricTopo  # imports Mininet (also Debian's)
        from mininet_labs.topo import all_intfs

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
        saved = mark(self.dir)
        try:
            self.net.build()
        except BaseException:
            unmark(saved)
            raise
        self.state.hosts = {h.name: {"pid": h.pid, "nics": []} for h in self.net.hosts}
        self.state.switches = {s.name: {"pid": None, "shell_pid": s.pid, "device_id": s.device_id,
                                        "grpc": s.grpc_addr, "log": str(s.log_path)} for s in self.net.switches}
        self.state.write(self.state_path)
        try:
            self.net.start()
        finally:  # record the switch PIDs even when one did not come up, for cleanup
            unmark(saved)
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

    @property
    def hosts(self) -> list[str]:
        return sorted(self.model.hosts, key=natural)

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

    def _switch_state(self, name: str) -> dict[str, Any]:
        if name not in self.state.switches:
            raise LabError(f"unknown switch '{name}' (switches: {', '.join(sorted(self.state.switches, key=natural))})")
        return self.state.switches[name]

    def kill_switch(self, name: str) -> int | None:
        """SIGKILL a switch's simple_switch_grpc (a crash: no goodbye on its streams); the lab state
        then records no PID for it. The PID killed, or None when it was not running."""
        sw = self._switch_state(name)
        pid = sw.get("pid")
        if pid and alive(pid) and f"{ENV_MARK}={self.dir}".encode() in environ(pid):
            os.kill(pid, signal.SIGKILL)
            end = time.monotonic() + 5
            while alive(pid) and time.monotonic() < end:
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

    def status(self) -> dict[str, Any]:
        """Processes and interfaces of the lab as they are now (no switch is contacted)."""
        st = self.state
        return {"lab_dir": st.lab_dir, "topology": st.topology, "program": st.program, "phase": st.phase,
                "error": st.error, "pid": st.pid, "pid_alive": alive(st.pid), "timings": st.timings,
                "switches": {n: {**s, "alive": bool(s.get("pid")) and alive(s["pid"])} for n, s in st.switches.items()},
                "hosts": {n: {"pid": h["pid"], "alive": alive(h["pid"]),
                              "nics": [f"{x['intf']} {x['v6']} plane {x['plane']}" for x in h["nics"]]}
                          for n, h in st.hosts.items()},
                "intfs_present": sum(1 for i in st.intfs if intf_exists(i)), "intfs": len(st.intfs),
                "faults": [f.describe() for f in active_faults(self.dir)]}

    def cli(self) -> None:
        """The Mininet CLI on this lab (only in the process running it)."""
        from mininet.cli import CLI

        if self.net is None:
            raise LabError("the Mininet CLI needs the process that ran 'lab up' (use 'lab up --cli')")
        CLI(self.net)
