"""Link shaping: every link of a lab (leaf-spine and host-leaf, both directions) held to one rate by a tbf
qdisc on each sending end, so the links are the bottleneck and not the switches' or senders' CPUs.

    shape(lab, LinkRate(2.0))       # 2 Mbit/s on every link end; recorded in DIR/link-rate.json
    current(lab.dir)                # LinkRate(2.0, ...) or None
    unshape(lab)

The queue of each tbf (`limit`) is deep enough for every window the collective runner keeps in flight,
so a collision queues (as a lossless RoCE fabric's PFC would hold it) rather than drops. On the bmv2 lab
the switch ends live in the root namespace, on the kernel lab in each switch's namespace; the host ends
in the hosts'. This kernel has no netem: tbf is the only shaper used. The fault library's `slow` fault
replaces a link end's tbf, and undoing it leaves that end unshaped.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mininet_labs.labstate import LabError

RATE_NAME = "link-rate.json"
MAX_MBIT = 1000.0


@dataclass(frozen=True)
class LinkRate:
    """Rate (Mbit/s on the wire, Ethernet header included), bucket (bytes) and queue limit (bytes)."""

    mbit: float
    burst: int = 4096
    limit: int = 512 * 1024

    def __post_init__(self) -> None:
        if not 0 < self.mbit <= MAX_MBIT:
            raise LabError(f"a link rate must be above 0 and at most {MAX_MBIT:.0f} Mbit/s, not {self.mbit}")
        if self.burst < 1600 or self.limit < self.burst:
            raise LabError(f"tbf needs a burst of at least one frame (1600 bytes) and a limit above it, not "
                           f"burst {self.burst}, limit {self.limit}")

    @property
    def bytes_per_s(self) -> float:
        return self.mbit * 1e6 / 8

    def tc_args(self) -> list[str]:
        return ["tbf", "rate", f"{self.mbit * 1000:.0f}kbit", "burst", str(self.burst), "limit", str(self.limit)]


def _ends(lab: Any) -> list[tuple[list[str], str]]:
    """Every link end of the lab as (the argv prefix that runs a command in its namespace, interface)."""
    out: list[tuple[list[str], str]] = []
    kernel = getattr(lab, "dataplane", "bmv2") == "kernel"
    if kernel:
        from controller.southbound.kroutes import intf
        from mininet_labs.kernel import netns

        for s in lab.model.switches:
            for port in (*s.host_ports, *s.uplinks, *s.downlinks):
                if port in s.host_ports and s.host_ports.index(port) >= len(getattr(s, "host_names", ())):
                    continue  # a host port with no host: no veth
                out.append((netns.exec_argv(lab.netns_of(s.name), []), intf(port)))
    else:
        from mininet_labs.topo import all_intfs

        out += [([], i) for i in all_intfs(lab.model, lab.tag) if Path("/sys/class/net", i).exists()]
    for h in lab.hosts:
        host = lab.host(h)
        out += [(host.argv([]), n.intf) for n in host.nics]
    return out


def _tc(prefix: Sequence[str], *argv: str, check: bool = True) -> None:
    proc = subprocess.run([*prefix, "tc", *argv], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise LabError(f"tc {' '.join(argv)}: {(proc.stderr or proc.stdout).strip() or f'exit {proc.returncode}'}")


def shape(lab: Any, rate: LinkRate) -> int:
    """Put `rate` on every link end of the lab (replacing any root qdisc); the number of ends shaped."""
    ends = _ends(lab)
    try:
        for prefix, dev in ends:
            _tc(prefix, "qdisc", "replace", "dev", dev, "root", *rate.tc_args())
    except BaseException:
        unshape(lab, ends)
        raise
    Path(lab.dir, RATE_NAME).write_text(json.dumps(asdict(rate)) + "\n")
    return len(ends)


def unshape(lab: Any, ends: list[tuple[list[str], str]] | None = None) -> int:
    """Remove the root qdisc of every link end (back to the default); the number of ends touched."""
    ends = ends if ends is not None else _ends(lab)
    for prefix, dev in ends:
        _tc(prefix, "qdisc", "del", "dev", dev, "root", check=False)
    Path(lab.dir, RATE_NAME).unlink(missing_ok=True)
    return len(ends)


def current(lab_dir: str | Path) -> LinkRate | None:
    """The rate `shape` last put on the lab in lab_dir, or None."""
    path = Path(lab_dir, RATE_NAME)
    try:
        return LinkRate(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as e:
        raise LabError(f"{path} is not a link rate: {e}") from None


def fabric_link_bytes(lab: Any) -> dict[str, int]:
    """Bytes sent so far on every leaf-spine link, per direction ('p0-t0-0>p0-t1-1'), from the sending
    port's interface counters (a veth counts what the switch put on it)."""
    out: dict[str, int] = {}
    kernel = getattr(lab, "dataplane", "bmv2") == "kernel"
    for p in range(lab.model.planes):
        spines, leaves = lab.model.t1s(p), lab.model.t0s(p)
        ends = [(leaf, leaf.uplinks[j], spines[j]) for leaf in leaves for j in range(len(leaf.uplinks))]
        ends += [(spine, spine.downlinks[i], leaves[i]) for spine in spines for i in range(len(spine.downlinks))]
        by_switch: dict[str, list[tuple[int, str]]] = {}
        for sw, port, peer in ends:
            by_switch.setdefault(sw.name, []).append((port, peer.name))
        for name, ports in by_switch.items():
            sw = lab.model.switch(name)
            if kernel:
                from controller.southbound.kroutes import intf
                from mininet_labs.kernel import netns

                paths = [f"/sys/class/net/{intf(port)}/statistics/tx_bytes" for port, _ in ports]
                proc = subprocess.run(netns.exec_argv(lab.netns_of(name), ["cat", *paths]), capture_output=True,
                                      text=True, timeout=30)
                if proc.returncode != 0:
                    raise LabError(f"reading {name}'s counters: {proc.stderr.strip()}")
                values = [int(v) for v in proc.stdout.split()]
            else:
                from mininet_labs.topo import port_intf

                values = [int(Path("/sys/class/net", port_intf(sw, port, lab.tag), "statistics", "tx_bytes").read_text())
                          for port, _ in ports]
            for (_, peer), v in zip(ports, values):
                out[f"{name}>{peer}"] = v
    return out
