"""Telling bmv2 builds apart (the non-blocking pcap fix, the all-members-down fix, the port poll option,
the logging or throughput build) on ELF files gcc and g++ build here:
a "switch" binary whose BMI lives in a library of its RUNPATH, as in a bmv2 built with shared libs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from controller.programs.bmv2build import (
    divisions,
    libpcap_version,
    nonblocking_warning,
    pcap_nonblocking,
    traits,
    watch_ports_warning,
)
from tests.require import need

BMI_FIXED = """extern int pcap_next_ex(void*, void*, void*); extern int pcap_setnonblock(void*, int, char*);
int bmi(void) { return pcap_next_ex(0, 0, 0) + pcap_setnonblock(0, 1, 0); }
"""
BMI_STOCK = "extern int pcap_next_ex(void*, void*, void*);\nint bmi(void) { return pcap_next_ex(0, 0, 0); }\n"
NO_PCAP = "int bmi(void) { return 0; }\n"
MAIN = "int bmi(void);\nint main(void) { return bmi(); }\n"


def build(where: Path, bmi_source: str) -> Path:
    """bin/switch needing lib/libbmi.so, found through RUNPATH $ORIGIN/../lib."""
    gcc = shutil.which("gcc")
    need("gcc", gcc is not None, "gcc not found on PATH (builds the ELF files these tests read)")
    (where / "bin").mkdir(parents=True)
    (where / "lib").mkdir()
    (where / "bmi.c").write_text(bmi_source)
    (where / "main.c").write_text(MAIN)
    subprocess.run([gcc, "-shared", "-fPIC", "-o", where / "lib/libbmi.so", where / "bmi.c"], check=True)
    subprocess.run([gcc, "-o", where / "bin/switch", where / "main.c", f"-L{where / 'lib'}", "-lbmi",
                    "-Wl,-rpath,$ORIGIN/../lib", "-Wl,--enable-new-dtags", "-Wl,--allow-shlib-undefined"], check=True)
    return where / "bin/switch"


def test_a_build_whose_bmi_library_calls_pcap_setnonblock_is_fixed(tmp_path: Path):
    binary = build(tmp_path, BMI_FIXED)
    assert pcap_nonblocking(binary) is True
    assert nonblocking_warning(binary) is None


def test_a_stock_build_is_affected_and_lab_up_says_what_to_do(tmp_path: Path):
    binary = build(tmp_path, BMI_STOCK)
    assert pcap_nonblocking(binary) is False
    warning = nonblocking_warning(binary)
    assert warning is not None and warning.startswith(f"warning: {binary} is built without the non-blocking pcap fix")
    assert "patches/bmv2-bmi-nonblocking.patch" in warning and "\n" not in warning


def test_what_cannot_be_told_is_none(tmp_path: Path):
    assert pcap_nonblocking(build(tmp_path / "a", NO_PCAP)) is None  # no pcap use found
    (tmp_path / "text").write_text("#!/bin/sh\n")
    assert pcap_nonblocking(tmp_path / "text") is None  # not ELF
    assert pcap_nonblocking(tmp_path / "missing") is None
    assert pcap_nonblocking(None) is None
    assert libpcap_version(tmp_path / "missing") is None


def test_the_libpcap_version_is_read_from_the_library_in_the_runpath(tmp_path: Path):
    binary = build(tmp_path, BMI_STOCK)
    gcc = shutil.which("gcc")
    (tmp_path / "pcap.c").write_text('const char *pcap_lib_version(void) { return "libpcap version 1.10.3 (with TPACKET_V3)"; }\n')
    subprocess.run([gcc, "-shared", "-fPIC", "-o", tmp_path / "lib/libpcap.so.0.8", tmp_path / "pcap.c"], check=True)
    subprocess.run([gcc, "-o", binary, tmp_path / "main.c", f"-L{tmp_path / 'lib'}", "-Wl,--no-as-needed", "-lbmi",
                    "-l:libpcap.so.0.8", "-Wl,-rpath,$ORIGIN/../lib", "-Wl,--enable-new-dtags",
                    "-Wl,--allow-shlib-undefined"], check=True)
    assert libpcap_version(binary) == "1.10.3"
    assert "with libpcap 1.10.3:" in (nonblocking_warning(binary) or "")


# PI's group member choice (PI/src/group_selection.cpp), reduced: a stock build divides by the active
# members' count; with patches/bmv2-group-all-members-down.patch it chooses among all members when none is active.
GROUP_SELECTION = """#include <list>
#include <vector>
#include <cstddef>
namespace pibmv2 { struct GroupSelection { struct GroupInfo {
  std::list<unsigned> members; std::vector<unsigned> active;
  unsigned get_from_hash(unsigned h) const;
}; }; }
unsigned pibmv2::GroupSelection::GroupInfo::get_from_hash(unsigned h) const {
#ifdef FIXED
  if (active.size() == 0) { auto it = members.begin(); for (size_t i = h % members.size(); i; --i) ++it; return *it; }
#endif
  return active[h % active.size()];
}
"""
PORT_MONITOR = 'extern "C" const char *bm_port_monitor_env(void) { return "BM_PORT_MONITOR_MS"; }\n'
PACKET_LOG = 'extern "C" const char *bm_packet_log(void) { return "Processing packet received on port {}"; }\n'


def build_switch(where: Path, *, fixed: bool, poll: bool, logs: bool) -> Path:
    """bin/simple_switch_grpc needing lib/libbmpi.so (the PI target) through RUNPATH $ORIGIN/../lib."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found on PATH (builds the ELF files these tests read)")
    (where / "bin").mkdir(parents=True)
    (where / "lib").mkdir()
    source = where / "gs.cpp"
    source.write_text(GROUP_SELECTION + (PORT_MONITOR if poll else "") + (PACKET_LOG if logs else ""))
    subprocess.run([gxx, "-O2", "-shared", "-fPIC", *(["-DFIXED"] if fixed else []), "-o", where / "lib/libbmpi.so",
                    source], check=True)
    (where / "main.c").write_text("int main(void) { return 0; }\n")
    binary = where / "bin/simple_switch_grpc"
    subprocess.run([gxx, "-o", binary, "-x", "c", where / "main.c", "-x", "none", f"-L{where / 'lib'}",
                    "-Wl,--no-as-needed", "-lbmpi", "-Wl,-rpath,$ORIGIN/../lib", "-Wl,--enable-new-dtags"], check=True)
    return binary


def test_divisions_counts_64_bit_div_instructions():
    # the shared toolchain's get_from_hash: divq 0x30(%rdi) (all members) and div %rcx (the active ones)
    assert divisions(bytes.fromhex("31d2488b4f2848f77730488d42ff")) == 1
    assert divisions(bytes.fromhex("48f7773031d24883ec0848f7f14839d1")) == 2
    assert divisions(bytes.fromhex("f7f1")) == 0  # a 32-bit div: not size_t arithmetic
    assert divisions(bytes.fromhex("48f7d8")) == 0  # neg %rax: F7 /3


def test_a_build_with_the_all_members_down_fix_turns_watch_ports_on(tmp_path: Path):
    t = traits(build_switch(tmp_path, fixed=True, poll=True, logs=False))
    assert (t.all_members_down, t.port_poll_option, t.packet_logs, t.kind) == (True, True, False, "throughput")
    assert t.watch_ports_safe and watch_ports_warning(t.binary) is None
    assert t.describe() == (f"throughput build {t.binary}: non-blocking pcap unknown, all-members-down fix yes, "
                            "BM_PORT_MONITOR_MS yes")


def test_a_stock_build_keeps_watch_ports_off_with_one_line(tmp_path: Path):
    t = traits(build_switch(tmp_path, fixed=False, poll=False, logs=True))
    assert (t.all_members_down, t.port_poll_option, t.packet_logs, t.kind) == (False, False, True, "logging")
    assert not t.watch_ports_safe
    line = watch_ports_warning(t.binary)
    assert line == (f"watch ports off: {t.binary} is built without patches/bmv2-group-all-members-down.patch, so a "
                    "leaf that lost every uplink would die of SIGFPE at its next packet (docs/toolchain.md)")


def test_a_build_that_cannot_be_told_keeps_watch_ports_off(tmp_path: Path):
    (tmp_path / "text").write_text("#!/bin/sh\n")
    t = traits(tmp_path / "text")
    assert (t.all_members_down, t.port_poll_option, t.packet_logs, t.kind) == (None, None, None, "unknown")
    assert "is not known to carry patches/bmv2-group-all-members-down.patch" in (watch_ports_warning(t.binary) or "")
    assert traits(tmp_path / "missing").all_members_down is None


def test_the_toolchain_here_is_told_apart_build_by_build():
    from controller.programs.toolchain import find_binary

    logging = find_binary("simple_switch_grpc")
    fast = None if logging is None else Path(logging).parent.parent / "perf/bin/simple_switch_grpc"
    if fast is None or not fast.exists():
        pytest.skip("simple_switch_grpc and a perf/bin/simple_switch_grpc beside it not found ($P4_TOOLCHAIN_BIN)")
    slow_traits, fast_traits = traits(logging), traits(fast)
    assert (slow_traits.kind, fast_traits.kind) == ("logging", "throughput")
    # both built from the same sources and patches (the toolchain's VERSIONS)
    for t in (slow_traits, fast_traits):
        assert (t.nonblocking_pcap, t.all_members_down, t.port_poll_option) == (True, True, True)
