"""The SR-domain boundary at a kernel leaf's host ports, as nftables rules counted per drop reason: what srv6_spray's
host_policy does at a P4 leaf (RFC 8754 5.1, RFC 8986 8; docs/pipeline.md, docs/kernel.md)."""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from controller.model.sids import SidPlan

TABLE = "srv6_fabric_boundary"  # one per leaf namespace (family inet)
# the P4 program's drop reasons of the same name (p4/include/defines.p4), as nftables counter names
REASONS = ("host_source", "sr_boundary", "host_sr_steering")


@dataclass(frozen=True)
class HostPort:
    """A leaf port facing a host: its interface in the leaf's namespace and the host's address on it."""

    intf: str
    host_addr: str


def ruleset(ports: Sequence[HostPort], sids: SidPlan, *, first_usids: Sequence[int] = ()) -> str:
    """The nft script for one leaf: from each host port, IPv6 only from the host's own address (link-local too:
    neighbour discovery), and nothing for the SR domain unless endpoint mode opens it.

    Without `first_usids` (the plan's default): a destination in the uSID block, any Routing header, or an inner
    IPv6/IPv4 header is SR_BOUNDARY. With them (endpoint mode: hosts write their own carriers): a destination in
    the block passes only with its first uSID among them (the plane's spines and the leaf's own uN), a Routing
    header only of type 4 (SRH); anything else for the block is HOST_SR_STEERING. Unlike the P4 leaf, the
    SRH's segments are not checked to lie in the block (nftables reads no segment list)."""
    block = f"{ipaddress.IPv6Address(sids.block_prefix)}/32"
    lines = [f"table inet {TABLE} {{"]
    lines += [f"  counter {r} {{ }}" for r in REASONS]
    lines += ["  chain host_ports {", "    type filter hook prerouting priority raw; policy accept;"]
    for p in ports:
        at = f'iifname "{p.intf}"'
        lines.append(f"    {at} meta nfproto ipv6 ip6 saddr != {{ {p.host_addr}, fe80::/10 }} counter name host_source drop")
        if first_usids:
            allowed = ", ".join(f"{ipaddress.IPv6Address(sids.un_prefix(u))}/48" for u in first_usids)
            lines.append(f"    {at} ip6 daddr {block} ip6 daddr != {{ {allowed} }} counter name host_sr_steering drop")
            lines.append(f"    {at} exthdr rt exists rt type != 4 counter name host_sr_steering drop")
            lines.append(f"    {at} exthdr rt exists ip6 daddr != {block} counter name host_sr_steering drop")
        else:
            lines.append(f"    {at} ip6 daddr {block} counter name sr_boundary drop")
            lines.append(f"    {at} exthdr rt exists counter name sr_boundary drop")
            lines.append(f"    {at} meta l4proto {{ ipv6, ipip }} counter name sr_boundary drop")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def drops(exec_argv: Sequence[str]) -> dict[str, int]:
    """Packets each boundary counter dropped, read from the leaf (`exec_argv`: how to run a command in its
    namespace); {} where the table is absent (not a leaf, or a lab without the boundary)."""
    proc = subprocess.run([*exec_argv, "nft", "-j", "list", "counters", "table", "inet", TABLE],
                          capture_output=True, text=True, timeout=10)
    if proc.returncode != 0:
        return {}
    out = {}
    for item in json.loads(proc.stdout).get("nftables", []):
        counter = item.get("counter")
        if counter and counter.get("table") == TABLE:
            out[counter["name"]] = int(counter["packets"])
    return out
