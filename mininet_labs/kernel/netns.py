"""Named network namespaces and the veths between them (pyroute2), and per-namespace setup commands (sysctl, ip -batch).

A namespace is named `sf-<lab name>-<node>` (a switch or host name), so two labs with different
names never clash and nothing that is not the lab's carries the prefix. Interfaces live only inside
the namespaces: deleting a namespace deletes its veths (and their peers), so `remove` leaves nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyroute2 import IPRoute, netns

from mininet_labs.labstate import NETNS_PREFIX

PREFIX = NETNS_PREFIX
NETNS_DIR = Path("/run/netns")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,24}$")


class NetnsError(RuntimeError):
    """A namespace or veth could not be made or configured (one line)."""


def check_lab_name(name: str) -> str:
    if not _NAME.match(name):
        raise NetnsError(f"lab name {name!r}: 1-24 letters, digits, '.', '_' or '-'")
    return name


def ns_name(lab: str, node: str) -> str:
    return f"{PREFIX}{lab}-{node}"


def existing(prefix: str) -> list[str]:
    """Names of the namespaces that start with `prefix`."""
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


def create(names: Iterable[str]) -> None:
    for name in names:
        try:
            netns.create(name)
        except OSError as e:
            raise NetnsError(f"cannot create namespace {name}: {e.strerror or e}") from None


def remove(names: Iterable[str]) -> list[str]:
    """Delete the namespaces that exist; the names deleted."""
    done = []
    for name in names:
        if (NETNS_DIR / name).exists():
            try:
                netns.remove(name)
            except OSError as e:
                raise NetnsError(f"cannot delete namespace {name}: {e.strerror or e}") from None
            done.append(name)
    return done


@dataclass(frozen=True)
class Veth:
    """A veth pair: interface `a` in namespace `ns_a`, its peer `b` in `ns_b`."""

    ns_a: str
    a: str
    ns_b: str
    b: str


def make_veths(veths: Sequence[Veth]) -> None:
    """Create every pair, each end directly in its namespace (nothing passes through the root namespace)."""
    by_ns: dict[str, list[Veth]] = {}
    for v in veths:
        by_ns.setdefault(v.ns_a, []).append(v)
    for ns, pairs in by_ns.items():
        with IPRoute(netns=ns, flags=0) as ipr:
            for v in pairs:
                try:
                    ipr.link("add", ifname=v.a, kind="veth", peer={"ifname": v.b, "net_ns_fd": v.ns_b})
                except Exception as e:  # NetlinkError, OSError
                    raise NetnsError(f"cannot create veth {v.ns_a}:{v.a} -- {v.ns_b}:{v.b}: {e}") from None


def run_scripts(scripts: Mapping[str, tuple[Sequence[str], str]], timeout: float = 60.0,
                nft: Mapping[str, str] | None = None) -> None:
    """Per namespace, a sysctl argument list and an `ip -batch` text (then an `nft -f` script where `nft` has one),
    run in parallel; NetnsError naming the first namespace whose commands failed."""
    procs = []
    with tempfile.TemporaryDirectory(prefix="sf-kernel-lab-") as tmp:
        for ns, (sysctls, batch) in scripts.items():
            path = Path(tmp) / f"{ns}.ip"
            path.write_text(batch)
            cmd = (f"sysctl -qw {' '.join(sysctls)} && " if sysctls else "") + f"ip -batch {path}"
            if nft and ns in nft:
                rules = Path(tmp) / f"{ns}.nft"
                rules.write_text(nft[ns])
                cmd += f" && nft -f {rules}"
            procs.append((ns, subprocess.Popen(["ip", "netns", "exec", ns, "sh", "-ec", cmd], stdout=subprocess.PIPE,
                                               stderr=subprocess.STDOUT, text=True)))
        for ns, proc in procs:
            out, _ = proc.communicate(timeout=timeout)
            if proc.returncode != 0:
                raise NetnsError(f"configuring {ns} failed: {' '.join(out.split())[-400:]}")


def exec_argv(ns: str, argv: Sequence[str]) -> list[str]:
    """argv run inside a namespace."""
    return ["ip", "netns", "exec", ns, *argv]
