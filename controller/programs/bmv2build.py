"""What a bmv2 build carries, read from its ELF files: whether its pcap ports are non-blocking
(patches/bmv2-bmi-nonblocking.patch), so a lost carrier on one port cannot stall the whole switch."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

FIX_SYMBOL = "pcap_setnonblock"  # the patch's one call: imported by whatever object holds bmv2's BMI
PCAP_USERS = ("pcap_next_ex", "pcap_activate")  # BMI's pcap calls: an object importing these holds BMI
AFFECTED = "libpcap >= 1.10"  # a capture no longer ends when its interface goes down: it waits in pcap_next_ex


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
    """The binary and every library it needs that its RUNPATH holds (transitively), with their imports.
    Libraries outside the RUNPATH (the system's libpcap, glibc) are not bmv2's own code: not read."""
    seen: set[Path] = set()
    todo = [binary.resolve()]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        imports, needed, dirs = _imports_and_deps(path)
        yield path, imports
        for name in needed:
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
