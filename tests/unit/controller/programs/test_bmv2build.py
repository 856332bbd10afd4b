"""Telling a bmv2 build with the non-blocking pcap fix from one without, on ELF files gcc builds here:
a "switch" binary whose BMI lives in a library of its RUNPATH, as in a bmv2 built with shared libs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from controller.programs.bmv2build import libpcap_version, nonblocking_warning, pcap_nonblocking
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
