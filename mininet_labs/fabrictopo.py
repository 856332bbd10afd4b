"""FabricTopo: the Mininet Topo of a multi-plane Clos (see mininet_labs.topo); importing this loads Mininet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.model.topology import Topology
from mininet_labs._mininet import load
from mininet_labs.topo import LabTopologyError, check, grpc_port, port_intf, wires
from mininet_labs.frames import host_intf

load()
from mininet.topo import Topo  # noqa: E402

from mininet_labs.bmv2switch import Bmv2Switch  # noqa: E402


class FabricTopo(Topo):
    """Mininet Topo of a Topology. Options: tag, lab_dir, pcap_dir, log_level (passed to every switch)."""

    def build(self, model: Topology, *, tag: str = "", lab_dir: str | Path = ".", pcap_dir: str | Path | None = None,
              log_level: str = "warn", **switch_opts: Any) -> None:  # type: ignore[override]
        problems = check(model, tag)
        if problems:
            raise LabTopologyError("\n".join(problems))
        self.model = model
        self.tag = tag
        for s in model.switches:
            self.addSwitch(s.name, cls=Bmv2Switch, device_id=s.device_id, grpc_port=grpc_port(s),
                           lab_dir=str(lab_dir), pcap_dir=None if pcap_dir is None else str(pcap_dir),
                           log_level=log_level, **switch_opts)
        for host in model.hosts:
            self.addHost(host, ip=None)  # addresses come from the SID plan, per plane (lab.configure_hosts)
        for w in wires(model):
            leaf = model.switch(w.a)
            if w.host is not None:
                self.addLink(w.host, leaf.name, port1=w.plane, port2=w.a_port, intfName1=host_intf(w.host, w.plane),
                             intfName2=port_intf(leaf, w.a_port, tag), addr1=model.host_mac(leaf, w.host_slot))
            else:
                self.addLink(leaf.name, w.b, port1=w.a_port, port2=w.b_port, intfName1=port_intf(leaf, w.a_port, tag),
                             intfName2=port_intf(model.switch(w.b), w.b_port, tag))
