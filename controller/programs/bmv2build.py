"""What a bmv2 build carries, read from its ELF files (no run needed): whether its pcap ports are
non-blocking (patches/bmv2-bmi-nonblocking.patch), so a lost carrier on one port cannot stall the whole
switch; whether a selector group whose members' watch ports are all down still forwards
(patches/bmv2-group-all-members-down.patch); whether the port poll is an option
(patches/bmv2-port-monitor-interval.patch); and whether it logs per packet (the logging build) or was
built for throughput (--disable-logging-macros). `traits(binary)` reads them all; `Bmv2Traits.describe()`
names the build in one line for `fabricctl doctor` and `lab up`."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

FIX_SYMBOL = "pcap_setnonblock"  # the patch's one call: imported by whatever object holds bmv2's BMI
PCAP_USERS = ("pcap_next_ex", "pcap_activate")  # BMI's pcap calls: an object importing these holds BMI
AFFECTED = "libpcap >= 1.10"  # where a capture does not end when its interface goes down: it waits in pcap_next_ex
OWN_LIBRARIES = ("libbm", "libsimpleswitch")  # bmv2's own shared libraries (BMI, bm_sim, the PI target)


def _imports_and_deps(path: Path) -> tuple[set[str], list[str], list[Path]]:
    """(undefined dynamic symbols, DT_NEEDED names, RUNPATH/RPATH directories with $ORIGIN expanded)."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    imports: set[str] = set()
    needed: list[str] = []
    dirs: list[Path] = []
    with open(path, "rb") as f:
        elf = ELFFile(f)
        dynsym = elf.get_section_by_name(".dynsym")
        if isinstance(dynsym, SymbolTableSection):
            imports = {s.name for s in dynsym.iter_symbols() if s.name and s["st_shndx"] == "SHN_UNDEF"}
        for section in elf.iter_sections():
            if not isinstance(section, DynamicSection):
                continue
            for tag in section.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED":
                    needed.append(tag.needed)  # type: ignore[attr-defined]  # elftools sets it on DT_NEEDED tags only
                elif tag.entry.d_tag in ("DT_RUNPATH", "DT_RPATH"):
                    value = tag.runpath if tag.entry.d_tag == "DT_RUNPATH" else tag.rpath  # type: ignore[attr-defined]  # set per tag kind
                    for d in value.split(":"):
                        if d:
                            dirs.append(Path(d.replace("$ORIGIN", str(path.parent)).replace("${ORIGIN}", str(path.parent))))
    return imports, needed, dirs


def _objects(binary: Path) -> Iterator[tuple[Path, set[str]]]:
    """The binary and every bmv2 library it needs that its RUNPATH holds (transitively: libbm*,
    libsimpleswitch*), with their imports. Other libraries (gRPC, protobuf, the system's libpcap,
    glibc) are not bmv2's own code: not read (reading their symbols would take seconds)."""
    seen: set[Path] = set()
    top = binary.resolve()
    todo = [top]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        imports, needed, dirs = _imports_and_deps(path)
        yield path, imports
        for name in needed:
            if not name.startswith(OWN_LIBRARIES):
                continue
            for d in dirs:
                candidate = d / name
                if candidate.exists():
                    todo.append(candidate.resolve())
                    break


def pcap_nonblocking(binary: str | os.PathLike[str] | None) -> bool | None:
    """Whether a bmv2 build (simple_switch_grpc, or any bmv2 target) makes its pcap handles
    non-blocking: True when the object holding its pcap ports (the binary, or a library in its RUNPATH)
    imports pcap_setnonblock; False when it uses pcap without it (affected with libpcap >= 1.10: a
    lost carrier on one port stalls every port); None when it cannot be told (no binary, not ELF,
    pyelftools missing, or no pcap use found)."""
    if binary is None:
        return None
    try:
        objects = list(_objects(Path(binary)))
    except ImportError:
        return None
    except Exception:  # not readable, not ELF, a truncated file: elftools raises its own errors
        return None
    return _nonblocking(objects)


def _nonblocking(objects: list[tuple[Path, set[str]]]) -> bool | None:
    if any(FIX_SYMBOL in imports for _, imports in objects):
        return True
    if any(any(s in imports for s in PCAP_USERS) for _, imports in objects):
        return False
    return None


def libpcap_version(binary: str | os.PathLike[str] | None) -> str | None:
    """The version of the libpcap the build loads ('1.10.3'), as the library names itself
    (pcap_lib_version's text), found in its RUNPATH or the system's usual directories; None when not found."""
    if binary is None:
        return None
    try:
        _, needed, dirs = _imports_and_deps(Path(binary).resolve())
    except Exception:
        return None
    name = next((n for n in needed if n.startswith("libpcap.so")), None)
    if name is None:
        return None
    for d in [*dirs, Path("/lib/x86_64-linux-gnu"), Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib64"),
              Path("/usr/lib"), Path("/usr/local/lib")]:
        p = d / name
        if p.exists():
            m = re.search(rb"libpcap version (\d+(?:\.\d+)+)", p.read_bytes())
            return m.group(1).decode() if m else None
    return None


def nonblocking_warning(binary: str | os.PathLike[str] | None) -> str | None:
    """One line for `lab up` and `fabricctl doctor` when the build is affected; None when it is not
    (or it cannot be told)."""
    if pcap_nonblocking(binary) is not False:
        return None
    version = libpcap_version(binary)
    with_pcap = f" with libpcap {version}" if version else ""
    return (f"warning: {binary} is built without the non-blocking pcap fix{with_pcap}: a port that loses carrier "
            "stalls every port of that switch until a frame arrives on it again; rebuild bmv2 with "
            "patches/bmv2-bmi-nonblocking.patch (docs/toolchain.md)")


# pibmv2::GroupSelection::GroupInfo::get_from_hash(unsigned int) const (PI/src/group_selection.cpp): picks a
# group member from a hash, `h % active_count`; the all-members-down fix adds `h % members.size()` when no
# member is active. One 64-bit division in a stock build, two with the fix.
GET_FROM_HASH = "_ZNK6pibmv214GroupSelection9GroupInfo13get_from_hashEj"
PORT_POLL_VARIABLE = b"BM_PORT_MONITOR_MS"  # read by the port monitor of a build with the poll option
PACKET_LOG_TEXT = b"Processing packet received on port"  # simple_switch's first per-packet log line


def divisions(code: bytes) -> int:
    """The 64-bit unsigned/signed divisions (REX.W F7 /6 or /7) in x86-64 machine code; a byte scan, enough
    for a function of a few dozen instructions where the pattern appears only as the instruction."""
    count = 0
    for i in range(len(code) - 2):
        if code[i] in (0x48, 0x49, 0x4C, 0x4D) and code[i + 1] == 0xF7 and (code[i + 2] >> 3) & 7 in (6, 7):
            count += 1
    return count


def _function_code(path: Path, symbol: str) -> bytes | None:
    """The machine code of a function an ELF file defines (by its dynamic or static symbol); None if absent."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    with open(path, "rb") as f:
        elf = ELFFile(f)
        for table in (".dynsym", ".symtab"):
            section = elf.get_section_by_name(table)
            if not isinstance(section, SymbolTableSection):
                continue
            for sym in section.get_symbol_by_name(symbol) or []:
                if sym["st_shndx"] == "SHN_UNDEF" or not sym["st_size"]:
                    continue
                addr, size = sym["st_value"], sym["st_size"]
                for sec in elf.iter_sections():
                    start = sec["sh_addr"]
                    if sec["sh_type"] == "SHT_PROGBITS" and start <= addr < start + sec["sh_size"]:
                        f.seek(sec["sh_offset"] + addr - start)
                        return f.read(size)
    return None


@dataclass(frozen=True)
class Bmv2Traits:
    """What one simple_switch_grpc carries; None: cannot be told (pyelftools missing, not ELF, not found)."""

    binary: str
    nonblocking_pcap: bool | None
    all_members_down: bool | None  # a group whose members' watch ports are all down forwards instead of SIGFPE
    port_poll_option: bool | None  # BM_PORT_MONITOR_MS sets the port status poll
    packet_logs: bool | None  # per-packet log lines at --log-level debug|trace (the logging build)

    @property
    def kind(self) -> str:
        """'throughput' (no per-packet logging compiled in), 'logging', or 'unknown'."""
        return {True: "logging", False: "throughput", None: "unknown"}[self.packet_logs]

    @property
    def watch_ports_safe(self) -> bool:
        """Whether the labs may turn watch ports on: only where a group with every member down is known to forward."""
        return self.all_members_down is True

    def watch_ports_line(self) -> str | None:
        """Why the labs keep watch ports off on this build, in one line; None where they turn them on."""
        if self.watch_ports_safe:
            return None
        how = "is built without" if self.all_members_down is False else "is not known to carry"
        return (f"watch ports off: {self.binary} {how} patches/bmv2-group-all-members-down.patch, so a leaf that "
                "lost every uplink would die of SIGFPE at its next packet (docs/toolchain.md)")

    def describe(self) -> str:
        """One line: which build, and each fix it carries (yes/no/unknown)."""
        def yn(v: bool | None) -> str:
            return {True: "yes", False: "no", None: "unknown"}[v]
        return (f"{self.kind} build {self.binary}: non-blocking pcap {yn(self.nonblocking_pcap)}, "
                f"all-members-down fix {yn(self.all_members_down)}, BM_PORT_MONITOR_MS {yn(self.port_poll_option)}")

    def as_dict(self) -> dict[str, object]:
        """For a bench's JSON and `lab status --json`."""
        return {"binary": self.binary, "build": self.kind, "nonblocking_pcap": self.nonblocking_pcap,
                "all_members_down_fix": self.all_members_down, "port_poll_option": self.port_poll_option}


_TRAITS: dict[tuple[str, float], Bmv2Traits] = {}


def traits(binary: str | os.PathLike[str]) -> Bmv2Traits:
    """Read a build's traits once per path and mtime."""
    path = Path(binary)
    try:
        key = (str(path.resolve()), path.stat().st_mtime)
    except OSError:
        return Bmv2Traits(str(binary), None, None, None, None)
    if key not in _TRAITS:
        _TRAITS[key] = _read_traits(path)
    return _TRAITS[key]


def _read_traits(path: Path) -> Bmv2Traits:
    try:
        read = list(_objects(path))
    except Exception:  # ImportError (pyelftools), not ELF, unreadable: elftools raises its own errors
        return Bmv2Traits(str(path), None, None, None, None)
    nonblocking = _nonblocking(read)
    objects = [p for p, _ in read]
    blobs = [p.read_bytes() for p in objects]
    hashes = []
    for p in objects:
        try:
            code = _function_code(p, GET_FROM_HASH)
        except Exception:
            code = None
        if code is not None:
            hashes.append(divisions(code))
    all_down = None if not hashes or min(hashes) == 0 else min(hashes) >= 2
    poll = any(PORT_POLL_VARIABLE in b for b in blobs) if blobs else None
    logs = any(PACKET_LOG_TEXT in b for b in blobs) if blobs else None
    return Bmv2Traits(str(path), nonblocking, all_down, poll, logs)


def watch_ports_warning(binary: str | os.PathLike[str] | None) -> str | None:
    """One line for `lab up` when a build is not known to survive a group whose members are all down (the
    labs then keep watch ports off); None when it is."""
    return None if binary is None else traits(binary).watch_ports_line()
