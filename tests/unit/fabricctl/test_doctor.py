"""`fabricctl --version` and `fabricctl doctor`: what they name, and what a miss says and exits with."""

from __future__ import annotations

import json
import shutil
import socket
from importlib import metadata

import pytest
from click.testing import CliRunner

from fabricctl.main import cli
from controller.programs.toolchain import find_binary
from fabricctl import doctor as dr
from tests.paths import REPO
from tests.require import need


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, list(args), prog_name="fabricctl", env=env)


def test_version_names_the_package_protobuf_grpcio_and_p4runtime():
    from google.protobuf.internal import api_implementation

    r = run("--version", env={"P4C": "/nonexistent/p4c", "SIMPLE_SWITCH_GRPC": "/nonexistent/ssg"})
    assert r.exit_code == 0
    assert r.stdout.splitlines() == [
        f"fabricctl (srv6-fabric) {metadata.version('srv6-fabric')}",
        "p4c: not found (PATH, $P4_TOOLCHAIN_BIN, $P4C)",
        "simple_switch_grpc: not found (PATH, $P4_TOOLCHAIN_BIN, $SIMPLE_SWITCH_GRPC)",
        f"protobuf: {metadata.version('protobuf')} ({api_implementation.Type()} implementation)",
        f"grpcio: {metadata.version('grpcio')}",
        f"p4runtime: bindings from finsy {metadata.version('finsy')}"]


def test_version_names_the_toolchain_it_finds():
    p4c, ssg = find_binary("p4c"), find_binary("simple_switch_grpc")
    need("p4-toolchain", p4c is not None and ssg is not None, "p4c or simple_switch_grpc not found (PATH, $P4_TOOLCHAIN_BIN)")
    lines = run("--version").stdout.splitlines()
    assert lines[1].startswith("p4c: p4c ") and lines[1].endswith(f"({p4c})")
    assert lines[2].startswith("simple_switch_grpc: ") and lines[2].endswith(f"({ssg})")


def test_doctor_without_the_toolchain_says_what_to_do_and_exits_1():
    env = {"P4C": "/nonexistent/p4c", "SIMPLE_SWITCH_GRPC": "/nonexistent/ssg"}
    r = run("doctor", env=env)
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["check", "status", "found", "what", "to", "do"]
    rows = {line.split("  ")[0]: line for line in lines[1:-1]}
    assert "MISSING" in rows["p4c"] and "build p4c (docs/guide/install.md, 'The P4 toolchain') or set P4C / P4_TOOLCHAIN_BIN" in rows["p4c"]
    assert "\n## The P4 toolchain\n" in (REPO / "docs" / "guide" / "install.md").read_text()  # the section it names
    assert "MISSING" in rows["bmv2 with PI"] and " warn " in rows["bmv2 non-blocking pcap"]
    assert lines[-1].startswith("not ready: p4c, simple_switch_grpc, bmv2 with PI")
    doc = json.loads(run("doctor", "--json", env=env).stdout)
    assert doc["ok"] is False
    by = {c["name"]: c for c in doc["checks"]}
    assert set(by) == {"p4c", "simple_switch_grpc", "bmv2 with PI", "bmv2 with Thrift, nanomsg", "bmv2 non-blocking pcap",
                       "bmv2 the labs run", "bmv2 throughput build", "bmv2 all members down", "bmv2 port poll option",
                       "Mininet", "nftables", "root", "ip with seg6", "chromium", "etcd", "ports free"}
    assert (by["p4c"]["ok"], by["p4c"]["required"], by["etcd"]["required"]) == (False, True, False)
    assert doc["versions"]["p4c"] == {"path": None, "version": None, "error": "not found (PATH, $P4_TOOLCHAIN_BIN, $P4C)"}


def test_doctor_names_a_busy_port():
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        doc = json.loads(run("doctor", "--json", "--port", str(port)).stdout)
    finally:
        busy.close()
    row = next(c for c in doc["checks"] if c["name"] == "ports free")
    assert (row["ok"], row["found"]) == (False, f"in use: {port}")
    assert "fabricctl lab up --grpc-base-port N" in row["fix"]
    assert dr._ranges([5, 1, 2, 3, 9]) == "1-3, 5, 9"


def test_imported_symbols_are_read_from_the_elf():
    need("binutils", shutil.which("nm") is not None, "nm not found (binutils)")
    ls = shutil.which("ls")
    assert dr.imports(ls, "malloc") is True  # every dynamic ls takes malloc from libc
    assert dr.imports(ls, dr.PCAP_FIX) is False


def test_bmv2_build_of_the_toolchain_here():
    ssg = find_binary("simple_switch_grpc")
    need("p4-toolchain", ssg is not None, "simple_switch_grpc not found (PATH, $P4_TOOLCHAIN_BIN)")
    need("binutils", shutil.which("nm") is not None and shutil.which("readelf") is not None, "nm or readelf not found")
    rows = {c.name: c for c in dr.check_bmv2_build()}
    assert rows["bmv2 with PI"].ok and "libpi.so" in rows["bmv2 with PI"].found
    pcap = rows["bmv2 non-blocking pcap"]
    users = dr.pcap_fix_users(ssg, dr.elf_dynamic(ssg)[1])
    assert pcap.ok == bool(users)
    assert pcap.found == (f"pcap_setnonblock imported by {', '.join(u.rsplit('/', 1)[-1] for u in users)}" if users
                          else "neither the binary nor its RUNPATH libraries import pcap_setnonblock")
