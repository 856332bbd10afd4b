"""A lab's wiring: links and host NICs set down and up (carrier), and cuts that drop every frame (MTU)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path


from mininet_labs.labstate import CUT_MTU, LabError


class WiringMixin:
    """A lab's wiring: links and host NICs set down and up (carrier), and cuts that drop every frame (MTU)."""

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
