"""`fabricctl doctor`: check this machine for what the toolkit needs, one row per check with what to do about a miss."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import click

from controller.programs.toolchain import find_binary
from fabricctl.version import tool_version, versions

PCAP_FIX = "pcap_setnonblock"
LAB_GRPC_BASE, LAB_SWITCHES, THRIFT_OFFSET, WEB_PORT = 50001, 8, 10000, 9400  # `fabricctl lab up`'s and `web`'s defaults


@dataclass(frozen=True)
class Check:
    """One row: what was checked, whether it passed, what was found, what to do about a miss, and whether the
    main job (compile, run labs and the controller) needs it (a miss of an optional one does not fail doctor)."""

    name: str
    ok: bool
    found: str
    fix: str = ""
    required: bool = True


def _run(argv: list[str], timeout: float = 10.0) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, str(getattr(e, "strerror", None) or e)
    return p.returncode, p.stdout + p.stderr


def _sbin_which(name: str) -> str | None:
    """`which`, also in the sbin directories a user's PATH may lack."""
    return shutil.which(name) or shutil.which(name, path="/usr/local/sbin:/usr/sbin:/sbin")


def check_toolchain() -> list[Check]:
    out = []
    for name, fix in (("p4c", "build p4c (docs/guide/install.md, 'The P4 toolchain') or set P4C / P4_TOOLCHAIN_BIN"),
                      ("simple_switch_grpc", "build behavioral-model --with-pi (docs/guide/install.md, 'The P4 toolchain') or set "
                                             "SIMPLE_SWITCH_GRPC / P4_TOOLCHAIN_BIN")):
        path, text = tool_version(name)
        out.append(Check(f"{name}", path is not None, f"{text} ({path})" if path else text, "" if path else fix))
    return out


def check_bmv2_build() -> list[Check]:
    """What simple_switch_grpc was built with: Thrift and nanomsg (its --help), PI (linked libpi), and the
    non-blocking pcap fix (it or a library of its RUNPATH imports pcap_setnonblock)."""
    binary = find_binary("simple_switch_grpc")
    if binary is None:
        why = "simple_switch_grpc not found"
        return [Check("bmv2 with PI", False, why, "see simple_switch_grpc above"),
                Check("bmv2 with Thrift, nanomsg", False, why, "see simple_switch_grpc above", required=False),
                Check("bmv2 non-blocking pcap", False, why, "see simple_switch_grpc above", required=False),
                *(Check(name, False, why, "see simple_switch_grpc above", required=False) for name in LAB_BUILD_ROWS)]
    _, help_text = _run([binary, "--help"])
    thrift, nanomsg = "--thrift-port" in help_text, "--notifications-addr" in help_text
    needed, runpath = elf_dynamic(binary)
    pi = any(n.startswith("libpi") for n in needed)
    out = [Check("bmv2 with PI", pi and "--no-p4" in help_text,
                 "linked with " + ", ".join(n for n in needed if n.startswith("libpi")) if pi else
                 "no libpi* among its libraries" if shutil.which("readelf") else "cannot tell: readelf not found",
                 "" if pi else "configure behavioral-model --with-pi" if shutil.which("readelf")
                 else "apt-get install binutils"),
           Check("bmv2 with Thrift, nanomsg", thrift and nanomsg,
                 f"Thrift {'yes' if thrift else 'no'}, nanomsg {'yes' if nanomsg else 'no'}",
                 "" if thrift and nanomsg else "optional: the labs leave out --thrift-port/--notifications-addr; "
                 "build with Thrift for simple_switch_CLI (queue rate and depth in labs)", required=False)]
    users = pcap_fix_users(binary, runpath)
    if users is None:
        out.append(Check("bmv2 non-blocking pcap", False, "cannot tell: nm not found",
                         "apt-get install binutils", required=False))
    else:
        out.append(Check("bmv2 non-blocking pcap", bool(users),
                         f"{PCAP_FIX} imported by {', '.join(Path(u).name for u in users)}" if users else
                         f"neither the binary nor its RUNPATH libraries import {PCAP_FIX}",
                         "" if users else "optional: rebuild behavioral-model with the non-blocking pcap fix; without "
                         "it a port set down blocks the switch (the labs cut links by MTU instead)", required=False))
    return out + check_lab_build()


LAB_BUILD_ROWS = ("bmv2 the labs run", "bmv2 throughput build", "bmv2 all members down", "bmv2 port poll option")


def check_lab_build() -> list[Check]:
    """The build the labs and benches run (mininet_labs.bmv2proc.lab_binary: the throughput build where
    there is one, unless per-packet logs are asked for) and what it carries, read from its ELF files
    (controller.programs.bmv2build.traits)."""
    from controller.programs.bmv2build import traits
    from mininet_labs.bmv2proc import DEFAULT_PORT_POLL_MS, PACKET_LOG_LEVELS, lab_binary

    binary = lab_binary()
    logging = find_binary("simple_switch_grpc")
    if binary is None or logging is None:
        return [Check(name, False, "simple_switch_grpc not found", "see simple_switch_grpc above", required=False)
                for name in LAB_BUILD_ROWS]
    t = traits(binary)
    fast = t.kind == "throughput"
    return [
        Check("bmv2 the labs run", t.kind != "unknown", t.describe(),
              "" if t.kind != "unknown" else "cannot tell the build: pyelftools missing or not ELF", required=False),
        Check("bmv2 throughput build", fast,
              f"{binary}; the logging build {logging} runs with --log-level {'|'.join(PACKET_LOG_LEVELS)}" if fast
              else f"none: no perf/bin/simple_switch_grpc beside {logging}",
              "" if fast else "optional: bmv2 built with --disable-logging-macros and -O3 forwards 1.3-2.2x the "
              "packets (docs/performance.md)", required=False),
        Check("bmv2 all members down", t.all_members_down is True,
              "a group whose members are all down forwards: the labs turn watch ports on" if t.all_members_down
              else "a group whose members are all down divides by zero (SIGFPE): the labs keep watch ports off"
              if t.all_members_down is False else "cannot tell: the labs keep watch ports off",
              "" if t.all_members_down else "optional: rebuild bmv2 with patches/bmv2-group-all-members-down.patch "
              "(docs/toolchain.md)", required=False),
        Check("bmv2 port poll option", t.port_poll_option is True,
              f"BM_PORT_MONITOR_MS: the labs poll port status every {DEFAULT_PORT_POLL_MS} ms" if t.port_poll_option
              else "port status read every 200 ms, fixed: switch-local failover takes up to that long",
              "" if t.port_poll_option else "optional: rebuild bmv2 with patches/bmv2-port-monitor-interval.patch",
              required=False),
    ]


def elf_dynamic(path: str) -> tuple[list[str], list[str]]:
    """(NEEDED libraries, RUNPATH/RPATH directories with $ORIGIN resolved) of an ELF file, read with readelf."""
    code, text = _run(["readelf", "-d", path])
    if code != 0:
        return [], []
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", text)
    dirs: list[str] = []
    for m in re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]+)\]", text):
        for d in m.split(":"):
            dirs.append(os.path.normpath(d.replace("$ORIGIN", str(Path(path).resolve().parent))
                                         .replace("${ORIGIN}", str(Path(path).resolve().parent))))
    return needed, dirs


def imports(path: str, symbol: str) -> bool | None:
    """Whether an ELF file imports (uses undefined) a dynamic symbol; None when nm is missing or fails."""
    code, text = _run(["nm", "-D", "--undefined-only", path])
    if code != 0:
        return None
    return any(line.split()[-1].split("@")[0] == symbol for line in text.splitlines() if line.strip())


def pcap_fix_users(binary: str, runpath: Iterable[str]) -> list[str] | None:
    """The binary and RUNPATH libraries that import pcap_setnonblock (bmv2's fix calls it); None: cannot tell."""
    if shutil.which("nm") is None:
        return None
    first = imports(binary, PCAP_FIX)
    if first:
        return [binary]
    users = []
    for d in runpath:
        for lib in sorted(Path(d).glob("lib*.so*")) if Path(d).is_dir() else []:
            if lib.is_file() and not lib.is_symlink() and imports(str(lib), PCAP_FIX):
                users.append(str(lib))
    return users


def check_system(ports: Iterable[int]) -> list[Check]:
    out = []
    from mininet_labs._mininet import missing as mininet_missing

    why = mininet_missing()
    out.append(Check("Mininet", why is None, "importable, mnexec found" if why is None else why,
                     "" if why is None else "apt-get install mininet"))
    nft = _sbin_which("nft")
    code, text = _run([nft, "--version"]) if nft else (-1, "")
    out.append(Check("nftables", nft is not None and code == 0, text.strip() if nft and code == 0 else "nft not found",
                     "" if nft else "apt-get install nftables (the labs' link faults use it)"))
    root = os.geteuid() == 0
    out.append(Check("root", root, "uid 0" if root else f"uid {os.geteuid()}",
                     "" if root else "labs and the bmv2/Mininet tiers need root: run with sudo"))
    ip = _sbin_which("ip")
    code, text = _run([ip, "-6", "route", "help"]) if ip else (-1, "")
    kernel = Path("/proc/sys/net/ipv6/conf/all/seg6_enabled").exists()
    seg6 = ip is not None and "seg6" in text
    out.append(Check("ip with seg6", seg6 and kernel,
                     f"iproute2 seg6 {'yes' if seg6 else 'no'}, kernel SRv6 {'yes' if kernel else 'no'}",
                     "" if seg6 and kernel else "apt-get install iproute2; a kernel with CONFIG_IPV6_SEG6_LWTUNNEL"))
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    out.append(Check("chromium", bool(chrome and driver), f"{chrome or 'no chromium'}, {driver or 'no chromedriver'}",
                     "" if chrome and driver else "optional (the live view's browser tests): "
                     "apt-get install chromium chromium-driver", required=False))
    etcd = shutil.which("etcd")
    code, text = _run([etcd, "--version"]) if etcd else (-1, "")
    out.append(Check("etcd", etcd is not None and code == 0, text.strip().splitlines()[0] if etcd and text.strip()
                     else "etcd not found", "" if etcd else "optional: apt-get install etcd-server", required=False))
    busy = [p for p in ports if not port_free(p)]
    out.append(Check("ports free", not busy, "all free: " + _ranges(ports) if not busy else f"in use: {_ranges(busy)}",
                     "" if not busy else "stop what listens there (a lab already up? 'fabricctl lab down'), or give "
                     "'fabricctl lab up --grpc-base-port N' / 'fabricctl web --listen 127.0.0.1:PORT'"))
    return out


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _ranges(ports: Iterable[int]) -> str:
    ps = sorted(set(ports))
    out, i = [], 0
    while i < len(ps):
        j = i
        while j + 1 < len(ps) and ps[j + 1] == ps[j] + 1:
            j += 1
        out.append(str(ps[i]) if i == j else f"{ps[i]}-{ps[j]}")
        i = j + 1
    return ", ".join(out)


def default_ports() -> list[int]:
    """The default lab's P4Runtime and Thrift ports and the live view's port."""
    grpc = list(range(LAB_GRPC_BASE, LAB_GRPC_BASE + LAB_SWITCHES))
    return grpc + [p + THRIFT_OFFSET for p in grpc] + [WEB_PORT]


def checks(ports: Iterable[int] | None = None) -> list[Check]:
    return [*check_toolchain(), *check_bmv2_build(), *check_system(default_ports() if ports is None else ports)]


def table(rows: list[Check]) -> list[str]:
    cells = [("check", "status", "found", "what to do")] + [
        (c.name, "ok" if c.ok else ("MISSING" if c.required else "warn"), c.found, c.fix) for c in rows]
    w = [max(len(r[i]) for r in cells) for i in range(3)]
    return [f"{a:<{w[0]}}  {b:<{w[1]}}  {c:<{w[2]}}  {d}".rstrip() for a, b, c, d in cells]


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the table.")
@click.option("--port", "ports", type=click.IntRange(1, 65535), multiple=True, metavar="PORT",
              help="Check these TCP ports on 127.0.0.1 instead of the default lab's (50001-50008, 60001-60008) and 9400.")
def doctor(as_json: bool, ports: tuple[int, ...]) -> None:
    """Check this machine: the P4 toolchain and how bmv2 was built, Mininet, nftables, root, SRv6 in
    iproute2 and the kernel, chromium, etcd, free ports. One row per check, with what to do about a miss.

    Exit 0 when everything the main job needs (compile, run labs and the controller) is there, 1
    otherwise; optional checks (warn) never fail it.

    \b
    Examples:
      fabricctl doctor
      fabricctl doctor --json | jq '.checks[] | select(.ok | not)'
    """
    rows = checks(ports or None)
    ok = all(c.ok for c in rows if c.required)
    if as_json:
        click.echo(json.dumps({"ok": ok, "checks": [asdict(c) for c in rows], "versions": versions()}, indent=2))
    else:
        for line in table(rows):
            click.echo(line)
        missing = [c.name for c in rows if c.required and not c.ok]
        click.echo("ready" if ok else f"not ready: {', '.join(missing)} missing")
    raise click.exceptions.Exit(0 if ok else 1)
